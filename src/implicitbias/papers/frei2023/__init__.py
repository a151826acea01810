"""Frei, Vardi, Bartlett, Srebro & Hu 2023 (ICLR), "Implicit bias in leaky ReLU networks trained on
high-dimensional data" (SCIENCE.md S1, S2): Theorems 3.2 and 3.4, Lemma 3.3, Theorem 4.2, Figures 1 and 2, the
XOR example of Sec. 5.

- `theorems`: `FreiTheorem32`, `FreiTheorem34` (`theorems.flow`), `FreiLemma33`, `FreiTheorem42`
  (`theorems.gd`), the claims of the figures and of Sec. 5 (`theorems.claims`), the linear rule of Theorem 3.2 (4)
  (`theorems.linear_rule`);
- `experiments`: frei2023-fig1, frei2023-fig2, frei2023-kkt, frei2023-xor.
"""
