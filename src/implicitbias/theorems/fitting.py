"""Curve fits and per-run summaries of a cell's results, shared by the theorem checks and the reports.

A cell's results are an `xarray.Dataset` over (run, checkpoint) (see `implicitbias.training.dataset`).

- `fitted_slope(x, y)`: least-squares slope and R^2, e.g. ||W||_F against log t, or log L against log t
  (Kou et al. 2023, S3: ||W||_F = Theta(log t) and L = Theta(1/t) appear as a slope > 0 and a slope -1);
- `linear_fit(x, y)`: the same line with the standard error of its slope, and `rate_verdict`: a fitted
  exponent judged against the predicted one and its nearest wrong competitors (a rate reading of an
  asymptotic claim: holds when the exponent's confidence interval lies nearer the prediction than any
  competitor, fails when it lies nearer a competitor, not_evaluated (inconclusive) when it straddles);
- `late_window(time)`: the late checkpoints of one run, where the asymptotic rates are fitted;
- `curve`, `final`, `initial`: a metric over (run, checkpoint), its last finite value, its first value;
- `over_runs`: the verdict on the worst run of a cell (every theorem reports the worst case over runs);
- `flag`: a verdict on a yes/no condition (an activation, a loss, the structure of the outer layer);
- `extrapolated_limit`, `limit_verdict`: a limit y(t) -> y* read at finite time from the last value and the
  extrapolation of y_inf + c / log t, held to the quantity's range (`RANGES`, `quantity_range`);
- `run_labels`: a label per run of a `RunContext`.  Everything else about run r is read from its spec,
  `run.runs[r]`, and its data, `run.data[r]` (see `theorems.base.RunContext`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from implicitbias.theorems.base import Kind, Verdict, compare


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
        return self.n - self.groups - 1

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided `level` confidence interval of the slope (Student t with `dof` degrees of freedom);
        (nan, nan) when the standard error is undefined."""
        if self.dof < 1 or not math.isfinite(self.se):
            return math.nan, math.nan
        import scipy.stats

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


def rate_verdict(theorem: str, statement: str, fit: LineFit, predicted: float, competitors: Sequence[float],
                 *, level: float = 0.95, note: str = "") -> Verdict:
    """A fitted exponent (the slope of `fit`) against the `predicted` one and its wrong `competitors`.

    The accepted interval runs between the midpoints from `predicted` to its nearest competitor below and
    above (unbounded on a side without one): an exponent inside it is nearer the prediction than any
    competitor. With the `level` confidence interval CI of the slope: holds if CI lies inside the accepted
    interval, fails if CI lies outside it, not_evaluated (inconclusive: the fit cannot tell the prediction
    from a competitor) if CI straddles an end, or if the slope or its standard error is undefined (with the
    reason in the note). A fit without residual (SE = 0) has CI = {slope}."""
    below = [c for c in competitors if c < predicted]
    above = [c for c in competitors if c > predicted]
    lo = (predicted + max(below)) / 2.0 if below else -math.inf
    hi = (predicted + min(above)) / 2.0 if above else math.inf
    accepted = f"accepted ({lo:.4g}, {hi:.4g}): midpoints to the competitors " + (
        ", ".join(f"{c:g}" for c in sorted(competitors)) or "none")
    c_lo, c_hi = fit.interval(level)
    head = f"exponent {fit.slope:.4g} +- {fit.se:.2g} (SE), {level:.0%} CI [{c_lo:.4g}, {c_hi:.4g}], " \
           f"n = {fit.n} ({fit.groups} intercepts), R^2 = {fit.r2:.4f}; predicted {predicted:.4g}, {accepted}"
    if not math.isfinite(fit.slope):
        return Verdict(theorem, "prediction", statement, None, "~", float(predicted), "not_evaluated",
                       _join(f"slope undefined: fewer than 2 distinct finite points (n = {fit.n})", note))
    if not math.isfinite(c_lo):
        why = (f"slope {fit.slope:.4g} from {fit.n} points in {fit.groups} group(s) has no standard error "
               "(needs at least one residual degree of freedom)")
        return Verdict(theorem, "prediction", statement, fit.slope, "~", float(predicted), "not_evaluated",
                       _join(why, accepted, note))
    if lo < c_lo and c_hi < hi:
        outcome = "holds"
    elif c_hi <= lo or c_lo >= hi:
        outcome = "fails"
    else:
        outcome = "not_evaluated"
        head = "inconclusive: the confidence interval straddles an end of the accepted interval; " + head
    return Verdict(theorem, "prediction", statement, fit.slope, "~", float(predicted), outcome, _join(head, note))


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


