"""Chistikov, Englert & Lazic 2023 (NeurIPS), Sec. 7 and appendix G (S11): rank-1 against minimum-norm
interpolators (Theorem 8) on the paper's two families with known sign of M and on random centred data.
"""

from __future__ import annotations

import numpy as np

from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.papers.chistikov2023.experiments.fig1 import GF, NET, SQUARE
from implicitbias.papers.chistikov2023.families import ChistikovFamily
from implicitbias.papers.chistikov2023.theorems.theorem7 import ChistikovTheorem7
from implicitbias.papers.chistikov2023.theorems.theorem8 import ChistikovTheorem8, chistikov_reference
from implicitbias.theorems.init_scale_cells import lambdas, theta_sq
from implicitbias.training.stopping import Stop

MIN_NORM_LAMBDAS = [4.0**-4, 4.0**-6, 4.0**-8]


def _theorem8(cell):
    """Theorem 8, and Theorem 7 (the rank-1 limit it relies on) in its proofs' reading (angles below pi/4)."""
    return [ChistikovTheorem8(), ChistikovTheorem7()]


def _min_norm_figure(results):
    fig, (ax,) = panels(1, width=7.0)
    labels, learned, mins, signs = [], [], [], []
    for cell in results.cells:
        res = cell.results
        at = np.flatnonzero((lambdas(res) == lambdas(res).min()) & (res["trial"].values == 0))
        ds = cell.data[at[0]]
        ref = chistikov_reference(ds.X, ds.info["v_star"], ds.y)
        labels.append(f"{cell.spec.part}\nd = {ds.d}")
        learned.append(theta_sq(res)[at[0]] / ref["rank_one"])
        mins.append(ref["min_norm"] / ref["rank_one"])
        signs.append(ref["M"])
    x = np.arange(len(labels))
    ax.plot(x, np.asarray(learned) - 1, "o", label="learned ||theta||^2 (smallest lambda)")
    ax.plot(x, np.asarray(mins) - 1, "s", label="convex min-norm ||theta||^2")
    for i, m in enumerate(signs):
        ax.annotate(f"M = {m:.3g}", (x[i], mins[i] - 1), fontsize=6, xytext=(0, -10),
                    textcoords="offset points")
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_yscale("symlog", linthresh=1e-6)
    ax.set_xticks(x, labels, fontsize=6)
    ax.set_ylabel("||theta||^2 / (2 ||v*||) - 1 (rank-1 value = 0)")
    ax.grid(True, alpha=0.3)
    low = min(min(mins), min(learned)) - 1
    ax.set_ylim(3 * low if low < 0 else -1e-6, 1e-4)
    finish(ax, "GF at the smallest lambda vs the minimum norm (trial 0 of each cell);\nlearned values are "
               "off by ~ the final residual sqrt(2 loss)")
    return fig


def _family_part(family: str, dims: list[int]) -> dict:
    return {"data.name": "chistikov_family", "data.family": family,
            "grid": {"data.d": dims, "init_scale": MIN_NORM_LAMBDAS}}


MIN_NORM = Experiment(
    name="chistikov2023-min-norm",
    paper="Chistikov, Englert, Lazic 2023 (NeurIPS), Sec. 7 (Theorem 8) and appendix G",
    systems=("S11",),
    summary="Rank-1 against minimum norm: on the paper's two families with known sign of M (M < 0 and M > 0) "
            "and on random centred data sets (small d), the Z-matrix condition, M (exact), the convex "
            "minimum ||theta||^2 over interpolators and the ||theta||^2 reached by gradient flow from small "
            "lambda: 2 ||v*|| (rank-1) always, which is the minimum iff M < 0.",
    config=ExperimentConfig(
        model=NET.replace(width=50),
        data=ChistikovFamily(family="m_negative", d=3),
        loss=SQUARE,
        method=GF,
        stop=Stop(loss_tol=1e-12, max_time=2e5),
        checkpoints=25,
        kkt=False,
        parts={
            "m_negative": _family_part("m_negative", [3, 4, 5]),
            "m_positive": _family_part("m_positive", [3, 4, 5]),
            "centred": {"data.name": "teacher_neuron", "trials": 3,
                        "grid": {"data.d": [3, 4, 5], "init_scale": MIN_NORM_LAMBDAS}},
        },
    ),
    quick={"checkpoints": 15, "parts": {
        "m_negative": _family_part("m_negative", [3]),
        "m_positive": _family_part("m_positive", [3]),
        # one trial: the same batch shape as the family cells, so the quick variant compiles once
        "centred": {"data.name": "teacher_neuron", "trials": 1,
                    "grid": {"data.d": [3], "init_scale": MIN_NORM_LAMBDAS}},
    }},
    figures=(Figure("min_norm",
                    "||theta||^2 relative to the rank-1 value 2||v*||: learned by gradient flow at the "
                    "smallest lambda, and the convex minimum over interpolators, with M.",
                    _min_norm_figure),),
    theorems=_theorem8,
    settings_source="Families and M from the paper (Sec. 7, appendix G: xi = half its pi/4 bound, b = 11). "
                    "Ours: d = 3..5, m = 50, lambda = 4^-4..4^-8, loss < 1e-12 (so that ||theta||^2 resolves "
                    "the 4e-4 gap of the M > 0 family), 3 random centred data sets per d. Quick: d = 3, one "
                    "centred data set.",
)

EXPERIMENTS = [MIN_NORM]
