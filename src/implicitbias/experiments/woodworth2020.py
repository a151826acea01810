"""Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry, Srebro 2020 (COLT), "Kernel and rich regimes in
overparametrized models" (survey, seed 002; SCIENCE.md S6, regression).

Sparse regression (n < d, a k-sparse teacher w*), the diagonal network w = u^D - v^D from u = v = alpha 1 trained
by gradient flow on the square loss until it interpolates, over a dense log grid of alpha in one sweep (every
alpha of a depth is one cell). Checked: the limit is argmin Q_alpha^D s.t. Xw = y at every alpha (Theorem 1;
Sec. 5 for D = 3), it tends to the min-l1 interpolator as alpha -> 0 and to the min-l2 one as alpha -> infinity,
the error to w* shows the kernel/rich transition (sharper for D = 3), and the stored trajectory is the mirror
flow with the hyperbolic-entropy potential (Sec. 4).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.data import SparseRegression
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.figures import write_dict_csv as _write_csv
from implicitbias.losses import Loss
from implicitbias.models import DiagonalLinear
from implicitbias.theorems.base import RunContext, compare
from implicitbias.theorems.fitting import fitted_slope
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop


@dataclasses.dataclass(frozen=True)
class DiagonalExperiment(Experiment):
    """An experiment on diagonal networks from u = v = alpha 1: alpha <= 0 is refused before anything trains
    (alpha = 0 is a saddle where gradient flow never moves, and alpha < 0 flips the parametrisation)."""

    def runs(self, config: ExperimentConfig) -> list:
        runs = super().runs(config)
        for spec in runs:
            if not spec.init_scale > 0:
                raise ConfigError(f"init_scale = {spec.init_scale!r} is not allowed: expected alpha > 0 (init u = v = "
                                  "alpha 1; at alpha = 0 the flow sits on a saddle and never moves)")
        return runs


#: gradient flow by RKC at rtol 1e-8 with an absolute floor of 1e-14, on the displacements du = u - alpha 1,
#: dv = v - alpha 1 (`DiagonalLinear(trained="displacement")`: the same flow, with error control and rounding of w
#: relative to the displacement; at alpha = 100, D = 3 a tolerance relative to u ~ 100 would be loose in w ~ 1)
GF = GradientFlow(solver="rkc", rtol=1e-8, atol=1e-14, atol_rel=None, dt0=1e-10)
#: interpolation: L < 1e-16, a relative residual ~1e-8 (L(0) ~ 1/2), far below the 1e-6 the limit check needs and
#: above the float64 floor of w = u^2 - v^2 at alpha = 100 (~1e-21)
STOP = Stop(loss_tol=1e-16, max_time=1e6)
#: depth 3: the flow passes saddles where a small integration error becomes a shift in time of a sharp rise, seen
#: as a pointwise gap to the mirror flow (1.2e-4 at rtol 1e-8, 6e-6 at 1e-10, alpha = 0.016, d = 1000), hence rtol
#: 1e-10; and at small alpha the last directions of the residual decay at a rate ~ alpha^4, hence t up to 1e8
DEPTH_3 = {"model.depth": 3, "method.rtol": 1e-10, "stop.max_time": 1e8}
ALPHAS = [float(a) for a in np.logspace(-3, 2, 26)]  # 5 per decade, 1e-3 .. 1e2
QUICK_ALPHAS = [float(a) for a in np.logspace(-3, 2, 11)]
#: D = 3 from 1e-2: its transition is over by then, and below it the flow needs t ~ 1e8 (two runs were 24 of
#: the quick variant's 32 s)
QUICK_ALPHAS_D3 = QUICK_ALPHAS[2:]


def _cells_by_depth(results) -> dict[int, object]:
    return {int(c.spec.model.depth): c for c in sorted(results.cells, key=lambda c: c.spec.model.depth)}


def summary_rows(cell) -> list[dict]:
    """Per run of a cell (sorted by alpha): the GF limit's distances to w*, to the min-l1 and min-l2
    interpolators and to the Q_alpha minimiser (all relative), and the run's end state."""
    from implicitbias.theorems.diagonal import (
        interpolator_references,
        q_alpha_reference,
        relative_distance,
        stored_predictor,
    )

    run = RunContext.of(cell)
    rows = []
    for r in np.argsort([s.init_scale for s in run.runs]):
        spec, w = run.runs[r], stored_predictor(run, r)
        refs, q = interpolator_references(run, r), q_alpha_reference(run, r)
        ds = cell.results
        rows.append({
            "depth": int(spec.model.depth), "alpha": float(spec.init_scale),
            "teacher_error": relative_distance(w, run.data[r].info["w_star"]),
            "distance_l1": relative_distance(w, refs["l1"]), "distance_l2": relative_distance(w, refs["l2"]),
            "distance_q_alpha": np.nan if isinstance(q, Exception) else relative_distance(w, q.w),
            "l1_l2_sparsity": float(np.abs(w).sum() ** 2 / (w @ w)),
            "final_loss": float(ds["loss"].values[r, -1]), "time": float(ds["time"].values[r, -1]),
            "grad_evals": int(ds["grad_evals"].values[r, -1]),
        })
    return rows


