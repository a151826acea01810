"""Checkpoint grids: log-spaced by default, so that step 10 and step 10^7 are both visible."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from implicitbias._spec import ConfigError


def log_steps(max_steps: int, n: int) -> np.ndarray:
    """0 and about n - 1 log-spaced integer steps up to max_steps (duplicates removed)."""
    grid = np.unique(np.round(np.logspace(0, np.log10(max_steps), max(n - 1, 1))).astype(np.int64))
    return np.concatenate([[0], grid[grid <= max_steps]])


def log_times(max_time: float, n: int, first: float) -> np.ndarray:
    """0 and n - 1 log-spaced times from `first` to `max_time`."""
    first = min(first, max_time)
    return np.concatenate([[0.0], np.logspace(np.log10(first), np.log10(max_time), max(n - 1, 1))])


def resolve(checkpoints: int | Sequence[float], *, is_flow: bool, max_steps: int, max_time: float | None,
            first_time: float) -> np.ndarray:
    """The grid a run records at: steps (discrete methods) or times (gradient flow)."""
    if isinstance(checkpoints, int | np.integer):
        if checkpoints < 2:
            raise ConfigError(f"checkpoints = {checkpoints} is not allowed: expected an integer >= 2")
        if is_flow:
            if max_time is None:
                raise ConfigError("stop.max_time = None is not allowed for gradient flow: give a time budget")
            return log_times(max_time, int(checkpoints), first_time)
        return log_steps(max_steps, int(checkpoints))
    grid = np.asarray(checkpoints, dtype=float if is_flow else np.int64)
    if grid.ndim != 1 or grid.size < 1 or np.any(np.diff(grid) <= 0) or grid[0] < 0:
        raise ConfigError(
            f"checkpoints = {list(checkpoints)!r} is not allowed: expected a strictly increasing list of "
            "non-negative steps (times for gradient flow)"
        )
    return grid if grid[0] == 0 else np.concatenate([[0], grid]).astype(grid.dtype)
