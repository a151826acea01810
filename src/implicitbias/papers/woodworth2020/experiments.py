"""Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry, Srebro 2020 (COLT), "Kernel and rich regimes in
overparametrized models" (survey, seed 002; SCIENCE.md S6, regression).

Sparse regression (n < d, a k-sparse teacher w*), the diagonal network w = u^D - v^D from u = v = alpha 1 trained
by gradient flow on the square loss until it interpolates, over a dense log grid of alpha in one sweep (every
alpha of a depth is one cell). Checked: the limit is argmin Q_alpha^D s.t. Xw = y at every alpha (Theorem 1;
Sec. 5 for D = 3), it tends to the min-l1 interpolator as alpha -> 0 and to the min-l2 one as alpha -> infinity,
the error to w* shows the kernel/rich transition (sharper for D = 3), and the stored trajectory is the mirror
flow with the hyperbolic-entropy potential (Sec. 4). The regime claims are read against the closed form (the
Q_alpha^D minimisers on the same alphas): the rates at which the GF limits approach the min-l1 and min-l2
interpolators on either side of their crossover (`regime_rate`), the teacher errors at the ends of the grid against
the two interpolators' (`recovery_claims`), and the transition widths with the uncertainty of the grid and of the
flow (`sharper_claim`); these claims are `claims.KernelRichClaims`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from implicitbias.data import SparseRegression
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.figures import write_dict_csv as _write_csv
from implicitbias.experiments.validation import check_positive_alpha
from implicitbias.losses import Loss
from implicitbias.models import DiagonalLinear
from implicitbias.papers.woodworth2020.claims import KernelRichClaims, cells_by_depth, column, summary_rows
from implicitbias.papers.woodworth2020.theorems import MirrorFlowPath, WoodworthLimit, mirror_flow_comparison
from implicitbias.theorems.base import RunContext
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop

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
#: quick: 4 per decade, so that each side of the kernel/rich crossover has >= MIN_FIT_POINTS alphas whose distance to
#: its limit interpolator is above the flow's error (the regime rates of `regime_claims`): D = 2 over 1e-3 .. 1e2
QUICK_ALPHAS = [float(10.0 ** (k / 4.0)) for k in range(-12, 9)]
#: D = 3 over 10^-1.75 .. 10 (its crossover is near 0.2; below 10^-1.75 the flow needs t ~ 1e7 and more, and above 10
#: every distance to the min-l2 interpolator is at the flow's error)
QUICK_ALPHAS_D3 = [float(10.0 ** (k / 4.0)) for k in range(-7, 5)]


# -- figures ----------------------------------------------------------------------------------------------
def _transition_figure(results):
    fig, (a, b, c) = panels(3, width=4.4)
    for depth, cell in cells_by_depth(results).items():
        rows = summary_rows(cell)
        alpha, style = column(rows, "alpha"), "-" if depth == 2 else "--"
        a.plot(alpha, column(rows, "teacher_error"), "o" + style, ms=3, label=f"D = {depth}")
        b.plot(alpha, column(rows, "distance_l1"), "o" + style, ms=3, color="C0", label=f"to min-l1, D = {depth}")
        b.plot(alpha, column(rows, "distance_l2"), "s" + style, ms=3, color="C3", label=f"to min-l2, D = {depth}")
        q = column(rows, "distance_q_alpha")
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
    cells = cells_by_depth(results)
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
    out_dir = Path(out_dir)
    rows, paths = [], []
    for cell in cells_by_depth(results).values():
        rows += summary_rows(cell)
    paths.append(_write_csv(out_dir / "kernel_rich_transition.csv", rows))
    gaps = []
    for depth, cell in cells_by_depth(results).items():
        run = RunContext.of(cell)
        for r in _mirror_runs(cell):
            times, W, M = mirror_flow_comparison(run, r)
            scale = np.linalg.norm(W[-1])
            for t, wg, wm in zip(times, W, M):
                gaps.append({"depth": depth, "alpha": run.runs[r].init_scale, "time": float(t),
                             "norm_w_gf": float(np.linalg.norm(wg)), "gap_relative": float(np.linalg.norm(wg - wm) / scale)})
    paths.append(_write_csv(out_dir / "mirror_flow_path.csv", gaps))
    return paths


def _theorems(cell):
    return [WoodworthLimit(), MirrorFlowPath()]


KERNEL_RICH = Experiment(
    validate_runs=check_positive_alpha,
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
    claims=(KernelRichClaims(),),
    tables=_tables,
    settings_source="Woodworth et al. 2020 and the literature after it: d = 1000, n = 100, a 5-sparse teacher with "
                    "entries 1/sqrt(5), x ~ N(0, I_d), noiseless labels. Ours: alpha = 1e-3 .. 1e2 (26 values, 5 per "
                    "decade), gradient flow by RKC (rtol 1e-8, 1e-10 for D = 3; atol 1e-14) until L < 1e-16 or t = 1e6 "
                    "(1e8 for D = 3), 49 log-spaced "
                    "checkpoints from t = 1e-10 (at alpha = 100, D = 3 the flow is over by t ~ 1e-8) with the trajectory "
                    "stored. Quick: d = 200, n = 30, k = 3, 4 alphas per decade (enough for >= 4 on each side of the "
                    "kernel/rich crossover above the flow's error): 21 for D = 2 (1e-3 .. 1e2) and 12 for D = 3 "
                    "(10^-1.75 .. 10), 33 checkpoints.",
)

#: the experiments of this module, in the order `implicitbias list` shows them
EXPERIMENTS = [KERNEL_RICH]
