"""Margins, accuracy and alignment (SCIENCE.md, section 0, "Quantities measured along training").

Pure JAX, usable under `jit` and `vmap`.  `cosine` and `unit_distance` accept arrays of any shape or pytrees
(flattened into one vector), so they compare a parameter vector theta with a reference solution as readily
as two predictors.  The unit vector of 0 is taken to be 0 (so the cosine with a zero vector is 0).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.flatten_util import ravel_pytree


def margins(pred, y) -> jnp.ndarray:
    """q_i = y_i f(x_i; theta), from predictions pred_i = f(x_i; theta) and labels y_i in {-1, +1}."""
    return jnp.asarray(y) * jnp.asarray(pred)


def normalized_margin(q, theta_norm, degree) -> jnp.ndarray:
    """gamma_bar(theta) = min_i q_i / ||theta||_2^{L_h} for an L_h-homogeneous model (L_h = `degree`).

    Lyu & Li 2020, eq. (3) (SCIENCE.md S10): invariant under theta -> c theta, c > 0, and non-decreasing
    along gradient flow once the loss is below l(0)/n.  theta_norm = 0 gives +-inf or nan (undefined).
    """
    return jnp.min(q) / jnp.asarray(theta_norm) ** degree


def margin_spread(q) -> jnp.ndarray:
    """max_i q_i / min_i q_i (>= 1; 1 when every point sits on the margin).

    Defined only when every point is correctly classified; returns +inf when min_i q_i <= 0.
    """
    q = jnp.asarray(q)
    qmin, qmax = jnp.min(q), jnp.max(q)
    ok = qmin > 0
    return jnp.where(ok, qmax / jnp.where(ok, qmin, 1.0), jnp.inf)


def accuracy(pred, y) -> jnp.ndarray:
    """Fraction of points with sign(pred_i) = y_i; a prediction of exactly 0 counts as wrong."""
    return jnp.mean(jnp.asarray(y) * jnp.asarray(pred) > 0)


def _flat(u) -> jnp.ndarray:
    return ravel_pytree(u)[0]


def _unit(u) -> jnp.ndarray:
    """u / ||u||, with the unit vector of 0 taken to be 0."""
    n = jnp.sqrt(jnp.sum(u * u))
    return u / jnp.where(n > 0, n, 1.0)


def cosine(u, v) -> jnp.ndarray:
    """cos angle(u, v) = <u, v> / (||u|| ||v||), clipped to [-1, 1]; 0 if u or v is 0.

    Near +-1 the cosine cannot resolve small angles; use `angle_between` or `unit_distance` for those.
    """
    return jnp.clip(jnp.dot(_unit(_flat(u)), _unit(_flat(v))), -1.0, 1.0)


def unit_distance(u, v) -> jnp.ndarray:
    """|| u/||u|| - v/||v|| ||_2 in [0, 2] (= 2 sin(angle/2), accurate at small angles)."""
    return jnp.linalg.norm(_unit(_flat(u)) - _unit(_flat(v)))
