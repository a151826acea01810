"""Soudry et al. 2018's Figure 1 read off a finished experiment (`experiments`): each run's curves and
fitted rates against its max-margin reference, and the paper's claim across cells, as a `CellsTheorem`: normalised
GD (Nacson et al. 2019) reaches GD's final angle gap in orders of magnitude fewer steps.
"""

from __future__ import annotations

import math

import numpy as np

from implicitbias.metrics.extrapolation import log_rate, power_rate
from implicitbias.papers.soudry2018.theorems.common import gap_fit, soudry_w_tilde
from implicitbias.theorems.base import CellsTheorem, RunContext, Verdict, compare, prediction
from implicitbias.theorems.fitting import fitted_slope, late_window
from implicitbias.theorems.max_margin import angle_gaps, svm_of

#: steps normalised GD may take at most to reach GD's final angle gap, as a fraction of GD's steps
SPEEDUP = 1e-2


def cells_of(results, data_kind: str) -> dict[str, object]:
    """The cells of one data set ("2d", "highdim", "multiclass": the parts' prefix), by method kind."""
    return {c.spec.method.kind: c for c in results.cells if c.spec.part.startswith(data_kind)}


def cell_svm(cell, r: int):
    """The max-margin reference of run r of a cell (`max_margin.svm_of`)."""
    return svm_of(RunContext.of(cell), r)


def run_curves(cell, r: int) -> dict[str, np.ndarray]:
    """Run r's curves (t > 0 only): step, time, ||w||, loss, angle gap, margin gap, angle gap x log t."""
    ds = cell.results
    t = ds["time"].values[r]
    keep = t > 0
    svm = cell_svm(cell, r)
    gap = angle_gaps(RunContext.of(cell))[r]
    out = {"step": ds["step"].values[r], "time": t, "norm": ds["param_norm"].values[r], "loss": ds["loss"].values[r],
           "angle_gap": gap, "margin_gap": (svm.margin - ds["normalized_margin"].values[r]) / svm.margin}
    out["angle_gap_x_log_t"] = np.where(t > 1, gap * np.log(np.maximum(t, 1.0)), np.nan)
    out["angle_gap_x_norm"] = gap * out["norm"]
    return {k: np.asarray(v, dtype=float)[keep] for k, v in out.items()}


def run_fits(cell, r: int) -> dict[str, float]:
    """The fitted rates of run r on its late checkpoints (angle_q, margin_q: the exponents q of gap ~ ||w||^-q that
    the theorems judge against 1; angle_p, margin_p: the exponents of (log t)^-p, for the figure)."""
    c = run_curves(cell, r)
    window = late_window(c["time"])
    svm = cell_svm(cell, r)
    slope, r2 = fitted_slope(np.log(c["time"][window]), c["norm"][window])
    return {"w_hat_norm": 1.0 / svm.margin, "norm_slope": slope, "norm_r2": r2,
            "norm_intercept": float(np.mean(c["norm"][window] - slope * np.log(c["time"][window]))),
            "loss_slope": power_rate(c["time"], c["loss"], window)[0],
            "angle_p": log_rate(c["time"], c["angle_gap"], window)[0],
            "margin_p": log_rate(c["time"], c["margin_gap"], window)[0],
            "angle_slope_t": power_rate(c["time"], c["angle_gap"], window)[0],
            "angle_q": gap_q(cell, r, "angle_gap"), "margin_q": gap_q(cell, r, "margin_gap"),
            "final_angle_gap": float(c["angle_gap"][-1]), "final_angle_gap_x_norm": float(c["angle_gap_x_norm"][-1]),
            "gd_limit_P_w_tilde": limit_level(cell, r), "final_t_loss": float(c["time"][-1] * c["loss"][-1]),
            "w_hat_norm_sq": 1.0 / svm.margin**2, "steps": float(c["step"][-1])}


def gap_q(cell, r: int, name: str) -> float:
    """q of gap ~ ||w||^-q over run r's late checkpoints, on the same window as the theorems (`soudry.gap_fit`)."""
    ds = cell.results
    t, norm = ds["time"].values[r], ds["param_norm"].values[r]
    gap = run_curves_full(cell, r)[name]
    return -gap_fit(t, gap, norm, late_window(t))[0].slope


