"""The experiment: a signed quadratic network on quadratic-teacher data, gradient flow from init scales alpha
between 1e-4 and 10; the end point's nuclear norm over the minimum, and its distance to M*, against alpha."""

from __future__ import annotations

import numpy as np

from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.losses import Loss
from implicitbias.theorems.base import RunContext
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop
from implicitbias_quadratic.data import QuadraticTeacher
from implicitbias_quadratic.model import QuadraticNet
from implicitbias_quadratic.theorem import LiMaZhang2018, quantities


def _figure(results):
    """Left: ||M||_* / min - 1 against alpha; right: ||M - M*||_F / ||M*||_F; per trial, with the kernel-regime
    limit M_F (dotted) and the theorem's bound, the midpoint (dashed)."""
    fig, (left, right) = panels(2)
    half = LiMaZhang2018().gap_fraction
    for cell in results.cells:
        q = quantities(RunContext.of(cell))
        trials = np.array([spec.trial for spec in cell.runs])
        for t in np.unique(trials):
            sel = np.flatnonzero(trials == t)
            sel = sel[np.argsort(q["alpha"][sel])]
            for ax, value, kernel, offset in ((left, "ratio", "ratio_F", 1.0), (right, "error", "error_F", 0.0)):
                line = ax.plot(q["alpha"][sel], np.maximum(q[value][sel] - offset, 1e-9), "o-", ms=4,
                               label=f"gradient flow, trial {t}")[0]
                ax.axhline(q[kernel][sel[0]] - offset, color=line.get_color(), ls=":", lw=1,
                           label=f"kernel limit M_F, trial {t}")
                ax.axhline(half * (q[kernel][sel[0]] - offset), color=line.get_color(), ls="--", lw=0.8,
                           label=f"bound (midpoint), trial {t}")
    for ax, what in ((left, "||M||_* / min ||M'||_* - 1"), (right, "||M - M*||_F / ||M*||_F")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("init scale alpha")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    finish(left, f"nuclear norm over the minimum ({results.cells[0].label})")
    finish(right, "distance to the teacher M*")
    return fig


QUADRATIC = Experiment(
    name="li2018-quadratic",
    paper="Li, Ma & Zhang 2018 (COLT), Algorithmic regularization in over-parameterized matrix sensing and neural "
          "networks with quadratic activations",
    systems=("quadratic network (plugin implicitbias-quadratic)",),
    summary="A two-layer network with quadratic activation and fixed outer weights +-1, f(x) = x^T M x, trained by "
            "gradient flow on y_i = x_i^T M* x_i (M* PSD, rank 2, d = 10, n = 40 < 55 = d(d+1)/2): from a small init "
            "the end point has the minimum nuclear norm and is M*; from a large one (the kernel regime) it moves "
            "toward the minimum-Frobenius interpolant.",
    config=ExperimentConfig(
        model=QuadraticNet(width=20),
        data=QuadraticTeacher(d=10, rank=2, n=40),
        loss=Loss(name="square"),
        method=GradientFlow(rtol=1e-8),
        stop=Stop(loss_tol=1e-14, max_time=1e6),
        trials=5,
        checkpoints=20,
        kkt=False,
        grid={"init_scale": [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]},
    ),
    quick={"trials": 2, "grid.init_scale": [1e-2, 1e-1, 1.0]},
    figures=(Figure("nuclear_ratio", "The end point's nuclear norm over the minimum (left) and its distance to M* "
                    "(right) against the init scale: gradient flow (solid), the kernel-regime limit M_F (dotted) and "
                    "the theorem's bound, their midpoint (dashed).", _figure),),
    theorems=lambda cell: [LiMaZhang2018()],
    settings_source="Ours: d = 10, rank 2, n = 40 (above the recovery threshold, where the minimum nuclear norm "
                    "interpolant is M*, and below d(d+1)/2 = 55), width 20 (10 neurons of each sign), gradient flow "
                    "(RKC, rtol 1e-8) to loss 1e-14, 5 trials, alpha = 1e-4..10. Quick: 2 trials, alpha = 1e-2, 0.1, 1.",
)

EXPERIMENTS = [QUADRATIC]
