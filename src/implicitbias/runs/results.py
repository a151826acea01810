"""`Results`: the typed outcome of a sweep, one entry per run.

`runs[i]` is the `RunSpec` of run i, `arrays[i]` its Dataset (run dimension of length 1, metrics over
checkpoints, final parameters), `data_of(i)` its training data.  Runs are selected and grouped by any
spec field (`select(**{"data.d": 16})`, `group_by("data.scheme", "data.d")`); `stack(indices)` puts
runs side by side in one Dataset over (run, checkpoint) with the spec fields that differ between
them as run coordinates, which is what figures and theorem checks read.  A *cell* is a set of runs
that differ only in their traced values (init seed and scale, learning rate, numeric model fields,
data seed, trial): the runs one theorem check looks at together.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from implicitbias.data import Dataset
from implicitbias.runs.spec import RunSpec, field_value, group_by
from implicitbias.status import Status

#: spec fields shown as run coordinates of a stacked Dataset
COORDS = ("init_scale", "seed", "trial", "data_seed")


@dataclasses.dataclass
class Cell:
    """Runs checked together: their specs, stacked arrays and data sets (aligned with `runs`)."""

    runs: list[RunSpec]
    results: xr.Dataset
    data: list[Dataset]
    indices: list[int]
    #: set by `Results.cells`: the base label, with the fields that tell this cell from others of that label
    named: str = ""

    def __repr__(self) -> str:
        return f"Cell({self.label!r}, {len(self.runs)} runs, {self.trials} trials)"

    @property
    def spec(self) -> RunSpec:
        """The first run's spec: the fields every run of the cell shares (model structure, data
        generator, method kind, stopping rule, ...)."""
        return self.runs[0]

    @property
    def trials(self) -> int:
        return len({r.trial for r in self.runs})

    @property
    def label(self) -> str:
        """The cell's name in checks and reports: its part, data scheme/family/d/n and method, and the fields
        that vary between cells that would otherwise share this name (e.g. `model.width=50`)."""
        return self.named or self.base_label

    @property
    def base_label(self) -> str:
        """The part, data scheme/family/d/n and method (not unique when cells differ in other fields)."""
        s = self.spec
        bits = [s.part] if s.part else []
        for name in ("scheme", "family", "d", "n"):
            v = getattr(s.data, name, None)
            if v is not None:
                bits.append(f"{name}={v}")
        if s.method.kind != "gd" or not bits:
            bits.append(f"method={s.method.kind}")
        return ", ".join(bits)


@dataclasses.dataclass(repr=False)
class Results:
    """The outcome of an experiment: its runs, their arrays and data sets, the checks and the config.

    `definition` is the `Experiment` that produced them (what `plot` draws with), `record` how the call that
    produced them went (`implicitbias.pipeline.RunRecord`: failed runs, paths, wall time)."""

    experiment: str
    config: Any
    runs: list[RunSpec]
    arrays: list[xr.Dataset]
    datasets: dict[str, Dataset]
    checks: list[dict] = dataclasses.field(default_factory=list)
    #: "" for the results of a finished run; else what they hold ("2 of 4 runs finished ..."): `report --partial`
    partial: str = ""
    definition: Any = None
    record: Any = None
    #: what `once` computed on these results (not copied by `dataclasses.replace`: new results, new values)
    memo: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def once(self, name: str, compute):
        """`compute()` evaluated once per Results: an experiment's figures, tables and claims can share an
        expensive table of its runs (e.g. the census of every run) instead of each building it again."""
        if name not in self.memo:
            self.memo[name] = compute()
        return self.memo[name]

    def __repr__(self) -> str:
        outcomes: dict[str, int] = {}
        for c in self.checks:
            if c.get("kind") == "prediction":
                outcomes[c["outcome"]] = outcomes.get(c["outcome"], 0) + 1
        verdicts = ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())) or "none"
        where = f", report={self.record.paths['report']!r}" if self.record is not None and \
            "report" in getattr(self.record, "paths", {}) else ""
        held = f"partial: {self.partial.split(' (')[0]}, " if self.partial else ""
        return (f"<Results {self.experiment!r}: {held}{len(self.runs)} runs ({len(self.failed)} failed), "
                f"predictions: {verdicts}{where}>")

    def __len__(self) -> int:
        return len(self.runs)

    def data_of(self, i: int) -> Dataset:
        return self.datasets[self.runs[i].data_key()]

    def status(self, i: int) -> Status:
        return Status(int(self.arrays[i]["status"].values[0]))

    @functools.cached_property
    def failed(self) -> list[int]:
        """Runs that diverged or whose solver failed: left out of figures, fits and checks."""
        return [i for i in range(len(self.runs)) if self.status(i).failed]

    def select(self, **where: Any) -> list[int]:
        """Indices of the runs whose dotted fields equal the given values, e.g.
        `select(**{"data.d": 16, "part": "centred"})`; failed runs are left out.  A selection that matches no
        run is empty (a part an override left out has no runs), and `stack` of it says which criterion matched
        nothing and the values the runs have."""
        bad = set(self.failed)
        return Selection([i for i, s in enumerate(self.runs) if i not in bad
                          and all(field_value(s, k) == v for k, v in where.items())], where)

    def group_by(self, *fields: str) -> dict[Any, list[int]]:
        """Indices of the finished runs grouped by the values of the given dotted fields, in first-seen order.
        With one field the keys are its values (`group_by("init_scale")` -> `{0.1: [...], 1.0: [...]}`); with
        several, tuples of their values in the order given (`group_by("data.scheme", "data.d")` ->
        `{("centred", 16): [...], ...}`)."""
        if not fields:
            raise ValueError("group_by() needs at least one dotted run field, e.g. group_by('init_scale')")
        bad = set(self.failed)
        groups = group_by(self.runs, *fields)
        return {k[0] if len(fields) == 1 else k: [i for i in v if i not in bad]
                for k, v in groups.items() if any(i not in bad for i in v)}

    def plot(self, name: str | None = None):
        """Draw one of the experiment's figures (by name; the first when None) and return the matplotlib
        Figure, headed by the figure's title and laid out for a plain `savefig` (`Figure.render`): in a
        notebook it shows inline."""
        if self.definition is None:
            raise KeyError(f"these results of {self.experiment} carry no experiment definition: get them from "
                           "implicitbias.run(...) or implicitbias.load(DIR)")
        figures = {f.name: f for f in self.definition.figures}
        if not figures:
            raise KeyError(f"{self.experiment} declares no figures")
        if name is None:
            name = next(iter(figures))
        if name not in figures:
            raise KeyError(f"figure {name!r} is not one of {self.experiment}'s: expected one of {list(figures)}")
        return figures[name].render(self)

    def stack(self, indices: Sequence[int]) -> xr.Dataset:
        """The runs `indices` side by side in one Dataset over (run, checkpoint) (`stack_runs`); an empty
        selection is refused with what the runs have."""
        if len(indices) == 0:
            raise ValueError(f"stack: the selection is empty, there is no run to stack: {self._why_empty(indices)}")
        return stack_runs([self.arrays[i] for i in indices], [self.runs[i] for i in indices])

    def _why_empty(self, selection: Sequence[int]) -> str:
        """Which criterion of an empty `select` matched nothing, with the values the runs have."""
        bad = set(self.failed)
        finished = [s for i, s in enumerate(self.runs) if i not in bad]
        n_failed = len(self.failed)
        failed = f" ({n_failed} failed run{'s are' if n_failed > 1 else ' is'} never selected)" if n_failed else ""
        where = getattr(selection, "where", None)
        if not finished:
            return f"none of the {len(self.runs)} runs finished"
        if where is None:
            return (f"these results hold {len(finished)} finished runs{failed}; "
                    f"they vary in {_varying(finished) or 'no field'}")
        shown = ", ".join(f"{k}={v!r}" for k, v in where.items())
        misses = [f"{k}={v!r} matches no finished run ({k} takes {_values([field_value(s, k) for s in finished])})"
                  for k, v in where.items() if not any(field_value(s, k) == v for s in finished)]
        if misses:
            return f"select({shown}): " + "; ".join(misses) + failed
        return (f"select({shown}): each criterion matches some finished run but none matches them all{failed}; "
                f"the runs vary in {_varying(finished)}")

    @functools.cached_property
    def cells(self) -> list[Cell]:
        """The runs grouped into cells (same part and static part), failed runs left out."""
        cells = [Cell([self.runs[i] for i in idx], self.stack(idx), [self.data_of(i) for i in idx], idx)
                 for idx in cell_indices(self.runs, exclude=self.failed)]
        name_cells(cells)
        return cells


class Selection(list):
    """The run indices `Results.select` returns: a list that keeps the criteria it was selected by, so that
    stacking an empty one can say which criterion matched nothing."""

    def __init__(self, indices, where: dict[str, Any]):
        super().__init__(indices)
        self.where = dict(where)


def _values(values: Sequence[Any]) -> str:
    """The distinct values, in first-seen order (at most 8 shown)."""
    seen: list = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return ", ".join(map(repr, seen[:8])) + (f", ... ({len(seen)} values)" if len(seen) > 8 else "")


def _varying(runs: Sequence[RunSpec]) -> str:
    """The dotted fields whose values differ between `runs`, each with its values."""
    flat = [_flatten(s.model_dump(mode="json")) for s in runs]
    keys = dict.fromkeys(k for f in flat for k in f)
    return "; ".join(f"{k} takes {_values([f.get(k) for f in flat])}" for k in keys
                     if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1)


def name_cells(cells: Sequence[Cell]) -> None:
    """Give cells that share a base label the fields that tell them apart (`model.width=50`), so that every
    cell's label is unique; a cell with a label of its own keeps it."""
    by_label: dict[str, list[Cell]] = {}
    for cell in cells:
        by_label.setdefault(cell.base_label, []).append(cell)
    for label, same in by_label.items():
        if len(same) < 2:
            continue
        flat = [_flatten(_static_fields(c.spec)) for c in same]
        varying = [k for k in flat[0] if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]
        varying += [k for k in {k for f in flat for k in f} - set(flat[0])]
        for cell, fields in zip(same, flat):
            bits = ", ".join(f"{k}={_short(fields.get(k))}" for k in varying)
            cell.named = f"{label}, {bits}" if bits else label


