"""How an experiment's quick variant differs from its full one, read off the two resolved configs.

The documentation's experiment pages and `implicitbias describe NAME --quick` state the quick variant from
here, never from hand-written text: `quick_differences(experiment)` compares `experiment.resolve(quick=True)`
with `experiment.resolve(quick=False)` field by field, and `describe_quick(experiment)` writes the comparison as
one sentence ("Quick variant: differs from the full one in model.width 200 -> 50, trials 5 -> 3, ...").

Parts (`ExperimentConfig.parts`) are compared as the runs see them: each part's effective config (the base with
the part's overrides, `ExperimentConfig.part`), so a base value that every part overrides is not reported, and a
difference shared by every part is reported once, for the whole experiment.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from implicitbias.experiments.base import Experiment
from implicitbias.experiments.config import ExperimentConfig

__all__ = ["Difference", "describe_quick", "format_value", "quick_differences"]

#: stands for a field (a grid axis) that one of the two variants does not have
ABSENT = "(none)"
#: a list with more values than this is written as its length and its first and last values
_LIST_SHOWN = 8


@dataclasses.dataclass(frozen=True)
class Difference:
    """One field whose value differs between the full and the quick variant of an experiment.

    `path` is the dotted config path (`model.width`, `trials`, `grid.init_scale` for a grid axis), `full` and
    `quick` its values in the two variants (`ABSENT` where a variant has no such field, e.g. no such grid axis),
    and `parts` the parts whose runs it concerns (empty: every run of the experiment).  `only_in` is set instead
    for a whole part that one variant has and the other has not ("full" or "quick"; `path` is then empty)."""

    path: str
    full: Any = None
    quick: Any = None
    parts: tuple[str, ...] = ()
    only_in: str = ""

    def text(self) -> str:
        """The difference in words: `model.width 200 -> 50`, or `part NAME: quick variant only`."""
        if self.only_in:
            return f"part {', '.join(self.parts)}: {self.only_in} variant only"
        return f"{self.path} {format_value(self.full)} -> {format_value(self.quick)}"


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    """{dotted path: value} of a config dump; a grid's axes (whose names contain dots) are leaves."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if key == "grid" and not prefix and isinstance(value, dict):
            out.update({f"grid.{axis}": values for axis, values in value.items()})
        elif isinstance(value, dict):
            out.update(_flat(value, path + "."))
        else:
            out[path] = value
    return out


def _changes(full: ExperimentConfig, quick: ExperimentConfig) -> dict[str, tuple[Any, Any]]:
    """{path: (full value, quick value)} over the fields (parts left out) on which two configs differ."""
    a = _flat(full.model_dump(exclude={"parts"}))
    b = _flat(quick.model_dump(exclude={"parts"}))
    return {path: (a.get(path, ABSENT), b.get(path, ABSENT)) for path in sorted(set(a) | set(b), key=_order)
            if a.get(path, ABSENT) != b.get(path, ABSENT)}


#: the order differences are listed in: the fields a reader looks for first, then the rest alphabetically
_FIRST = ("model.", "data.", "trials", "init_scale", "grid.", "method.", "stop.", "checkpoints")


def _order(path: str) -> tuple[int, str]:
    rank = next((i for i, head in enumerate(_FIRST) if path.startswith(head)), len(_FIRST))
    return rank, path


