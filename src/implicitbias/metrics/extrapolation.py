"""Generic fits of a quantity's approach to its limit, shared by the theorem modules (S4-S6).

- `log_rate`, `power_rate`: the exponent p of values ~ (log t)^-p, and the slope of log values against log t, over
  a window of checkpoints;
- `Extrapolation` / `extrapolate`: the limit y_inf of y = y_inf + c x fitted where x -> 0 as t -> infinity, with
  its uncertainty (the fit's standard error and the bias that the curvature left out of the model gives);
- `relative_distance`, `unit_distance`: distances between predictors.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from implicitbias.metrics.fits import fitted_slope


def log_rate(time, values, window) -> tuple[float, float]:
    """(p, R^2) of values ~ (log t)^(-p) over the checkpoints of `window` with t > 1: minus the slope of
    log values against log log t."""
    t, g = np.asarray(time, dtype=np.float64), np.asarray(values, dtype=np.float64)
    keep = window & (t > 1.0) & (g > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope, r2 = fitted_slope(np.log(np.log(t[keep])), np.log(g[keep]))
    return -slope, r2


def power_rate(time, values, window) -> tuple[float, float]:
    """(slope, R^2) of log values against log t over the checkpoints of `window` (t > 0, values > 0)."""
    t, g = np.asarray(time, dtype=np.float64), np.asarray(values, dtype=np.float64)
    keep = window & (t > 0) & (g > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return fitted_slope(np.log(t[keep]), np.log(g[keep]))


@dataclasses.dataclass(frozen=True)
class Extrapolation:
    """y = y_inf + c x fitted by least squares over a window where x -> 0 as t -> infinity (x = t^-nu, ||w||^-q):
    y_inf with the standard error of the intercept (`se_fit`, residuals over n - 2 degrees of freedom) and the
    difference `drift` of the intercepts fitted on the first and the second half of the window.

    The drift measures the part of the approach the one-term model leaves out. If y = y_inf + c x + e x^2 over the
    window [x_last, x_first] (x_mid where the halves meet), a line through it extrapolates to y_inf - e x_first
    x_last, and the halves' intercepts differ by e x_mid (x_first - x_last): the bias of the extrapolation is
    `bias` = drift x_first x_last / (x_mid (x_first - x_last)). It exceeds the drift when the window lies far from
    x = 0 (a long reach, as along ||w||^(-1/L)) and is below it when the window nearly reaches 0 (t^-nu at large t).
    The uncertainty is se = sqrt(se_fit^2 + bias^2)."""

    y_inf: float
    se_fit: float
    drift: float
    reach: float
    last: float
    n: int

    @property
    def bias(self) -> float:
        """The bias of the extrapolation from the curvature the one-term model leaves out: drift x reach."""
        return self.drift * self.reach

    @property
    def se(self) -> float:
        """The uncertainty of y_inf: sqrt(se_fit^2 + bias^2)."""
        return math.hypot(self.se_fit, self.bias)

    def describe(self) -> str:
        """The limit, its uncertainty and their parts, in words (for a verdict's note)."""
        return (f"extrapolated limit {self.y_inf:.5g} +- {self.se:.2g} (fit SE {self.se_fit:.2g}; first-half vs "
                f"second-half drift {self.drift:.2g} x reach {self.reach:.3g} = curvature bias {self.bias:.2g}; "
                f"n = {self.n}); last value {self.last:.5g}")


def _intercept(x, y) -> tuple[float, float]:
    """(intercept, its standard error) of the least-squares line y ~ b + c x; nan where x does not vary."""
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if not sxx > 1e-30 * max(float(x @ x), 1e-300):
        return math.nan, math.nan
    c = float(xc @ (y - y.mean())) / sxx
    b = float(y.mean() - c * x.mean())
    dof = y.size - 2
    if dof < 1:
        return b, math.nan
    s2 = float(np.sum((y - b - c * x) ** 2)) / dof
    return b, math.sqrt(s2 * (1.0 / y.size + x.mean() ** 2 / sxx))


def extrapolate(x, y) -> Extrapolation:
    """`Extrapolation` of y = y_inf + c x over the finite pairs (x, y) in time order; nan with fewer than 5 pairs
    (each half needs 3 points for its own intercept and the whole fit a residual)."""
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    last = float(y[-1]) if y.size else math.nan
    nan = Extrapolation(math.nan, math.nan, math.nan, math.nan, last, int(y.size))
    if y.size < 5:
        return nan
    y_inf, se = _intercept(x, y)
    if not math.isfinite(y_inf):
        return nan
    h = y.size // 2
    first, second = _intercept(x[: h + 1], y[: h + 1])[0], _intercept(x[h:], y[h:])[0]
    reach = abs(x[0] * x[-1]) / (abs(x[h]) * abs(x[0] - x[-1])) if x[h] != 0 else math.inf
    return Extrapolation(y_inf, se, abs(first - second), reach, last, int(y.size))


def relative_distance(w, ref) -> float:
    """||w - ref|| / ||ref|| (inf for ref = 0 and w != 0)."""
    den = float(np.linalg.norm(ref))
    num = float(np.linalg.norm(np.asarray(w) - np.asarray(ref)))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def unit_distance(w, ref) -> float:
    """|| w/||w|| - ref/||ref|| || = 2 sin(angle/2), stable for tiny angles."""
    a, b = float(np.linalg.norm(w)), float(np.linalg.norm(ref))
    if a == 0 or b == 0:
        return math.nan
    return float(np.linalg.norm(np.asarray(w) / a - np.asarray(ref) / b))

