"""Razin & Cohen 2020 (NeurIPS), "Implicit regularization in deep learning may not be explainable by norms": the
2 x 2 completion counterexample (S8). W_12 = W_21 = 1 and W_22 = 0 are observed, W_11 is not; every completion has
det W = -1, so from a balanced init with det W(0) > 0 a factorisation of depth >= 2, whose determinant keeps its
sign, can drive the loss to 0 only with |W_11| -> infinity: every norm diverges while the effective rank falls
towards 1. The balanced inits are alpha I (balanced, det W(0) > 0). Gradient flow in physical time down to loss
1e-8 (`LOSS_TOL`) with the implicit, L-stable Kvaerno5 (`GradientFlow(solver="kvaerno5")`, rtol 1e-10, atol 1e-14):
the flow gets stiff as the loss falls, which held the explicit RKC to loss 1e-6 (~2e7 gradient evaluations, ~100
times more per further decade); with at most 8 parameters a Newton step with a dense Jacobian is cheap, and each run
takes ~2000 steps (seconds). Beside it, unbalanced inits (0.3 I plus small noise, depth 3, RKC as before): the
determinant crosses zero, after which the loss reaches 0 at a finite W_11.

The determinant, measured: at depth 3 det W ~ L^2 and at depth 4 det W ~ L (4e-13 and 5e-7 at L = 1e-8), resolved
in float64 when read from the factors, det W = prod_j det W_j (each 2 x 2 determinant from its own entries, exact in
sign above its rounding 2 u ||W_j||_F^2), while det W computed from W cancels (u |W_11| |W_22| ~ 1e-16 against
det W ~ L^2); it stays positive to the end (the RKC runs of before lost it below L ~ 1e-6: an artefact of their
tolerance). At depth 2 the flow from alpha I keeps W_2 = W_1^T, so W = W_1^T W_1 >= 0, and det W = det(W_1)^2 falls to
~1e-24 already at L ~ 2e-3, below what float64 factors resolve (their determinants are at rounding level from there
on): positivity is structural there, not measurable. An implicit step breaks W_2 = W_1^T at the rounding level, far
above that determinant, and the path then crosses det W = 0 and ends at a finite completion (measured: det W -> -0.99,
|W_11| ~ 22 at L = 1e-8). The depth-2 runs are therefore the symmetric factorisation W = U U^T, U(0) = alpha I: the
same balanced flow restricted to its invariant set W_2 = W_1^T = U (its clock runs twice as fast), PSD by construction.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from implicitbias.data import RazinCohen
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.validation import check_factorization_runs
from implicitbias.losses import Loss
from implicitbias.metrics.factorization import effective_rank, product, schatten
from implicitbias.models import MatrixFactorization
from implicitbias.papers.razin2020.theorems import NORMS, RazinCohen2020, razin_factors
from implicitbias.theorems.base import CellsTheorem, Verdict, compare, prediction
from implicitbias.theorems.fitting import curve, fitted_slope
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop

#: the loss the balanced runs are integrated down to (quick variant too). Kvaerno5 reaches it in ~2000 steps a run
#: (measured: t ~ 2e9 at depth 3, 3e8 at depth 4, 2e10 in the clock of the depth-2 U U^T); the explicit RKC needed
#: ~2e7 gradient evaluations to 1e-6 and about 100 times more per further decade (1e-8: ~2e11 evaluations a run, projected).
LOSS_TOL = 1e-8

#: the balanced parts: depth 2 as the symmetric factorisation U U^T (see the module docstring), depths 3 and 4
BALANCED = ("balanced_symmetric", "balanced")


def _paths(cell) -> dict[str, np.ndarray]:
    """Along training, per run: loss, time, W_11, W_22, det W = prod_j det W_j (from the factors, see the module
    docstring), whether float64 resolves its sign, the norms of `NORMS` and the effective rank."""
    fs = razin_factors(cell.results, cell.spec.model)
    W = product(fs)
    dets = np.stack([np.linalg.det(f) for f in fs])
    rounding = np.stack([2.0 * np.finfo(float).eps * np.sum(f**2, axis=(-2, -1)) for f in fs])
    s = np.linalg.svd(W, compute_uv=False)
    out = {"loss": curve(cell.results, "loss"), "time": curve(cell.results, "time"), "W11": W[..., 0, 0],
           "W22": W[..., 1, 1], "det": np.prod(dets, axis=0),
           "det_resolved": np.all(np.abs(dets) > rounding, axis=0).astype(float), "effective_rank": effective_rank(s)}
    out.update({name: schatten(s, p) for name, p in NORMS.items()})
    return out


def _balanced(results):
    return sorted((c for c in results.cells if c.spec.part in BALANCED), key=lambda c: c.spec.model.depth)


def _depth_label(cell) -> str:
    return f"N = {cell.spec.model.depth}" + (" (U U^T)" if cell.spec.model.symmetric else "")


def _part(results, name):
    return sorted((c for c in results.cells if c.spec.part == name), key=lambda c: c.spec.model.depth)


def _lower_bound(loss):
    rho = np.sqrt(6.0 * loss)
    return np.where(rho < 1, (1 - rho) ** 2 / np.where(rho > 0, rho, 1.0), np.nan)


def _slope(loss, values, late=1e-3):
    keep = (loss <= late) & (loss > 0) & (values > 0)
    return fitted_slope(np.log(loss[keep]), np.log(values[keep]))[0] if keep.sum() >= 3 else math.nan


def _norms_figure(results):
    cells = _balanced(results)
    fig, axes = panels(len(cells), width=4.6, height=4.0)
    for ax, cell in zip(axes, cells):
        p = _paths(cell)
        r = 0  # the first seed; the others are in the CSV and the checks
        L = p["loss"][r]
        keep = L > 0
        lines = {"|W_11|": np.abs(p["W11"][r]), **{f"{k} norm": p[k][r] for k in NORMS}}
        for name, v in lines.items():
            ax.plot(L[keep], v[keep], marker=".", ms=3, label=f"{name} (slope {_slope(L, v):.3f})")
        ax.plot(L[keep], _lower_bound(L[keep]), "k--", lw=0.8, label="(1 - rho)^2 / rho, rho = sqrt(6L)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("training loss (decreasing to the right)")
        ax.set_ylabel("norm of W = W_N ... W_1")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, f"depth {_depth_label(cell)}, balanced init, det W(0) > 0\n"
                   f"slopes of log norm vs log L for L <= 1e-3")
    return fig


def _rank_det_figure(results):
    fig, (a, b, c, d) = panels(4, width=4.4, height=3.8)
    for cell in _balanced(results):
        p = _paths(cell)
        L, label = p["loss"][0], _depth_label(cell)
        keep = L > 0
        a.plot(L[keep], p["effective_rank"][0][keep], marker=".", ms=3, label=label)
        ok = keep & (p["det_resolved"][0] > 0) & (p["det"][0] > 0)
        line, = b.plot(L[ok], p["det"][0][ok], marker=".", ms=3, label=f"{label}, resolved")
        lost = keep & (p["det_resolved"][0] == 0)
        if lost.any():
            b.axvline(L[lost].max(), color=line.get_color(), ls=":", lw=0.9,
                      label=f"{label}: unresolved below L = {L[lost].max():.2g}")
        d.plot(L[keep], np.abs(p["W11"][0][keep]), label=f"balanced, {label}")
    for cell in _part(results, "unbalanced"):
        p = _paths(cell)
        for r in range(p["det"].shape[0]):
            t, L = p["time"][r], p["loss"][r]
            c.plot(t[t > 0], p["det"][r][t > 0], "--", lw=0.9, label=f"seed {cell.runs[r].seed}")
            d.plot(L[L > 0], np.abs(p["W11"][r][L > 0]), "--", label=f"unbalanced, seed {cell.runs[r].seed}")
    a.set_xscale("log")
    a.invert_xaxis()
    a.set_xlabel("training loss")
    a.set_ylabel("effective rank of W")
    finish(a, "effective rank falls towards 1")
    b.set_xscale("log")
    b.set_yscale("log")
    b.invert_xaxis()
    b.set_xlabel("training loss")
    b.set_ylabel("det W = prod_j det W_j")
    finish(b, "balanced: det W(t) > 0 where float64 resolves it\n(depth 2: W = U U^T >= 0 by structure)")
    c.set_xscale("log")
    c.set_yscale("symlog", linthresh=1e-10)
    c.axhline(0.0, color="k", lw=0.8)
    c.set_xlabel("time t")
    c.set_ylabel("det W(t)")
    finish(c, "unbalanced (depth 3, 0.3 I + noise):\ndet W(t) crosses zero")
    d.set_xscale("log")
    d.set_yscale("log")
    d.invert_xaxis()
    d.set_xlabel("training loss")
    d.set_ylabel("|W_11|")
    finish(d, "|W_11|: diverges (balanced), stays finite\nonce det W crossed zero (unbalanced)")
    for ax in (a, b, c, d):
        ax.grid(True, which="both", alpha=0.3)
    return fig


def _tables(results, out_dir):
    written = []
    for cell in results.cells:
        p = _paths(cell)
        for r, spec in enumerate(cell.runs):
            path = Path(out_dir) / f"razin_{spec.part}_depth{spec.model.depth}_seed{spec.seed}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            names = ["time", "loss", "W11", "W22", "det", "det_resolved", "Frobenius", "nuclear", "spectral",
                     "Schatten-1/2", "effective_rank"]
            with path.open("w", newline="") as f:
                w = csv.writer(f)
                w.writerow(names)
                w.writerows([[f"{p[k][r][i]:.10g}" for k in names] for i in range(p["loss"].shape[1])])
            written.append(path)
    return written


_UNBALANCED_SOURCE = ("Razin & Cohen 2020 (NeurIPS), Sec. 3: the positive determinant is what forces |W_11| -> "
                      "infinity; without a balanced init it can cross zero (ours: the unbalanced inits are the control)")


class RazinUnbalancedClaims(CellsTheorem):
    """The unbalanced inits (part "unbalanced": 0.3 I plus noise): where det W(t) crosses zero, the loss still
    reaches its tolerance, at a finite W_11 below the bound (1 - rho)^2 / rho that a positive determinant would
    force. Its sign is read where float64 resolves it (det W = prod_j det W_j, `_paths`)."""

    @property
    def title(self) -> str:
        """The name its verdicts carry."""
        return "Razin & Cohen 2020, unbalanced inits"

    @prediction("det W(t) crosses zero in some run from an unbalanced init (number of runs >= 1)",
                source=_UNBALANCED_SOURCE)
    def determinant_crosses_zero(self, ctx) -> list[Verdict]:
        """Per unbalanced cell, the number of runs whose resolved det W(t) crossed zero, >= 1."""
        out = []
        for cell, _, crossed in self._crossings(ctx):
            seeds = ", ".join(str(cell.runs[r].seed) for r in crossed) or "none"
            out.append(compare(self.title, "prediction", f"depth {cell.spec.model.depth}, 0.3 I plus noise: det W(t) "
                               "crosses zero in some run (number of runs)", float(len(crossed)), ">=", 1.0,
                               f"seeds {seeds}"))
        return out

    @prediction("after det W crossed zero the loss reaches its tolerance at |W_11| below the det > 0 bound "
                "(1 - rho)^2 / rho", source=_UNBALANCED_SOURCE)
    def finite_completion(self, ctx) -> list[Verdict]:
        """Per run that crossed: the final |W_11| is below the bound det W > 0 would force."""
        out = []
        for cell, p, crossed in self._crossings(ctx):
            for r in crossed:
                L, w11 = p["loss"][r][-1], abs(p["W11"][r][-1])
                out.append(compare(self.title, "prediction", f"seed {cell.runs[r].seed}: after det W crossed zero the "
                                   f"loss reaches {L:.3g} with |W_11| below the det > 0 bound (1 - rho)^2 / rho",
                                   w11, "<", float(_lower_bound(L))))
        return out

    @staticmethod
    def _crossings(ctx) -> list[tuple]:
        """(cell, its paths, the runs whose resolved det W(t) crossed zero) of every unbalanced cell."""
        def compute():
            out = []
            for cell in _part(ctx.results, "unbalanced"):
                p = _paths(cell)
                resolved = p["det_resolved"] > 0
                crossed = [r for r in range(p["det"].shape[0])
                           if p["det"][r][resolved[r]].min(initial=0.0) < 0 < p["det"][r][0]]
                out.append((cell, p, crossed))
            return out

        return ctx.once("razin.unbalanced", compute)


def _theorems(cell):
    return [RazinCohen2020()]


_BALANCED_PARTS = {
    "balanced_symmetric": {"model.depth": 2, "model.symmetric": True},
    "balanced": {"grid": {"model.depth": [3, 4]}},
}
_UNBALANCED = {"model.init_noise": 0.1, "model.depth": 3, "init_scale": 0.3, "stop.loss_tol": 1e-9, "stop.max_time": 1e6,
               "method.solver": "rkc", "method.rtol": 1e-8, "method.atol": None, "method.atol_rel": 1e-6}

RAZIN = Experiment(
    validate_runs=check_factorization_runs,
    name="razin2020-counterexample",
    paper="Razin & Cohen 2020 (NeurIPS), Sec. 3",
    systems=("S8",),
    summary="2 x 2 completion with W_12 = W_21 = 1, W_22 = 0 observed and W_11 unobserved, depth N = 2 (as U U^T), "
            "3, 4 from balanced inits alpha I (det W(0) > 0), gradient flow (implicit Kvaerno5) to loss 1e-8: "
            "det W = prod_j det W_j stays positive wherever float64 resolves it, |W_11| and every norm (Frobenius, "
            "nuclear, spectral, Schatten-1/2) grow like L^-1/2 as the loss falls, the effective rank falls towards 1. "
            "Unbalanced inits (0.3 I plus noise, depth 3): det W crosses zero and the loss reaches 0 at a finite W_11.",
    config=ExperimentConfig(
        model=MatrixFactorization(dim=2, depth=2, init_scheme="identity"),
        data=RazinCohen(),
        loss=Loss(name="square"),
        method=GradientFlow(solver="kvaerno5", rtol=1e-10, atol=1e-14, atol_rel=None, max_solver_steps=1_000_000),
        stop=Stop(loss_tol=LOSS_TOL, max_time=1e14),
        init_scale=0.5,
        checkpoints=60,
        kkt=False,
        keep_trajectory=True,
        parts={**_BALANCED_PARTS, "unbalanced": {**_UNBALANCED, "trials": 3}},
    ),
    quick={"checkpoints": 40, "parts": {**_BALANCED_PARTS, "unbalanced": {**_UNBALANCED, "trials": 2}}},
    figures=(
        Figure("norms_against_loss", "Razin & Cohen's counterexample: |W_11| and the Frobenius, nuclear, spectral and "
               "Schatten-1/2 norms of W against the training loss (falling to the right, down to 1e-8), one panel per "
               "depth, with the lower bound (1 - rho)^2 / rho that det W > 0 forces and fitted slopes.", _norms_figure),
        Figure("rank_and_determinant", "Effective rank against the loss; det W = prod_j det W_j of the balanced runs "
               "against the loss where float64 resolves it; det W(t) of the unbalanced runs over time (crosses zero); "
               "|W_11| against the loss, balanced and unbalanced.", _rank_det_figure),
    ),
    theorems=_theorems,
    claims=(RazinUnbalancedClaims(),),
    tables=_tables,
    settings_source="Ours (the survey gives no numbers): balanced init W_j = alpha I with alpha = 0.5 (det W(0) > 0); "
                    "gradient flow (Kvaerno5, rtol 1e-10, atol 1e-14) in physical time to loss 1e-8; depth 2 as the "
                    "symmetric U U^T (the same flow on W_2 = W_1^T, see the module docstring). Unbalanced: "
                    "W_i = 0.3 (I + 0.1 G_i) at depth 3, three seeds, RKC (rtol 1e-8) to loss 1e-9. Quick: 40 "
                    "checkpoints, two unbalanced seeds.",
)

EXPERIMENTS = [RAZIN]