def run_curves_full(cell, r: int) -> dict[str, np.ndarray]:
    """Run r's angle and margin gaps over every checkpoint (t = 0 included)."""

    ds, svm = cell.results, cell_svm(cell, r)
    return {"angle_gap": angle_gaps(RunContext.of(cell))[r],
            "margin_gap": (svm.margin - ds["normalized_margin"].values[r]) / svm.margin}


def limit_level(cell, r: int) -> float:
    """||P w_tilde||, the level angle gap x ||w(t)|| tends to under GD (nan when w_tilde is not determined)."""

    svm = cell_svm(cell, r)
    w_tilde = soudry_w_tilde(RunContext.of(cell), r, svm)
    if w_tilde is None:
        return math.nan
    u = svm.direction.ravel()
    return float(np.linalg.norm(w_tilde - u * (u @ w_tilde)))


# -- claims across cells ---------------------------------------------------------------------------------------
def steps_to_reach(cell, r: int, target: float) -> float:
    """The first recorded iteration k at which run r's angle gap is <= target (inf if never)."""
    c = run_curves(cell, r)
    hit = np.flatnonzero(c["angle_gap"] <= target)
    return float(c["step"][hit[0]]) if hit.size else math.inf


def speedup(gd, ngd, r: int) -> tuple[float, str]:
    """steps(NGD) / steps(GD) for GD's run r: the first iteration at which normalised GD (same data) reaches the
    angle gap GD has after all its steps. Not reached within its run: at least its length / GD's (a failure when
    that already exceeds SPEEDUP, else undecided: nan)."""
    spec, c = gd.runs[r], run_curves(gd, r)
    target, steps_gd = c["angle_gap"][-1], c["step"][-1]
    match = [q for q, s in enumerate(ngd.runs) if s.data_seed == spec.data_seed]
    if not match:
        return math.nan, f"trial {spec.trial}: no normalised GD run on the same data"
    reached, note = steps_to_reach(ngd, match[0], target), ""
    if math.isinf(reached):
        last = run_curves(ngd, match[0])["step"][-1]
        reached, note = (last if last / steps_gd > SPEEDUP else math.nan), " (or later: not within its run)"
    return reached / steps_gd, (f"trial {spec.trial}: GD angle gap {target:.3g} after {steps_gd:.0f} steps, "
                                f"normalised GD reaches it at step {reached:.0f}{note}")




class NormalizedSpeedup(CellsTheorem):
    """Nacson et al. 2019 against Soudry et al. 2018, across the GD and normalised-GD cells of each data set: the
    first iteration at which normalised GD reaches the angle gap GD has after all its steps is at most SPEEDUP
    (1e-2) of GD's steps (`speedup`)."""

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Nacson et al. 2019 / Soudry et al. 2018"

    def _speedup(self, ctx, kind: str) -> list[Verdict]:
        cells = cells_of(ctx.results, kind)
        if not {"gd", "normalized_gd"} <= set(cells):
            return []
        ratios, notes = zip(*(speedup(cells["gd"], cells["normalized_gd"], r) for r in range(len(cells["gd"].runs))))
        return [compare(self.title, "prediction", f"{kind}: normalised GD reaches GD's final angle gap in orders of "
                        f"magnitude fewer steps: steps(NGD) / steps(GD), worst trial", float(np.max(ratios)), "<=",
                        SPEEDUP, "; ".join(notes))]

    @prediction("2-D data: normalised GD reaches GD's final angle gap in orders of magnitude fewer steps",
                source="Nacson et al. 2019 (AISTATS), Sec. 4 (polynomial against 1/log t); SPEEDUP = 1e-2: ours")
    def speedup_2d(self, ctx) -> list[Verdict]:
        """Prediction: 2-D data: normalised GD reaches GD's final angle gap in orders of magnitude fewer steps."""
        return self._speedup(ctx, "2d")

    @prediction("high-dimensional data: normalised GD reaches GD's final angle gap in orders of magnitude fewer steps",
                source="Nacson et al. 2019 (AISTATS), Sec. 4 (polynomial against 1/log t); SPEEDUP = 1e-2: ours")
    def speedup_highdim(self, ctx) -> list[Verdict]:
        """Prediction: high-dimensional data: normalised GD reaches GD's final angle gap in orders of magnitude fewer
        steps."""
        return self._speedup(ctx, "highdim")
