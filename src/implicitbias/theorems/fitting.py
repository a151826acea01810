"""Verdicts on fitted curves, shared by the theorem checks: the generic fits are `implicitbias.metrics.fits`.

- `rate_verdict`: a fitted exponent (`linear_fit`) judged against the predicted one and its nearest wrong
  competitors (a rate reading of an asymptotic claim: holds when the exponent's confidence interval lies nearer
  the prediction than any competitor, fails when it lies nearer a competitor, not_evaluated (inconclusive)
  when it straddles);
- `over_runs`: the verdict on the worst run of a cell (every theorem reports the worst case over runs);
- `flag`: a verdict on a yes/no condition (an activation, a loss, the structure of the outer layer);
- `limit_verdict`: a limit y(t) -> y* read at finite time from the last value and the extrapolation of
  y_inf + c / log t (`extrapolated_limit`), held to the quantity's range, over the checkpoints of
  `asymptotic_window` or the late ones;
- `run_labels`: a label per run of a `RunContext`.  Everything else about run r is read from its spec,
  `run.runs[r]`, and its data, `run.data[r]` (see `theorems.base.RunContext`).

The fits themselves (`fitted_slope`, `linear_fit`, `LineFit`, `late_window`, `curve`, `final`, `initial`,
`extrapolated_limit`, `Limit`, `RANGES`, `quantity_range`, `APPROACH`, `growth_exponent`) are re-exported
here, so `from implicitbias.theorems.fitting import curve` keeps working.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from implicitbias.metrics.fits import (
    APPROACH,
    RANGES,
    Limit,
    LineFit,
    curve,
    extrapolated_limit,
    final,
    fitted_slope,
    growth_exponent,
    initial,
    late_window,
    linear_fit,
    quantity_range,
)
from implicitbias.theorems.base import Kind, Verdict, compare

__all__ = [
    "APPROACH", "RANGES", "Limit", "LineFit", "asymptotic_window", "curve", "extrapolated_limit", "final",
    "fitted_loss_level", "fitted_slope", "flag", "growth_exponent", "initial", "late_window", "limit_verdict",
    "linear_fit", "over_runs", "quantity_range", "rate_verdict", "run_labels", "why_missing",
]


# -- verdicts ---------------------------------------------------------------------------------------
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
