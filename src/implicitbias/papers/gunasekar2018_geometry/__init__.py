"""Gunasekar, Lee, Soudry & Srebro 2018 (ICML), "Characterizing implicit bias in terms of optimization
geometry" (SCIENCE.md S7; survey, seed 002): Sec. 2, under-determined linear regression.

- `theorems`: `BregmanLimit` and the other checks of the limit of GD, SGD and mirror descent (the Bregman
  projection of the start onto the interpolators);
- `experiments`: linear-regression-implicit-bias.
"""
