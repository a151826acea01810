"""Limits as the init scale alpha -> 0, read over a grid of alphas (S8: Gunasekar et al. 2017, Li et al. 2021).

A quantity y(alpha) that the theory sends to a target as alpha -> 0 (a nuclear-norm ratio -> 1, a distance to
GLRL's saddles -> 0) does so, in these theories, at a power of alpha: gradient flow from alpha I escapes each saddle
along a component of size ~alpha^2 that grows exponentially, so every error that the small init leaves behind is a
power alpha^p (Gunasekar et al.: the flow is exponentiated gradient, whose limit is an entropy-regularised linear
program with regularisation 1 / log(1/alpha^2); its error falls like exp(-c log(1/alpha^2)) = alpha^(2c), Cominetti &
San Martin 1994. Li et al.: the component left over at the end of a phase is alpha^(2 (1 - sigma_2 / sigma_1))).

`approach_verdict` reads such a limit per trial, in two parts:
- the rate: the exponent p of y - target against alpha (log-log least squares) with its 95% confidence interval.
  The nearest wrong rate is 0, a quantity that keeps its distance from the target (the theorems give no value of p:
  it is set by eigenvalue ratios at the saddles, e.g. 1 - sigma_2 / sigma_1, and can be small). For reference the
  note gives s_log, the slope that an approach like 1 / ln(1/alpha) shows over the same alphas;
- the limit: the fit y = y_inf + c alpha^q (q free) and the standard error se of y_inf. A quantity that levels off
  above the target has y_inf - 2 se > target, even where its log-log slope is still a little above 0.
A trial holds when the CI lies above 0 and y_inf - 2 se <= target + floor (floor: the accuracy of the comparison);
it fails when the CI lies at or below 0 or y_inf - 2 se > target + floor; otherwise (a CI reaching 0, fewer than 4
alphas) it is inconclusive (not_evaluated).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import linear_fit

#: the exponents q tried by the free fit y = y_inf + c alpha^q (q -> 0 would make y_inf and c indistinguishable)
_Q_GRID = np.round(np.arange(0.02, 3.0 + 1e-9, 0.01), 10)


@dataclasses.dataclass(frozen=True)
class PowerLimit:
    """y = y_inf + c alpha^q fitted by least squares over one trial's alphas: q on a grid, (y_inf, c) linear;
    se: the standard error of y_inf at that q (residual variance over n - 3 degrees of freedom; nan when n < 4)."""

    y_inf: float
    se: float
    q: float
    n: int


def power_limit(alpha, y) -> PowerLimit:
    """The fit y = y_inf + c alpha^q over the finite points (at least 3 distinct alphas; nan otherwise)."""
    a, v = np.asarray(alpha, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    ok = np.isfinite(a) & np.isfinite(v) & (a > 0)
    a, v = a[ok], v[ok]
    if np.unique(a).size < 3:
        return PowerLimit(math.nan, math.nan, math.nan, int(a.size))
    best = None
    for q in _Q_GRID:
        A = np.stack([np.ones_like(a), (a / a.max()) ** q], axis=1)
        coef, *_ = np.linalg.lstsq(A, v, rcond=None)
        sse = float(np.sum((v - A @ coef) ** 2))
        if best is None or sse < best[0]:
            best = (sse, q, coef, A)
    sse, q, coef, A = best
    dof = a.size - 3
    se = math.sqrt(sse / dof * float(np.linalg.inv(A.T @ A)[0, 0])) if dof >= 1 else math.nan
    return PowerLimit(float(coef[0]), se, float(q), int(a.size))


def log_law_slope(alpha) -> float:
    """The log-log slope against alpha of 1 / ln(1/alpha) over these alphas: what an approach like 1 / ln(1/alpha)
    (slower than every power) shows as a fitted exponent."""
    a = np.asarray(alpha, np.float64).ravel()
    return float(linear_fit(np.log(a), -np.log(np.log(1.0 / a))).slope)


def approach_verdict(theorem: str, statement: str, alpha, y, target: float, groups, *, floor: float,
                     group_names=None, note: str = "") -> Verdict:
    """y -> target as alpha -> 0 at a power of alpha (module docstring), judged per trial (group); the worst trial
    is reported (measured: its exponent; bound: 0). Points with y - target <= floor (the accuracy of the comparison)
    are left out of the rate fit. alpha, y, groups: one entry per run."""
    alpha, y = np.asarray(alpha, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    groups = np.asarray(groups).ravel()
    names = group_names or {g: f"trial {g}" for g in np.unique(groups)}
    rank = {"fails": 0, "not_evaluated": 1, "holds": 2}
    judged = [_one_trial(alpha[groups == g], y[groups == g], target, floor) + (names[g],) for g in np.unique(groups)]
    outcome, slope, s_log, why, name = min(judged, key=lambda j: (rank[j[0]], j[1] - j[2] if math.isfinite(j[1] - j[2])
                                                                  else -math.inf))
    where = f"worst of {len(judged)} trials ({name})" if len(judged) > 1 else name
    return Verdict(theorem, "prediction", statement, slope if math.isfinite(slope) else None, ">",
                   s_log if math.isfinite(s_log) else None, outcome, "; ".join(p for p in (where, why, note) if p))


def _one_trial(alpha, y, target, floor) -> tuple[str, float, float, str]:
    """(outcome, exponent, 0 (the wrong rate), note) of one trial's approach (see `approach_verdict`)."""
    excess = y - target
    keep = np.isfinite(excess) & (excess > floor) & (alpha > 0) & (alpha < 1)
    lim = power_limit(alpha, y)
    limit_note = (f"extrapolated limit of y = y_inf + c alpha^q: y_inf = {lim.y_inf:.4g} +- {lim.se:.2g} (SE, q = "
                  f"{lim.q:.2f}, {lim.n} alphas), target {target:g}")
    fit = linear_fit(np.log(alpha[keep]), np.log(excess[keep])) if keep.sum() >= 2 else None
    if fit is None or fit.dof < 1 or not math.isfinite(fit.se):
        return ("not_evaluated", math.nan, math.nan, f"{int(keep.sum())} alpha(s) with y - target above the accuracy "
                f"floor {floor:g}: too few for a rate with an uncertainty (the quantity reached the comparison's "
                f"accuracy); {limit_note}")
    s_log = log_law_slope(alpha[keep])
    lo, hi = fit.interval(0.95)
    note = (f"exponent {fit.slope:.4g} +- {fit.se:.2g} (SE), 95% CI [{lo:.4g}, {hi:.4g}] over {fit.n} alphas; the "
            f"1/ln(1/alpha) law's slope over them s_log = {s_log:.4g}; {limit_note}")
    level_off = math.isfinite(lim.se) and lim.y_inf - 2.0 * lim.se > target + floor
    if hi <= 0.0 or level_off:
        return "fails", fit.slope, 0.0, note
    if lo > 0.0 and math.isfinite(lim.se):
        return "holds", fit.slope, 0.0, note
    why = "the exponent's CI reaches 0" if lo <= 0.0 else "the limit has no uncertainty (fewer than 4 alphas)"
    return "not_evaluated", fit.slope, 0.0, f"inconclusive: {why}; {note}"
