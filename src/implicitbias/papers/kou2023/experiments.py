"""Kou, Chen & Gu 2023 (NeurIPS): the rates of GD on a two-layer network with outer weights +-1/m on nearly
orthogonal data (S3)."""

from __future__ import annotations

from implicitbias.data import NearlyOrthogonal
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import curves, finish, panels
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.kou2023.theorems import KouTheorem
from implicitbias.training.methods import GD
from implicitbias.training.stopping import Stop

LOGISTIC = Loss(name="logistic")


# -- Kou et al. 2023: rates under GD -------------------------------------------------------------------
def _kou_figure(results):
    fig, axes = panels(4, width=3.6)
    for cell in results.cells:
        lab = cell.spec.model.activation
        curves(axes[0], cell, "W.stable_rank", x="time", label=lab)
        curves(axes[1], cell, "W.frobenius", x="time", label=lab)
        curves(axes[2], cell, "loss", x="time", logy=True, label=lab)
        curves(axes[3], cell, "margin_spread", x="time", label=lab)
    for ax, title in zip(axes, ["stable rank of W", "||W||_F against log t", "loss against t (log-log)",
                                "margin spread max q / min q"]):
        finish(ax, title)
    return fig


KOU = Experiment(
    name="kou2023-rates",
    paper="Kou, Chen, Gu 2023 (NeurIPS)",
    systems=("S3",),
    summary="GD on Kou's two-layer network (2m neurons, outer weights +-1/m): stable rank -> 1 for leaky ReLU and "
            "bounded for ReLU, ||W||_F = Theta(log t), loss = Theta(1/t), margin spread -> 1 (fitted slopes).",
    config=ExperimentConfig(
        model=TwoLayer(width=40, activation="leaky_relu", gamma=0.5, outer_scale="inv_half_width",
                       outer_signs="balanced"),
        data=NearlyOrthogonal(n=10, d=20_000, scale="unit"),
        loss=LOGISTIC,
        method=GD(lr=1.0),
        stop=Stop(max_steps=50_000),
        init_scale=0.01,
        checkpoints=40,
        kkt=False,
        grid={"model.activation": ["relu", "leaky_relu"]},
    ),
    quick={"data.n": 8, "data.d": 2000, "model.width": 20, "stop.max_steps": 20_000, "checkpoints": 20},
    figures=(Figure("kou_rates", "Kou et al.'s predictions over GD time: stable rank, ||W||_F (log t growth), "
                    "loss (1/t decay) and margin spread.", _kou_figure),),
    # one set of thresholds for the quick and the full variant: a limit (srank, margin spread) lies between the
    # last value and the extrapolation of a fitted 1/log t trend, and a run whose interval straddles the bound has
    # not converged (not_evaluated), so a shorter run needs no wider tolerance; the rates are fitted exponents
    # (see `theorems`)
    theorems=lambda cell: [KouTheorem()],
    settings_source="Ours: n = 10, d = 20000 (so that Kou's condition holds with C = 3), m = 20 per sign "
                    "(width 40), lr 1, 5 10^4 steps; the review gives no numeric settings.",
)

#: the experiments of this module, in the order `implicitbias list` shows them
EXPERIMENTS = [KOU]
