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
import difflib
import math
from typing import Any, Literal, get_args

from implicitbias._spec import Spec

Kind = Literal["assumption", "prediction"]
#: holds / fails: evaluated; outside_scope: a prediction whose theorem's assumptions are not met;
#: not_evaluated: the quantity is undefined on this run (e.g. margins not yet positive) or a fit cannot decide
#: (inconclusive); a not_evaluated verdict always says why in its note
Outcome = Literal["holds", "fails", "outside_scope", "not_evaluated"]

#: the allowed values of `Verdict.kind` and `Verdict.outcome` (what `compare` and `Verdict` accept)
KINDS: tuple[str, ...] = get_args(Kind)
OUTCOMES: tuple[str, ...] = get_args(Outcome)
#: the relations `compare` decides: `measured RELATION bound`
RELATIONS = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}
#: the relations a verdict may print: RELATIONS, "~" (about: a fitted exponent or rate, decided by
#: `fitting.rate_verdict` from its confidence interval, not by a comparison) and "" (no bound)
SHOWN = (*RELATIONS, "~", "")
#: other spellings of a relation, refused with their ASCII form as the suggestion: they are not read as it, since
#: code that branches on the relation (`fitting.over_runs` picks the worst run by it) compares the ASCII strings
ALIASES = {"≥": ">=", "≤": "<=", "⩾": ">=", "⩽": "<=", "=>": ">=", "=<": "<=", "≧": ">=", "≦": "<="}


def _choice(where: str, arg: str, value, allowed, context: str = "", hint: str = "") -> None:
    """Refuse `value` of argument `arg` when it is not one of `allowed`, in one line that names the argument, the
    value, the allowed ones and, without a `hint`, the nearest spelling."""
    if isinstance(value, str) and value in allowed:
        return
    near = [] if hint else difflib.get_close_matches(str(value), [a for a in allowed if a], n=1, cutoff=0.6)
    guess = f" (did you mean {near[0]!r}?)" if near else ""
    raise ValueError(f"{where}: {arg}={value!r} is not allowed{context}: expected one of "
                     f"{', '.join(repr(a) for a in allowed)}{guess}{hint}")