def _column(rows, name) -> np.ndarray:
    return np.asarray([row[name] for row in rows], dtype=float)


# -- figures ----------------------------------------------------------------------------------------------
def _transition_figure(results):
    fig, (a, b, c) = panels(3, width=4.4)
    for depth, cell in _cells_by_depth(results).items():
        rows = summary_rows(cell)
        alpha, style = _column(rows, "alpha"), "-" if depth == 2 else "--"
        a.plot(alpha, _column(rows, "teacher_error"), "o" + style, ms=3, label=f"D = {depth}")
        b.plot(alpha, _column(rows, "distance_l1"), "o" + style, ms=3, color="C0", label=f"to min-l1, D = {depth}")
        b.plot(alpha, _column(rows, "distance_l2"), "s" + style, ms=3, color="C3", label=f"to min-l2, D = {depth}")
        q = _column(rows, "distance_q_alpha")
        c.plot(alpha, np.maximum(q, 1e-17), "o" + style, ms=3, label=f"D = {depth}")
    c.axhline(1e-4, color="k", lw=0.8, ls=":", label="1e-4")
    for ax, ylabel, title in (
        (a, "||w - w*|| / ||w*||", "error to the sparse teacher (rich: small alpha)"),
        (b, "relative distance", "distance to the min-l1 / min-l2 interpolators"),
        (c, "||w_GF - w_alpha|| / ||w_alpha||", "GF limit vs argmin Q_alpha s.t. Xw = y"),
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("initialisation scale alpha")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, title)
    return fig


def _mirror_runs(cell, k: int = 3) -> list[int]:
    """k runs spread over the alpha grid (smallest, middle, largest)."""
    order = np.argsort([s.init_scale for s in cell.runs])
    return sorted({int(order[i]) for i in np.linspace(0, len(order) - 1, k).round().astype(int)})


def _mirror_figure(results):
    from implicitbias.theorems.diagonal import mirror_flow_comparison

    cells = _cells_by_depth(results)
    fig, axes = panels(len(cells) + 1, width=4.4)
    for ax, (depth, cell) in zip(axes, cells.items()):
        run = RunContext.of(cell)
        for j, r in enumerate(_mirror_runs(cell)):
            times, W, M = mirror_flow_comparison(run, r)
            top = np.argsort(-np.abs(W[-1]))[:3]
            for i, idx in enumerate(top):
                lab = f"alpha = {run.runs[r].init_scale:.2g}" if i == 0 else None
                ax.plot(times[1:], W[1:, idx], "-", color=f"C{j}", lw=1, label=lab)
                ax.plot(times[1:], M[1:, idx], "x", color=f"C{j}", ms=4)
        ax.set_xscale("log")
        ax.set_xlabel("time t")
        ax.set_ylabel("w_i(t), three largest coordinates")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, f"D = {depth}: GF on (u, v) (lines) vs mirror flow (x)")
    gap_ax = axes[-1]
    for depth, cell in cells.items():
        run = RunContext.of(cell)
        for r in _mirror_runs(cell):
            times, W, M = mirror_flow_comparison(run, r)
            gap = np.linalg.norm(W - M, axis=1) / np.linalg.norm(W[-1])
            gap_ax.plot(times[1:], np.maximum(gap[1:], 1e-17), "-" if depth == 2 else "--",
                        label=f"D = {depth}, alpha = {run.runs[r].init_scale:.2g}")
    gap_ax.axhline(1e-4, color="k", lw=0.8, ls=":")
    gap_ax.set_xscale("log")
    gap_ax.set_yscale("log")
    gap_ax.set_xlabel("time t")
    gap_ax.set_ylabel("||w_GF(t) - w_MF(t)|| / ||w_GF(end)||")
    gap_ax.grid(True, which="both", alpha=0.3)
    finish(gap_ax, "gap between the two paths")
    return fig


