"""Verdicts on fitted rates, shared by the theorem modules of S4-S6 (Soudry et al., Ji & Telgarsky, Gunasekar et
al.): an exponent judged on every run and reported on the worst (`rate_over_runs`, `worst_rate`), and a slope that
must be negative (`sign_verdict`).
"""

from __future__ import annotations

import dataclasses
import math

from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import LineFit, rate_verdict

#: a fitted line needs this many points: two residual degrees of freedom, so that the standard error of its slope
#: is estimated from more than one residual
MIN_FIT_POINTS = 4


def negated(fit: LineFit) -> LineFit:
    """The same line with the sign of its slope flipped (an exponent q read off a slope -q)."""
    return dataclasses.replace(fit, slope=-fit.slope)


def rate_over_runs(theorem: str, statement: str, fits, predicted, competitors, labels, notes) -> Verdict:
    """`fitting.rate_verdict` on every run (an exponent per run, its predicted value and wrong competitors per
    run), reported on the worst run: the first that fails, else the first inconclusive (not_evaluated), else the
    run whose confidence interval comes nearest an end of its accepted interval."""
    verdicts = [rate_verdict(theorem, statement, f, p, c, note=f"{labels[r]}; {notes[r]}" if len(fits) > 1 else notes[r])
                for r, (f, p, c) in enumerate(zip(fits, predicted, competitors))]
    if not verdicts:
        return Verdict(theorem, "prediction", statement, None, "~", None, "not_evaluated", "no runs")
    for outcome in ("fails", "not_evaluated"):
        found = [v for v in verdicts if v.outcome == outcome]
        if found:
            return found[0]

    def slack(r):
        lo, hi = fits[r].interval()
        return min(lo - (predicted[r] + max([c for c in competitors[r] if c < predicted[r]], default=-math.inf)) / 2,
                   (predicted[r] + min([c for c in competitors[r] if c > predicted[r]], default=math.inf)) / 2 - hi)

    return verdicts[min(range(len(verdicts)), key=slack)]


def sign_verdict(theorem: str, statement: str, fit: LineFit, note: str, level: float = 0.95) -> Verdict:
    """A fitted slope that must be negative: holds when its `level` confidence interval lies below 0, fails when it
    lies at or above 0 (a slope of exactly 0 with no residual included: a constant), not_evaluated (inconclusive)
    when it straddles 0 or cannot be estimated (fewer than MIN_FIT_POINTS points)."""
    lo, hi = fit.interval(level)
    head = f"slope {fit.slope:.4g} +- {fit.se:.2g} (SE), {level:.0%} CI [{lo:.4g}, {hi:.4g}], n = {fit.n}"
    if fit.n < MIN_FIT_POINTS or not math.isfinite(lo):
        return Verdict(theorem, "prediction", statement, fit.slope if math.isfinite(fit.slope) else None, "<", 0.0,
                       "not_evaluated", f"{head}: fewer than {MIN_FIT_POINTS} points, or no residual degree of freedom, "
                       f"so the slope's uncertainty cannot be estimated; {note}")
    outcome = "holds" if hi < 0.0 else "fails" if lo >= 0.0 else "not_evaluated"
    if outcome == "not_evaluated":
        head = "inconclusive: the confidence interval straddles 0; " + head
    return Verdict(theorem, "prediction", statement, fit.slope, "<", 0.0, outcome, f"{head}; {note}")


def worst_rate(verdicts: list[Verdict]) -> Verdict:
    """The verdict of the worst run: a failure first, then an undecided one, else the largest (slowest) slope."""
    for outcome in ("fails", "not_evaluated"):
        hit = [v for v in verdicts if v.outcome == outcome]
        if hit:
            return max(hit, key=lambda v: -math.inf if v.measured is None else v.measured)
    return max(verdicts, key=lambda v: v.measured)
