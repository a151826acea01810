"""Arora, Cohen, Hu & Luo 2019 (NeurIPS), "Implicit regularization in deep matrix factorization" (SCIENCE.md
S8): Sec. 3, Figure 1, deep matrix completion.

- `experiments`: arora2019-deep-completion (matrix completion of a random rank-5 100 x 100 matrix by
  factorisations of depth 1 to 4 from a small balanced init; Figure 1's effective rank and error against the
  number of observed entries).
"""
