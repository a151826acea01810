"""Theorems as objects (SCIENCE.md, "What checking a theorem means").

A `Theorem` evaluates (a) its assumptions on the concrete data and hyper-parameters and (b) its
predictions on a finished run.  Each evaluation is a `Verdict` printed as

    [assumption] R_min^2 >= 3 gamma^-3 R^2 n max|<x_i, x_j>|: holds (812.3 >= 97.1)
    [prediction] margin spread max q / min q -> 1: holds (1.0004 <= 1.01)

"Assumption not met" and "prediction failed" are different outcomes: a theorem whose assumption
fails reports its predictions as `outside_scope` (measured, but not a failure of the theorem).
Constants a paper leaves unspecified are fields of the theorem with documented defaults.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, Literal

from implicitbias._spec import Spec

Kind = Literal["assumption", "prediction"]
#: holds / fails: evaluated; outside_scope: a prediction whose theorem's assumptions are not met;
#: not_evaluated: the quantity is undefined on this run (e.g. margins not yet positive) or a fit cannot decide
#: (inconclusive); a not_evaluated verdict always says why in its note
Outcome = Literal["holds", "fails", "outside_scope", "not_evaluated"]

RELATIONS = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    theorem: str
    kind: Kind
    statement: str
    measured: float | None
    relation: str
    bound: float | None
    outcome: Outcome
    note: str = ""

    def __post_init__(self):
        if self.outcome == "not_evaluated" and not self.note.strip():
            raise ValueError(f"{self.theorem}: the not_evaluated verdict '{self.statement}' must say why in its note "
                             "(e.g. 'measured value is NaN: <what>')")

    @property
    def passed(self) -> bool:
        return self.outcome != "fails"

    def line(self) -> str:
        nums = f"{_fmt(self.measured)} {self.relation} {_fmt(self.bound)}" if self.bound is not None else _fmt(
            self.measured)
        note = f"; {self.note}" if self.note else ""
        return f"[{self.kind}] {self.statement}: {self.outcome.replace('_', ' ')} ({nums}{note})"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for k in ("measured", "bound"):
            v = out[k]
            out[k] = None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v)
        out["line"] = self.line()
        return out


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v)
    return f"{v:.4g}"


def _undefined(what: str, value) -> str:
    if value is None:
        return f"{what} not available"
    value = float(value)
    return "" if math.isfinite(value) else f"{what} is {'NaN' if math.isnan(value) else 'infinite'}"


def compare(theorem: str, kind: Kind, statement: str, measured, relation: str, bound, note: str = "") -> Verdict:
    """A verdict from `measured relation bound`; a None, NaN or infinite measurement or bound is
    `not_evaluated`, and the note then starts with the reason ("measured value is NaN: <note>")."""
    reason = "; ".join(r for r in (_undefined("measured value", measured), _undefined("bound", bound)) if r)
    if reason:
        outcome: Outcome = "not_evaluated"
        note = f"{reason}: {note}" if note else reason
    else:
        outcome = "holds" if RELATIONS[relation](float(measured), float(bound)) else "fails"
    m = None if measured is None else float(measured)
    b = None if bound is None else float(bound)
    return Verdict(theorem, kind, statement, m, relation, b, outcome, note)


class Theorem(Spec, abc.ABC):
    """A theorem: its name and source, assumptions and predictions.  Subclasses are Specs, so their
    constants are validated, documented fields that an experiment can set."""

    @property
    @abc.abstractmethod
    def title(self) -> str:
        """E.g. 'Frei et al. 2023, Theorem 3.2'."""

    @abc.abstractmethod
    def assumptions(self, run) -> list[Verdict]:
        """Evaluate the assumptions on `run` (a `RunContext`: data, config and results)."""

    @abc.abstractmethod
    def predictions(self, run) -> list[Verdict]:
        """Evaluate the predictions on the finished run."""

    def check(self, run) -> list[Verdict]:
        assumed = self.assumptions(run)
        predicted = self.predictions(run)
        if any(v.outcome == "fails" for v in assumed):
            predicted = [
                dataclasses.replace(v, outcome="outside_scope", note=(v.note + "; " if v.note else "")
                                    + f"measured {v.outcome}, but an assumption is not met")
                if v.outcome in ("holds", "fails") else v
                for v in predicted
            ]
        return assumed + predicted


@dataclasses.dataclass
class RunContext:
    """What a theorem sees: the runs of one cell as typed specs, their results stacked over
    (run, checkpoint) in the same order, and the training data of each run (`data[r]` is run r's).

    Everything about run r is read from `runs[r]` (`runs[r].model`, `runs[r].method.lr`,
    `runs[r].stop.loss_tol`, `runs[r].data.d`, ...), never reconstructed from strings."""

    runs: list
    results: Any
    data: list

    @classmethod
    def of(cls, cell) -> RunContext:
        """The context of a `implicitbias.runs.results.Cell`."""
        return cls(runs=list(cell.runs), results=cell.results, data=list(cell.data))

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    @property
    def spec(self):
        """The first run's spec (the fields all runs of a cell share)."""
        return self.runs[0]