# -- tables and claims ------------------------------------------------------------------------------------
def _tables(results, out_dir):
    from implicitbias.theorems.diagonal import mirror_flow_comparison

    out_dir = Path(out_dir)
    rows, paths = [], []
    for cell in _cells_by_depth(results).values():
        rows += summary_rows(cell)
    paths.append(_write_csv(out_dir / "kernel_rich_transition.csv", rows))
    gaps = []
    for depth, cell in _cells_by_depth(results).items():
        run = RunContext.of(cell)
        for r in _mirror_runs(cell):
            times, W, M = mirror_flow_comparison(run, r)
            scale = np.linalg.norm(W[-1])
            for t, wg, wm in zip(times, W, M):
                gaps.append({"depth": depth, "alpha": run.runs[r].init_scale, "time": float(t),
                             "norm_w_gf": float(np.linalg.norm(wg)), "gap_relative": float(np.linalg.norm(wg - wm) / scale)})
    paths.append(_write_csv(out_dir / "mirror_flow_path.csv", gaps))
    return paths


def transition_width(alpha, error, low: float = 0.1, high: float = 0.9) -> float:
    """The width in decades of alpha over which the teacher error climbs from `low` to `high` of its range
    (first crossings, interpolated linearly in log10 alpha); nan if it does not cross both levels."""
    la, e = np.log10(np.asarray(alpha, float)), np.asarray(error, float)
    span = e.max() - e.min()
    if not span > 0:
        return np.nan
    s = (e - e.min()) / span
    crossings = []
    for level in (low, high):
        k = np.flatnonzero((s[:-1] < level) & (s[1:] >= level))
        if k.size == 0:
            return np.nan
        i = k[0]
        crossings.append(la[i] + (level - s[i]) * (la[i + 1] - la[i]) / (s[i + 1] - s[i]))
    return float(crossings[1] - crossings[0])


#: a distance is used in a trend only if it is this many times the flow's measured error at that alpha (its
#: distance to the exact Q_alpha minimiser): below, the distance is the integration error, not the regime
TREND_MARGIN = 10.0


def limit_trend(alpha, distance, accuracy, side: str) -> tuple[float, int]:
    """(fitted slope of log distance against log alpha, number of points) over the smaller ("rich") or larger
    ("kernel") half of the alpha grid, on the points whose distance is above TREND_MARGIN x `accuracy` (the flow's
    error there); nan with fewer than 2 such points."""
    alpha, distance, accuracy = (np.asarray(v, float) for v in (alpha, distance, accuracy))
    half = len(alpha) // 2
    window = slice(0, half) if side == "rich" else slice(len(alpha) - half, len(alpha))
    a, dist, acc = alpha[window], distance[window], accuracy[window]
    keep = dist > TREND_MARGIN * np.where(np.isfinite(acc), acc, np.inf)
    if keep.sum() < 2:
        return np.nan, int(keep.sum())
    return fitted_slope(np.log(a[keep]), np.log(dist[keep]))[0], int(keep.sum())


def _claims(results):
    title = "Woodworth et al. 2020, kernel and rich regimes"
    out, widths = [], {}
    for depth, cell in _cells_by_depth(results).items():
        rows = summary_rows(cell)
        alpha = _column(rows, "alpha")
        l1, l2, err = _column(rows, "distance_l1"), _column(rows, "distance_l2"), _column(rows, "teacher_error")
        accuracy = _column(rows, "distance_q_alpha")
        s1, k1 = limit_trend(alpha, l1, accuracy, "rich")
        s2, k2 = limit_trend(alpha, l2, accuracy, "kernel")
        floor = (f"fitted on the {{}} points of that half whose distance exceeds {TREND_MARGIN:g} x the flow's error "
                 "there (its distance to the exact Q_alpha minimiser)")
        out += [
            compare(title, "prediction", f"D = {depth}: alpha -> 0 gives the min-l1 interpolator: slope of log ||w - "
                    "w_l1|| against log alpha over the smaller half of the alpha grid > 0", s1, ">", 0.0,
                    f"{floor.format(k1)}; distance {l1[0]:.3g} at alpha = {alpha[0]:.3g}"),
            compare(title, "prediction", f"D = {depth}: alpha -> infinity gives the min-l2 interpolator: slope of log "
                    "||w - w_l2|| against log alpha over the larger half of the alpha grid < 0", s2, "<", 0.0,
                    f"{floor.format(k2)}; distance {l2[-1]:.3g} at alpha = {alpha[-1]:.3g}"),
            compare(title, "prediction", f"D = {depth}: the rich regime recovers the sparse teacher, the kernel "
                    "regime does not: ||w - w*|| / ||w*|| at the smallest alpha below that at the largest",
                    err[0], "<", err[-1]),
        ]
        widths[depth] = transition_width(alpha, err)
    if 2 in widths and 3 in widths:
        out.append(compare(title, "prediction", "the transition is sharper for D = 3: decades of alpha over which "
                           "the teacher error climbs from 10% to 90% of its range, D = 3 below D = 2",
                           widths[3], "<", widths[2]))
    return out