def _static_fields(spec: RunSpec) -> dict:
    """The spec's fields that fix its cell (what `RunSpec.static_key` hashes)."""
    dump = spec.model_dump(mode="json", exclude={"seed", "data_seed", "trial", "part", "init_scale"})
    for name in spec.traced_model_fields():
        dump["model"].pop(name, None)
    for name in spec.method.traced_fields:
        dump["method"].pop(name, None)
    return dump


def _flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list) and len(value) > 4:
        return f"[{len(value)} values]"
    return str(value)


def cell_indices(runs: Sequence[RunSpec], exclude: Sequence[int] = ()) -> list[list[int]]:
    """The runs' indices grouped into cells: same part and same static part (`RunSpec.static_key`)."""
    bad = set(exclude)
    groups: dict[tuple, list[int]] = {}
    for i, spec in enumerate(runs):
        if i not in bad:
            groups.setdefault((spec.part, spec.static_key()), []).append(i)
    return list(groups.values())


def stack_runs(arrays: Sequence[xr.Dataset], runs: Sequence[RunSpec]) -> xr.Dataset:
    """Runs side by side over (run, checkpoint).  A run that stopped before the last checkpoint of
    the longest one has its last row repeated, which is exactly what it would have recorded (a
    stopped run no longer changes); the spec fields `COORDS`, the method's traced fields (`lr`) and the
    numeric model fields
    become run coordinates."""
    if not arrays:
        raise ValueError("stack_runs: no runs to stack (an empty selection)")
    n = max(a.sizes["checkpoint"] for a in arrays)
    longest = next(a for a in arrays if a.sizes["checkpoint"] == n)
    padded = []
    for a in arrays:
        k = a.sizes["checkpoint"]
        a = a.isel(checkpoint=np.minimum(np.arange(n), k - 1)).assign_coords(
            checkpoint=np.arange(n), target=("checkpoint", longest["target"].values))
        padded.append(a)
    ds = xr.concat(padded, dim="run", data_vars="minimal", coords="minimal", compat="override",
                   combine_attrs="drop")
    coords = {name: ("run", np.asarray([getattr(r, name) for r in runs])) for name in COORDS}
    for name in runs[0].method.traced_fields:  # e.g. the learning rate
        coords[name] = ("run", np.asarray([getattr(r.method, name) for r in runs], dtype=float))
    for name in runs[0].traced_model_fields():
        values = np.asarray([getattr(r.model, name) for r in runs], dtype=float)
        coords[f"model.{name}"] = ("run", values)
    ds = ds.assign_coords(run=np.arange(len(arrays)), **coords)
    ds.attrs["wall_time_s"] = float(sum(float(a.attrs.get("wall_time_s", 0.0)) for a in arrays))
    return ds
