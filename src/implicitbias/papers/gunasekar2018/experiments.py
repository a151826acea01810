"""Gunasekar, Lee, Soudry, Srebro 2018 (NeurIPS), "Implicit bias of gradient descent on linear convolutional
networks" (survey, seed 002; SCIENCE.md S6, classification).

Diagonal networks w = u^D - v^D of depth D = 1, 2, 3 from u = v = alpha 1, logistic loss, separable data with a
sparse teacher (so that the l1 and l2 max-margin directions differ clearly), gradient flow integrated in the
loss clock to L ~ e^-600: w/||w|| -> the l2 SVM for D = 1, the l1 max-margin predictor (LP) for D = 2, and a
stationary point of ||w||_{2/3} for D = 3, sparser still (||w||_1^2 / ||w||_2^2).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from implicitbias.data import Separable
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.validation import check_positive_alpha
from implicitbias.losses import Loss
from implicitbias.metrics.extrapolation import unit_distance
from implicitbias.models import DiagonalLinear
from implicitbias.papers.gunasekar2018.theorems import GunasekarDiagonal
from implicitbias.reference import check_separable
from implicitbias.runs.execute import dataset_of
from implicitbias.theorems.base import CellsTheorem, RunContext, Verdict, compare, prediction
from implicitbias.theorems.diagonal_common import max_margin_references, stored_predictor
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop


def check_diagonal_max_margin_runs(runs) -> None:
    """alpha > 0 (`check_positive_alpha`) and data linearly separable through the origin (the max-margin
    references do not exist otherwise), refused before anything trains, naming the points."""
    check_positive_alpha(runs)
    seen = set()
    for spec in runs:
        if spec.data_key() not in seen:
            seen.add(spec.data_key())
            data = dataset_of(spec)
            check_separable(data.X, data.y)


#: checkpoints in the loss clock s (ds = L dt): log-spaced to s = 1, then every 0.05 to s = 10 and every 0.25 to s = 20
#: (for D >= 2 the whole margin-maximising phase, L from ~1e-2 to e^-600, takes a few units of s: log(1/L) grows
#: exponentially in s for D = 2 and blows up at a finite s for D = 3, within about one unit of s, so the step 0.05
#: gives the D = 3 trend of `GunasekarDiagonal` its >= 4 points on the last half of that phase), then log-spaced to
#: 1e4 (D = 1: log(1/L) grows linearly in s)
CHECKPOINTS = [float(s) for s in np.unique(np.round(np.concatenate(
    [np.logspace(-2, 0, 9), np.arange(1.05, 10.001, 0.05), np.arange(10.25, 20.01, 0.25),
     np.logspace(np.log10(25.0), 4.0, 20)]), 10))]


def _cells_by_depth(results) -> dict[int, object]:
    return {int(c.spec.model.depth): c for c in sorted(results.cells, key=lambda c: c.spec.model.depth)}


def sparsity(w) -> np.ndarray:
    """||w||_1^2 / ||w||_2^2 along the last axis (a soft count of the nonzero entries)."""
    w = np.asarray(w, dtype=float)
    return np.sum(np.abs(w), axis=-1) ** 2 / np.sum(w * w, axis=-1)


def _paths(cell, r: int = 0) -> dict[str, np.ndarray]:
    """Run r's trajectory: time, unit distances to the l2 SVM and l1 LP directions, sparsity."""
    run = RunContext.of(cell)
    W = stored_predictor(run, r, trajectory=True)
    refs = max_margin_references(run, r)
    t = np.asarray(cell.results["time"].values[r], dtype=float)
    L = np.asarray(cell.results["loss"].values[r], dtype=float)
    keep = (t > 0) & (np.linalg.norm(W, axis=1) > 0) & np.concatenate([[True], np.diff(t) > 0])
    W, t, L = W[keep], t[keep], L[keep]
    U = W / np.linalg.norm(W, axis=1, keepdims=True)
    unit = {k: np.linalg.norm(U - v / np.linalg.norm(v), axis=1) for k, v in refs.items()}
    return {"time": t, "log_inv_loss": np.log(1.0 / L), "to_l2": unit["l2"], "to_l1": unit["l1"],
            "sparsity": sparsity(W)}


