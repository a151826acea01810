"""Li, Luo & Lyu 2021 (ICLR), "Towards resolving the implicit bias of gradient descent for matrix factorization:
greedy low-rank learning" (S8): from a tiny init alpha, gradient flow on a depth-2 factorisation learns the singular
values of W one at a time (saddle to saddle); the plateau times grow like ln(1/alpha); the path approaches that of
greedy low-rank learning (GLRL, rank-1 steps, `implicitbias.reference.greedy_low_rank`) as alpha -> 0.

Measured (full variant, alpha = 1e-4..1e-8, runs stopped on convergence at loss 1e-6): the first escape takes
ln(1/alpha) / sigma_1(M_0) (fitted slope 1.005 +- 0.0035 against the predicted 1), and every later plateau lengthens
with ln(1/alpha). On trial 2 the path does not approach GLRL's first saddle W_1 at these alphas: its closest approach
stays at 0.358 (exponent 0.0008). GLRL's own rank-1 flow, from the same top direction of -grad L(0), lingers at
distance ~0.36 from W_1 until t ~ 20 and reaches it only by t ~ 50-100 (its slowest stable rate at W_1 is 0.2),
while gradient flow from alpha I spends about (1 - sigma_2 / sigma_1)(M_0) ln(1/alpha) / sigma_1(M_1) ~ 5 time
units near rank 1 at alpha = 1e-8 before the second direction escapes: the limit alpha -> 0 is reached there only
for ln(1/alpha) in the hundreds. The path check reports it as failed (the approach has stalled over the grid).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from implicitbias.data import MatrixSensing
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.validation import check_factorization_runs
from implicitbias.losses import Loss
from implicitbias.metrics.factorization import end_to_end
from implicitbias.models import MatrixFactorization
from implicitbias.papers.li2021.theorems import LiIncremental, saddle_distances
from implicitbias.theorems.base import RunContext
from implicitbias.theorems.matrix_common import greedy_path, target_rank
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop

ALPHAS = [1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
#: the runs stop on convergence at this loss: below 1e-4 x the loss of GLRL's last saddle before W* on every data set
#: (0.27-0.31 for the three trials), where `LiIncremental` reads the r-th singular value as settled (to ~1%); from
#: alpha <= 1e-4 the directions W* does not need stay below ~alpha^2 e^(...) and the loss reaches it by t ~ 100
LOSS_TOL = 1e-6
#: checkpoints linear in time over 1 <= t <= 100: the plateaus sit at times ~ ln(1/alpha) / sigma_k, a few units apart;
#: then geometric to t = 1e4 (the time budget, `max_time`), so that a run stops on `LOSS_TOL`, not on its last checkpoint
TIMES = [0.0] + list(np.geomspace(0.01, 1.0, 8)) + list(np.linspace(1.25, 100.0, 320)) + list(np.geomspace(100.0, 1e4, 41)[1:])


def _numbers(cell):
    ctx = RunContext.of(cell)
    W = end_to_end(cell.results, cell.spec.model.depth)
    return {"alpha": np.array([s.init_scale for s in cell.runs]), "trial": np.array([s.trial for s in cell.runs]),
            "s": np.linalg.svd(W, compute_uv=False), "time": cell.results["time"].values,
            "t_k": LiIncremental().times(ctx), "dist": saddle_distances(ctx, target_rank(ctx))}


def _figure(results):
    cell = results.cells[0]
    nums = _numbers(cell)
    fig, (a, b, c) = panels(3, width=4.6, height=3.9)
    r = int(np.flatnonzero((nums["alpha"] == nums["alpha"].min()) & (nums["trial"] == 0))[0])
    rank = target_rank(RunContext.of(cell))
    t = nums["time"][r]
    for k in range(min(rank + 1, nums["s"].shape[-1])):
        line = a.plot(t[t > 0], nums["s"][r, t > 0, k], label=f"sigma_{k + 1}")[0]
        if k < rank:
            a.axvline(nums["t_k"][r, k], color=line.get_color(), ls=":", lw=0.8)
    path = greedy_path(cell.data[r], rank, cell.runs[r].data_key())
    for k, sv in enumerate(path.singular_values):
        for v in sv[: k + 1]:
            a.axhline(v, color="0.5", ls="--", lw=0.5)
    a.set_yscale("log")
    a.set_xlim(0.0, 1.5 * float(np.nanmax(nums["t_k"][r])))
    a.set_ylim(max(1e-14, nums["s"][r, :, :rank + 1].min() / 2), None)
    a.set_xlabel("time t")
    a.set_ylabel("singular values of W(t)")
    finish(a, f"alpha = {nums['alpha'][r]:.0e}: one at a time\n(dashed: GLRL saddles; dotted: t_k)")
    for trial in np.unique(nums["trial"]):
        sel = nums["trial"] == trial
        x = np.log(1.0 / nums["alpha"][sel])
        for k in range(rank):
            b.plot(x, nums["t_k"][sel, k], "o-", ms=4, label=f"t_{k + 1}" if trial == 0 else None, color=f"C{k}")
            c.plot(nums["alpha"][sel], nums["dist"][sel, k], "o-", ms=4, color=f"C{k}",
                   label=f"saddle {k + 1}" if trial == 0 else None)
    b.set_xlabel("ln(1 / alpha)")
    b.set_ylabel("t_k: sigma_k reaches half its final value")
    finish(b, "plateau times grow like ln(1/alpha)")
    c.set_xscale("log")
    c.set_yscale("log")
    c.set_xlabel("init scale alpha")
    c.set_ylabel("min_t ||W(t) - W_k^GLRL|| / ||W_k^GLRL||")
    finish(c, "distance to the GLRL saddles")
    for ax in (a, b, c):
        ax.grid(True, which="both", alpha=0.3)
    return fig


def _tables(results, out_dir):
    out = []
    for cell in results.cells:
        nums = _numbers(cell)
        rank = nums["t_k"].shape[1]
        path = Path(out_dir) / "incremental_plateaus.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["trial", "alpha"] + [f"t_{k + 1}" for k in range(rank)]
                       + [f"dist_saddle_{k + 1}" for k in range(rank)])
            for i in range(nums["alpha"].size):
                w.writerow([int(nums["trial"][i]), f"{nums['alpha'][i]:.3g}"]
                           + [f"{v:.8g}" for v in nums["t_k"][i]] + [f"{v:.8g}" for v in nums["dist"][i]])
        out.append(path)
        path = Path(out_dir) / "singular_values_smallest_alpha.csv"
        r = int(np.argmin(nums["alpha"]))
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time"] + [f"sigma_{k + 1}" for k in range(nums["s"].shape[-1])])
            w.writerows([[f"{nums['time'][r, i]:.8g}"] + [f"{v:.8g}" for v in nums["s"][r, i]]
                         for i in range(nums["s"].shape[1])])
        out.append(path)
    return out


def _theorems(cell):
    return [LiIncremental()]


LI = Experiment(
    validate_runs=check_factorization_runs,
    name="li2021-incremental",
    paper="Li, Luo & Lyu 2021 (ICLR), greedy low-rank learning",
    systems=("S8",),
    summary="Matrix sensing of a rank-3 W* (singular values 3, 2, 1) with W = W_2 W_1 from W_j = alpha I, gradient "
            "flow: the singular values of W(t) are learned one at a time (saddle to saddle), the plateau times grow "
            "like ln(1/alpha), and the path passes ever closer to the saddles of greedy low-rank learning as "
            "alpha -> 0.",
    config=ExperimentConfig(
        model=MatrixFactorization(dim=8, depth=2),
        data=MatrixSensing(d=8, rank=3, n=60, singular_values=(3.0, 2.0, 1.0)),
        loss=Loss(name="square"),
        method=GradientFlow(rtol=1e-8),
        stop=Stop(loss_tol=LOSS_TOL, max_time=1e4),
        trials=3,
        checkpoints=TIMES,
        kkt=False,
        keep_trajectory=True,
        grid={"init_scale": ALPHAS},
    ),
    quick={"trials": 1},
    figures=(Figure("incremental_learning", "Left: singular values of W(t) at the smallest alpha (dashed: those of "
                    "the GLRL saddles; dotted: the times t_k). Middle: t_k against ln(1/alpha). Right: closest approach "
                    "of W(t) to each GLRL saddle against alpha.", _figure),),
    theorems=_theorems,
    tables=_tables,
    settings_source="Ours: d = 8, W* = U diag(3, 2, 1) V^T, n = 60 Gaussian measurements (above the 39 degrees of "
                    "freedom of rank 3, below the 64 entries; with n = 48 the flow was seen to end on a higher-rank "
                    "interpolator), alpha = 1e-4..1e-8 (from 1e-3 up the directions W* does not need grow large enough that "
                    "the loss stalls near 1e-5 for t > 100), gradient flow (RKC, rtol 1e-8) to loss 1e-6 (a stop on "
                    "convergence: below 1e-4 x the loss of GLRL's saddle W_2 on every data set), checkpoints every "
                    "0.31 time units to t = 100, then geometric to the budget t = 1e4, 3 data sets. Quick: one data set.",
)

EXPERIMENTS = [LI]
