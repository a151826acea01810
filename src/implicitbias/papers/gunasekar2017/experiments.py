"""Gunasekar, Woodworth, Bhojanapalli, Neyshabur, Srebro 2017 (NeurIPS), "Implicit regularization in matrix
factorization" (S8): matrix sensing with a depth-2 factorisation from W_1 = W_2 = alpha I, gradient flow to
interpolation, the nuclear norm of the limit against the minimum nuclear norm (cvxpy) as alpha -> 0. With
commuting measurements (their Theorem 1) the ratio -> 1; with Gaussian measurements (their Conjecture 1) they
observed the same; the minimum-Frobenius interpolator's ratio is shown beside.

Its `validate_runs`, as every S8 experiment's, is the core's `check_factorization_runs`: runs are refused before
anything trains when alpha <= 0 or the factorisation's size does not match the matrix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from implicitbias.data import MatrixSensing
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.figures import write_csv as _write_csv
from implicitbias.experiments.validation import check_factorization_runs
from implicitbias.losses import Loss
from implicitbias.models import MatrixFactorization
from implicitbias.papers.gunasekar2017.theorems import GunasekarCommuting, GunasekarConjecture
from implicitbias.theorems.base import RunContext
from implicitbias.theorems.matrix_common import min_frobenius_nuclear_norm, min_nuclear_norm, min_nuclear_norm_psd
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop


def _rows(cell) -> list[list]:
    """Per run: part, trial, alpha, ||W||_*, the minimum over PSD interpolators, the ratio, the min-Frobenius
    interpolator's ||W||_* over the minimum among all interpolators, the final loss."""
    ctx = RunContext.of(cell)
    nuc = cell.results["W.nuclear"].values[:, -1]
    rows = []
    for r, spec in enumerate(ctx.runs):
        ds, key = ctx.data[r], spec.data_key()
        ref = min_nuclear_norm_psd(ds, key).nuclear_norm
        frob = min_frobenius_nuclear_norm(ds, key) / min_nuclear_norm(ds, key).nuclear_norm
        rows.append([spec.part, spec.trial, spec.init_scale, nuc[r], ref, nuc[r] / ref, frob,
                     cell.results["loss"].values[r, -1]])
    return rows


HEADER = ["part", "trial", "alpha", "nuclear_norm", "min_nuclear_norm_psd", "ratio", "min_frobenius_ratio",
          "final_loss"]


def _figure(results):
    parts = [p for p in ("commuting", "gaussian", "gaussian_few") if any(c.spec.part == p for c in results.cells)]
    fig, axes = panels(len(parts))
    for ax, part in zip(axes, parts):
        for cell in (c for c in results.cells if c.spec.part == part):
            rows = np.array([r[1:] for r in _rows(cell)], dtype=float)
            for t in np.unique(rows[:, 0]):
                sel = rows[rows[:, 0] == t]
                order = np.argsort(sel[:, 1])
                excess = np.maximum(sel[order, 4] - 1.0, 1e-9)
                line = ax.plot(sel[order, 1], excess, "o-", ms=4, label=f"GF limit, trial {int(t)}")[0]
                ax.axhline(sel[0, 5] - 1.0, color=line.get_color(), ls=":", lw=1.0,
                           label=f"min-Frobenius interpolator, trial {int(t)}")
        ax.axhline(1e-3, color="k", ls="--", lw=0.8, label="1e-3")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("init scale alpha (U(0) = alpha I)")
        ax.set_ylabel("||W||_* / min_PSD ||W||_*  - 1 (floored at 1e-9)")
        ax.grid(True, which="both", alpha=0.3)
        cell = next((c for c in results.cells if c.spec.part == part), None)
        if cell is not None:
            s = cell.spec.data
            finish(ax, f"{part} measurements: d = {s.d}, rank {s.rank}, n = {s.n}")
    return fig


def _tables(results, out_dir):
    rows = [row for cell in results.cells for row in _rows(cell)]
    return [_write_csv(Path(out_dir) / "nuclear_norm_ratio.csv", HEADER,
                       [[p, t, f"{a:.6g}"] + [f"{v:.12g}" for v in rest] for p, t, a, *rest in rows])]


def _theorems(cell):
    return [GunasekarCommuting()] if cell.spec.data.measurements == "commuting" else [GunasekarConjecture()]


ALPHAS = [1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8]

GUNASEKAR = Experiment(
    validate_runs=check_factorization_runs,
    name="gunasekar2017-sensing",
    paper="Gunasekar et al. 2017 (NeurIPS), Theorem 1 and Conjecture 1",
    systems=("S8",),
    summary="Matrix sensing with W = U U^T from U(0) = alpha I, gradient flow to interpolation: the nuclear norm of "
            "the limit over the minimum nuclear norm among PSD interpolators (cvxpy) against alpha. Commuting "
            "(simultaneously diagonalisable) measurements, the proved case: -> 1, <= 1.001 at the smallest alpha. "
            "Gaussian measurements (the conjecture): above the recovery threshold (n = 40) the same; below it "
            "(n = 20, where the minimum is not W*) the ratio can stay above 1. The minimum-Frobenius interpolator beside.",
    config=ExperimentConfig(
        model=MatrixFactorization(dim=10, depth=2, symmetric=True),
        data=MatrixSensing(d=10, rank=6, n=5, psd=True, measurements="commuting"),
        loss=Loss(name="square"),
        method=GradientFlow(rtol=1e-8),
        stop=Stop(loss_tol=1e-16, max_time=1e6),
        trials=3,
        checkpoints=20,
        kkt=False,
        parts={
            "commuting": {"grid": {"init_scale": ALPHAS}},
            "gaussian": {"data.measurements": "gaussian", "data.rank": 2, "data.n": 40,
                         "grid": {"init_scale": ALPHAS}},
            "gaussian_few": {"data.measurements": "gaussian", "data.rank": 2, "data.n": 20,
                             "grid": {"init_scale": ALPHAS}},
        },
    ),
    quick={"trials": 1, "checkpoints": 12, "parts": {
        "commuting": {"grid": {"init_scale": ALPHAS}},
        "gaussian": {"data.measurements": "gaussian", "data.rank": 2, "data.n": 40, "grid": {"init_scale": ALPHAS}},
        "gaussian_few": {"data.measurements": "gaussian", "data.rank": 2, "data.n": 20,
                         "grid": {"init_scale": ALPHAS}},
    }},
    figures=(Figure("nuclear_norm_ratio", "||W(inf)||_* / min over PSD interpolators - 1 against alpha: commuting "
                    "measurements (Theorem 1) and Gaussian ones above and below the recovery threshold (Conjecture 1); "
                    "dotted, the minimum-Frobenius interpolator's ||W||_* over the minimum among all interpolators.",
                    _figure),),
    theorems=_theorems,
    tables=_tables,
    settings_source="Ours: d = 10, PSD W*, alpha = 1e-1..1e-8, gradient flow (RKC, rtol 1e-8) on W = U U^T to loss "
                    "1e-16, 3 trials. Commuting: A_i = Q diag(a_i) Q^T, n = 5, rank 6 (so that the minimum over PSD "
                    "interpolators is not W* itself). Gaussian: rank 2, n = 40 (above the recovery threshold) and "
                    "n = 20 (below it: there the minimum nuclear norm is not W*, so converging to it can be told from "
                    "recovering W*). Quick: one trial, commuting, n = 40 and n = 20.",
)

EXPERIMENTS = [GUNASEKAR]
