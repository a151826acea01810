"""Ji & Telgarsky 2019 (ICLR), "Gradient descent aligns the layers of deep linear networks" (SCIENCE.md S5):
Theorem 2.2.

- `theorems`: `JiTelgarskyAlignment`, the alignment of the layers and their convergence in direction;
- `experiments`: ji2019-deep-linear (it reuses Soudry et al.'s data checks, `implicitbias.papers.soudry2018`).
"""
