"""Deep matrix factorisation W = W_N ... W_1 for matrix sensing and completion (S8).

An observation is a measurement matrix A (d x d) passed flattened as the input x = vec(A);
f(x) = <A, W> = trace(A^T W).  Completion uses A = e_p e_q^T.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import jax
import jax.numpy as jnp
import pydantic

from implicitbias.models.base import Model


def _haar_orthogonal(key, n: int):
    """A Haar-distributed n x n orthogonal matrix (QR of a Gaussian matrix, signs of diag(R) fixed)."""
    Q, R = jnp.linalg.qr(jax.random.normal(key, (n, n)))
    return Q * jnp.where(jnp.diag(R) < 0, -1.0, 1.0)


class MatrixFactorization(Model):
    """Depth-N factorisation of a dim x dim matrix, each factor dim x dim, init scale alpha = `scale`.

    init_scheme:
    - identity: W_i = alpha (I + init_noise G_i), G_i with iid N(0, 1) entries; with init_noise = 0 this is
      alpha I (balanced, det W(0) = alpha^(N dim) > 0); with init_noise > 0 it is unbalanced (Razin & Cohen
      2020 observe the determinant crossing zero from 0.3 I plus small noise at depth 3);
    - gaussian: entries ~ N(0, alpha^2) (unbalanced);
    - balanced: W_j = alpha F_j S^(1/N) F_{j-1}^T from the SVD G = U S V^T of a Gaussian G (entries
      N(0, 1/dim)), F_0 = V, F_N = U and F_1..F_{N-1} Haar-random orthogonal, so that
      W_{j+1}^T W_{j+1} = W_j W_j^T (the balancedness of Arora et al. 2018/2019 and of Razin & Cohen 2020's
      analysis) and W(0) = alpha^N G. With positive_det, the first column of G is negated when det G < 0,
      so det W(0) > 0.

    inputs: dense (x = vec(A), f = <A, W>) or entries (x = (p, q), f = W[p, q]: matrix completion without the
    n x dim^2 one-hot inputs, for large matrices; `MatrixCompletion(encoding="entries")`).

    symmetric (depth 2 only): W = U U^T with one trained factor U = W1 (Gunasekar et al. 2017's PSD model), W1
    initialised like the first factor of the scheme (identity: U(0) = alpha I).
    """

    #: the noise of the initialisation may differ between the members of one compiled call
    traced_fields: ClassVar[tuple[str, ...]] = ("init_noise",)

    kind: Literal["matrix_factorization"] = "matrix_factorization"
    depth: int = pydantic.Field(2, ge=1)
    dim: int = pydantic.Field(2, ge=1)
    init_scheme: Literal["identity", "gaussian", "balanced"] = "identity"
    init_noise: float = pydantic.Field(0.0, ge=0.0)
    positive_det: bool = False
    symmetric: bool = False
    inputs: Literal["dense", "entries"] = "dense"

    @pydantic.model_validator(mode="after")
    def _symmetric_depth_2(self):
        if self.symmetric and self.depth != 2:
            raise ValueError(f"symmetric = true is not allowed with depth = {self.depth}: expected depth 2 "
                             "(the symmetric factorisation W = U U^T of Gunasekar et al. 2017)")
        return self

    @property
    def homogeneity(self) -> int:
        return self.depth

    def init(self, key, d, scale):
        n = self.dim
        if self.inputs == "dense" and d != n * n:
            raise ValueError(f"matrix factorisation of dim {n} expects inputs vec(A) of size {n * n}, got {d}")
        keys = jax.random.split(key, self.depth)
        if self.symmetric:
            theta, const = self._factors(key, keys, n, scale)
            return {"W1": theta["W1"]}, const
        return self._factors(key, keys, n, scale)

    def _factors(self, key, keys, n, scale):
        if self.init_scheme == "identity":
            eye = jnp.eye(n)
            return {f"W{i + 1}": scale * (eye + self.init_noise * jax.random.normal(k, (n, n)))
                    for i, k in enumerate(keys)}, {}
        if self.init_scheme == "balanced":
            return self._balanced(key, scale), {}
        return {f"W{i + 1}": scale * jax.random.normal(k, (n, n)) for i, k in enumerate(keys)}, {}

    def _balanced(self, key, scale) -> dict:
        n, depth = self.dim, self.depth
        k_g, *k_frames = jax.random.split(key, depth + 1)
        G = jax.random.normal(k_g, (n, n)) / jnp.sqrt(n)
        if self.positive_det:
            G = G.at[:, 0].multiply(jnp.where(jnp.linalg.det(G) < 0, -1.0, 1.0))
        U, s, Vt = jnp.linalg.svd(G)
        root = s ** (1.0 / depth)
        frames = [Vt.T] + [_haar_orthogonal(k, n) for k in k_frames[: depth - 1]] + [U]
        return {f"W{j}": scale * (frames[j] * root) @ frames[j - 1].T for j in range(1, depth + 1)}

    def product(self, theta):
        if self.symmetric:
            return theta["W1"] @ theta["W1"].T
        P = theta["W1"]
        for i in range(2, self.depth + 1):
            P = theta[f"W{i}"] @ P
        return P

    def apply(self, theta, const, x):
        if self.inputs == "entries":
            return self.product(theta)[x[0].astype(jnp.int32), x[1].astype(jnp.int32)]
        return jnp.sum(self.product(theta).reshape(-1) * x)

    def weight_matrices(self, theta, const):
        return {"W": self.product(theta)}

    def linear_predictor(self, theta, const):
        return self.product(theta).reshape(-1)
