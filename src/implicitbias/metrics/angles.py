"""Angles between vectors and between hidden neurons, computed stably (SCIENCE.md S11).

Chistikov et al. 2023 report median angles between active neurons down to 1e-6 degrees (~2e-8 rad).
arccos of a float64 dot product cannot resolve angles below ~1e-8 rad (cos t = 1 - t^2/2 rounds to 1), so
every angle here is 2 atan2(||u_hat - v_hat||, ||u_hat + v_hat||) of the unit vectors u_hat, v_hat, which is
accurate to about 1e-16 rad (absolute) at every angle in [0, pi].

Pure JAX, usable under `jit` and `vmap`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from implicitbias.metrics.margins import _flat, _unit

#: elements of the (rows x m x d) difference block that `neuron_angles` holds in memory at once
_BLOCK_ELEMENTS = 1 << 22


def angle_between(u, v) -> jnp.ndarray:
    """The angle in [0, pi] between u and v (arrays or pytrees, flattened), as
    2 atan2(||u_hat - v_hat||, ||u_hat + v_hat||).  With the zero-vector convention of `margins` (unit of 0
    is 0) the angle with a zero vector is pi/2, and between two zero vectors 0."""
    u, v = _unit(_flat(u)), _unit(_flat(v))
    return 2.0 * jnp.arctan2(jnp.linalg.norm(u - v), jnp.linalg.norm(u + v))


def pairwise_angles(W) -> jnp.ndarray:
    """The (m, m) matrix of angles between the rows of W, each computed as in `angle_between`.

    The differences are formed explicitly (not through the Gram matrix, which would lose the small angles),
    a block of rows at a time with `lax.map`, so memory stays at about 2^22 numbers for any m and d.
    """
    W = jnp.asarray(W)
    m, d = W.shape
    norms = jnp.sqrt(jnp.sum(W * W, axis=1, keepdims=True))
    U = W / jnp.where(norms > 0, norms, 1.0)

    def row(u):
        dist = jnp.sqrt(jnp.sum((U - u) ** 2, axis=1))
        summ = jnp.sqrt(jnp.sum((U + u) ** 2, axis=1))
        return 2.0 * jnp.arctan2(dist, summ)

    batch = int(min(m, max(1, _BLOCK_ELEMENTS // max(1, m * d))))
    return jax.lax.map(row, U, batch_size=batch)


def neuron_angles(W, active_mask) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(max, mean) angle over unordered pairs j != k of active rows of W (Chistikov et al. 2023, Fig. 1).

    `active_mask` is a boolean (m,) array, e.g. from `active_neurons`.  With fewer than two active rows both
    are 0.
    """
    A = pairwise_angles(W)
    active = jnp.asarray(active_mask, dtype=bool)
    m = active.shape[0]
    pairs = active[:, None] & active[None, :] & ~jnp.eye(m, dtype=bool)
    n_pairs = jnp.sum(pairs)
    masked = jnp.where(pairs, A, 0.0)
    mean = jnp.sum(masked) / jnp.maximum(n_pairs, 1)
    return jnp.max(masked), mean


def active_neurons(W, X, b=None) -> jnp.ndarray:
    """Boolean (m,) mask of the neurons j with <w_j, x_i> (+ b_j) > 0 for at least one training input x_i.

    The "active" neurons of Chistikov et al. 2023 (S11): a training point lies in the open positive half-space
    of w_j.  A ReLU neuron that is not active receives zero gradient and stops moving.
    """
    Z = jnp.asarray(X) @ jnp.asarray(W).T
    if b is not None:
        Z = Z + b
    return jnp.any(Z > 0, axis=0)


def balancedness(a, W) -> jnp.ndarray:
    """a_j^2 - ||w_j||^2 per neuron, shape (m,): conserved along gradient flow for a two-layer network with
    positively homogeneous activation and no bias (Du et al. 2018); 0 at the balanced init of S11."""
    a = jnp.asarray(a)
    W = jnp.asarray(W)
    return a * a - jnp.sum(W * W, axis=1)
