"""Quantities of the neurons of a trained two-layer network, computed on the host from final parameters.

`weighted_max_angle` is the largest angle between active neurons that carry weight (Chistikov et al.
2023, Figure 1 read on the neurons that matter): neuron j is active when <w_j, x_i> > 0 for some
training input, and carries weight when |a_j| ||w_j|| >= rel x sum_k |a_k| ||w_k||.  Angles are
2 atan2(||u - v||, ||u + v||) of the unit vectors, accurate down to 1e-8 rad (`angles_to`, the host-side
counterpart of `implicitbias.metrics.angles.angle_between`).

`kink_max_angle` is the largest angle between the neurons active beyond the resolution of a ReLU kink: neuron j
counts when cos(w_j, x_i) > `KINK_COS` for some training input.  A neuron that the flow brings onto a kink
(<w_j, x_i> -> 0 on its last training point) stops there: exactly on the kink it is not active, but a numerical
solution leaves it a few 1e-6 on the active side or up to ~1e-3 past the kink, and which side depends on the
tolerance, not on the flow.
"""

from __future__ import annotations

import numpy as np

#: the share of sum_k |a_k| ||w_k|| below which a neuron is said to carry no weight
WEIGHT_REL = 1e-6

#: the cosine to a training input up to which a neuron counts as sitting on that input's ReLU kink
#: (`kink_max_angle`).  Measured on chistikov2023-fig1 (d = 256, uncentred, lambda = 4^-9, trial 4): the neuron
#: whose side of the kink sets that run's recorded max angle (0.0011 or 1.66 rad) ends at cos -1.1e-4, -9.1e-5,
#: -1.8e-4, +2.7e-6, -2.2e-6 at rtol 1e-4, 1e-5, 1e-6, 1e-7, 1e-8 (the last two with atol_rel 1e-9, 1e-10), and at
#: +8.8e-7, -5.6e-4 with Figure 1's tail at rtol 1e-3, 1e-2: no tolerance resolves its sign, and on the active side
#: it stays below 3e-6.  1e-5 is above that; over the 640 runs of that figure at d <= 256 any value from 1e-6 to
#: 1e-5 changes the max angle of that run alone, and 1e-4 would change one more.  Bracketed, not derived.
KINK_COS = 1e-5


def angles_to(U, v) -> np.ndarray:
    """The angle (rad) between each row of U and the vector v, as 2 atan2(||u_hat - v_hat||, ||u_hat + v_hat||);
    NaN for a zero row, or for every row when v = 0."""
    U = np.asarray(U, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    norms, v_norm = np.linalg.norm(U, axis=1), np.linalg.norm(v)
    if v_norm == 0:
        return np.full(U.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = U / norms[:, None]
    v = v / v_norm
    out = 2.0 * np.arctan2(np.linalg.norm(unit - v, axis=1), np.linalg.norm(unit + v, axis=1))
    return np.where(norms > 0, out, np.nan)


def _widest_pair(U) -> tuple[float, int, int]:
    """The largest angle (rad) between rows of the unit-row matrix U, 2 atan2(||u - v||, ||u + v||), and the
    rows (i, j) that make it; (0, -1, -1) with fewer than two rows."""
    best, pair = 0.0, (-1, -1)
    for i in range(U.shape[0] - 1):
        angles = 2.0 * np.arctan2(np.linalg.norm(U[i + 1:] - U[i], axis=1), np.linalg.norm(U[i + 1:] + U[i], axis=1))
        k = int(np.argmax(angles))
        if pair[0] < 0 or angles[k] > best:
            best, pair = float(angles[k]), (i, i + 1 + k)
    return best, pair[0], pair[1]


def _active_neurons(W, a, X):
    """(W, |a_j| ||w_j||, ||w_j||, mask of the nonzero neurons active on some training input) in float64."""
    W, norms, active = _active_mask(W, X)
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    return W, np.abs(a) * norms, norms, active


def _active_mask(W, X, kink: float = 0.0):
    """(W in float64, ||w_j||, mask of the nonzero neurons with cos(w_j, x_i) > kink for some training input);
    kink = 0 is <w_j, x_i> > 0, Figure 1's active neurons."""
    W = np.asarray(W, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(W, axis=1)
    pre = X @ W.T
    if kink:
        pre = pre - kink * np.linalg.norm(X, axis=1)[:, None] * norms[None, :]
    return W, norms, np.any(pre > 0, axis=0) & (norms > 0)


def max_angle_pair(W, a, X) -> tuple[float, float]:
    """(the max angle (rad) between active neurons, the weight share |a_j| ||w_j|| / sum_k |a_k| ||w_k|| of
    the lighter of the two neurons that make it); (0, nan) with fewer than two active neurons.  Tells
    whether Figure 1's quantity is set by a neuron that matters or by one that vanishes with lambda."""
    W, weight, norms, active = _active_neurons(W, a, X)
    idx = np.flatnonzero(active)
    if idx.size < 2:
        return 0.0, float("nan")
    best, i, j = _widest_pair(W[idx] / norms[idx, None])
    total = weight.sum()
    return best, float(min(weight[idx[i]], weight[idx[j]]) / total) if total > 0 else float("nan")


def kink_max_angle(W, X, kink: float = KINK_COS) -> float:
    """The max angle (rad) between the neurons j with cos(w_j, x_i) > `kink` for some training input x_i: Figure
    1's active neurons, with those sitting on a ReLU kink (within `kink` of it) counted as inactive, as they are
    on the kink itself; 0 with fewer than two of them.  With kink = 0 it is the recorded `max_angle`."""
    W, norms, keep = _active_mask(W, X, kink)
    return _widest_pair(W[keep] / norms[keep, None])[0]


def weighted_max_angle(W, a, X, rel: float = WEIGHT_REL) -> float:
    """The max angle (rad) between active neurons carrying weight; 0 with fewer than two of them."""
    W, weight, norms, active = _active_neurons(W, a, X)
    keep = active & (weight >= rel * weight.sum())
    return _widest_pair(W[keep] / norms[keep, None])[0]
