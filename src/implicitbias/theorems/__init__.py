"""Theorems as objects: assumptions checked on the data, predictions checked on a run.

- `base`: `Theorem`, `Verdict`, `compare`, `RunContext`;
- `frei`: Frei et al. 2023, Theorem 3.2, Lemma 3.3, Theorem 3.4, Theorem 4.2 (S1, S2);
- `kou`: Kou, Chen, Gu 2023 (S3);
- `lyu_li`: Lyu & Li 2020, monotone smoothed margin of homogeneous models (S10);
- `chistikov`: Chistikov et al. 2023, Theorems 7 and 8 (S11); Boursier et al. 2022, orthogonal inputs (S12);
- `soudry`: Soudry et al. 2018, Theorem 3 (GD), and its SGD and normalised-GD companions (S4);
- `ji_telgarsky`: Ji & Telgarsky 2019, layer alignment of deep linear networks (S5);
- `diagonal`: Woodworth et al. 2020 (the Q_alpha limit, the mirror-flow path) and Gunasekar et al. 2018 (l_(2/D)
  max margin) for diagonal linear networks (S6);
- `matrix_factorization`: Razin & Cohen 2020, Gunasekar et al. 2017 (Theorem 1, Conjecture 1), Li et al. 2021 (S8);
- `single_neuron`: Vardi & Shamir 2021, leaky ReLU and ReLU neurons (S9);
- `fitting`: slopes of recorded curves and worst-case summaries over the runs of a cell.
"""

from implicitbias.theorems.base import RunContext, Theorem, Verdict, compare
from implicitbias.theorems.chistikov import BoursierOrthogonal, ChistikovTheorem7, ChistikovTheorem8
from implicitbias.theorems.diagonal import GunasekarDiagonal, MirrorFlowPath, WoodworthLimit
from implicitbias.theorems.fitting import fitted_slope
from implicitbias.theorems.frei import FreiLemma33, FreiTheorem32, FreiTheorem34, FreiTheorem42
from implicitbias.theorems.ji_telgarsky import JiTelgarskyAlignment
from implicitbias.theorems.kou import KouTheorem
from implicitbias.theorems.lyu_li import LyuLiMonotoneMargin
from implicitbias.theorems.matrix_factorization import (
    GunasekarCommuting,
    GunasekarConjecture,
    LiIncremental,
    RazinCohen2020,
)
from implicitbias.theorems.single_neuron import VardiLeakyNeuron, VardiReluNeuron
from implicitbias.theorems.soudry import NacsonNormalizedGD, NacsonSGD, SoudryMulticlass, SoudryTheorem3

__all__ = [
    "BoursierOrthogonal",
    "ChistikovTheorem7",
    "ChistikovTheorem8",
    "FreiLemma33",
    "FreiTheorem32",
    "FreiTheorem34",
    "FreiTheorem42",
    "GunasekarCommuting",
    "GunasekarConjecture",
    "GunasekarDiagonal",
    "JiTelgarskyAlignment",
    "KouTheorem",
    "LiIncremental",
    "LyuLiMonotoneMargin",
    "MirrorFlowPath",
    "NacsonNormalizedGD",
    "NacsonSGD",
    "RazinCohen2020",
    "RunContext",
    "SoudryMulticlass",
    "SoudryTheorem3",
    "Theorem",
    "VardiLeakyNeuron",
    "VardiReluNeuron",
    "Verdict",
    "WoodworthLimit",
    "compare",
    "fitted_slope",
]
