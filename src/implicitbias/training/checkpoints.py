"""Checkpoint grids: log-spaced by default, so that step 10 and step 10^7 are both visible.

A method picks its grid (`Method.checkpoint_grid`): fixed-step methods record at steps (`step_grid`),
continuous ones at times (`time_grid`).
"""

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


def _count(checkpoints) -> int | None:
    if isinstance(checkpoints, int | np.integer):
        if checkpoints < 2:
            raise ConfigError(f"checkpoints = {checkpoints} is not allowed: expected an integer >= 2")
        return int(checkpoints)
    return None


def _explicit(checkpoints: Sequence[float], dtype, what: str) -> np.ndarray:
    grid = np.asarray(checkpoints, dtype=dtype)
    if grid.ndim != 1 or grid.size < 1 or np.any(np.diff(grid) <= 0) or grid[0] < 0:
        raise ConfigError(
            f"checkpoints = {list(checkpoints)!r} is not allowed: expected a strictly increasing list of "
            f"non-negative {what}"
        )
    return grid if grid[0] == 0 else np.concatenate([[0], grid]).astype(grid.dtype)


def step_grid(checkpoints: int | Sequence[float], max_steps: int) -> np.ndarray:
    """The steps a fixed-step method records at: `checkpoints` log-spaced steps up to max_steps, or the
    given list (step 0 added)."""
    n = _count(checkpoints)
    return log_steps(max_steps, n) if n is not None else _explicit(checkpoints, np.int64, "steps")


def time_grid(checkpoints: int | Sequence[float], max_time: float | None, first_time: float,
              method: str = "gradient flow") -> np.ndarray:
    """The times a continuous method records at: `checkpoints` log-spaced times from `first_time` to
    max_time, or the given list (time 0 added)."""
    n = _count(checkpoints)
    if n is None:
        return _explicit(checkpoints, float, "times")
    if max_time is None:
        raise ConfigError(f"stop.max_time = None is not allowed for {method}: give a time budget")
    return log_times(max_time, n, first_time)
