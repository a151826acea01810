"""Gradient flow d theta/dt = -grad L(theta) (SCIENCE.md section 0), integrated with error control by
diffrax (`implicitbias.training.flow`)."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
import pydantic
import pydantic_core

from implicitbias.training import checkpoints as _checkpoints
from implicitbias.training.methods.base import Method


class GradientFlow(Method):
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

    is_adaptive: ClassVar[bool] = True

    @pydantic.field_validator("dtype")
    @classmethod
    def _float64_only(cls, dtype: str) -> str:
        if dtype != "float64":
            raise pydantic_core.PydanticCustomError(
                "float64_only",
                "float64 for gradient flow (float32 is for the discrete methods gd, sgd, normalized_gd, mirror)",
            )
        return dtype

    def checkpoint_grid(self, checkpoints, stop) -> np.ndarray:
        return _checkpoints.time_grid(checkpoints, stop.max_time, self.dt0)

    def stepper(self, problem, stop, n: int):
        from implicitbias.training.flow import make_flow

        return make_flow(problem, self, stop)

    def clock_readings(self, carry, hp) -> dict[str, np.ndarray]:
        return {"step": np.asarray(carry["step"]), "time": np.asarray(carry["t_phys"]),
                "grad_evals": np.asarray(carry["evals"])}
