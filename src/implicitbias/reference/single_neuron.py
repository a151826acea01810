"""A single neuron with a strictly monotone activation (S9; Vardi & Shamir 2021, "Implicit regularization in
ReLU networks with the square loss", the strictly monotone case).

For f(x; w) = sigma(<w, x>) and the square loss, grad L(w) = sum_i (sigma(<w, x_i>) - y_i) sigma'(<w, x_i>) x_i
lies in the row space of X, so gradient flow keeps w(t) - w0 in it. If sigma is strictly monotone and the
labels are realisable, zero loss means X w = sigma^{-1}(y), and the only such point of w0 + rowspace(X) is

    w_inf = w0 + X^+ (sigma^{-1}(y) - X w0),

the zero-loss point closest to w0 in l2 (when GF reaches zero loss).
"""

from __future__ import annotations

import numbers

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.reference._common import as_data
from implicitbias.reference.interpolators import min_l2_interpolator


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
