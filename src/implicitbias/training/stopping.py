"""When a run stops, and the status it reports.

A run stops when the training loss falls below `loss_tol`, after `max_steps` optimiser steps
(discrete methods) or at time `max_time` (t = lr * k for discrete methods, physical time for
gradient flow).  A run whose loss becomes non-finite or grows by more than `divergence_factor`
over its initial value, or whose step is longer than `divergence_factor` x max(||theta||, 1), is
stopped at its last finite state and reported as diverged.
"""

from __future__ import annotations

import pydantic

from implicitbias._spec import Spec
from implicitbias.status import Status

__all__ = ["Status", "Stop", "failure_message"]


class Stop(Spec):
    """Stopping rule. `max_time` applies to every method; `max_steps` to discrete ones."""

    loss_tol: float = pydantic.Field(0.0, ge=0.0)
    max_steps: int = pydantic.Field(10_000, ge=1)
    max_time: float | None = pydantic.Field(None, gt=0.0)
    divergence_factor: float = pydantic.Field(1e4, gt=1.0)


def failure_message(status: Status, step: int, time: float, loss_before: float, lr: float | None) -> str:
    """A message that says what happened and what to try."""
    if status == Status.DIVERGED:
        hint = (
            f"the learning rate {lr:g} is probably above 2/beta for this loss; try a smaller method.lr "
            "(e.g. 10x smaller) or gradient flow (method.kind=gf)"
            if lr is not None
            else "try tighter tolerances (method.rtol, method.atol)"
        )
        return (
            f"diverged at step {step} (t = {time:g}): the loss became non-finite or exceeded "
            f"divergence_factor x its initial value, or the step exceeded divergence_factor x max(||theta||, 1) "
            f"(last finite loss {loss_before:.6g}); {hint}"
        )
    if status == Status.SOLVER_FAILED:
        return (
            f"the ODE solver failed at t = {time:g} after {step} steps; try increasing "
            "method.max_solver_steps, loosening method.rtol/method.atol, or another method.solver"
        )
    return ""
