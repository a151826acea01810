"""The two-layer network of S1-S3, S11 and S12, as one configurable model.

    f(x) = sum_j a_j phi(<w_j, x> + b_j)

Frei et al. 2023 (S1, S2): outer layer fixed at +-1/sqrt(m), Gaussian init of W.
Kou et al. 2023 (S3): 2m neurons with outer weights +-1/m split in halves (`outer_scale="inv_half_width"`).
Chistikov et al. 2023 (S11) and Boursier et al. 2022 (S12): both layers trained, balanced init
w_j = lambda z_j, z_j ~ N(0, I_d/(d m)), a_j = s_j ||w_j||.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import jax
import jax.numpy as jnp
import pydantic

from implicitbias.models.activations import POSITIVELY_HOMOGENEOUS, activation
from implicitbias.models.base import Model


class TwoLayer(Model):
    """One-hidden-layer network. Fields:

    width: number of hidden neurons m (>= 1).
    activation: relu | leaky_relu | smooth_leaky_relu | identity; gamma: leaky slope in (0, 1].
    train_outer: whether the outer weights a are trained (S11, S12) or fixed (S1-S3).
    outer_scale: |a_j| of a fixed outer layer: inv_sqrt_width (1/sqrt(m)), inv_width (1/m),
        inv_half_width (2/m, Kou's 1/m per half) or a positive number.
    outer_signs: random (each sign uniform) or balanced (first ceil(m/2) positive, rest negative).
    bias: hidden biases b_j (initialised at 0).
    init_scheme: gaussian (W_jk ~ N(0, scale^2)), glorot_uniform (U(-r, r), r = scale sqrt(6/(d+m));
        scale = 1 is Keras' default, scale = 1/50 Frei's "50x smaller"), balanced (S11, scale = lambda).
    """

    #: the leaky slope may differ between the members of one compiled call
    traced_fields: ClassVar[tuple[str, ...]] = ("gamma",)

    kind: Literal["two_layer"] = "two_layer"
    width: int = pydantic.Field(20, ge=1)
    activation: Literal["relu", "leaky_relu", "smooth_leaky_relu", "identity"] = "leaky_relu"
    gamma: float = pydantic.Field(0.5, gt=0.0, le=1.0)
    train_outer: bool = False
    outer_scale: Literal["inv_sqrt_width", "inv_width", "inv_half_width"] | pydantic.PositiveFloat = (
        "inv_sqrt_width"
    )
    outer_signs: Literal["random", "balanced"] = "balanced"
    bias: bool = False
    init_scheme: Literal["gaussian", "glorot_uniform", "balanced"] = "gaussian"

    @pydantic.model_validator(mode="after")
    def _balanced_needs_trained_outer(self):
        if self.init_scheme == "balanced" and not self.train_outer:
            raise ValueError("init_scheme = 'balanced' sets a_j = s_j ||w_j|| and needs train_outer = true")
        return self

    # -- structure -------------------------------------------------------------------------------
    def outer_magnitude(self):
        m = self.width
        return {"inv_sqrt_width": m**-0.5, "inv_width": 1.0 / m, "inv_half_width": 2.0 / m}.get(
            self.outer_scale, self.outer_scale
        )

    def signs(self, key):
        m = self.width
        if self.outer_signs == "balanced":
            return jnp.where(jnp.arange(m) < (m + 1) // 2, 1.0, -1.0)
        return jnp.where(jax.random.bernoulli(key, 0.5, (m,)), 1.0, -1.0)

    @property
    def homogeneity(self) -> int | None:
        if self.bias or self.activation not in POSITIVELY_HOMOGENEOUS:
            return None
        return 2 if self.train_outer else 1

    # -- parameters ------------------------------------------------------------------------------
    def init(self, key, d: int, scale):
        m = self.width
        k_w, k_s, k_a = jax.random.split(key, 3)
        if self.init_scheme == "gaussian":
            W = scale * jax.random.normal(k_w, (m, d))
        elif self.init_scheme == "glorot_uniform":
            r = scale * jnp.sqrt(6.0 / (d + m))
            W = jax.random.uniform(k_w, (m, d), minval=-r, maxval=r)
        else:  # balanced, Chistikov et al. 2023
            W = scale * jax.random.normal(k_w, (m, d)) / jnp.sqrt(d * m)
        s = self.signs(k_s)
        theta = {"W": W}
        const = {}
        if self.train_outer:
            if self.init_scheme == "balanced":
                theta["a"] = s * jnp.linalg.norm(W, axis=1)
            elif self.init_scheme == "glorot_uniform":
                r = scale * jnp.sqrt(6.0 / (m + 1))
                theta["a"] = jax.random.uniform(k_a, (m,), minval=-r, maxval=r)
            else:
                theta["a"] = scale * jax.random.normal(k_a, (m,))
        else:
            const["a"] = s * self.outer_magnitude()
        if self.bias:
            theta["b"] = jnp.zeros((m,))
        return theta, const

    def outer(self, theta, const):
        return theta["a"] if self.train_outer else const["a"]

    def preactivations(self, theta, const, x):
        z = theta["W"] @ x
        return z + theta["b"] if self.bias else z

    def apply(self, theta, const, x):
        h = activation(self.activation, self.preactivations(theta, const, x), self.gamma)
        return jnp.dot(self.outer(theta, const), h)

    def predict(self, theta, const, X):
        """f on every row of X (n, d) at once: Z^T = W X^T (m, n), the activation, and the product with the
        outer layer, a^T phi(Z^T).  The same values as `apply` row by row, up to rounding.

        The layout keeps the compiled training step free of transposes and of large temporaries: the forward
        product takes W as stored, the backward product dL/dW = (dL/dZ^T) X is a plain (m, n) x (n, d)
        product, and in a vmapped batch of runs the W's stack into one (runs * m, d) matrix.
        """
        if jnp.ndim(X) != 2:
            return super().predict(theta, const, X)
        ZT = theta["W"] @ X.T
        if self.bias:
            ZT = ZT + theta["b"][:, None]
        return self.outer(theta, const) @ activation(self.activation, ZT, self.gamma)

    def weight_matrices(self, theta, const):
        return {"W": theta["W"]}

    def linear_predictor(self, theta, const):
        """z = W^T a, the linear predictor of Frei et al.'s Theorem 3.2 (4)."""
        return theta["W"].T @ self.outer(theta, const)
