"""Generic statistical fits of training curves: slopes, growth exponents and limits read at finite time.

A cell's results are an `xarray.Dataset` over (run, checkpoint) (see `implicitbias.training.dataset`).

- `fitted_slope(x, y)`: least-squares slope and R^2, e.g. ||W||_F against log t, or log L against log t;
- `linear_fit(x, y, groups)`: the same line with the standard error of its slope (`LineFit`, with a Student t
  confidence interval), optionally with one intercept per group;
- `late_window(time)`: the late checkpoints of one run, where asymptotic rates are fitted;
- `curve`, `final`, `initial`: a metric over (run, checkpoint), its last finite value, its first value;
- `extrapolated_limit`: the fit y(t) = y_inf + c / log t of a quantity converging to a limit (`Limit`, with the
  interval that holds the limit), held to the quantity's range (`RANGES`, `quantity_range`);
- `growth_exponent`: the Box-Cox exponent of a growth curve (q = 0: logarithmic, q = p: like t^p).

The verdicts built on them (a rate against its competitors, a limit against a bound, the worst run of a cell)
are `implicitbias.theorems.fitting`.  scipy is imported inside `LineFit.interval` and `growth_exponent` on
purpose: `scipy.stats` and `scipy.optimize` are heavy, and only these two readings need them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


# -- fits ------------------------------------------------------------------------------------------
def fitted_slope(x, y) -> tuple[float, float]:
    """Least-squares line y ~ slope * x + b through the finite pairs: returns (slope, R^2).

    R^2 = 1 - SS_res / SS_tot (1.0 for an exact fit, also when y is constant). With fewer than two
    finite pairs, or a constant x, the slope is undefined: (nan, nan).
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 2 or np.ptp(x) == 0:
        return math.nan, math.nan
    xc, yc = x - x.mean(), y - y.mean()
    slope = float(xc @ yc / (xc @ xc))
    ss_res = float(np.sum((yc - slope * xc) ** 2))
    ss_tot = float(yc @ yc)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return slope, r2


@dataclasses.dataclass(frozen=True)
class LineFit:
    """y ~ slope x + intercept by least squares over `n` finite pairs (with `groups` > 1: one intercept per
    group, a common slope); `se` is the standard error of the slope, sqrt(SS_res / dof / sum (x - group
    mean of x)^2) with dof = n - groups - 1 residual degrees of freedom (nan when dof < 1)."""

    slope: float
    intercept: float
    se: float
    r2: float
    n: int
    groups: int = 1

    @property
    def dof(self) -> int:
        """Residual degrees of freedom: n - groups - 1."""
        return self.n - self.groups - 1

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided `level` confidence interval of the slope (Student t with `dof` degrees of freedom);
        (nan, nan) when the standard error is undefined."""
        if self.dof < 1 or not math.isfinite(self.se):
            return math.nan, math.nan
        import scipy.stats  # deferred on purpose: heavy, needed only for a confidence interval

        half = float(scipy.stats.t.ppf(0.5 + level / 2.0, self.dof)) * self.se
        return self.slope - half, self.slope + half


def linear_fit(x, y, groups=None) -> LineFit:
    """Least-squares line through the finite pairs of (x, y) with the standard error of its slope. With
    `groups` (a label per pair, e.g. the trial), each group has its own intercept and the slope is common:
    x and y are centred within each group (the intercept is then the mean of the group intercepts)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    g = np.zeros(x.shape, dtype=np.int64) if groups is None else np.unique(np.asarray(groups).ravel(),
                                                                           return_inverse=True)[1]
    ok = np.isfinite(x) & np.isfinite(y)
    x, y, g = x[ok], y[ok], g[ok]
    labels = np.unique(g)
    xc, yc = x.copy(), y.copy()
    for k in labels:
        xc[g == k] -= x[g == k].mean()
        yc[g == k] -= y[g == k].mean()
    sxx = float(xc @ xc)
    if x.size < 2 or sxx == 0:
        return LineFit(math.nan, math.nan, math.nan, math.nan, int(x.size), int(labels.size))
    slope = float(xc @ yc / sxx)
    intercept = float(np.mean([y[g == k].mean() - slope * x[g == k].mean() for k in labels]))
    res = yc - slope * xc
    ss_res, ss_tot = float(res @ res), float(yc @ yc)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    dof = x.size - labels.size - 1
    se = math.sqrt(ss_res / dof / sxx) if dof >= 1 else math.nan
    return LineFit(slope, intercept, se, r2, int(x.size), int(labels.size))


