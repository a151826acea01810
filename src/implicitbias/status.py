"""How a run ended: one small enum shared by training, storage and reports (no imports of its own)."""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """How a run ended, stored per run as `status` (and `status_name`) in its results: running, converged (the
    loss below `Stop.loss_tol`), budget reached, diverged, or the ODE solver failed."""

    RUNNING = 0
    CONVERGED = 1  # loss < loss_tol
    BUDGET = 2  # max_steps or max_time reached
    DIVERGED = 3  # loss non-finite or above divergence_factor * initial loss
    SOLVER_FAILED = 4  # the ODE solver gave up (step-size underflow, max solver steps)

    @property
    def failed(self) -> bool:
        """A diverged run or one whose solver gave up: left out of figures, fits and checks."""
        return self in (Status.DIVERGED, Status.SOLVER_FAILED)
