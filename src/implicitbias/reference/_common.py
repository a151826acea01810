"""Shared helpers of the reference solvers: errors, input checks and one cvxpy solve call."""

from __future__ import annotations

import numpy as np


class NotSeparableError(ValueError):
    """The data cannot be separated by a linear classifier through the origin."""


class ReferenceSolverError(RuntimeError):
    """A reference solver did not reach a solution that passes its optimality certificate."""


def as_data(X, y=None):
    """Return (X, y) as float64 NumPy arrays, checking X is (n, d) and y is (n,)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(
            f"X must be a 2-D array of shape (n, d) with the data points as rows, got shape {X.shape}"
        )
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite entries")
    if y is None:
        return X, None
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinite entries")
    return X, y


def solve_cvxpy(problem, what: str, **kwargs):
    """Solve a cvxpy problem with Clarabel and return its status; raise if no solution came back."""
    import cvxpy as cp

    try:
        problem.solve(solver=cp.CLARABEL, **kwargs)
    except cp.error.SolverError as exc:  # pragma: no cover - solver crash
        raise ReferenceSolverError(f"{what}: Clarabel failed ({exc}).") from exc
    return problem.status
