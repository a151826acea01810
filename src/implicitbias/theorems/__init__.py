"""Theorems as objects: assumptions checked on the data, predictions checked on a run.

The paper-specific theorems live in their paper packages (`implicitbias.papers.<paper>`, registered through the
entry-point group `implicitbias.theorems` as any plugin's); this package holds the machinery they share:

- `base`: `Theorem`, with its checks declared by `assumption` and `prediction` (each with its threshold and
  source); `CellsTheorem`, a paper's claim across the cells of an experiment; `Verdict`, `compare`, `RunContext`;
- `fitting`: verdicts from fitted curves and worst-case summaries over the runs of a cell (the fits themselves are
  `implicitbias.metrics.fits`); `rates_common`: the convergence rates fitted against log t;
- two-layer networks: `two_layer_common` (the assumption checks and loss verdicts of the two-layer theorems),
  `two_layer_bounds` (the loss-rate and norm bounds of the ReLU-network theorems), `init_scale_cells` (the
  per-lambda summaries of a sweep over the init scale and the assumptions of the small-init ReLU theorems);
- `smoothed_margin`: the monotone smoothed margin of homogeneous models (Lyu & Li 2020, S10), checked on the
  runs of more than one paper;
- linear classifiers: `max_margin` (the max-margin references and separability);
- diagonal linear networks: `diagonal_common`; matrix factorisation: `matrix_common`, `_small_init`.

`catalog()` lists every installed theorem: those of the built-in paper packages and of plugin packages (entry-point
group `implicitbias.theorems`), and the core's own (`builtin_theorems`).
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
from implicitbias.theorems.fitting import fitted_slope
from implicitbias.theorems.smoothed_margin import LyuLiMonotoneMargin


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
    "CellsContext",
    "CellsTheorem",
    "LyuLiMonotoneMargin",
    "RunContext",
    "Theorem",
    "Verdict",
    "assumption",
    "builtin_theorems",
    "catalog",
    "compare",
    "fitted_slope",
    "prediction",
]
