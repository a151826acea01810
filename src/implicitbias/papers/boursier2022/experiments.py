"""Boursier, Pillaud-Vivien & Flammarion 2022 (NeurIPS) on orthogonal inputs (S12): the two-layer ReLU network of
Chistikov et al. (`chistikov2023`) from a small init reaches the closed-form minimum norm, polynomially in lambda.
"""

from __future__ import annotations

import numpy as np

from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.boursier2022.data import Orthogonal
from implicitbias.papers.boursier2022.theorems import BoursierOrthogonal
from implicitbias.theorems.base import RunContext
from implicitbias.theorems.init_scale_cells import by_lambda, lambdas, theta_sq
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop

#: the network and flow of Chistikov et al.'s Figure 1 (`chistikov2023-fig1`), which Boursier et al.'s setting
#: shares: ReLU, both layers trained, balanced init with random signs, the square loss, gradient flow by RKC at
#: rtol 1e-4 (the width is this experiment's, set below)
SQUARE = Loss(name="square")
NET = TwoLayer(width=200, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
GF = GradientFlow(solver="rkc", rtol=1e-4)


def _orthogonal_theorem(cell):
    """Boursier et al.'s theorem with its default constants."""
    return [BoursierOrthogonal()]


def _orthogonal_figure(results):
    fig, (left, right) = panels(2)
    for cell in results.cells:
        res = cell.results
        ctx = RunContext.of(cell)
        gap = theta_sq(res) / BoursierOrthogonal().min_norms(ctx) - 1.0
        lam = lambdas(res)
        left.plot(lam, gap, ".", color="0.6")
        grid, med = by_lambda(res, gap)
        left.plot(grid, med, "o-", label=f"median, n = {cell.spec.data.n}")
        for r in np.flatnonzero(lam == lam.min()):
            t, loss = res["time"].values[r], res["loss"].values[r]
            right.plot(t[t > 0], loss[t > 0], lw=0.8)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("initialisation scale lambda")
    left.set_ylabel("learned ||theta||^2 / (2 (||v+|| + ||v-||)) - 1")
    finish(left, "gap to the closed-form minimum norm")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("time t")
    right.set_ylabel("training loss")
    finish(right, "loss curves at the smallest lambda")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    return fig


ORTHOGONAL = Experiment(
    name="boursier2022-orthogonal",
    paper="Boursier, Pillaud-Vivien, Flammarion 2022 (NeurIPS), orthogonal inputs",
    systems=("S12",),
    summary="Pairwise orthogonal inputs with labels of both signs, the two-layer ReLU network from a small "
            "balanced init, gradient flow: the learned ||theta||^2 approaches the closed-form minimum 2 "
            "(||v+|| + ||v-||) as lambda decreases (one neuron direction per label sign), slowly: "
            "polynomially in lambda.",
    config=ExperimentConfig(
        model=NET.replace(width=100),
        data=Orthogonal(n=6, d=12, label_min=1.0, label_max=1.0),
        loss=SQUARE,
        method=GF,
        stop=Stop(loss_tol=1e-12, max_time=2e5),
        trials=5,
        checkpoints=30,
        kkt=False,
        grid={"init_scale": [4.0**k for k in range(1, -11, -1)]},
    ),
    quick={"trials": 3, "model.width": 50, "grid": {"init_scale": [1.0, 4.0**-2, 4.0**-4, 4.0**-6, 4.0**-8]}},
    figures=(Figure("orthogonal_min_norm",
                    "Left: learned ||theta||^2 over the closed-form minimum, minus 1, against lambda (dots: "
                    "runs; line: median). Right: loss curves at the smallest lambda.", _orthogonal_figure),),
    theorems=_orthogonal_theorem,
    settings_source="Ours (the survey gives no numbers): n = 6 orthonormal inputs in d = 12, labels +-1 in "
                    "balanced signs (3 per sign: the excess norm then decays like lambda^0.37, see "
                    "BoursierOrthogonal; with unequal labels the exponent can be much smaller), m = 100, "
                    "lambda = 4^1..4^-10, 5 trials, loss < 1e-12. Quick: m = 50, 5 lambdas down to 4^-8, 3 "
                    "trials.",
)

EXPERIMENTS = [ORTHOGONAL]
