"""The two-layer network with quadratic activation, f(x) = sum_j a_j (w_j . x)^2 = x^T M x, M = W^T diag(a) W."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import pydantic

from implicitbias.models.base import Model


class QuadraticNet(Model):
    """f(x) = sum_j a_j (w_j . x)^2 with fixed outer weights a_j: the quadratic form x^T M x of M = W^T diag(a) W.

    width: hidden neurons m (the rows of W, trained).
    outer: "signed" (a_j = +1 for the first m/2 neurons, -1 for the rest, with W_-(0) = W_+(0) so that f = 0 at
        initialisation: M = W_+^T W_+ - W_-^T W_- is any symmetric matrix) or "positive" (a_j = +1: M = W^T W is
        PSD, the quadratic-activation network of Li, Ma & Zhang 2018).
    The rows of W_+ (and W_-) start at `scale` B, B a random k x d matrix with orthonormal columns (orthonormal rows
    when k < d), k the neurons of one sign (Li, Ma & Zhang's U_0 = alpha B): with k >= d, W^T W = 2 alpha^2 I, so the
    tangent kernel of the signed network is 8 alpha^2 (x . x')^2, isotropic in M.
    """

    kind: Literal["quadratic_net"] = "quadratic_net"
    width: int = pydantic.Field(20, ge=1)
    outer: Literal["signed", "positive"] = "signed"

    @pydantic.model_validator(mode="after")
    def _even_width(self):
        if self.outer == "signed" and self.width % 2:
            raise ValueError(f"width = {self.width} is not allowed with outer = 'signed': expected an even width "
                             "(m/2 neurons of each sign)")
        return self

    @property
    def homogeneity(self) -> int:
        """f(x; c W) = c^2 f(x; W)."""
        return 2

    def signs(self):
        """The fixed outer weights a_j."""
        if self.outer == "positive":
            return jnp.ones(self.width)
        return jnp.where(jnp.arange(self.width) < self.width // 2, 1.0, -1.0)

    def init(self, key, d: int, scale):
        """W = scale [B; B] (signed) or scale B (positive), B with orthonormal columns (rows when k < d)."""
        k = self.width // 2 if self.outer == "signed" else self.width
        G = jax.random.normal(key, (max(k, d), min(k, d)))
        Q = jnp.linalg.qr(G)[0]
        B = Q if k >= d else Q.T
        W = jnp.concatenate([B, B]) if self.outer == "signed" else B
        return {"W": scale * W}, {"a": self.signs()}

    def apply(self, theta, const, x):
        """sum_j a_j (w_j . x)^2."""
        return jnp.dot(const["a"], (theta["W"] @ x) ** 2)

    def predict(self, theta, const, X):
        """f on every row of X at once: a^T (W X^T)^2."""
        return const["a"] @ (theta["W"] @ X.T) ** 2

    def matrix(self, theta, const):
        """M = W^T diag(a) W, with f(x) = x^T M x."""
        return theta["W"].T @ (const["a"][:, None] * theta["W"])

    def weight_matrices(self, theta, const):
        """M, whose spectral quantities (nuclear norm, effective rank, ...) are recorded as M.*."""
        return {"M": self.matrix(theta, const)}