def _convergence_figure(results):
    fig, axes = panels(3, width=4.4)
    cells = _cells_by_depth(results)
    for depth, cell in cells.items():
        p = _paths(cell)
        axes[0].plot(p["log_inv_loss"], p["to_l2"], ".-", ms=3, label=f"D = {depth}")
        axes[1].plot(p["log_inv_loss"], p["to_l1"], ".-", ms=3, label=f"D = {depth}")
        axes[2].plot(p["log_inv_loss"], p["sparsity"], ".-", ms=3, label=f"D = {depth}")
    first = next(iter(cells.values()))
    refs = max_margin_references(RunContext.of(first), 0)
    for (name, w), ls in zip(refs.items(), (":", "--")):
        axes[2].axhline(sparsity(w), color="k", lw=0.8, ls=ls, label=f"{name} max-margin")
    titles = ("distance of w/||w|| to the l2 SVM direction", "distance of w/||w|| to the l1 max-margin direction",
              "||w||_1^2 / ||w||_2^2 (soft count of nonzeros)")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("log(1/L) along gradient flow")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, title)
    return fig


def _predictor_figure(results):
    cells = _cells_by_depth(results)
    fig, axes = panels(len(cells), width=4.4)
    for ax, (depth, cell) in zip(axes, cells.items()):
        run = RunContext.of(cell)
        w = stored_predictor(run, 0)
        refs = max_margin_references(run, 0)
        ref = refs["l2"] if depth == 1 else refs["l1"]
        idx = np.arange(w.size)
        ax.plot(idx, ref / np.abs(ref).max(), "o", mfc="none", ms=6, color="k",
                label="l2 SVM" if depth == 1 else "l1 max-margin (LP)")
        ax.plot(idx, w / np.abs(w).max(), ".", ms=4, color="C3", label="GF limit w/||w||_inf")
        star = run.data[0].info["w_star"]
        ax.plot(idx[star != 0], (star / np.abs(star).max())[star != 0], "x", color="C2", label="teacher support")
        ax.set_xlabel("coordinate i")
        ax.set_ylabel("w_i / max |w|")
        ax.grid(True, alpha=0.3)
        finish(ax, f"D = {depth}: ||w||_1^2/||w||_2^2 = {float(sparsity(w)):.3g}")
    return fig


