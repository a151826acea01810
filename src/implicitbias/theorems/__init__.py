"""Theorems as objects: assumptions checked on the data, predictions checked on a run.

- `base`: `Theorem`, `Verdict`, `compare`, `RunContext`;
- `frei`: Frei et al. 2023, Theorem 3.2, Lemma 3.3, Theorem 3.4, Theorem 4.2 (S1, S2);
- `kou`: Kou, Chen, Gu 2023 (S3);
- `lyu_li`: Lyu & Li 2020, monotone smoothed margin of homogeneous models (S10);
- `chistikov`: Chistikov et al. 2023, Theorems 7 and 8 (S11); Boursier et al. 2022, orthogonal inputs (S12);
- `fitting`: slopes of recorded curves and worst-case summaries over the runs of a cell.
"""

from implicitbias.theorems.base import RunContext, Theorem, Verdict, compare
from implicitbias.theorems.chistikov import BoursierOrthogonal, ChistikovTheorem7, ChistikovTheorem8
from implicitbias.theorems.fitting import fitted_slope
from implicitbias.theorems.frei import FreiLemma33, FreiTheorem32, FreiTheorem34, FreiTheorem42
from implicitbias.theorems.kou import KouTheorem
from implicitbias.theorems.lyu_li import LyuLiMonotoneMargin

__all__ = [
    "BoursierOrthogonal",
    "ChistikovTheorem7",
    "ChistikovTheorem8",
    "FreiLemma33",
    "FreiTheorem32",
    "FreiTheorem34",
    "FreiTheorem42",
    "KouTheorem",
    "LyuLiMonotoneMargin",
    "RunContext",
    "Theorem",
    "Verdict",
    "compare",
    "fitted_slope",
]