# -- verdicts ---------------------------------------------------------------------------------------
def flag(theorem: str, kind: Kind, statement: str, ok: bool | None, note: str = "", measured=None) -> Verdict:
    """A verdict on a yes/no condition: holds / fails, or not_evaluated when `ok` is None."""
    outcome = "not_evaluated" if ok is None else ("holds" if ok else "fails")
    m = None if measured is None else float(measured)
    return Verdict(theorem, kind, statement, m, "", None, outcome, note)


def over_runs(
    theorem: str,
    kind: Kind,
    statement: str,
    measured,
    relation: str,
    bound,
    *,
    where: str = "at the final checkpoint",
    note: str = "",
    labels: Sequence[str] | None = None,
    run_notes: Sequence[str] | None = None,
) -> Verdict:
    """The verdict `measured relation bound` on the worst run of a cell.

    measured: one value per run (None: not recorded in this cell, or `note` says why it is missing);
    bound: a number or one per run. The worst run is the one with the least slack (smallest
    measured - bound for >= and >, largest for <= and <); its entry of `run_notes` joins the note. If some
    runs have no finite value the quantity is undefined there and the verdict is `not_evaluated` (the
    others' worst case is shown).
    """
    if measured is None:
        return compare(theorem, kind, statement, None, relation, None, note or "not recorded in this cell")
    measured = np.atleast_1d(np.asarray(measured, dtype=np.float64))
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), measured.shape)
    n = measured.size
    ok = np.isfinite(measured) & np.isfinite(bound)
    labels = list(labels) if labels is not None else [f"run {r}" for r in range(n)]
    if not ok.any():
        what = f"undefined on all {n} run(s) {where}"
        return compare(theorem, kind, statement, None, relation, None, _join(what, note))
    slack = np.where(ok, measured - bound, np.nan)
    r = int(np.nanargmin(slack) if relation in (">=", ">") else np.nanargmax(slack))
    what = f"worst of {n} runs ({labels[r]}) {where}".rstrip() if n > 1 else where
    extra = run_notes[r] if run_notes is not None else ""
    v = compare(theorem, kind, statement, measured[r], relation, bound[r], _join(what, extra, note))
    if not ok.all():
        bad = ", ".join(labels[i] for i in np.flatnonzero(~ok))
        v = dataclasses.replace(
            v, outcome="not_evaluated", note=_join(v.note, f"undefined (not finite) on {bad}")
        )
    return v


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


# -- labels ------------------------------------------------------------------------------------------
def run_labels(run) -> list[str]:
    """A label per run of a `RunContext` (its position and init seed), for the notes of `over_runs`."""
    return [f"run {r}, seed {spec.seed}" for r, spec in enumerate(run.runs)]


def fitted_loss_level(run, r: int) -> float:
    """l(0) / n: below this training loss every point of run r has a positive margin."""
    return run.runs[r].loss.value_at_zero / run.data[r].n


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
        raise KeyError(f"no range declared for the quantity {name!r}: add it to fitting.RANGES (the values it can "
                       "take), or pass lo and hi")
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


def asymptotic_window(run, r: int) -> np.ndarray:
    """The checkpoints of run r in the asymptotic regime: from the first with L < l(0)/n on (every point is
    then fitted, and the theories of Lyu & Li, Frei et al. 3.4 and Kou et al. apply), t > 0 and strictly
    increasing (a run that stopped early repeats its last state); every such checkpoint when no loss is
    recorded."""
    loss, time = curve(run.results, "loss"), curve(run.results, "time")
    if time is None:
        return np.zeros(0, dtype=bool)
    keep = late_window(time[r], 1.0)
    if loss is None:
        return keep
    below = np.flatnonzero(loss[r] < fitted_loss_level(run, r))
    if below.size == 0:
        return np.zeros_like(keep)
    keep[: below[0]] = False
    return keep


