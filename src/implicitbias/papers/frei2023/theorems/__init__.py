"""Frei et al. 2023's theorems: Theorems 3.2 and 3.4 (`flow`), Lemma 3.3 and Theorem 4.2 (`gd`), the claims of
Figures 1, 2 and Sec. 5 (`claims`), the linear rule of Theorem 3.2 (4) (`linear_rule`)."""

from implicitbias.papers.frei2023.theorems.flow import FreiTheorem32, FreiTheorem34
from implicitbias.papers.frei2023.theorems.gd import FreiLemma33, FreiTheorem42

#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [FreiLemma33, FreiTheorem32, FreiTheorem34, FreiTheorem42]
