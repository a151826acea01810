"""Linear-in-the-input models: the linear predictor (S4, S7), deep linear networks (S5),
diagonal linear networks (S6) and the single neuron (S9)."""

from __future__ import annotations

from typing import ClassVar, Literal

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


class MulticlassLinear(Model):
    """Scores f(x) = W x in R^k of k classes, W (k x d) (S4, multiclass cross-entropy; Soudry et al. 2018, Sec. 4.3);
    init W ~ N(0, scale^2). The prediction is argmax_c (W x)_c."""

    kind: Literal["multiclass_linear"] = "multiclass_linear"
    classes: int = pydantic.Field(3, ge=2)

    @property
    def homogeneity(self) -> int:
        return 1

    def init(self, key, d, scale):
        return {"W": scale * jax.random.normal(key, (self.classes, d))}, {}

    def apply(self, theta, const, x):
        return theta["W"] @ x

    def weight_matrices(self, theta, const):
        return {"W": theta["W"]}

    def linear_predictor(self, theta, const):
        return theta["W"]


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

    trained (form = difference only): "weights" trains u and v; "displacement" trains du = u - alpha 1 and
    dv = v - alpha 1 from 0, with alpha = scale a fixed constant (`const["alpha"]`). The gradient flow is the same
    (d u/d du = 1), but the ODE solver's error control is relative to the displacement rather than to u ~ alpha,
    and w = (du - dv) sum_j u^j v^(k-1-j) has no cancellation: at alpha = 100, k = 3, u^3 ~ 1e6 while w ~ 1, so
    "weights" loses ~10 digits of w to rounding and its solver tolerances are loose in w. Not homogeneous in
    (du, dv): `homogeneity` is None.
    """

    kind: Literal["diagonal_linear"] = "diagonal_linear"
    depth: int = pydantic.Field(2, ge=1)
    form: Literal["product", "difference"] = "difference"
    trained: Literal["weights", "displacement"] = "weights"

    @pydantic.model_validator(mode="after")
    def _displacement_needs_difference(self):
        if self.trained == "displacement" and self.form != "difference":
            raise ValueError(f"trained = 'displacement' is not allowed with form = {self.form!r}: expected form = "
                             "'difference' (u = v = alpha 1 at init)")
        return self

    @property
    def homogeneity(self) -> int | None:
        return self.depth if self.trained == "weights" else None

    def init(self, key, d, scale):
        ones = jnp.ones((d,))
        if self.form == "product":
            return {f"u{i + 1}": scale * ones for i in range(self.depth)}, {}
        if self.trained == "displacement":
            return {"du": 0.0 * ones, "dv": 0.0 * ones}, {"alpha": jnp.asarray(scale, dtype=ones.dtype)}
        return {"u": scale * ones, "v": scale * ones}, {}

    def effective(self, theta, const=None):
        """The end-to-end w; for trained = "displacement", alpha is read from `const` (or from `theta`, where
        stored parameters and constants are merged)."""
        if self.form == "product":
            w = theta["u1"]
            for i in range(2, self.depth + 1):
                w = w * theta[f"u{i}"]
            return w
        if self.trained == "displacement":
            alpha = (const if const is not None else theta)["alpha"]
            u, v = alpha + theta["du"], alpha + theta["dv"]
            return (theta["du"] - theta["dv"]) * sum(u**j * v ** (self.depth - 1 - j) for j in range(self.depth))
        return theta["u"] ** self.depth - theta["v"] ** self.depth

    def apply(self, theta, const, x):
        return jnp.dot(self.effective(theta, const), x)

    def linear_predictor(self, theta, const):
        return self.effective(theta, const)


class SingleNeuron(Model):
    """f(x) = sigma(<w, x>) (S9); init w ~ N(0, scale^2 I)."""

    #: the leaky slope may differ between the members of one compiled call
    traced_fields: ClassVar[tuple[str, ...]] = ("gamma",)

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
