"""Training methods of SCIENCE.md section 0, interchangeable in `train`.

Discrete methods (GD, SGD, normalised GD) are optax transformations stepped in a compiled
`lax.while_loop`; gradient flow is integrated by diffrax with error control.  GD step k and GF
time t = eta k share one time axis.
"""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic

from implicitbias._spec import Spec


class GD(Spec):
    """Gradient descent theta_{k+1} = theta_k - lr grad L(theta_k)."""

    kind: Literal["gd"] = "gd"
    lr: pydantic.PositiveFloat = 0.01

    @property
    def is_flow(self) -> bool:
        return False


class SGD(Spec):
    """SGD on batches of `batch_size` drawn without replacement each epoch, from the run's seed."""

    kind: Literal["sgd"] = "sgd"
    lr: pydantic.PositiveFloat = 0.01
    batch_size: int = pydantic.Field(32, ge=1)

    @property
    def is_flow(self) -> bool:
        return False


class NormalizedGD(Spec):
    """Normalised GD theta_{k+1} = theta_k - lr grad L(theta_k) / L(theta_k) (fast margin maximisation)."""

    kind: Literal["normalized_gd"] = "normalized_gd"
    lr: pydantic.PositiveFloat = 0.01

    @property
    def is_flow(self) -> bool:
        return False


class GradientFlow(Spec):
    """Gradient flow d theta/dt = -grad L(theta), integrated by diffrax with error control.

    solver: rkc (second-order Runge-Kutta-Chebyshev, `implicitbias.training.rkc`: explicit, stable far
    along the negative real axis, suited to the stiff late phase of gradient flow, whose Jacobian
    -Hessian has real eigenvalues), tsit5 or dopri5.
    rtol: relative tolerance.  atol: absolute-tolerance floor; None means 1e-5 x rms(theta(0)) (1e-9
    from theta(0) = 0): small against the initial parameter scale, whose directions fix the end point.
    atol_rel: the absolute tolerance at a step is max(atol, atol_rel x rms(theta)), following the
    parameters as they grow by orders of magnitude from a small init (None: the floor alone).
    clock: "time" integrates in physical time t; "loss" integrates the same trajectory in the
    rescaled time s with ds = L dt (see `implicitbias.training.flow`), which reaches the very large t
    of margin maximisation cheaply; checkpoints and stop.max_time are then in s.
    """

    kind: Literal["gf"] = "gf"
    solver: Literal["rkc", "tsit5", "dopri5"] = "rkc"
    rtol: float = pydantic.Field(1e-6, gt=0.0, lt=1.0)
    atol: float | None = pydantic.Field(None, gt=0.0)
    atol_rel: float | None = pydantic.Field(1e-6, gt=0.0)
    dt0: pydantic.PositiveFloat = 0.01
    max_solver_steps: int = pydantic.Field(1_000_000, ge=1)
    clock: Literal["time", "loss"] = "time"

    @property
    def is_flow(self) -> bool:
        return True


AnyMethod = Annotated[GD | SGD | NormalizedGD | GradientFlow, pydantic.Field(discriminator="kind")]
