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
- the limit: the fit y = y_inf + c alpha^q (q >= 0.02 free) and the profile interval [lo, hi] of y_inf over the q
  that fit within the 95% F bound (`PowerLimit`). A quantity that levels off above the target has lo > target,
  even where its log-log slope is still a little above 0. (The standard error of y_inf at the best q alone is not
  enough: on Li et al.'s closest approach to GLRL's first saddle over alpha = 1e-4..1e-8 it put y_inf at 0.0038
  +- 0.0008, while the distance went on falling, to 0.0042 at alpha = 1e-14.)
A trial holds when the CI lies above 0 and lo <= target + floor (floor: the accuracy of the comparison). It fails
when the CI lies at or below 0, or when lo > target + floor and the approach has stalled: the CI lies below s_log
(slower than 1/ln(1/alpha), which the mechanism above never gives). A profile interval above the target while the
exponent is still above s_log is inconclusive (not_evaluated): over four decades a floor and a decelerating sum of
powers look alike (Li et al.'s closest approach to GLRL's second saddle, trial 0: 0.0125 at alpha = 1e-8, its
interval [0.0071, 0.0091], then 0.0061 at 1e-12). So is a CI reaching 0, or fewer than 4 alphas.
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
    """y = y_inf + c alpha^q fitted by least squares over one trial's alphas: q on a grid, (y_inf, c) linear.
    y_inf, se, q: the best fit, se the standard error of y_inf at that q (residual variance over n - 3 degrees of
    freedom). lo, hi: the profile interval of y_inf, the range of y_inf(q) -+ 2 se(q) over every q whose residual sum
    of squares is within the 95% F bound of the best, SSE(q) <= SSE_min (1 + F(0.95; 1, n - 3) / (n - 3)): it holds
    the uncertainty of q, which the conditional se does not (over a few decades, a small q with a low y_inf fits
    about as well as a larger q with a higher one). nan with fewer than 4 distinct alphas."""

    y_inf: float
    se: float
    q: float
    n: int
    lo: float = math.nan
    hi: float = math.nan

    def describe(self, target: float) -> str:
        """The fit in words, against the target limit (for a verdict's note)."""
        return (f"extrapolated limit of y = y_inf + c alpha^q: y_inf = {self.y_inf:.4g} +- {self.se:.2g} (SE at q = "
                f"{self.q:.2f}), profile interval over q [{self.lo:.4g}, {self.hi:.4g}], {self.n} alphas; target "
                f"{target:g}")


def power_limit(alpha, y) -> PowerLimit:
    """The fit y = y_inf + c alpha^q over the finite points (`PowerLimit`; at least 3 distinct alphas)."""
    a, v = np.asarray(alpha, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    ok = np.isfinite(a) & np.isfinite(v) & (a > 0)
    a, v = a[ok], v[ok]
    if np.unique(a).size < 3:
        return PowerLimit(math.nan, math.nan, math.nan, int(a.size))
    dof = a.size - 3
    fits = []
    for q in _Q_GRID:
        A = np.stack([np.ones_like(a), (a / a.max()) ** q], axis=1)
        coef, *_ = np.linalg.lstsq(A, v, rcond=None)
        sse = float(np.sum((v - A @ coef) ** 2))
        se = math.sqrt(sse / dof * float(np.linalg.inv(A.T @ A)[0, 0])) if dof >= 1 else math.nan
        fits.append((sse, q, float(coef[0]), se))
    sse, q, y_inf, se = min(fits)
    if dof < 1:
        return PowerLimit(y_inf, se, q, int(a.size))
    import scipy.stats  # deferred on purpose: ~0.3 s to import, and only this bound uses it

    bound = sse * (1.0 + float(scipy.stats.f.ppf(0.95, 1, dof)) / dof) + 1e-30 * float(v @ v)
    kept = [(y - 2.0 * e, y + 2.0 * e) for s_, _, y, e in fits if s_ <= bound]
    return PowerLimit(y_inf, se, q, int(a.size), min(k[0] for k in kept), max(k[1] for k in kept))


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
    limit_note = lim.describe(target)
    fit = linear_fit(np.log(alpha[keep]), np.log(excess[keep])) if keep.sum() >= 2 else None
    if fit is None or fit.dof < 1 or not math.isfinite(fit.se):
        return ("not_evaluated", math.nan, math.nan, f"{int(keep.sum())} alpha(s) with y - target above the accuracy "
                f"floor {floor:g}: too few for a rate with an uncertainty (the quantity reached the comparison's "
                f"accuracy); {limit_note}")
    s_log = log_law_slope(alpha[keep])
    lo, hi = fit.interval(0.95)
    note = (f"exponent {fit.slope:.4g} +- {fit.se:.2g} (SE), 95% CI [{lo:.4g}, {hi:.4g}] over {fit.n} alphas; the "
            f"1/ln(1/alpha) law's slope over them s_log = {s_log:.4g}; {limit_note}")
    level_off = math.isfinite(lim.lo) and lim.lo > target + floor
    if hi <= 0.0 or (level_off and hi < s_log):
        return "fails", fit.slope, 0.0, note
    if lo > 0.0 and math.isfinite(lim.lo) and not level_off:
        return "holds", fit.slope, 0.0, note
    why = ("the exponent's CI reaches 0" if lo <= 0.0 else "the limit has no uncertainty (fewer than 4 alphas)"
           if not math.isfinite(lim.lo) else "the profile interval of the limit lies above the target while the "
           "approach is still faster than 1/ln(1/alpha): decelerating, a floor or a second, smaller exponent")
    return "not_evaluated", fit.slope, 0.0, f"inconclusive: {why}; {note}"