def limit_verdict(theorem: str, run, statement: str, name: str, target, tol: float, *, window=None,
                  values=None, extra=None, lo=None, hi=None) -> Verdict:
    """A limit y(t) -> target read at finite time: the limit y* of every run must satisfy y* <= target + tol
    (`target`: a number or one per run).

    Per run, y* lies in the interval between the last fitted value and the extrapolation y_inf -+ 2 se of
    y = y_inf + c / log t, clipped to the quantity's range [lo, hi] (`Limit.bracket`; the range: `lo`, `hi`, a
    number or one per run, by default `quantity_range(name)`). The run holds when the whole interval is within
    the bound, fails when the whole interval is above it, and is not_evaluated (not converged) when the interval
    straddles the bound: the run is still above the bound and only the extrapolation says it will come within
    it, or still within it and only the extrapolation says it will leave. An extrapolation outside the range
    (`Limit.outside`), or a run still speeding up (`Limit.accelerating`), has not converged in the fitted form:
    its interval extends to the range's end, and the note says so. None of the limits
    read this way comes with a rate or a time in its theorem (Frei et al.'s Theorem 3.2 describes the limit of
    gradient flow, Kou et al. state srank -> 1 and spread -> 1 without a time), so a run that has not converged
    is not_evaluated, never failed.

    The cell's verdict is the worst run's: any run failing fails the cell (the run with the largest excess of
    its interval's lower end over the bound is shown); else any run not converged, or with no fit, makes it
    not_evaluated (the first such run in order of excess is shown, and the note names every one); else it
    holds (the run with the least slack is shown). The measured value is the interval's upper end (lower end
    for a failing run). (Kou's ReLU srank on kou2023-rates --quick ends at 2.434, falling, with the limit
    structure's 2.313 + 0.05 as the bound: the old reading passed it on y_inf = 2.169.)
    window(run, r): the checkpoints fitted (default: the last half, `late_window`); `values` (run, checkpoint)
    replaces the recorded metric `name`; `extra`: a note per run."""
    res = run.results
    y, time = (curve(res, name) if values is None else values), curve(res, "time")
    n = run.n_runs
    bound = np.broadcast_to(np.asarray(target, np.float64) + tol, (n,))
    if lo is None or hi is None:
        dlo, dhi = quantity_range(name)
        lo, hi = (dlo if lo is None else lo), (dhi if hi is None else hi)
    lo, hi = np.broadcast_to(np.asarray(lo, np.float64), (n,)), np.broadcast_to(np.asarray(hi, np.float64), (n,))
    full = (f"{statement}: limit (between the last value and the extrapolated y_inf of {APPROACH}, +- 2 se, within "
            f"the quantity's range) <= limit + {tol:g}")
    if y is None or time is None:
        return over_runs(theorem, "prediction", full, None, "<=", bound)
    labels = run_labels(run)
    fits = [extrapolated_limit(time[r], y[r], None if window is None else window(run, r), lo=lo[r], hi=hi[r])
            for r in range(n)]
    notes = [f.describe() + (f"; {extra[r]}" if extra is not None and extra[r] else "") for r, f in enumerate(fits)]
    brackets = [f.bracket() for f in fits]
    outcome = []
    for (lower, upper), b in zip(brackets, bound):
        if not (math.isfinite(lower) and math.isfinite(b)):
            outcome.append("undefined")
        else:
            outcome.append("holds" if upper <= b else "fails" if lower > b else "open")
    where = "from the first checkpoint with L < l(0)/n" if window is asymptotic_window else "late checkpoints"

    def pick(which, key):
        rs = [r for r in range(n) if outcome[r] == which]
        return max(rs, key=key) if rs else None

    failing = pick("fails", lambda r: brackets[r][0] - bound[r])
    open_ = [r for r in range(n) if outcome[r] == "open"]
    undefined = [r for r in range(n) if outcome[r] == "undefined"]
    if failing is not None:
        r, result, measured = failing, "fails", brackets[failing][0]
        tail = "the whole interval is above the bound"
    elif open_ or undefined:
        r = max(open_, key=lambda k: brackets[k][1] - bound[k]) if open_ else undefined[0]
        result, measured = "not_evaluated", brackets[r][1]
        parts = []
        if open_:
            parts.append("not converged: the interval holding the limit straddles the bound on "
                         + ", ".join(labels[k] for k in open_))
        if undefined:
            parts.append("no fit (fewer than 2 checkpoints, or no value) on " + ", ".join(labels[k] for k in undefined))
        tail = "; ".join(parts)
    else:
        r = pick("holds", lambda k: brackets[k][1] - bound[k])
        result, measured, tail = "holds", brackets[r][1], "the whole interval is within the bound"
    what = f"worst of {n} runs ({labels[r]}) {where}" if n > 1 else where
    note = _join(what, notes[r], tail)
    m = float(measured) if math.isfinite(measured) else None
    b = float(bound[r]) if math.isfinite(bound[r]) else None
    return Verdict(theorem, "prediction", full, m, "<=", b, result, note)


def why_missing(values, notes) -> str:
    """The runs' notes, when no run has a finite value (`over_runs` then shows no run's note)."""
    return "" if np.isfinite(np.asarray(values, np.float64)).any() else "; ".join(sorted(set(notes)))


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
    from scipy.optimize import minimize_scalar

    best = minimize_scalar(sse, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    return float(best.x) if best.fun <= sse(grid[k]) else float(grid[k])


# -- shared pieces ---------------------------------------------------------------------------------
