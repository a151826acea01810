"""A single neuron with a strictly monotone activation (S9; Vardi & Shamir 2021, "Implicit regularization in
ReLU networks with the square loss", the strictly monotone case).

For f(x; w) = sigma(<w, x>) and the square loss, grad L(w) = sum_i (sigma(<w, x_i>) - y_i) sigma'(<w, x_i>) x_i
lies in the row space of X, so gradient flow keeps w(t) - w0 in it. If sigma is strictly monotone and the
labels are realisable, zero loss means X w = sigma^{-1}(y), and the only such point of w0 + rowspace(X) is

    w_inf = w0 + X^+ (sigma^{-1}(y) - X w0),

the zero-loss point closest to w0 in l2 (when GF reaches zero loss).

For the ReLU (not invertible) the reference is the minimum-norm zero-loss neuron, a quadratic program; the QP
solver's answer is polished on its active set and certified by a duality gap (`certified_relu_min_norm`).
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.reference._common import ReferenceSolverError, as_data
from implicitbias.reference.interpolators import min_l2_interpolator, single_neuron_min_norm


def leaky_relu_inverse(y, leak: float) -> np.ndarray:
    """sigma^{-1}(y) for the leaky ReLU sigma(z) = z for z > 0, leak * z otherwise: y for y >= 0, y / leak below."""
    _check_leak(leak)
    y = np.asarray(y, dtype=np.float64)
    return np.where(y >= 0, y, y / leak)


def _check_leak(leak):
    if not (isinstance(leak, numbers.Real) and not isinstance(leak, bool) and np.isfinite(leak) and leak > 0):
        raise ConfigError(
            f"leak = {leak!r} is not allowed: expected a finite slope > 0 (leak = 0 is the ReLU, which is not "
            "invertible; use reference.single_neuron_min_norm)"
        )


def neuron_preimage_projection(X, y, w0, leak: float) -> np.ndarray:
    """w0 + X^+ (sigma^{-1}(y) - X w0): the point of {w : sigma(Xw) = y} closest to w0, the limit of gradient
    flow from w0 for the leaky-ReLU neuron sigma(<w, x>) with realisable labels y (S9; module docstring).

    X: (n, d) points as rows (full row rank for the preimage to be reached exactly); y: (n,) labels;
    w0: (d,) initialisation; leak: the slope of sigma for z < 0 (the model's gamma), > 0.
    """
    _check_leak(leak)
    X, y = as_data(X, y)
    return min_l2_interpolator(X, leaky_relu_inverse(y, leak), w0)


@dataclasses.dataclass(frozen=True)
class ReluMinNorm:
    """w_min = argmin ||w|| s.t. <w, x_i> = y_i (y_i > 0), <w, x_i> <= 0 (y_i = 0), with its certificate.

    w: the solution, w = sum_i c_i x_i over the equality rows E (the points with y_i > 0 and the zero-label points
    whose constraint is active), with c_i <= 0 on the zero-label ones (-c_i their multipliers);
    gap: the duality gap ||w||^2 - sum_{y_i > 0} c_i y_i between the primal value ||w||^2 / 2 and the dual value at c;
    violation: the largest violation of a constraint (|<w, x_i> - y_i|, [<w, x_i>]_+), or of dual feasibility (c_i > 0
    on an active zero-label point);
    error: a bound on ||w - w_true||: sqrt(2 |gap|) (the objective is 1-strongly convex, so a dual-feasible point
    bounds the distance of any feasible one to the optimum by the gap) plus ||X_E^+||_2 x the constraint
    violation (the move that makes w exactly feasible on E).
    """

    w: np.ndarray
    gap: float
    violation: float
    error: float
    active: int

    def describe(self) -> str:
        return (f"certified ||w_min - w_true|| <= {self.error:.2g} (duality gap {self.gap:.2g}, largest violation "
                f"{self.violation:.2g}, {self.active} active constraints)")


def certified_relu_min_norm(X, y, start=None, *, max_rounds: int = 50) -> ReluMinNorm:
    """The minimum-norm zero-loss ReLU neuron w_min (`single_neuron_min_norm`'s QP) polished and certified
    (`ReluMinNorm`): from the active set of `start` (default: the Clarabel solution of `single_neuron_min_norm`),
    solve the equality-constrained least-norm problem on it exactly (w = X_E^+ b), then drop the zero-label rows with
    a wrong-signed multiplier and add the violated ones, until the KKT conditions hold (a primal active-set method;
    at most max_rounds rounds). Raises ValueError for negative labels or when no zero-loss neuron exists (from
    `single_neuron_min_norm`), ReferenceSolverError when the active set does not settle."""
    X, y = as_data(X, y)
    w = np.asarray(single_neuron_min_norm(X, y) if start is None else start, dtype=np.float64)
    pos = y > 0
    scale = max(float(np.max(np.abs(y))), 1e-300) * 1e-9
    active = pos | ((X @ w) > -scale)
    for _ in range(max_rounds):
        E = np.flatnonzero(active)
        b = np.where(pos[E], y[E], 0.0)
        XE = X[E]
        c, *_ = np.linalg.lstsq(XE @ XE.T, b, rcond=None)
        w = XE.T @ c
        wrong = E[(~pos[E]) & (c > 0)]  # a zero-label row pulling w towards <w, x_i> > 0: not active at the optimum
        violated = np.flatnonzero((~pos) & (~active) & ((X @ w) > 0))
        if wrong.size == 0 and violated.size == 0:
            z = X @ w
            violation = max(float(np.max(np.abs(z[pos] - y[pos]), initial=0.0)),
                            float(np.max(np.maximum(z[~pos], 0.0), initial=0.0)),
                            float(np.max(np.maximum(c[~pos[E]], 0.0), initial=0.0)))
            gap = float(w @ w - c[pos[E]] @ y[E][pos[E]])
            smin = float(np.linalg.svd(XE, compute_uv=False)[-1])
            error = float(np.sqrt(2.0 * abs(gap)) + violation / smin)
            return ReluMinNorm(w=w, gap=gap, violation=violation, error=error, active=int(E.size))
        if wrong.size:
            active[wrong[np.argmax(c[np.searchsorted(E, wrong)])]] = False
        else:
            active[violated[np.argmax((X @ w)[violated])]] = True
    raise ReferenceSolverError(f"certified_relu_min_norm: the active set did not settle in {max_rounds} rounds")
