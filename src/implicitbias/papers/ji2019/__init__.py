"""Ji & Telgarsky 2019 (ICLR), "Gradient descent aligns the layers of deep linear networks" (SCIENCE.md S5):
Theorem 2.2.

- `theorems`: `JiTelgarskyAlignment`, the alignment of the layers and their convergence in direction;
- `experiments`: ji2019-deep-linear (its runs are checked for separable data before training, as Soudry et al.'s,
  by the core's `implicitbias.experiments.validation.check_separable_runs`).
"""
