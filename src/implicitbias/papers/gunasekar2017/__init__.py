"""Gunasekar, Woodworth, Bhojanapalli, Neyshabur & Srebro 2017 (NeurIPS), "Implicit regularization in matrix
factorization" (SCIENCE.md S8): Theorem 1 and Conjecture 1.

- `theorems`: `GunasekarCommuting` (Theorem 1), `GunasekarConjecture` (Conjecture 1);
- `experiments`: gunasekar2017-sensing (its runs checked, as those of every matrix paper, by the core's
  `implicitbias.experiments.validation.check_factorization_runs`).
"""
