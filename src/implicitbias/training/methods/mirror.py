"""Mirror descent (SCIENCE.md S7): grad psi(theta_{k+1}) = grad psi(theta_k) - lr grad L(theta_k).

For a strictly convex potential psi whose mirror map grad psi is invertible, mirror descent on the square
loss from w0 keeps grad psi(w_k) - grad psi(w0) in the row space of X, so a limit that interpolates is the
Bregman projection argmin D_psi(w, w0) s.t. Xw = y (Gunasekar, Lee, Soudry & Srebro 2018, "Characterizing
implicit bias in terms of optimization geometry", ICML, Sec. 2; computed by
`implicitbias.reference.bregman_projection`).  Potentials (separable, applied to every parameter entry):

- `Lp(p)`: psi(w) = (1/p) sum_i |w_i|^p, p in (1, 2]; mirror map sign(w)|w|^(p-1), inverse sign(z)|z|^(1/(p-1));
  p = 2 is gradient descent;
- `HyperbolicEntropy(beta)`: psi(w) = sum_i (w_i arcsinh(w_i / beta) - sqrt(w_i^2 + beta^2)), beta > 0
  (Ghai, Hazan & Singer 2020); mirror map arcsinh(w / beta), inverse beta sinh(z).

The iteration is an optax transformation (`mirror_descent`) whose state is the dual variable
z_k = grad psi(w_k): each step updates z in the dual space and maps back, w_{k+1} = grad psi*(z_{k+1}),
so the dual never picks up the rounding of a round trip through grad psi.  The time of step k is t = lr k
(mirror flow d grad psi(w)/dt = -grad L(w) as lr -> 0).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pydantic
import pydantic_core

from implicitbias._spec import Spec
from implicitbias.training.methods.base import DiscreteMethod


class Lp(Spec):
    """psi(w) = (1/p) sum_i |w_i|^p with p in (1, 2] (SCIENCE.md S7)."""

    kind: Literal["lp"] = "lp"
    p: float

    @pydantic.field_validator("p")
    @classmethod
    def _invertible(cls, p: float) -> float:
        if not (math.isfinite(p) and 1.0 < p <= 2.0):
            raise pydantic_core.PydanticCustomError(
                "mirror_map",
                "p in (1, 2]: for p <= 1 the mirror map sign(w)|w|^(p-1) is not invertible (psi is not strictly "
                "convex), and for p > 2 its inverse has unbounded slope at 0",
            )
        return p

    def mirror_map(self, w):
        return jnp.sign(w) * jnp.abs(w) ** (self.p - 1.0)

    def inverse_mirror_map(self, z):
        return jnp.sign(z) * jnp.abs(z) ** (1.0 / (self.p - 1.0))

    def inverse_curvature(self, w) -> np.ndarray:
        """1 / psi''(w) = |w|^(2-p) / (p - 1), elementwise (host): the local step-size scale of mirror descent."""
        return np.abs(np.asarray(w, dtype=float)) ** (2.0 - self.p) / (self.p - 1.0)

    def reference(self):
        """The same potential for the reference solvers (`implicitbias.reference.LpPotential`)."""
        from implicitbias.reference import LpPotential  # deferred on purpose: the reference solvers load scipy.optimize

        return LpPotential(self.p)

    def label(self) -> str:
        return f"l_p, p = {self.p:g}"


class HyperbolicEntropy(Spec):
    """psi_beta(w) = sum_i (w_i arcsinh(w_i / beta) - sqrt(w_i^2 + beta^2)), beta > 0 (SCIENCE.md S7).

    Numerics: for |w| > 1e8 beta the mirror map is sign(w) (log 2|w| - log beta) (the error of the
    asymptotic form is below 1e-16 there), and beta sinh(z) is exp(|z| + log beta) / 2 (1 - e^(-2|z|)) for
    |z| > 20, so that a small beta does not overflow where w itself is moderate."""

    kind: Literal["hyperbolic"] = "hyperbolic"
    beta: float

    @pydantic.field_validator("beta")
    @classmethod
    def _positive_scale(cls, beta: float) -> float:
        if not (math.isfinite(beta) and beta > 0.0):
            raise pydantic_core.PydanticCustomError(
                "mirror_map",
                "a finite scale beta > 0: the mirror map arcsinh(w / beta) is undefined at beta = 0 and cannot "
                "be inverted (it is decreasing) for beta < 0",
            )
        return beta

    def mirror_map(self, w):
        far = jnp.abs(w) > 1e8 * self.beta
        asymptotic = jnp.sign(w) * (jnp.log(2.0 * jnp.where(far, jnp.abs(w), 1.0)) - math.log(self.beta))
        return jnp.where(far, asymptotic, jnp.arcsinh(jnp.where(far, 0.0, w) / self.beta))

    def inverse_mirror_map(self, z):
        a = jnp.abs(z)
        small = a <= 20.0
        near = self.beta * jnp.sinh(jnp.where(small, z, 0.0))
        big = jnp.where(small, 0.0, a)
        far = jnp.sign(z) * jnp.exp(big + math.log(self.beta) - math.log(2.0)) * (1.0 - jnp.exp(-2.0 * big))
        return jnp.where(small, near, far)

    def inverse_curvature(self, w) -> np.ndarray:
        """1 / psi''(w) = sqrt(w^2 + beta^2), elementwise (host)."""
        return np.hypot(np.asarray(w, dtype=float), self.beta)

    def reference(self):
        """The same potential for the reference solvers (`implicitbias.reference.HyperbolicPotential`)."""
        from implicitbias.reference import HyperbolicPotential  # deferred on purpose: loads scipy.optimize

        return HyperbolicPotential(self.beta)

    def label(self) -> str:
        return f"hyperbolic entropy, beta = {self.beta:g}"


#: the potential of mirror descent: `Lp` or `HyperbolicEntropy`, chosen by its `kind`
AnyPotential = Annotated[Lp | HyperbolicEntropy, pydantic.Field(discriminator="kind")]


class MirrorDescentState(NamedTuple):
    """The dual variable z = grad psi(theta) of every parameter."""

    dual: optax.Params


def mirror_descent(lr, potential) -> optax.GradientTransformation:
    """Mirror descent as an optax transformation: z <- z - lr g, update = grad psi*(z) - theta."""

    def init(params):
        return MirrorDescentState(jax.tree_util.tree_map(potential.mirror_map, params))

    def update(grads, state, params):
        dual = jax.tree_util.tree_map(lambda z, g: z - lr * g, state.dual, grads)
        target = jax.tree_util.tree_map(potential.inverse_mirror_map, dual)
        return jax.tree_util.tree_map(jnp.subtract, target, params), MirrorDescentState(dual)

    return optax.GradientTransformation(init, update)


class MirrorDescent(DiscreteMethod):
    """Mirror descent grad psi(theta_{k+1}) = grad psi(theta_k) - lr grad L(theta_k) with a separable
    potential psi (`Lp` or `HyperbolicEntropy`); t = lr k."""

    kind: Literal["mirror_descent"] = "mirror_descent"
    potential: AnyPotential

    def optimizer(self, hp):
        return mirror_descent(hp["lr"], self.potential)
