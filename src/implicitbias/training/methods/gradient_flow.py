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
    -Hessian has real eigenvalues), tsit5, dopri5 (explicit, for non-stiff flows), or kvaerno5 (Kvaerno's
    5/4 ESDIRK, implicit and L-stable: diffrax `Kvaerno5` with an optimistix Newton root finder, a fresh
    Jacobian every iteration, at the tolerances of the step controller). Use kvaerno5 for small stiff problems:
    a handful of parameters whose flow gets stiff, as a matrix factorisation does when the loss falls (the
    Hessian's largest eigenvalue grows while the trajectory slows down), where an explicit solver, RKC included,
    is held to steps near its stability limit and an implicit one steps at the pace of the trajectory (Razin &
    Cohen's 2 x 2 counterexample to loss 1e-8: ~2000 steps, seconds). Each Newton iteration costs a dense
    Jacobian of the gradient (the Hessian: p Hessian-vector products for p parameters) and its LU, O(p^3), so it
    is not for networks with thousands of parameters: it is refused above `KVAERNO5_MAX_PARAMETERS` = 1024
    parameters, before compiling, and meant for up to ~100. Unlike the explicit solvers, whose stages commute
    with the symmetries of the problem exactly, its LU breaks such invariants at the rounding level (e.g.
    W_2 = W_1^T of a balanced depth-2 factorisation from alpha I), which matters where the flow is unstable off
    the invariant set.
    rtol: relative tolerance.  atol: absolute-tolerance floor; None means 1e-5 x rms(theta(0)) (1e-9
    from theta(0) = 0): small against the initial parameter scale, whose directions fix the end point.
    atol_rel: the absolute tolerance at a step is max(atol, atol_rel x rms(theta)), following the
    parameters as they grow by orders of magnitude from a small init (None: the floor alone).
    tail_rtol: the relative tolerance of the tail, once the loss at a checkpoint is below `tail_below` x L(0)
    (None: rtol throughout).  The switch is made per member at the checkpoints, so a chunk runs at one tolerance.
    Where the late flow is slow but keeps crossing ReLU kinks (neurons sliding along a kink, whose steps have a
    first-order error), that phase can take most of a run's evaluations (S11 at d = 256: each tenfold looser
    rtol halved them) while the early phase, which fixes the neurons' directions, keeps the tight rtol.  A neuron
    that ends sitting on a kink can end active or not depending on the tail's tolerance.
    kinks: "cross" integrates the field as it is, its jumps at the ReLU kinks included (every solver); "slide"
    (`implicitbias.training.sliding`) holds the pairs (neuron j, point k) whose pre-activation sits on its kink
    <w_j, x_k> = 0 on it while the field pushes them there from both sides (the Filippov flow), and lets RKC step on
    the smooth field in between: a two-layer ReLU network without biases, rkc, clock "time".  Its step sizes come
    from a PI controller (`implicitbias.training.sliding.PID_COEFFICIENTS`): its error estimates are dominated by
    the kinks crossed within a step and do not vary smoothly ("cross" keeps diffrax's integral controller).
    kink_slots: at most that many sliding pairs per neuron, and no more than min(n, d) (a pair that finds no free
    slot crosses its kink as with "cross");
    kink_candidates: at most that many crossing pairs tested after each accepted step.
    clock: "time" integrates in physical time t; "loss" integrates the same trajectory in the
    rescaled time s with ds = L dt (see `implicitbias.training.flow`), which reaches the very large t
    of margin maximisation cheaply; checkpoints and stop.max_time are then in s.

    Recorded grad_evals: exact for rkc (counted by its controller) and for tsit5/dopri5 up to a rejected first
    attempt (6 per step attempt + 1). For kvaerno5 diffrax does not report how many Newton iterations its stages
    take, so grad_evals is a lower bound, 1 + 6 (p + 1) per step attempt: at least one Newton iteration in each
    of the 6 implicit stages, each a gradient evaluation and p Jacobian-vector products (counted as one gradient
    evaluation each); `step` counts the step attempts exactly.
    """

    kind: Literal["gf"] = "gf"
    solver: Literal["rkc", "tsit5", "dopri5", "kvaerno5"] = "rkc"
    rtol: float = pydantic.Field(1e-6, gt=0.0, lt=1.0)
    atol: float | None = pydantic.Field(None, gt=0.0)
    atol_rel: float | None = pydantic.Field(1e-6, gt=0.0)
    dt0: pydantic.PositiveFloat = 0.01
    max_solver_steps: int = pydantic.Field(1_000_000, ge=1)
    clock: Literal["time", "loss"] = "time"
    tail_rtol: float | None = pydantic.Field(None, gt=0.0, lt=1.0)
    tail_below: float = pydantic.Field(1e-4, gt=0.0, lt=1.0)
    kinks: Literal["cross", "slide"] = "cross"
    kink_slots: int = pydantic.Field(24, ge=1, le=1024)
    kink_candidates: int = pydantic.Field(512, ge=1)

    is_adaptive: ClassVar[bool] = True
    #: kvaerno5 refuses problems with more parameters than this (dense p x p Jacobian and LU every step)
    KVAERNO5_MAX_PARAMETERS: ClassVar[int] = 1024

    @pydantic.field_validator("dtype")
    @classmethod
    def _float64_only(cls, dtype: str) -> str:
        if dtype != "float64":
            raise pydantic_core.PydanticCustomError(
                "float64_only",
                "float64 for gradient flow (float32 is for the discrete methods gd, sgd, normalized_gd, mirror)",
            )
        return dtype

    @property
    def max_rtol(self) -> float:
        """The loosest relative tolerance the run integrates at (rtol, or tail_rtol once in the tail)."""
        return self.rtol if self.tail_rtol is None else max(self.rtol, self.tail_rtol)

    def checkpoint_grid(self, checkpoints, stop) -> np.ndarray:
        return _checkpoints.time_grid(checkpoints, stop.max_time, self.dt0)

    def check_model(self, model, loss) -> None:
        """kinks = "slide" applies to two-layer ReLU networks only: ConfigError, naming the field, otherwise."""
        if self.kinks == "slide":
            from implicitbias.training.sliding import check_sliding_model

            check_sliding_model(model, loss, self)

    def stepper(self, problem, stop, n: int):
        if self.kinks == "slide":
            from implicitbias.training.sliding import make_sliding_flow

            return make_sliding_flow(problem, self, stop)
        from implicitbias.training.flow import make_flow  # deferred on purpose: diffrax (~1 s) only for a flow

        return make_flow(problem, self, stop)

    def clock_readings(self, carry, hp) -> dict[str, np.ndarray]:
        return {"step": np.asarray(carry["step"]), "time": np.asarray(carry["t_phys"]),
                "grad_evals": np.asarray(carry["evals"])}
