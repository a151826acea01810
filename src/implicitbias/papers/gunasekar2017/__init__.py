"""Gunasekar, Woodworth, Bhojanapalli, Neyshabur & Srebro 2017 (NeurIPS), "Implicit regularization in matrix
factorization" (SCIENCE.md S8): Theorem 1 and Conjecture 1.

- `theorems`: `GunasekarCommuting` (Theorem 1), `GunasekarConjecture` (Conjecture 1);
- `experiments`: gunasekar2017-sensing, and `check_factorization_runs`, the run check the other matrix papers
  (Arora et al. 2019, Razin & Cohen 2020, Li et al. 2021) reuse.
"""