def late_window(time, fraction: float = 0.5) -> np.ndarray:
    """Boolean mask of the late checkpoints of one run: the last `fraction` of them, with t > 0 finite,
    keeping only strictly increasing times (a run that stopped early repeats its last state)."""
    t = np.asarray(time, dtype=np.float64).ravel()
    keep = np.zeros(t.shape, dtype=bool)
    keep[int(np.floor(t.size * (1.0 - fraction))) :] = True
    last = -np.inf
    for k in range(t.size):
        fresh = bool(np.isfinite(t[k]) and t[k] > 0 and t[k] > last)
        if np.isfinite(t[k]):
            last = max(last, t[k])
        keep[k] &= fresh
    return keep



# -- metrics of a cell ------------------------------------------------------------------------------
def curve(results, name: str) -> np.ndarray | None:
    """The metric `name` as a float array (run, checkpoint), or None if it was not recorded."""
    if name not in results.data_vars:
        return None
    return np.asarray(results[name].values, dtype=np.float64).reshape(results.sizes["run"], -1)


def final(results, name: str) -> np.ndarray | None:
    """The last finite value of the metric per run (nan where a run has none), or None if not recorded."""
    c = curve(results, name)
    if c is None:
        return None
    out = np.full(c.shape[0], np.nan)
    for r, row in enumerate(c):
        # +-inf is a value (e.g. a margin spread with a misclassified point); nan is "not recorded"
        ok = np.flatnonzero(~np.isnan(row))
        if ok.size:
            out[r] = row[ok[-1]]
    return out


def initial(results, name: str) -> np.ndarray | None:
    """The metric at the first checkpoint (step 0, the initialisation) per run, or None."""
    c = curve(results, name)
    return None if c is None else c[:, 0].copy()



# -- finite-time readings of asymptotic claims (Frei et al., Kou et al.) ---------------------------------
#: the trend fitted to a quantity that converges to a limit (margin spread -> 1, srank -> its limit structure's,
#: KKT residual -> 0, sigma_3/sigma_1 -> 0): GD and GF on the logistic loss converge in direction like 1/log t
#: (Soudry et al. 2018, Lyu & Li 2020: ||theta|| grows like log t while the part of theta off the limit direction
#: stays O(1)), the slowest approach these theories give (up to log log t factors).
APPROACH = "y(t) = y_inf + c / log t"

#: The range of every quantity whose limit is read by `limit_verdict`, keyed by the metric's name without its
#: matrix prefix ("W.stable_rank" -> "stable_rank"): the values the quantity can take at all, so the values its
#: limit can take. An extrapolation outside it is not a limit the run can reach.
#: - margin_spread = max_i q_i / min_i q_i with every q_i > 0: >= 1;
#: - stable_rank = ||W||_F^2 / ||W||_2^2 of a nonzero W: in [1, rank W] (the caller may pass min(m, d) as the top);
#: - sigma2_ratio, sigma3_ratio = sigma_k / sigma_1: in [0, 1];
#: - kkt_stationarity = min_(lambda >= 0) ||theta - sum_i lambda_i y_i grad f_i|| / ||theta|| (S10): in [0, 1]
#:   (lambda = 0 gives 1).
RANGES: dict[str, tuple[float, float]] = {
    "margin_spread": (1.0, math.inf),
    "stable_rank": (1.0, math.inf),
    "sigma2_ratio": (0.0, 1.0),
    "sigma3_ratio": (0.0, 1.0),
    "kkt_stationarity": (0.0, 1.0),
}


def quantity_range(name: str) -> tuple[float, float]:
    """The declared range (`RANGES`) of the recorded metric `name` ("W.stable_rank" is looked up as
    "stable_rank"); a KeyError names the quantity when none is declared: every limit is held to its range."""
    key = name.rsplit(".", 1)[-1]
    if key not in RANGES:
        raise KeyError(f"no range declared for the quantity {name!r}: add it to implicitbias.metrics.fits.RANGES "
                       "(the values it can take), or pass lo and hi")
    return RANGES[key]