def _relation(where: str, relation, allowed, context: str = "") -> None:
    """Refuse a relation not in `allowed`, with its ASCII spelling (`ALIASES`) or the way to write an equality."""
    if relation in ("==", "=", "!="):
        hint = ("; there is no equality: measured floats are never exactly equal, so compare abs(measured - expected) "
                "with '<=' and a tolerance field")
    else:
        hint = f" (write {ALIASES[relation]!r})" if isinstance(relation, str) and relation in ALIASES else ""
    _choice(where, "relation", relation, allowed, context, hint)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One evaluated assumption or prediction: `measured relation bound` and its outcome (usually built by
    `compare`).  kind, outcome and relation (one of `SHOWN`) are checked when it is built."""

    theorem: str
    kind: Kind
    statement: str
    measured: float | None
    relation: str
    bound: float | None
    outcome: Outcome
    note: str = ""

    def __post_init__(self):
        context = f" (theorem {self.theorem!r}: {self.statement!r})"
        _choice("Verdict", "kind", self.kind, KINDS, context)
        _choice("Verdict", "outcome", self.outcome, OUTCOMES, context)
        _relation("Verdict", self.relation, SHOWN, context)
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
    """The verdict of `measured relation bound`: "holds" when it is true, "fails" when it is not.

    `kind` is "assumption" or "prediction"; `relation` is one of:

    - ">=", ">", "<=", "<": the comparison, decided here;
    - "~" (about): the label of a fitted exponent or rate, which `fitting.rate_verdict` decides from the fit's
      confidence interval; compare takes it only for a verdict it cannot evaluate (measured value or bound missing).

    Nothing else: there is no equality (measured floats are never exactly equal, so compare
    `abs(measured - expected)` with "<=" and a tolerance field of the theorem), and "≥", "≤" are refused with
    their ASCII form (code that branches on the relation, such as `fitting.over_runs`, reads the ASCII strings).
    A kind or relation not listed is a ValueError naming the argument, the value and the allowed ones, raised
    whether or not the values are defined.  A None, NaN or infinite measurement or bound is `not_evaluated`, and
    the note then starts with the reason ("measured value is NaN: <note>")."""
    context = f" (theorem {theorem!r}: {statement!r})"
    _choice("compare", "kind", kind, KINDS, context)
    _relation("compare", relation, (*RELATIONS, "~"), context)
    reason = "; ".join(r for r in (_undefined("measured value", measured), _undefined("bound", bound)) if r)
    if reason:
        outcome: Outcome = "not_evaluated"
        note = f"{reason}: {note}" if note else reason
    elif relation not in RELATIONS:
        raise ValueError(f"compare: relation='~' cannot decide {_fmt(measured)} against {_fmt(bound)}{context}: "
                         f"'~' only labels a verdict that cannot be evaluated; expected one of "
                         f"{', '.join(map(repr, RELATIONS))} (a fitted rate is decided by "
                         "implicitbias.theorems.fitting.rate_verdict)")
    else:
        outcome = "holds" if RELATIONS[relation](float(measured), float(bound)) else "fails"
    m = None if measured is None else float(measured)
    b = None if bound is None else float(bound)
    return Verdict(theorem, kind, statement, m, relation, b, outcome, note)


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One declared assumption or prediction of a theorem (see `assumption` and `prediction`).

    name: the method that evaluates it (it returns one `Verdict` or a list of them);
    kind: "assumption" or "prediction";
    statement: what is checked, in the paper's words;
    threshold: the theorem field(s) holding its tolerance or constant ("" when the check compares two
        measured quantities or a derived bound with no free constant);
    source: where the claim and its threshold come from (the paper's theorem or equation, and for a tolerance
        its derivation, e.g. "midpoint between the claimed rate and the nearest wrong one", or "ours")."""

    name: str
    kind: Kind
    statement: str
    threshold: str
    source: str

    def row(self, theorem: Theorem) -> dict[str, Any]:
        """The declaration as a table row, with the threshold fields' values on `theorem`."""
        values = {f: getattr(theorem, f) for f in self.threshold.replace(",", " ").split() if hasattr(theorem, f)}
        return {"kind": self.kind, "name": self.name, "statement": self.statement,
                "threshold": ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                                       for k, v in values.items()),
                "source": self.source}


def _declare(kind: Kind, statement: str, threshold: str, source: str):
    if not isinstance(threshold, str):
        raise ValueError(f"the {kind} '{statement}': threshold={threshold!r} is not allowed: expected the theorem "
                         "field(s) holding its tolerance, as one string (e.g. 'tol' or 'tol, min_runs')")
    if not source.strip():
        raise ValueError(f"the {kind} '{statement}' must say where it comes from (source=...)")

    def mark(method):
        method.__declaration__ = Declaration(method.__name__, kind, statement, threshold, source)
        return method

    return mark


def assumption(statement: str, *, threshold: str = "", source: str):
    """Declare a method `f(self, run) -> Verdict | list[Verdict]` as one of the theorem's assumptions.

    Declared checks run in the order of the class body (a subclass's after its bases'; a subclass redefining
    a method keeps its place).  `threshold` names the theorem field(s) holding the constant, `source` says
    where the assumption and the constant come from."""
    return _declare("assumption", statement, threshold, source)


def prediction(statement: str, *, threshold: str = "", source: str):
    """Declare a method `f(self, run) -> Verdict | list[Verdict]` as one of the theorem's predictions, like
    `assumption`: `threshold` names the field(s) holding its tolerance, `source` the paper's claim and the
    tolerance's derivation (e.g. "Frei et al. 2023, Theorem 3.2 (1); tol: ours, the resolution of an
    extrapolated limit")."""
    return _declare("prediction", statement, threshold, source)


def _as_list(value) -> list[Verdict]:
    if isinstance(value, Verdict):
        return [value]
    return list(value)


