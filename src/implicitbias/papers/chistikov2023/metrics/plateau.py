"""When the loss leaves its initial plateau (SCIENCE.md S11: "the time the loss leaves its plateau").

From a small initialisation the loss of a two-layer network first stays near its initial value (the flow
passes near the saddle at 0) and then drops; Chistikov et al. 2023 predict the escape at about
ln(1/lambda)/||gamma_[n]||. `plateau_exit_time` reads that time off a recorded loss curve.

Host-side NumPy (the curves are recorded at checkpoints).
"""

from __future__ import annotations

import numpy as np


def _exit_1d(t: np.ndarray, loss: np.ndarray, fraction: float) -> float:
    ok = np.isfinite(t) & np.isfinite(loss)
    t, loss = t[ok], loss[ok]
    if t.size == 0 or not loss[0] > 0:
        return np.nan
    level = fraction * loss[0]
    below = np.flatnonzero(loss < level)
    if below.size == 0:
        return np.nan
    k = int(below[0])
    if k == 0:
        return float(t[0])
    t0, t1, l0, l1 = t[k - 1], t[k], loss[k - 1], loss[k]
    if not (l1 > 0 and t1 > t0):
        return float(t1)
    s = (np.log(l0) - np.log(level)) / (np.log(l0) - np.log(l1))  # in (0, 1]: log L is interpolated
    if t0 > 0:
        return float(np.exp(np.log(t0) + s * (np.log(t1) - np.log(t0))))
    return float(t0 + s * (t1 - t0))


def plateau_exit_time(time, loss, fraction: float = 0.5):
    """The first time the loss falls below `fraction` x its initial value.

    time, loss: one curve (shape (checkpoints,)) or one per run (shape (runs, checkpoints)); loss[..., 0]
    is the initial value. Between the two checkpoints that bracket the crossing, log L is interpolated
    linearly in log t (the checkpoints are log-spaced; linearly in t when the earlier checkpoint is t = 0).
    Returns a float, or an array of shape (runs,); NaN where the loss never falls below the level (or the
    initial loss is not positive). A run that stopped early repeats its last state; that does not matter,
    since only the first crossing counts.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction = {fraction!r} is not allowed: expected a number in (0, 1)")
    t = np.asarray(time, dtype=np.float64)
    L = np.asarray(loss, dtype=np.float64)
    if t.shape != L.shape or t.ndim not in (1, 2):
        raise ValueError(f"time {t.shape} and loss {L.shape} must have one shape, (checkpoints,) or "
                         "(runs, checkpoints)")
    if t.ndim == 1:
        return _exit_1d(t, L, fraction)
    return np.array([_exit_1d(a, b, fraction) for a, b in zip(t, L)])