def quick_differences(experiment: Experiment) -> list[Difference]:
    """Every field on which `experiment.resolve(quick=True)` differs from `experiment.resolve(quick=False)`.

    With parts that both variants have, each such part's effective config is compared with the same part of the
    other variant; a difference that all of them share is returned once with `parts = ()`, the others with the
    parts they concern.  Without a part in common (no parts at all, or one variant without parts) the two configs
    are compared without their parts.  A part present in one variant only is returned as a `Difference` with
    `only_in` set.  The seed is the same in both variants and never differs here."""
    full = experiment.resolve(quick=False)
    quick = experiment.resolve(quick=True)
    names_full, names_quick = list(full.parts), list(quick.parts)
    shared = [n for n in names_full if n in names_quick]
    if not shared:
        # no part in common (none at all, or one variant without parts): the configs without their parts
        out = [Difference(path, a, b) for path, (a, b) in _changes(full, quick).items()]
    else:
        per_part = {name: _changes(full.part(name), quick.part(name)) for name in shared}
        common = {path: change for path, change in per_part[shared[0]].items()
                  if all(per_part[n].get(path) == change for n in shared)}
        out = [Difference(path, a, b) for path, (a, b) in common.items()]
        by_change: dict[tuple[str, str, str], list[str]] = {}
        for name in shared:
            for path, (a, b) in per_part[name].items():
                if path not in common:
                    by_change.setdefault((path, repr(a), repr(b)), []).append(name)
        for (path, _, _), names in sorted(by_change.items(),
                                          key=lambda item: (shared.index(item[1][0]), _order(item[0][0]))):
            a, b = per_part[names[0]][path]
            out.append(Difference(path, a, b, parts=tuple(names)))
    out += [Difference("", parts=(n,), only_in="full") for n in names_full if n not in names_quick]
    out += [Difference("", parts=(n,), only_in="quick") for n in names_quick if n not in names_full]
    return out


def _power(value: float, base: int) -> int | None:
    """k where value == base**k exactly (k an integer, |k| <= 40), else None."""
    if value <= 0 or not math.isfinite(value):
        return None
    k = round(math.log(value, base))
    return k if abs(k) <= 40 and float(base) ** k == value else None


def _exponent(text: str) -> str:
    """'1e-06' -> '1e-6', '2e+07' -> '2e7'."""
    mantissa, e, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if e else text


def format_value(value: Any) -> str:
    """A config value as the settings texts write it: 4^-4 for an exact power of 4 at most 1/16 (the
    initialisation scales lambda), 1e-6, 0.16 or 2e5 for other numbers (4 significant digits; integers below
    10^4, or not a multiple of 1000, in full), [a, b, c] for a list (more than 8 values: their count, first and
    last), `ABSENT` as is."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return _exponent(f"{value:.4g}") if abs(value) >= 10_000 and value % 1000 == 0 else str(value)
    if isinstance(value, float):
        k = _power(value, 4)
        if k is not None and k <= -2:
            return f"4^{k}"
        if value.is_integer() and abs(value) < 10_000:
            return str(int(value))
        return _exponent(f"{value:.4g}")
    if isinstance(value, list | tuple):
        if len(value) > _LIST_SHOWN:
            return f"[{len(value)} values, {format_value(value[0])} .. {format_value(value[-1])}]"
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def describe_quick(experiment: Experiment) -> str:
    """The quick variant in one sentence, generated from `quick_differences`: "Quick variant: differs from the full
    one in model.width 200 -> 50, trials 5 -> 3; in part dimension: stop.max_steps 2000 -> 3e4." (or "Quick
    variant: the same config as the full one.")."""
    differences = quick_differences(experiment)
    if not differences:
        return "Quick variant: the same config as the full one."
    common = ", ".join(d.text() for d in differences if not d.parts)
    groups: dict[tuple[str, ...], list[str]] = {}
    for d in differences:
        if d.parts and not d.only_in:
            groups.setdefault(d.parts, []).append(d.text())
    # "in part NAME: ..." after a first clause, "part NAME: ..." as the first
    clauses = [common] if common else []
    for parts, texts in groups.items():
        clause = f"{'part' if len(parts) == 1 else 'parts'} {', '.join(parts)}: " + ", ".join(texts)
        clauses.append(f"in {clause}" if clauses else clause)
    clauses += [d.text() for d in differences if d.only_in]
    text = "; ".join(clauses)
    return f"Quick variant: differs from the full one in {text}."