@dataclasses.dataclass(frozen=True)
class Limit:
    """The fit y(t) = y_inf + c / log t on the late checkpoints of one run: the extrapolated limit y_inf, its
    standard error se (from the residuals of the fit), the approach coefficient c (> 0: falling, < 0: rising),
    the last value, the range [lo, hi] of the quantity, and the limits extrapolated from the early and the late
    half of the checkpoints (y_early, y_late; nan with fewer than 3 checkpoints).

    What it says about the limit y* = lim y(t) (`bracket`): 1/log t is the slowest approach the theories give,
    and a faster approach bends the curve towards its limit when plotted against u = 1/log t (y* + b t^-p =
    y* + b exp(-p / u) is flat at u = 0), so the straight line through the late checkpoints overshoots the
    limit: a falling run (c > 0) extrapolates below y*, a rising one above it, and a run still moving fast
    overshoots by much. The extrapolation is therefore the far end of an interval whose near end is the last
    value (the run has not turned back within the window): y* lies between the last value and y_inf -+ 2 se,
    and within the range. The old reading took y_inf itself as an upper estimate of the limit of a falling run;
    it is a lower one, so a run still falling fast passed whatever its last value.

    Two signs that the run is not yet in that regime, so that its extrapolation bounds nothing and the interval
    extends to the range's end on the far side (the note says so: not converged in the fitted form):
    - `outside`: y_inf lies outside the range by more than 2 se: the trend is not the 1/log t approach to any
      value the quantity can take;
    - `accelerating`: the late half of the checkpoints extrapolates further in the direction of motion than the
      early half (y_late < y_early for a falling run, > for a rising one, beyond their standard errors): the
      curve bends away from its limit against 1/log t, the opposite of any approach at least as fast as 1/log t,
      i.e. the run is still speeding up (frei2023-kkt's gradient flow from init scale 1: the KKT residual falls
      0.9996, 0.9895, 0.8595 at t = 463, 1e10, 3e38, and the line through them extrapolates to 0.90)."""

    y_inf: float
    se: float
    c: float
    last: float
    lo: float = -math.inf
    hi: float = math.inf
    y_early: float = math.nan
    y_late: float = math.nan
    se_halves: float = 0.0

    @property
    def defined(self) -> bool:
        """The fit and the last value are finite numbers."""
        return math.isfinite(self.y_inf) and math.isfinite(self.last)

    @property
    def outside(self) -> bool:
        """y_inf is outside [lo, hi] by more than 2 se (an extrapolation the quantity cannot take)."""
        se = self.se if math.isfinite(self.se) else 0.0
        return self.defined and (self.y_inf + 2.0 * se < self.lo or self.y_inf - 2.0 * se > self.hi)

    @property
    def accelerating(self) -> bool:
        """The late half extrapolates beyond the early half in the direction of motion by more than 2 standard
        errors of the difference (and more than rounding, 1e-9 of the values' scale)."""
        if not (self.defined and math.isfinite(self.y_early) and math.isfinite(self.y_late) and self.c != 0.0):
            return False
        shift = (self.y_early - self.y_late) * math.copysign(1.0, self.c)  # > 0: moved further along the motion
        floor = 2.0 * self.se_halves + 1e-9 * max(1.0, abs(self.y_early), abs(self.y_late))
        return shift > floor

    def bracket(self) -> tuple[float, float]:
        """(lower, upper): the interval between the last value and y_inf -+ 2 se, clipped to [lo, hi], extended to
        the range's end on the side the run moves to when it is `outside` the range or `accelerating`; the limit
        lies in it (see the class docstring); (nan, nan) when the fit is undefined."""
        if not self.defined:
            return math.nan, math.nan
        se = self.se if math.isfinite(self.se) else 0.0
        lower = min(self.last, self.y_inf - 2.0 * se)
        upper = max(self.last, self.y_inf + 2.0 * se)
        if self.accelerating:
            lower, upper = (self.lo, upper) if self.c > 0 else (lower, self.hi)
        clip = lambda v: min(max(v, self.lo), self.hi)  # noqa: E731
        return clip(lower), clip(upper)

    def describe(self) -> str:
        """The fit in words: last value, y_inf with its standard error, the interval holding the limit, and why
        the run is not converged in the fitted form, when it is not."""
        if not math.isfinite(self.y_inf):
            return "fewer than 2 checkpoints to fit"
        lower, upper = self.bracket()
        text = (f"last value {self.last:.4g}; fit {APPROACH}: y_inf = {self.y_inf:.4g} +- {self.se:.2g}, "
                f"c = {self.c:.3g}; the limit lies in [{lower:.4g}, {upper:.4g}]")
        if self.outside:
            text += (f"; the extrapolation lies outside the range [{self.lo:g}, {self.hi:g}] of the quantity: not "
                     "converged in the fitted form (still in a transient, or approaching faster than 1/log t), so the "
                     "interval ends at the range's end and only the last value can decide")
        if self.accelerating:
            text += (f"; accelerating: the late half of the checkpoints extrapolates to {self.y_late:.4g}, the early "
                     f"half to {self.y_early:.4g}: not converged in the fitted form (still speeding up), so the "
                     "interval extends to the range's end")
        return text


