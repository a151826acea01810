"""Ji & Telgarsky 2019 (ICLR), "Gradient descent aligns the layers of deep linear networks" (SCIENCE.md S5):
deep linear networks of depth 2-4 trained by gradient flow on the logistic loss with separable data. Every layer
below the last becomes rank 1, adjacent layers align, and the end-to-end vector turns towards the l2 SVM.

Gradient flow (the theorem's method) is integrated by Tsit5 at rtol 1e-8 in physical time to t = 1e10 (a few hundred
solver steps: the step grows with t); the parameters of every checkpoint are kept, so that the conserved
imbalances D_i = W_(i+1)^T W_(i+1) - W_i W_i^T at t = 0 give the bounds the figures draw and the checks test
(`theorems`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from implicitbias.data import Separable
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, plt, write_csv
from implicitbias.experiments.validation import check_separable_runs
from implicitbias.losses import Loss
from implicitbias.models import DeepLinear
from implicitbias.papers.ji2019.theorems import (
    JiTelgarskyAlignment,
    imbalances,
    layer_quantities,
    non_rank_one_bound,
    trajectory_layers,
)
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop


def _by_depth(results) -> list:
    return sorted(results.cells, key=lambda c: c.spec.model.depth)


def layer_curves(cell, r: int) -> dict[str, np.ndarray]:
    """Run r's curves over its checkpoints with t > 0: time, loss, unit distance to the SVM, and per layer i < L
    (arrays (L-1, checkpoint)): srank(W_i) - 1 and its bound B_i(0) / sigma_1^2, sin angle(v_(i+1), u_i) and its
    bound 2 ||D_i(0)||_2 / gap_i, sigma_1(W_i)."""
    ds = cell.results
    depth = cell.spec.model.depth
    t = ds["time"].values[r]
    keep = t > 0
    Ws = trajectory_layers(ds, r, depth)
    q = layer_quantities(Ws)
    D0 = [d[0] for d in imbalances(Ws)]
    B0 = non_rank_one_bound([d[None] for d in D0])[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {
            "srank_minus_1": q["tail"] / q["sigma1_sq"],
            "srank_bound": B0[:, None] / q["sigma1_sq"],
            "sin": q["sin"],
            "sin_bound": 2.0 * np.asarray([np.linalg.norm(d, 2) for d in D0])[:, None] / q["gap"],
            "sigma1": np.sqrt(q["sigma1_sq"]),
        }
    out = {k: v[:, keep] for k, v in out.items()}
    out.update({"time": t[keep], "loss": ds["loss"].values[r][keep],
                "unit_distance": ds["unit_distance_to_reference"].values[r][keep]})
    return out


def _figure(results):
    fig, grid = plt.subplots(2, 2, figsize=(11, 8.5))
    (a, b), (c, d) = grid
    for k, cell in enumerate(_by_depth(results)):
        L, col = cell.spec.model.depth, f"C{k}"
        cv = layer_curves(cell, 0)
        t = cv["time"]
        a.plot(t, cv["unit_distance"], color=col, label=f"depth {L}")
        for i in range(L - 1):
            style = ["-", "--", ":"][i % 3]
            b.plot(t, cv["srank_minus_1"][i], style, color=col, label=f"L = {L}, W_{i + 1}")
            b.plot(t, cv["srank_bound"][i], style, color=col, lw=0.5, alpha=0.6)
            c.plot(t, cv["sin"][i], style, color=col, label=f"L = {L}, (W_{i + 2}, W_{i + 1})")
            c.plot(t, np.minimum(cv["sin_bound"][i], 1.0), style, color=col, lw=0.5, alpha=0.6)
            d.plot(t, cv["sigma1"][i], style, color=col, label=f"L = {L}, W_{i + 1}")
    titles = ["end-to-end (W_L...W_1)^T: unit distance to the SVM direction",
              "srank(W_i) - 1 (thin: bound B_i(0) / sigma_1(W_i)^2)",
              "sin angle(v_1(W_(i+1)), u_1(W_i)) (thin: 2 ||D_i(0)|| / gap)", "sigma_1(W_i) (-> infinity)"]
    for ax, title in zip((a, b, c, d), titles):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("gradient-flow time t")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, title)
    return fig


def _tables(results, out_dir):
    rows, per_run = [], []
    for cell in _by_depth(results):
        L = cell.spec.model.depth
        for r, spec in enumerate(cell.runs):
            cv = layer_curves(cell, r)
            for i in range(L - 1):
                for k in range(cv["time"].size):
                    rows.append([L, spec.trial, i + 1, k, f"{cv['time'][k]:.10g}", f"{cv['loss'][k]:.10g}",
                                 f"{cv['unit_distance'][k]:.10g}"]
                                + [f"{cv[n][i, k]:.10g}" for n in ("srank_minus_1", "srank_bound", "sin", "sin_bound",
                                                                   "sigma1")])
            per_run += [[L, spec.trial, i + 1, f"{cv['unit_distance'][-1]:.10g}", f"{1 + cv['srank_minus_1'][i, -1]:.10g}",
                         f"{np.sqrt(1 - cv['sin'][i, -1] ** 2):.12g}"] for i in range(L - 1)]
    header = ["depth", "trial", "layer_i", "checkpoint", "time", "loss", "unit_distance_to_svm", "srank_minus_1",
              "srank_bound", "sin_angle_next_layer", "sin_bound", "sigma1"]
    return [write_csv(Path(out_dir) / "ji2019_alignment_curves.csv", header, rows),
            write_csv(Path(out_dir) / "ji2019_final.csv", ["depth", "trial", "layer_i", "unit_distance_to_svm",
                                                             "srank_W_i", "alignment_W_(i+1)_W_i"], per_run)]


def _theorems(cell):
    return [JiTelgarskyAlignment()]


JI = Experiment(
    validate_runs=check_separable_runs,
    name="ji2019-deep-linear",
    paper="Ji & Telgarsky 2019 (ICLR), Theorem 2.2",
    systems=("S5",),
    summary="Deep linear networks of depth 2, 3, 4 (hidden width 10) trained by gradient flow on the logistic loss, "
            "separable data in d = 20: every layer's stable rank -> 1, adjacent layers align (|<v_1(W_(i+1)), "
            "u_1(W_i)>| -> 1), both within the bounds set by the conserved imbalances at init, ||W_i|| -> infinity, "
            "and the end-to-end vector turns towards the l2 SVM, slowly: its part orthogonal to the support vectors "
            "grows like ||w||^(1 - 1/L), so the direction error falls like ||w||^(-1/L) ~ (log t)^(-1/L) (derived "
            "in theorems; still 6-8 degrees at t = 1e10); each shown over time.",
    config=ExperimentConfig(
        model=DeepLinear(depth=2, hidden=10),
        data=Separable(n=40, d=20, margin=0.5),
        loss=Loss(name="logistic"),
        method=GradientFlow(solver="tsit5", rtol=1e-8),
        stop=Stop(max_time=1e10),
        init_scale=0.1,
        trials=3,
        checkpoints=40,
        reference="svm",
        kkt=False,
        keep_trajectory=True,
        grid={"model.depth": [2, 3, 4]},
    ),
    quick={"trials": 1, "checkpoints": 25, "grid": {"model.depth": [2, 4]}},
    figures=(Figure("ji2019_alignment", "Over gradient-flow time t, depth 2-4 (trial 0): unit distance of the "
                    "end-to-end vector to the SVM direction; srank(W_i) - 1 and sin angle(v_1(W_(i+1)), u_1(W_i)) with "
                    "their bounds from the conserved imbalances (thin lines); sigma_1(W_i).", _figure),),
    theorems=_theorems,
    tables=_tables,
    settings_source="Ours (the paper has no experiments): Separable (n = 40, d = 20, margin 0.5), hidden width 10, "
                    "entries N(0, 0.1^2) at init, gradient flow (Tsit5, rtol 1e-8, so that the conserved imbalances drift by "
                    "< 1e-4 relative) to t = 1e10, 40 log-spaced checkpoints, 3 data draws. Quick: one draw, 25 "
                    "checkpoints, depths 2 and 4 (compiling the solver for each depth is most of the cost).",
)

EXPERIMENTS = [JI]