def _tables(results, out_dir):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    with (out_dir / "direction_convergence.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["depth", "time", "log_inv_loss", "unit_distance_l2_svm", "unit_distance_l1_max_margin",
                         "l1_l2_sparsity"])
        for depth, cell in _cells_by_depth(results).items():
            p = _paths(cell)
            writer.writerows([depth, *row] for row in zip(p["time"], p["log_inv_loss"], p["to_l2"], p["to_l1"],
                                                          p["sparsity"]))
    paths.append(out_dir / "direction_convergence.csv")
    with (out_dir / "final_predictors.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        cells = _cells_by_depth(results)
        first = RunContext.of(next(iter(cells.values())))
        refs = max_margin_references(first, 0)
        finals = {d: stored_predictor(RunContext.of(c), 0) for d, c in cells.items()}
        writer.writerow(["i", "teacher", "l2_svm", "l1_max_margin"] + [f"w_depth_{d}" for d in finals])
        for i in range(refs["l2"].size):
            writer.writerow([i, first.data[0].info["w_star"][i], refs["l2"][i], refs["l1"][i]]
                            + [w[i] for w in finals.values()])
    paths.append(out_dir / "final_predictors.csv")
    return paths


def _finals(results) -> dict[int, tuple[float, float, float]]:
    """Depth -> (sparsity, unit distance to the l2 SVM, unit distance to the l1 LP) of its run 0's limit."""
    final = {}
    for depth, cell in _cells_by_depth(results).items():
        run = RunContext.of(cell)
        w, refs = stored_predictor(run, 0), max_margin_references(run, 0)
        final[depth] = (float(sparsity(w)), unit_distance(w, refs["l2"]), unit_distance(w, refs["l1"]))
    return final


class DepthSparsityClaims(CellsTheorem):
    """Gunasekar et al. 2018's diagonal networks across depths: D = 1 nearer the l2 SVM, D = 2 nearer the l1
    max-margin LP, and sparser limits (||w||_1^2 / ||w||_2^2) as D grows."""

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Gunasekar et al. 2018, depth and sparsity"

    def _compare(self, ctx, depths, statement, pick) -> list[Verdict]:
        final = ctx.once("finals", lambda: _finals(ctx.results))
        if not all(d in final for d in depths):
            return []
        measured, relation, bound = pick(final)
        return [compare(self.title, "prediction", statement, measured, relation, bound)]

    @prediction("D = 1 is closer to the l2 SVM direction than to the l1 one",
                source="Gunasekar et al. 2018, Theorem 2 (D = 1: the l2 max-margin direction)")
    def depth_1_l2(self, ctx) -> list[Verdict]:
        """Prediction: D = 1 is closer to the l2 SVM direction than to the l1 one."""
        return self._compare(ctx, (1,), "D = 1 is closer to the l2 SVM direction than to the l1 one",
                             lambda f: (f[1][1], "<", f[1][2]))

    @prediction("D = 2 is closer to the l1 max-margin direction than to the l2 one",
                source="Gunasekar et al. 2018, Theorem 2 (D = 2: the l1 max-margin direction)")
    def depth_2_l1(self, ctx) -> list[Verdict]:
        """Prediction: D = 2 is closer to the l1 max-margin direction than to the l2 one."""
        return self._compare(ctx, (2,), "D = 2 is closer to the l1 max-margin direction than to the l2 one",
                             lambda f: (f[2][2], "<", f[2][1]))

    @prediction("depth 2 is sparser than depth 1", source="Gunasekar et al. 2018, Theorem 2 (l_{2/D} with D = 2 vs 1)")
    def sparser_at_2(self, ctx) -> list[Verdict]:
        """Prediction: depth 2 is sparser than depth 1."""
        return self._compare(ctx, (1, 2), "depth 2 is sparser than depth 1: ||w||_1^2/||w||_2^2",
                             lambda f: (f[2][0], "<", f[1][0]))

    @prediction("depth 3 is sparser still", source="Gunasekar et al. 2018, Theorem 2 (l_{2/3}: sparser than l1)")
    def sparser_at_3(self, ctx) -> list[Verdict]:
        """Prediction: depth 3 is sparser still."""
        return self._compare(ctx, (2, 3), "depth 3 is sparser still: ||w||_1^2/||w||_2^2 at D = 3 <= D = 2",
                             lambda f: (f[3][0], "<=", f[2][0]))


def _theorems(cell):
    return [GunasekarDiagonal()]


DIAGONAL = Experiment(
    validate_runs=check_diagonal_max_margin_runs,
    name="gunasekar2018-diagonal",
    paper="Gunasekar et al. 2018 (NeurIPS), Theorem 2 (diagonal networks)",
    systems=("S6", "S10"),
    summary="Separable data with a sparse teacher; diagonal networks w = u^D - v^D of depth 1, 2, 3 from u = v = alpha 1, "
            "logistic loss, gradient flow (loss clock) to L ~ e^-600: w/||w|| -> the l2 SVM for D = 1, the l1 "
            "max-margin predictor (LP) for D = 2, a KKT point of the margin problem (a stationary point of "
            "||w||_(2/3)) for D = 3, sparser as D grows (||w||_1^2 / ||w||_2^2).",
    config=ExperimentConfig(
        model=DiagonalLinear(depth=2, form="difference"),
        data=Separable(n=40, d=200, sparsity=3, margin=0.5),
        loss=Loss(name="logistic"),
        method=GradientFlow(solver="rkc", clock="loss", rtol=1e-8),
        stop=Stop(max_time=1e4),
        init_scale=0.1,
        checkpoints=CHECKPOINTS,
        kkt=True,
        keep_trajectory=True,
        grid={"model.depth": [1, 2, 3]},
    ),
    quick={"data.n": 20, "data.d": 60},
    figures=(
        Figure("direction_convergence", "Along gradient flow (x: log(1/L)), for D = 1, 2, 3: the distance of w/||w|| "
               "to the l2 SVM and to the l1 max-margin directions, and ||w||_1^2 / ||w||_2^2 (lines: the two references).",
               _convergence_figure),
        Figure("final_predictors", "The GF limit of each depth (dots, scaled to max |w_i| = 1) against its predicted "
               "reference (circles: l2 SVM for D = 1, l1 max-margin LP for D = 2, 3) and the teacher's support (x).",
               _predictor_figure),
    ),
    theorems=_theorems,
    claims=(DepthSparsityClaims(),),
    tables=_tables,
    settings_source="Ours (the paper proves the limit; it has no numeric experiment for diagonal nets): n = 40, d = 200, "
                    "a 3-sparse teacher with entries +-1/sqrt(3), points shifted by 0.5 along it, alpha = 0.1, gradient "
                    "flow by RKC in the loss clock (rtol 1e-8) until log L < -600, 249 checkpoints (every 0.05 in the "
                    "loss clock up to s = 10). Quick: n = 20, d = 60.",
)

#: the experiments of this module, in the order `implicitbias list` shows them
EXPERIMENTS = [DIAGONAL]
