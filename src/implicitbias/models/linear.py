"""Linear-in-the-input models: the linear predictor (S4, S7), deep linear networks (S5),
diagonal linear networks (S6) and the single neuron (S9)."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import pydantic

from implicitbias.models.activations import POSITIVELY_HOMOGENEOUS, activation
from implicitbias.models.base import Model


class Linear(Model):
    """f(x) = <w, x>; init w ~ N(0, scale^2 I) (scale = 0 starts at the origin)."""

    kind: Literal["linear"] = "linear"

    @property
    def homogeneity(self) -> int:
        return 1

    def init(self, key, d, scale):
        return {"w": scale * jax.random.normal(key, (d,))}, {}

    def apply(self, theta, const, x):
        return jnp.dot(theta["w"], x)

    def linear_predictor(self, theta, const):
        return theta["w"]


class DeepLinear(Model):
    """f(x) = W_k ... W_1 x with W_1 (h x d), W_i (h x h), W_k (1 x h); entries ~ N(0, scale^2)."""

    kind: Literal["deep_linear"] = "deep_linear"
    depth: int = pydantic.Field(2, ge=1)
    hidden: int = pydantic.Field(10, ge=1)

    @property
    def homogeneity(self) -> int:
        return self.depth

    def shapes(self, d):
        dims = [d] + [self.hidden] * (self.depth - 1) + [1]
        return [(dims[i + 1], dims[i]) for i in range(self.depth)]

    def init(self, key, d, scale):
        keys = jax.random.split(key, self.depth)
        return {f"W{i + 1}": scale * jax.random.normal(k, s) for i, (k, s) in enumerate(
            zip(keys, self.shapes(d)))}, {}

    def end_to_end(self, theta):
        P = theta["W1"]
        for i in range(2, self.depth + 1):
            P = theta[f"W{i}"] @ P
        return P[0]

    def apply(self, theta, const, x):
        return jnp.dot(self.end_to_end(theta), x)

    def weight_matrices(self, theta, const):
        return {k: theta[k] for k in sorted(theta)}

    def linear_predictor(self, theta, const):
        return self.end_to_end(theta)


class DiagonalLinear(Model):
    """Diagonal linear network of depth k (S6).

    form = product:    w = u_1 * ... * u_k            (Gunasekar et al. 2018), init u_i = scale * 1;
    form = difference: w = u^k - v^k (u*u - v*v for k = 2, Woodworth et al. 2020), init u = v = scale * 1.
    """

    kind: Literal["diagonal_linear"] = "diagonal_linear"
    depth: int = pydantic.Field(2, ge=1)
    form: Literal["product", "difference"] = "difference"

    @property
    def homogeneity(self) -> int:
        return self.depth

    def init(self, key, d, scale):
        ones = jnp.ones((d,))
        if self.form == "product":
            return {f"u{i + 1}": scale * ones for i in range(self.depth)}, {}
        return {"u": scale * ones, "v": scale * ones}, {}

    def effective(self, theta):
        if self.form == "product":
            w = theta["u1"]
            for i in range(2, self.depth + 1):
                w = w * theta[f"u{i}"]
            return w
        return theta["u"] ** self.depth - theta["v"] ** self.depth

    def apply(self, theta, const, x):
        return jnp.dot(self.effective(theta), x)

    def linear_predictor(self, theta, const):
        return self.effective(theta)


class SingleNeuron(Model):
    """f(x) = sigma(<w, x>) (S9); init w ~ N(0, scale^2 I)."""

    kind: Literal["single_neuron"] = "single_neuron"
    activation: Literal["relu", "leaky_relu", "smooth_leaky_relu", "identity"] = "relu"
    gamma: float = pydantic.Field(0.5, gt=0.0, le=1.0)

    @property
    def homogeneity(self) -> int | None:
        return 1 if self.activation in POSITIVELY_HOMOGENEOUS else None

    def init(self, key, d, scale):
        return {"w": scale * jax.random.normal(key, (d,))}, {}

    def apply(self, theta, const, x):
        return activation(self.activation, jnp.dot(theta["w"], x), self.gamma)

    def linear_predictor(self, theta, const):
        return theta["w"]
