"""Norm-based measures of sparsity and of low rank (S6, S8).

- `l1_l2_sparsity`: ||w||_1^2 / ||w||_2^2, a soft count of the nonzero entries of w (S6: the diagonal network
  from small alpha recovers a sparse w*);
- `schatten_norm`: (sum_k sigma_k^p)^(1/p), the nuclear norm at p = 1, Frobenius at p = 2, spectral at
  p = inf, a quasi-norm promoting low rank for p < 1 (S8; the deep factorisations of Arora et al. 2019).
Pure JAX, usable under `jit` and `vmap` (p is a Python number).
"""

from __future__ import annotations

import math
import numbers

import jax.numpy as jnp

from implicitbias._spec import ConfigError
from implicitbias.metrics.spectral import singular_values


def l1_l2_sparsity(w) -> jnp.ndarray:
    """||w||_1^2 / ||w||_2^2 over all entries of w, in [1, #nonzeros(w)]: equal to k for k entries of equal
    magnitude and 0 elsewhere (Hoyer-type soft count). Defined as 0 for w = 0."""
    w = jnp.ravel(jnp.asarray(w))
    l1 = jnp.sum(jnp.abs(w))
    l2sq = jnp.sum(w * w)
    ok = l2sq > 0
    return jnp.where(ok, l1 * l1 / jnp.where(ok, l2sq, 1.0), 0.0)


def schatten_norm(M, p: float) -> jnp.ndarray:
    """||M||_{S_p} = (sum_k sigma_k(M)^p)^(1/p) for p > 0 (a quasi-norm for p < 1; p = math.inf gives sigma_1).

    Computed as sigma_1 (sum_k (sigma_k / sigma_1)^p)^(1/p) so that small p does not underflow; 0 for M = 0.
    """
    if not (isinstance(p, numbers.Real) and not isinstance(p, bool) and p > 0):
        raise ConfigError(f"p = {p!r} is not allowed: expected a Schatten exponent p > 0 (or math.inf)")
    s = singular_values(M)
    if math.isinf(p):
        return s[0]
    ok = s[0] > 0
    ratio = s / jnp.where(ok, s[0], 1.0)
    return jnp.where(ok, s[0] * jnp.sum(ratio**p) ** (1.0 / p), 0.0)
