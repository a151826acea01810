"""Batched hyper-parameters: one array entry per run, validated before anything is compiled."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.models.base import Model


def _numeric_model_fields(model: Model) -> list[str]:
    return [
        name for name, field in type(model).model_fields.items()
        if field.annotation in (float, int) and name != "width" and isinstance(getattr(model, name), float)
    ]


def _check(name: str, values: list, ok, allowed: str) -> None:
    for i, v in enumerate(values):
        if not ok(v):
            raise ConfigError(f"batch.{name}[{i}] = {v!r} is not allowed: expected {allowed}")


def build_batch(model: Model, method, seed: int, init_scale: float,
                batch: Mapping[str, Sequence[Any]] | None, n_data: int = 1):
    """Return ({name: np.ndarray of length n_runs, "model": {field: np.ndarray}}, overridden model fields)."""
    batch = dict(batch or {})
    numeric = _numeric_model_fields(model)
    traced = list(method.traced_fields)
    allowed = ["seed", "init_scale", *traced] + [f"model.{f}" for f in numeric]
    for name in batch:
        if name not in allowed:
            raise ConfigError(f"batch.{name} is not allowed: batchable hyper-parameters are {allowed}")
    lengths = {name: len(v) for name, v in batch.items()}
    n_runs = max([*lengths.values(), n_data])
    if any(n != n_runs for n in lengths.values()) or n_data not in (1, n_runs):
        raise ConfigError(f"batch lengths {lengths} (and {n_data} data sets) are not allowed: every list needs "
                          f"one entry per run ({n_runs})")
    finite = lambda v: isinstance(v, int | float | np.number) and math.isfinite(v)
    hp: dict[str, np.ndarray] = {}
    seeds = list(batch.get("seed", [seed] * n_runs))
    _check("seed", seeds, lambda v: isinstance(v, int | np.integer) and v >= 0, "an integer >= 0")
    hp["seed"] = np.asarray(seeds, dtype=np.int64)
    scales = list(batch.get("init_scale", [init_scale] * n_runs))
    _check("init_scale", scales, lambda v: finite(v) and v >= 0, "a finite number >= 0")
    hp["init_scale"] = np.asarray(scales, dtype=float)
    for name in traced:  # the method's traced fields (the learning rate of discrete methods)
        values = list(batch.get(name, [getattr(method, name)] * n_runs))
        _check(name, values, finite, "a finite number")
        for i, v in enumerate(values):
            try:
                method.validated_replace(**{name: v})
            except ConfigError as exc:
                raise ConfigError(f"batch.{name}[{i}] = {v!r} is not allowed: {exc}") from None
        hp[name] = np.asarray(values, dtype=float)
    overrides = []
    fields: dict[str, np.ndarray] = {}
    for name in numeric:
        key = f"model.{name}"
        if key in batch:
            for i, v in enumerate(batch[key]):
                try:
                    model.validated_replace(**{name: v})
                except ConfigError as exc:
                    raise ConfigError(f"batch.{key}[{i}] = {v!r} is not allowed: {exc}") from None
            fields[name] = np.asarray(batch[key], dtype=float)
            overrides.append(name)
    if fields:
        hp["model"] = fields  # per-member model fields, nested: {"model": {"gamma": array}}
    return hp, tuple(overrides)