class Theorem(Spec, abc.ABC):
    """A theorem: its name and source, assumptions and predictions.  Subclasses are Specs, so their
    constants are validated, documented fields that an experiment can set.

    Assumptions and predictions are declared on the class with the `assumption` and `prediction`
    decorators, each with its threshold and source (like scikit-learn's declared parameter constraints);
    `declarations()` lists them and `check(run)` evaluates them in order.  Adding a prediction to a theorem
    is one decorated method."""

    @property
    @abc.abstractmethod
    def title(self) -> str:
        """E.g. 'Frei et al. 2023, Theorem 3.2'."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs):
        """Refuse, when the class is defined, a declared `threshold` that names no field of the theorem (a typo
        would otherwise leave the tolerance out of the theorem table without a word)."""
        super().__pydantic_init_subclass__(**kwargs)
        fields = sorted(cls.model_fields)
        for declared in cls.declarations():  # the inherited ones too (a mixin's declarations are checked here)
            for name in declared.threshold.replace(",", " ").split():
                if name not in cls.model_fields:
                    near = difflib.get_close_matches(name, fields, n=1, cutoff=0.5)
                    guess = f" (did you mean {near[0]!r}?)" if near else ""
                    have = (f"its fields: {', '.join(fields)}" if fields else
                            "it has no fields: declare the constant as one (e.g. `tol: float = 1e-3`)")
                    raise ValueError(f"{cls.__name__}.{declared.name}: threshold={name!r} is not a field of "
                                     f"{cls.__name__}{guess}; {have}")

    @classmethod
    def declarations(cls) -> tuple[Declaration, ...]:
        """The declared assumptions and predictions, in evaluation order."""
        order: dict[str, Declaration] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                declared = getattr(member, "__declaration__", None)
                if declared is not None:
                    order[name] = declared  # a redefinition keeps the first place
        return tuple(order.values())

    def _evaluate(self, kind: Kind, run) -> list[Verdict]:
        return [v for d in self.declarations() if d.kind == kind for v in _as_list(getattr(self, d.name)(run))]

    def assumptions(self, run) -> list[Verdict]:
        """Evaluate the declared assumptions on `run` (a `RunContext`: data, config and results)."""
        return self._evaluate("assumption", run)

    def predictions(self, run) -> list[Verdict]:
        """Evaluate the declared predictions on the finished run."""
        return self._evaluate("prediction", run)

    def check(self, run) -> list[Verdict]:
        """Assumptions, then predictions; when an assumption fails, a measured prediction is `outside_scope`."""
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


class CellsTheorem(Theorem):
    """A claim of a paper across the cells of an experiment (e.g. "the rank drop grows with d"): declared
    like a `Theorem`, and evaluated on a `CellsContext` (every cell of the results) instead of one cell.

    A claim that needs a cell the results lack (runs failed, a part left out by an override) is
    `not_evaluated` with the reason, rather than an error (see `implicitbias.pipeline`)."""


@dataclasses.dataclass
class CellsContext:
    """What a `CellsTheorem` sees: the experiment's `Results` (`results.cells`, `results.select(...)`)."""

    results: Any
    #: what `once` computed on this context (not copied by `dataclasses.replace`: new results, new values)
    memo: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def cells(self) -> list:
        """Every cell of the results."""
        return list(self.results.cells)

    def once(self, name: str, compute):
        """`compute()` evaluated once per context: several declared checks can share an expensive quantity."""
        if name not in self.memo:
            self.memo[name] = compute()
        return self.memo[name]


@dataclasses.dataclass
class RunContext:
    """What a theorem sees: the runs of one cell as typed specs, their results stacked over
    (run, checkpoint) in the same order, and the training data of each run (`data[r]` is run r's).

    Everything about run r is read from `runs[r]` (`runs[r].model`, `runs[r].method.lr`,
    `runs[r].stop.loss_tol`, `runs[r].data.d`, ...), never reconstructed from strings."""

    runs: list
    results: Any
    data: list
    #: what `once` computed on this context (not copied by `dataclasses.replace`: new results, new values)
    memo: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

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

    def once(self, name: str, compute):
        """`compute()` evaluated once per context: several declared checks can share an expensive quantity
        (a fit, a reference solution)."""
        if name not in self.memo:
            self.memo[name] = compute()
        return self.memo[name]
