"""Deep matrix factorisation W = W_N ... W_1 for matrix sensing and completion (S8).

An observation is a measurement matrix A (d x d) passed flattened as the input x = vec(A);
f(x) = <A, W> = trace(A^T W).  Completion uses A = e_p e_q^T.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import pydantic

from implicitbias.models.base import Model


class MatrixFactorization(Model):
    """Depth-N factorisation of a dim x dim matrix. init_scheme: identity (W_i = scale I, so det W(0) > 0)
    or gaussian (entries ~ N(0, scale^2))."""

    kind: Literal["matrix_factorization"] = "matrix_factorization"
    depth: int = pydantic.Field(2, ge=1)
    dim: int = pydantic.Field(2, ge=1)
    init_scheme: Literal["identity", "gaussian"] = "identity"

    @property
    def homogeneity(self) -> int:
        return self.depth

    def init(self, key, d, scale):
        n = self.dim
        if d != n * n:
            raise ValueError(f"matrix factorisation of dim {n} expects inputs vec(A) of size {n * n}, got {d}")
        keys = jax.random.split(key, self.depth)
        if self.init_scheme == "identity":
            return {f"W{i + 1}": scale * jnp.eye(n) for i in range(self.depth)}, {}
        return {f"W{i + 1}": scale * jax.random.normal(k, (n, n)) for i, k in enumerate(keys)}, {}

    def product(self, theta):
        P = theta["W1"]
        for i in range(2, self.depth + 1):
            P = theta[f"W{i}"] @ P
        return P

    def apply(self, theta, const, x):
        return jnp.sum(self.product(theta).reshape(-1) * x)

    def weight_matrices(self, theta, const):
        return {"W": self.product(theta)}

    def linear_predictor(self, theta, const):
        return self.product(theta).reshape(-1)
