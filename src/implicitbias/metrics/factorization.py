"""Matrix factorisations W = W_N ... W_1 read from stored results, and NumPy metrics over batches of matrices (S8).

The factors come from the stored trajectory (`keep_trajectory`: `trajectory.theta.W1`, ... of shape (run,
checkpoint, d, d)) or the final parameters (`theta.W1`, ...). The metrics act on the last axes, so that they apply
to every run and checkpoint at once: Schatten (quasi-)norms and the effective rank from singular values, the
balancedness of adjacent factors, the closest approach of a path to a point, the times at which singular values
rise, and how far measurement matrices are from commuting.
"""

from __future__ import annotations

import math

import numpy as np


def factors(results, depth: int, trajectory: bool = True) -> list[np.ndarray] | None:
    """[W_1, ..., W_N] of every run: (run, checkpoint, d, d) from the trajectory, or (run, d, d) final values.
    None when the trajectory was not stored."""
    prefix = "trajectory.theta." if trajectory else "theta."
    names = [f"{prefix}W{i}" for i in range(1, depth + 1)]
    if any(n not in results.data_vars for n in names):
        return None
    return [np.asarray(results[n].values, dtype=np.float64) for n in names]


def product(fs: list[np.ndarray]) -> np.ndarray:
    """W_N ... W_1 of factors [W_1, ..., W_N] (batched over the leading axes)."""
    P = fs[0]
    for F in fs[1:]:
        P = F @ P
    return P


def end_to_end(results, depth: int, trajectory: bool = True) -> np.ndarray | None:
    """W = W_N ... W_1 of every run at every checkpoint, (run, checkpoint, d, d) (or the final (run, d, d))."""
    fs = factors(results, depth, trajectory)
    return None if fs is None else product(fs)


def schatten(s: np.ndarray, p: float) -> np.ndarray:
    """(sum_k s_k^p)^(1/p) over the last axis of singular values s (p = inf: s_1), computed from the largest."""
    top = s[..., 0]
    if math.isinf(p):
        return top
    safe = np.where(top > 0, top, 1.0)
    return np.where(top > 0, top * np.sum((s / safe[..., None]) ** p, axis=-1) ** (1.0 / p), 0.0)


def effective_rank(s: np.ndarray) -> np.ndarray:
    """exp(H(p)), p_k = s_k / sum s (Roy & Vetterli 2007), over the last axis; 0 for the zero matrix."""
    total = np.sum(s, axis=-1, keepdims=True)
    p = np.where(total > 0, s / np.where(total > 0, total, 1.0), 0.0)
    h = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)
    return np.where(total[..., 0] > 0, np.exp(h), 0.0)


def balance_gap(fs: list[np.ndarray]) -> np.ndarray:
    """max_j ||W_{j+1}^T W_{j+1} - W_j W_j^T||_F / max(||W_j||_F^2, tiny) of factors (run, d, d)."""
    worst = np.zeros(fs[0].shape[0])
    for lo, hi in zip(fs[:-1], fs[1:]):
        gap = np.linalg.norm(np.swapaxes(hi, -1, -2) @ hi - lo @ np.swapaxes(lo, -1, -2), axis=(-2, -1))
        worst = np.maximum(worst, gap / np.maximum(np.linalg.norm(lo, axis=(-2, -1)) ** 2, 1e-300))
    return worst


def closest_approach(path: np.ndarray, point: np.ndarray) -> float:
    """min over the polygon through path[0], path[1], ... (checkpoint, d, d) of the Frobenius distance to `point`."""
    P = path.reshape(path.shape[0], -1)
    x = point.reshape(-1)
    a, step = P[:-1], np.diff(P, axis=0)
    length2 = np.sum(step**2, axis=1)
    s = np.clip(np.sum((x - a) * step, axis=1) / np.where(length2 > 0, length2, 1.0), 0.0, 1.0)
    seg = np.linalg.norm(a + s[:, None] * step - x, axis=1)
    return float(min(seg.min(initial=np.inf), np.linalg.norm(P[-1] - x)))


def crossing_times(time: np.ndarray, s: np.ndarray, fraction: float = 0.5) -> np.ndarray:
    """Per run and singular value k, the first time sigma_k(t) >= fraction x sigma_k(final) (linear interpolation
    between checkpoints; NaN if never). time: (run, checkpoint); s: (run, checkpoint, k)."""
    runs, _, K = s.shape
    out = np.full((runs, K), np.nan)
    for r in range(runs):
        for k in range(K):
            level = fraction * s[r, -1, k]
            above = np.flatnonzero(s[r, :, k] >= level)
            if level <= 0 or above.size == 0:
                continue
            i = int(above[0])
            if i == 0:
                out[r, k] = time[r, 0]
                continue
            t0, t1, a, b = time[r, i - 1], time[r, i], s[r, i - 1, k], s[r, i, k]
            out[r, k] = t0 + (level - a) / (b - a) * (t1 - t0) if b > a else t1
    return out


def spacing_at(time: np.ndarray, t: float) -> float:
    """The spacing of the checkpoints around time t (the interval that holds it; nan for t outside them)."""
    if not math.isfinite(t):
        return math.nan
    i = int(np.clip(np.searchsorted(time, t), 1, time.size - 1))
    return float(time[i] - time[i - 1])


def measurement_matrices(data) -> np.ndarray:
    """The sensing matrices A_i (n, d, d) of a data set whose rows are vec(A_i)."""
    d = int(round(math.sqrt(data.d)))
    return data.X.reshape(data.n, d, d)


def commutator_gap(data) -> float:
    """max_{i, j} ||A_i A_j - A_j A_i||_F / (||A_i||_F ||A_j||_F) and max_i ||A_i - A_i^T||_F / ||A_i||_F."""
    A = measurement_matrices(data)
    norms = np.maximum(np.linalg.norm(A, axis=(1, 2)), 1e-300)
    comm = np.einsum("iab,jbc->ijac", A, A)
    gap = np.linalg.norm(comm - np.swapaxes(comm, 0, 1), axis=(2, 3)) / np.outer(norms, norms)
    asym = np.linalg.norm(A - np.swapaxes(A, 1, 2), axis=(1, 2)) / norms
    return float(max(gap.max(), asym.max()))
