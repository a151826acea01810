"""Theorems as objects: assumptions checked on the data, predictions checked on a run.

- `base`: `Theorem`, with its checks declared by `assumption` and `prediction` (each with its threshold and
  source); `CellsTheorem`, a paper's claim across the cells of an experiment; `Verdict`, `compare`, `RunContext`;
- Frei et al. 2023 (S1, S2): `frei` (Theorems 3.2 and 3.4), `frei_gd` (Lemma 3.3, Theorem 4.2), `frei_claims`
  (Figures 1, 2 and the XOR claims), `two_layer_common` and `linear_rule` (their shared checks);
- `kou`: Kou, Chen, Gu 2023 (S3); `two_layer_bounds`: the loss-rate and norm bounds they share;
- `lyu_li`: Lyu & Li 2020, monotone smoothed margin of homogeneous models (S10);
- Soudry et al. 2018 and its SGD, normalised-GD and multiclass companions (S4): `soudry`, `soudry_common`,
  `soudry_claims`, `max_margin` (the max-margin references and separability), `rates_common`;
- `ji_telgarsky`: Ji & Telgarsky 2019, layer alignment of deep linear networks (S5);
- `linear_regression`: the Bregman limit of mirror descent and GD on under-determined regression (S7);
- diagonal linear networks (S6): `diagonal` (Woodworth et al. 2020: the Q_alpha limit, the mirror-flow path),
  `gunasekar_diagonal` (Gunasekar et al. 2018, l_(2/D) max margin), `woodworth_claims`, `diagonal_common`;
- matrix factorisation (S8): `razin_cohen` (Razin & Cohen 2020), `gunasekar_sensing` (Gunasekar et al. 2017,
  Theorem 1 and Conjecture 1), `li_luo_lyu` (Li et al. 2021), `matrix_common`, `_small_init`;
  `matrix_factorization` re-exports them;
- `single_neuron`: Vardi & Shamir 2021, leaky ReLU and ReLU neurons (S9);
- `chistikov`, `chistikov_min_norm`, `chistikov_common`: Chistikov et al. 2023, Theorems 7 and 8 (S11); `census`:
  Theorem 7 over trials; `boursier`: Boursier et al. 2022, orthogonal inputs (S12);
- `fitting`: verdicts from fitted curves and worst-case summaries over the runs of a cell (the fits themselves are
  `implicitbias.metrics.fits`).

`catalog()` lists every installed theorem, implicitbias's own (`builtin_theorems`) and those of plugin packages
(entry-point group `implicitbias.theorems`).
"""

from implicitbias import plugins
from implicitbias.theorems.base import (
    CellsContext,
    CellsTheorem,
    RunContext,
    Theorem,
    Verdict,
    assumption,
    compare,
    prediction,
)
from implicitbias.theorems.boursier import BoursierOrthogonal
from implicitbias.theorems.chistikov import ChistikovTheorem7
from implicitbias.theorems.chistikov_min_norm import ChistikovTheorem8
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


def builtin_theorems() -> list[type[Theorem]]:
    """implicitbias's own theorems: the package's entry in the group `implicitbias.theorems`."""
    return [obj for name in __all__ if isinstance(obj := globals()[name], type) and issubclass(obj, Theorem)
            and obj not in (Theorem, CellsTheorem)]


def catalog() -> dict[str, type[Theorem]]:
    """Every installed theorem class by name: implicitbias's own and the plugins' (`implicitbias.plugins`)."""
    out: dict[str, type[Theorem]] = {}
    for plugin in plugins.installed("theorems"):
        found = plugin.obj() if callable(plugin.obj) and not isinstance(plugin.obj, type) else plugin.obj
        for cls in found if isinstance(found, list | tuple) else [found]:
            if isinstance(cls, type) and issubclass(cls, Theorem):
                out.setdefault(cls.__name__, cls)
    return out


__all__ = [
    "BoursierOrthogonal",
    "CellsContext",
    "CellsTheorem",
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
    "assumption",
    "builtin_theorems",
    "catalog",
    "compare",
    "fitted_slope",
    "prediction",
]
