"""Li, Luo & Lyu 2021 (ICLR), "Towards resolving the implicit bias of gradient descent for matrix factorization:
greedy low-rank learning" (SCIENCE.md S8).

- `theorems`: `LiIncremental`, incremental learning of the singular values against greedy low-rank learning;
- `experiments`: li2021-incremental.
"""