def _theorems(cell):
    from implicitbias.theorems.diagonal import MirrorFlowPath, WoodworthLimit

    return [WoodworthLimit(), MirrorFlowPath()]


KERNEL_RICH = DiagonalExperiment(
    name="woodworth2020-kernel-rich",
    paper="Woodworth et al. 2020 (COLT), Theorem 1, Sec. 4-5",
    systems=("S6",),
    summary="Sparse regression (n < d, k-sparse teacher) with the diagonal network w = u^D - v^D from u = v = alpha 1, "
            "gradient flow to interpolation over a dense log grid of alpha (1e-3 .. 1e2) in one sweep, D = 2 and 3: "
            "the limit equals argmin Q_alpha^D s.t. Xw = y at every alpha; it approaches the min-l1 interpolator as "
            "alpha -> 0 (rich regime, recovers the teacher) and the min-l2 one as alpha -> infinity (kernel regime); "
            "the transition is sharper for D = 3; and the trajectory is mirror flow with the hyperbolic-entropy "
            "potential psi_beta, beta = 2 alpha^2, at rate 4.",
    config=ExperimentConfig(
        model=DiagonalLinear(depth=2, form="difference", trained="displacement"),
        data=SparseRegression(n=100, d=1000, k=5, w_star_values="positive"),
        loss=Loss(name="square"),
        method=GF,
        stop=STOP,
        checkpoints=49,
        kkt=False,
        keep_trajectory=True,
        parts={"depth_2": {"model.depth": 2, "grid": {"init_scale": ALPHAS}},
               "depth_3": {**DEPTH_3, "grid": {"init_scale": ALPHAS}}},
    ),
    quick={"data.n": 30, "data.d": 200, "data.k": 3, "checkpoints": 33,
           "parts": {"depth_2": {"model.depth": 2, "grid": {"init_scale": QUICK_ALPHAS}},
                     "depth_3": {**DEPTH_3, "grid": {"init_scale": QUICK_ALPHAS_D3}}}},
    figures=(
        Figure("kernel_rich_transition", "Against alpha, D = 2 (solid) and D = 3 (dashed): the error to the sparse "
               "teacher; the distances to the min-l1 and min-l2 interpolators; the distance of the GF limit to "
               "argmin Q_alpha^D s.t. Xw = y (dotted: 1e-4).", _transition_figure),
        Figure("mirror_flow_path", "Gradient flow on (u, v) (lines) against mirror flow with psi = "
               "diagonal_net_potential(alpha, D) at rate diagonal_net_time_scale(alpha, D) (crosses), three alphas "
               "per depth; right: the gap between the paths over time.", _mirror_figure),
    ),
    theorems=_theorems,
    claims=_claims,
    tables=_tables,
    settings_source="Woodworth et al. 2020 and the literature after it: d = 1000, n = 100, a 5-sparse teacher with "
                    "entries 1/sqrt(5), x ~ N(0, I_d), noiseless labels. Ours: alpha = 1e-3 .. 1e2 (26 values, 5 per "
                    "decade), gradient flow by RKC (rtol 1e-8, 1e-10 for D = 3; atol 1e-14) until L < 1e-16 or t = 1e6 "
                    "(1e8 for D = 3), 49 log-spaced "
                    "checkpoints from t = 1e-10 (at alpha = 100, D = 3 the flow is over by t ~ 1e-8) with the trajectory "
                    "stored. Quick: d = 200, n = 30, k = 3, 11 alphas for D = 2 (1e-3 .. 1e2) and 9 for D = 3 "
                    "(1e-2 .. 1e2), 33 checkpoints.",
)

#: the experiments of this module, in the order `implicitbias list` shows them
EXPERIMENTS = [KERNEL_RICH]
