"""The batch of one compiled call: the per-member values of the fields that may differ between its members.

Which fields those are is declared once, on the spec types: every run's `seed` and `init_scale`, the method's
`traced_fields` (`Method.traced_fields`, e.g. the learning rate of the discrete methods) and the model's
`traced_fields` (`Model.traced_fields`, e.g. a leaky slope).  Everything else fixes the compiled program.

A `Batch` is built from a group of runs (`Batch.of(runs)`, anything with `model`, `method`, `seed` and
`init_scale`, such as `implicitbias.runs.RunSpec`s of one static part) or, for a direct call of `train`, from
the lists of a `batch={...}` mapping (`Batch.from_lists`, validated before anything compiles).  `Batch.hp()` is
the dict of arrays that travels through the compiled call, one entry per member:
{"seed", "init_scale", <method traced fields>, "model": {<model traced fields that differ>}}.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.losses import Loss
from implicitbias.models.base import Model


class Member(Protocol):
    """What a batch reads of one run: its model and method specs, init seed and init scale."""

    model: Model
    method: Any
    seed: int
    init_scale: float


class Run(Member, Protocol):
    """A run as `train_runs` reads it (an `implicitbias.runs.RunSpec` is one): its member values and the
    static part shared by the group (loss, stopping rule, checkpoints, what it records)."""

    loss: Loss
    stop: Any
    checkpoints: int | list[float]
    kkt: bool
    keep_trajectory: bool


@dataclasses.dataclass(frozen=True)
class Batch:
    """Per-member values of one compiled call, one array entry per member.

    seed: int64 init seeds; init_scale: float init scales; method: every traced field of the method (float
    arrays); model: the model's traced fields whose values differ between the members (float arrays; a field
    with one value for all stays a static field of the model)."""

    seed: np.ndarray
    init_scale: np.ndarray
    method: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    model: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

    @property
    def size(self) -> int:
        """The number of members."""
        return len(self.seed)

    @property
    def model_overrides(self) -> tuple[str, ...]:
        """The model fields replaced by each member's own value inside the compiled call."""
        return tuple(self.model)

    def hp(self) -> dict[str, Any]:
        """The arrays that travel through the compiled call: seed, init_scale, the method's traced fields and,
        when some model field differs between members, {"model": {field: array}}."""
        hp: dict[str, Any] = {"seed": self.seed, "init_scale": self.init_scale, **self.method}
        if self.model:
            hp["model"] = dict(self.model)  # per-member model fields, nested: {"model": {"gamma": array}}
        return hp

    def member(self, i: int) -> dict[str, Any]:
        """The values of member i as Python scalars, in the layout of `hp()`."""
        out: dict[str, Any] = {"seed": self.seed[i].item(), "init_scale": self.init_scale[i].item()}
        out.update({name: values[i].item() for name, values in self.method.items()})
        if self.model:
            out["model"] = {name: values[i].item() for name, values in self.model.items()}
        return out

    @classmethod
    def of(cls, members: Sequence[Member]) -> Batch:
        """The batch of runs that share a static part, read from their typed fields (the values are valid:
        the specs validated them)."""
        first = members[0]
        method = {name: np.asarray([m.method.traced_values()[name] for m in members], dtype=float)
                  for name in first.method.traced_fields}
        model = {}
        for name in first.model.traced_fields:
            values = [m.model.traced_values()[name] for m in members]
            if len(set(values)) > 1:
                model[name] = np.asarray(values, dtype=float)
        return cls(np.asarray([m.seed for m in members], dtype=np.int64),
                   np.asarray([m.init_scale for m in members], dtype=float), method, model)

    @classmethod
    def from_lists(cls, model: Model, method, seed: int, init_scale: float,
                   batch: Mapping[str, Sequence[Any]] | None, n_data: int = 1) -> Batch:
        """The batch of a direct `train(..., batch={...})` call: keys `seed`, `init_scale`, the method's traced
        fields and `model.<field>` for the model's traced fields, each a list with one entry per member (a key
        left out takes the given value for every member); every value is validated as the spec would."""
        batch = dict(batch or {})
        allowed = ["seed", "init_scale", *method.traced_fields] + [f"model.{f}" for f in model.traced_fields]
        for name in batch:
            if name not in allowed:
                raise ConfigError(f"batch.{name} is not allowed: batchable hyper-parameters are {allowed}")
        lengths = {name: len(v) for name, v in batch.items()}
        n_runs = max([*lengths.values(), n_data])
        if any(n != n_runs for n in lengths.values()) or n_data not in (1, n_runs):
            raise ConfigError(f"batch lengths {lengths} (and {n_data} data sets) are not allowed: every list needs "
                              f"one entry per run ({n_runs})")
        finite = lambda v: isinstance(v, int | float | np.number) and math.isfinite(v)
        seeds = list(batch.get("seed", [seed] * n_runs))
        _check("seed", seeds, lambda v: isinstance(v, int | np.integer) and v >= 0, "an integer >= 0")
        scales = list(batch.get("init_scale", [init_scale] * n_runs))
        _check("init_scale", scales, lambda v: finite(v) and v >= 0, "a finite number >= 0")
        traced: dict[str, np.ndarray] = {}
        for name in method.traced_fields:  # the method's traced fields (the learning rate of discrete methods)
            values = list(batch.get(name, [getattr(method, name)] * n_runs))
            _check(name, values, finite, "a finite number")
            _check_spec(method, name, name, values)
            traced[name] = np.asarray(values, dtype=float)
        fields: dict[str, np.ndarray] = {}
        for name in model.traced_fields:
            key = f"model.{name}"
            if key in batch:
                _check_spec(model, name, key, batch[key])
                fields[name] = np.asarray(batch[key], dtype=float)
        return cls(np.asarray(seeds, dtype=np.int64), np.asarray(scales, dtype=float), traced, fields)


def _check(name: str, values: list, ok, allowed: str) -> None:
    for i, v in enumerate(values):
        if not ok(v):
            raise ConfigError(f"batch.{name}[{i}] = {v!r} is not allowed: expected {allowed}")


def _check_spec(spec, field: str, key: str, values) -> None:
    """Each value of `field` is one the spec accepts (its own validation)."""
    for i, v in enumerate(values):
        try:
            spec.validated_replace(**{field: v})
        except ConfigError as exc:
            raise ConfigError(f"batch.{key}[{i}] = {v!r} is not allowed: {exc}") from None


def build_batch(model: Model, method, seed: int, init_scale: float,
                batch: Mapping[str, Sequence[Any]] | None, n_data: int = 1):
    """(hp, overridden model fields) of `Batch.from_lists(...)`: the dict of per-member arrays and the names of
    the model fields that differ between members."""
    out = Batch.from_lists(model, method, seed, init_scale, batch, n_data)
    return out.hp(), out.model_overrides
