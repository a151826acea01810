"""Boursier, Pillaud-Vivien & Flammarion 2022 (NeurIPS), "Gradient flow dynamics of shallow ReLU networks for
square loss and orthogonal inputs" (SCIENCE.md S12), on Chistikov et al.'s network (`implicitbias.papers.chistikov2023`).

- `data`: `Orthogonal`, pairwise orthogonal inputs with labels of both signs (data name "orthogonal");
- `theorems`: `BoursierOrthogonal`, the learned ||theta||^2 against the closed-form minimum norm of orthogonal
  inputs (`implicitbias.reference.orthogonal_min_norm`);
- `experiments`: boursier2022-orthogonal.
"""
