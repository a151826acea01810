"""Shared helpers of the reference solvers: errors, input checks, one cvxpy solve call and the certificate of
the l1 linear programs."""

from __future__ import annotations

import dataclasses

import numpy as np

#: the relative duality gap and residuals an l1 linear program's answer must meet (HiGHS' vertex solutions
#: meet them to rounding: ~1e-15 on the references' instances)
LP_TOL = 1e-8


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


@dataclasses.dataclass(frozen=True)
class LPCertificate:
    """The optimality certificate of an l1 linear program min ||w||_1 over {Z w >= 1} or {X w = y}, from the
    primal w and the solver's dual multipliers: the dual problem is max b^T nu s.t. ||A^T nu||_inf <= 1 (nu >= 0
    for inequalities), and weak duality makes b^T nu a lower bound on the optimum for any dual-feasible nu.

    duality_gap: (||w||_1 - b^T nu) / max(||w||_1, 1), relative.  primal_residual: the largest violation of the
    constraints, relative to max(1, ||b||_inf).  dual_residual: max(||A^T nu||_inf - 1, 0) (and the largest
    negative nu of an inequality).  tol: what every one of them was checked against."""

    duality_gap: float
    primal_residual: float
    dual_residual: float
    tol: float = LP_TOL

    @property
    def holds(self) -> bool:
        """Whether every residual is within tol."""
        return max(abs(self.duality_gap), self.primal_residual, self.dual_residual) <= self.tol


def l1_lp_certificate(A, b, w, nu, *, equality: bool, what: str, tol: float = LP_TOL) -> LPCertificate:
    """Certify w (primal) and nu (dual) of min ||w||_1 s.t. A w = b (`equality`) or A w >= b; raise
    ReferenceSolverError naming the residuals when the certificate fails."""
    primal = float(np.abs(w).sum())
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    violation = A @ w - b
    primal_res = float(np.max(np.abs(violation) if equality else -violation, initial=0.0)) / scale
    dual_res = max(float(np.max(np.abs(A.T @ nu), initial=0.0)) - 1.0, 0.0)
    if not equality:
        dual_res = max(dual_res, float(-np.min(nu, initial=0.0)))
    cert = LPCertificate(duality_gap=(primal - float(b @ nu)) / max(primal, 1.0),
                         primal_residual=max(primal_res, 0.0), dual_residual=dual_res, tol=tol)
    if not cert.holds:
        raise ReferenceSolverError(f"{what}: the LP certificate fails at tol = {tol:g}: duality gap "
                                   f"{cert.duality_gap:.3g}, primal residual {cert.primal_residual:.3g}, dual "
                                   f"residual {cert.dual_residual:.3g}")
    return cert
