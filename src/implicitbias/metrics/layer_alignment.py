"""Alignment of adjacent layers of a deep linear network (S5; Ji & Telgarsky 2019, "Gradient descent aligns
the layers of deep linear networks", Theorem 1).

For f(x) = W_L ... W_1 x with W_i of shape (d_i, d_{i-1}), gradient descent on the logistic loss with separable
data drives every W_i (i < L) to rank 1 and aligns adjacent layers: |<v_1(W_{i+1}), u_1(W_i)>| -> 1, where
u_1 and v_1 are the top left and right singular vectors. Pure JAX, usable under `jit`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from implicitbias._spec import ConfigError


def layer_alignment(Ws) -> jnp.ndarray:
    """|<v_1(W_{i+1}), u_1(W_i)>| for i = 1..L-1, shape (L-1,), each in [0, 1] (1 = aligned).

    Ws: the layers W_1, ..., W_L in the order they act on x, W_i of shape (d_i, d_{i-1}). The absolute value
    removes the sign ambiguity of singular vectors. A pair involving a zero matrix gets 0 (its singular
    vectors are not defined). When sigma_1 = sigma_2 the top singular vector is not unique and the value is
    that of whichever vector the SVD returns; along a converging run sigma_1 / sigma_2 -> infinity.
    """
    Ws = [jnp.asarray(W) for W in Ws]
    if len(Ws) < 2:
        raise ConfigError(f"Ws with {len(Ws)} layer(s) is not allowed: expected at least 2 layers W_1, ..., W_L")
    for i, (lower, upper) in enumerate(zip(Ws[:-1], Ws[1:]), start=1):
        if lower.ndim != 2 or upper.ndim != 2 or upper.shape[1] != lower.shape[0]:
            raise ConfigError(
                f"Ws[{i - 1}], Ws[{i}] of shapes {lower.shape}, {upper.shape} are not allowed: expected W_{i + 1} of "
                f"shape (d_{i + 1}, d_{i}) after W_{i} of shape (d_{i}, d_{i - 1}), i.e. W_{i + 1}.shape[1] == W_{i}.shape[0]"
            )
    tops = [jnp.linalg.svd(W, full_matrices=False) for W in Ws]
    out = []
    for (u_low, s_low, _), (_, s_up, vt_up) in zip(tops[:-1], tops[1:]):
        value = jnp.abs(jnp.dot(vt_up[0], u_low[:, 0]))
        out.append(jnp.where((s_low[0] > 0) & (s_up[0] > 0), value, 0.0))
    return jnp.stack(out)


def layer_alignment_host(Ws) -> np.ndarray:
    """`layer_alignment` with NumPy on the host, for stacks of layers: each W_i of shape (..., d_i, d_{i-1}) with
    the same leading axes; returns shape (..., L-1)."""
    tops = [np.linalg.svd(np.asarray(W, dtype=float), full_matrices=False) for W in Ws]
    out = []
    for (u_low, s_low, _), (_, s_up, vt_up) in zip(tops[:-1], tops[1:]):
        value = np.abs(np.sum(vt_up[..., 0, :] * u_low[..., :, 0], axis=-1))
        out.append(np.where((s_low[..., 0] > 0) & (s_up[..., 0] > 0), value, 0.0))
    return np.stack(out, axis=-1)