def _line(u, v) -> tuple[float, float, float]:
    """(intercept, slope, standard error of the intercept) of v ~ intercept + slope u; se 0 with 2 points."""
    A = np.stack([np.ones_like(u), u], axis=1)
    coef, *_ = np.linalg.lstsq(A, v, rcond=None)
    dof = v.size - 2
    se = 0.0
    if dof > 0:
        s2 = float(np.sum((v - A @ coef) ** 2)) / dof
        se = math.sqrt(s2 * float(np.linalg.inv(A.T @ A)[0, 0]))
    return float(coef[0]), float(coef[1]), se


def extrapolated_limit(time, y, keep=None, *, lo: float = -math.inf, hi: float = math.inf) -> Limit:
    """Least-squares fit of y = y_inf + c / log t on the checkpoints `keep` (default: `late_window`) with
    t > 1; [lo, hi]: the range of the quantity (`quantity_range`), which the `Limit` holds the extrapolation to.
    se is the standard error of y_inf (residual variance over n - 2 degrees of freedom); with 2 points it is 0
    (an exact line), with fewer the limit is undefined (nan). `last` is the last fitted value. With 3 or more
    checkpoints the same line is also fitted on the first and the last ceil(n/2) of them (y_early, y_late,
    sharing the middle one when n is odd; se_halves: the root sum of squares of their standard errors)."""
    t, y = np.asarray(time, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    keep = (late_window(t) if keep is None else np.asarray(keep, bool)) & (t > 1.0) & np.isfinite(y)
    last = float(y[keep][-1]) if keep.any() else (float(y[np.isfinite(y)][-1]) if np.isfinite(y).any() else math.nan)
    if keep.sum() < 2:
        return Limit(math.nan, math.nan, math.nan, last, lo, hi)
    u, v = 1.0 / np.log(t[keep]), y[keep]
    y_inf, c, se = _line(u, v)
    early = late = math.nan
    se_halves = 0.0
    if v.size >= 3:
        h = (v.size + 1) // 2
        early, _, se_e = _line(u[:h], v[:h])
        late, _, se_l = _line(u[-h:], v[-h:])
        se_halves = math.hypot(se_e, se_l)
    return Limit(y_inf, se, c, last, float(lo), float(hi), early, late, se_halves)


def growth_exponent(time, y, fraction: float = 0.5) -> float:
    """The Box-Cox exponent q of the best least-squares fit y = a + b (t^q - 1)/q on the late checkpoints
    (q = 0: y = a + b log t). The family holds both readings of a growth rate: y = a + b log t has q = 0
    exactly, y = c t^p has q = p exactly, and a bounded y = a - b t^-r has q = -r. q is found on a grid of
    step 0.01 in [-2, 2], refined by a bounded scalar minimisation; nan with fewer than 4 late points."""
    t, y = np.asarray(time, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    keep = late_window(t, fraction) & np.isfinite(y)
    if keep.sum() < 4:
        return math.nan
    s, v = np.log(t[keep] / t[keep][0]), y[keep]

    def sse(q: float) -> float:
        u = s if abs(q) < 1e-12 else np.expm1(q * s) / q
        A = np.stack([np.ones_like(u), u], axis=1)
        coef, *_ = np.linalg.lstsq(A, v, rcond=None)
        return float(np.sum((v - A @ coef) ** 2))

    grid = np.round(np.arange(-2.0, 2.0 + 1e-9, 0.01), 10)
    k = int(np.argmin([sse(q) for q in grid]))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    from scipy.optimize import minimize_scalar  # deferred on purpose: heavy, needed only here

    best = minimize_scalar(sse, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    return float(best.x) if best.fun <= sse(grid[k]) else float(grid[k])
