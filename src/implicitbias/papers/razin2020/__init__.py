"""Razin & Cohen 2020 (NeurIPS), "Implicit regularization in deep learning may not be explainable by norms"
(SCIENCE.md S8): Sec. 3, the counterexample.

- `theorems`: `RazinCohen2020`, norms growing while the rank falls;
- `experiments`: razin2020-counterexample.
"""
