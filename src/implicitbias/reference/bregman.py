"""The Bregman projection onto the interpolators, argmin D_psi(w, w0) s.t. Xw = y: the limit of mirror
descent (and mirror flow) from w0 on the square loss (S7; Gunasekar et al. 2018, "Characterizing implicit
bias in terms of optimization geometry", Sec. 2), and of diagonal networks from alpha 1 (S6, with w0 = 0).

Mirror descent keeps grad psi(w_k) - grad psi(w0) in the row space of X, so its limit w satisfies

    grad psi(w) = grad psi(w0) + X^T nu,   X w = y,                                         (KKT)

the optimality conditions of the (strictly convex) projection. Writing theta0 = grad psi(w0) and
w(nu) = grad psi*(theta0 + X^T nu), nu minimises the smooth convex dual

    g(nu) = psi*(theta0 + X^T nu) - <nu, y>,   grad g = X w(nu) - y,
    hess g = X diag(hess psi*(theta0 + X^T nu)) X^T,

solved here by a regularised (Levenberg-Marquardt) Newton method: steps (hess g + mu I)^{-1} grad g with
mu adapted to the ratio of actual and predicted decrease, so that singular curvature (l_p with p < 2 at
theta = 0) and steep duals (the hyperbolic entropy at tiny beta) are handled, with quadratic convergence
once mu -> 0. X must have full row rank (rank-deficient X with consistent y also works: the dual is then
flat along null(X^T)).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from implicitbias.reference._common import ReferenceSolverError, as_data
from implicitbias.reference.potentials import MirrorPotential


@dataclasses.dataclass(frozen=True)
class BregmanProjection:
    """w: argmin D_psi(w, w0) s.t. Xw = y; nu: the dual variable, grad psi(w) = grad psi(w0) + X^T nu;
    kkt: the relative residuals of (KKT) (see `bregman_kkt`); n_iter: Newton iterations;
    rounding_error: first-order estimate of the relative error of w caused by rounding theta = theta0 + X^T nu,
    ||hess psi*(theta) o delta theta|| / ||w|| with delta theta = eps (|theta0| + |X|^T |nu|)."""

    w: np.ndarray
    nu: np.ndarray
    kkt: dict[str, float]
    n_iter: int
    rounding_error: float


def bregman_kkt(X, y, w, w0, potential: MirrorPotential) -> dict[str, float]:
    """Relative residuals of (KKT) at w:

    feasibility: ||Xw - y|| / max(||y||, ||X||_2 ||w||) (rounding level at a solution);
    stationarity: ||(I - P) (grad psi(w) - grad psi(w0))|| / max(||grad psi(w)||, ||grad psi(w0)||), with P
    the orthogonal projection onto the row space of X: zero iff grad psi(w) - grad psi(w0) = X^T nu.
    """
    X, y = as_data(X, y)
    w, w0 = _as_point(w, X), _as_point(w0, X)
    tiny = np.finfo(float).tiny
    scale = max(float(np.linalg.norm(y)), float(np.linalg.norm(X, 2) * np.linalg.norm(w)), tiny)
    t, t0 = potential.mirror_map(w), potential.mirror_map(w0)
    diff = t - t0
    coef, *_ = np.linalg.lstsq(X.T, diff, rcond=None)
    denom = max(float(np.linalg.norm(t)), float(np.linalg.norm(t0)), tiny)
    return {
        "feasibility": float(np.linalg.norm(X @ w - y)) / scale,
        "stationarity": float(np.linalg.norm(diff - X.T @ coef)) / denom,
    }


def _as_point(w, X) -> np.ndarray:
    w = np.zeros(X.shape[1]) if w is None else np.asarray(w, dtype=np.float64).reshape(-1)
    if w.shape[0] != X.shape[1]:
        raise ValueError(f"a point w with {w.shape[0]} entries does not fit X with {X.shape[1]} columns")
    return w


def bregman_projection(
    X, y, w0, potential: MirrorPotential, *, tol: float = 1e-13, max_iter: int = 1000, max_rounding_error: float = 1e-7
) -> BregmanProjection:
    """argmin D_psi(w, w0) s.t. Xw = y for a separable Legendre potential psi (S7): the limit of mirror
    descent grad psi(w_{k+1}) = grad psi(w_k) - eta grad L(w_k) from w0 on the square loss.

    X: (n, d) with full row rank, n < d; y: (n,); w0: (d,) or None for 0; potential: e.g.
    LpPotential(p) (p = 2 gives w0 + X^+ (y - X w0)) or HyperbolicPotential(beta).
    Solved by regularised Newton on the dual (module docstring); stops when the feasibility residual of
    `bregman_kkt` is <= tol (stationarity holds by construction). Raises ReferenceSolverError if the iteration
    stalls above max(1e3 tol, 1e-10) (e.g. when Xw = y has no solution), or if the rounding of theta alone
    makes w less accurate than max_rounding_error (relative; w = grad psi*(theta) amplifies an error
    delta theta by hess psi*(theta), which is steep for DeepDiagonalPotential where |theta_i| -> 1).
    """
    X, y = as_data(X, y)
    w0 = _as_point(w0, X)
    theta0 = potential.mirror_map(w0)
    if not np.all(np.isfinite(theta0)):
        raise ValueError("w0 is outside the domain of the potential (grad psi(w0) is not finite)")
    norm_X = float(np.linalg.norm(X, 2))
    nu = np.zeros(X.shape[0])

    def dual(nu):
        theta = theta0 + X.T @ nu
        val = potential.conjugate(theta) - float(nu @ y)
        return (val if np.isfinite(val) else np.inf), theta

    g, theta = dual(nu)
    mu, n_iter = None, 0
    while n_iter < max_iter:
        w = potential.inverse_mirror_map(theta)
        grad = X @ w - y
        scale = max(float(np.linalg.norm(y)), norm_X * float(np.linalg.norm(w)), np.finfo(float).tiny)
        if np.linalg.norm(grad) <= tol * scale:
            break
        H = (X * potential.conjugate_curvature(theta)) @ X.T
        if mu is None:  # start between a Newton and a gradient step
            mu = 1e-3 * max(float(np.trace(H)) / X.shape[0], float(np.linalg.norm(grad)), 1e-300)
        step = _accepted_step(dual, g, nu, grad, H, mu, lambda th: np.linalg.norm(X @ potential.inverse_mirror_map(th) - y))
        if step is None:  # no step decreases the dual: converged as far as rounding allows
            break
        nu, g, theta, mu = step
        n_iter += 1
    w = potential.inverse_mirror_map(theta)
    kkt = bregman_kkt(X, y, w, w0, potential)
    if not kkt["feasibility"] <= max(1e3 * tol, 1e-10):
        raise ReferenceSolverError(
            f"bregman_projection: regularised Newton on the dual stalled after {n_iter} iterations with "
            f"||Xw - y|| / max(||y||, ||X|| ||w||) = {kkt['feasibility']:.3g} ({potential!r}); does X have full "
            "row rank, and does Xw = y have a solution? (For DeepDiagonalPotential alpha may be too small for "
            "float64: see its docstring.)"
        )
    d_theta = np.finfo(float).eps * (np.abs(theta0) + np.abs(X).T @ np.abs(nu))
    rounding = float(np.linalg.norm(potential.conjugate_curvature(theta) * d_theta)) / max(
        float(np.linalg.norm(w)), np.finfo(float).tiny
    )
    if not rounding <= max_rounding_error:
        raise ReferenceSolverError(
            f"bregman_projection: the solution is only accurate to about {rounding:.2g} (relative), above "
            f"max_rounding_error = {max_rounding_error:g}: rounding of the dual variable theta where hess psi* is "
            f"steep ({potential!r}). For DeepDiagonalPotential, alpha is too small for this depth in float64."
        )
    return BregmanProjection(w=w, nu=nu, kkt=kkt, n_iter=n_iter, rounding_error=rounding)


def _accepted_step(dual, g, nu, grad, H, mu, residual):
    """One Levenberg-Marquardt step from nu: raise mu tenfold until the step (H + mu I)^{-1} (-grad) gives at
    least a quarter of its predicted decrease (or, within rounding of the dual value, shrinks the residual).
    Returns (nu_new, g_new, theta_new, mu / 10), or None when no mu < 1e300 works."""
    eye = np.eye(H.shape[0])
    rounding = 1e-14 * (abs(g) + 1.0)
    mu = max(mu, 1e-15 * float(np.trace(H)) / H.shape[0])  # below this, H + mu I is singular in floating point
    while mu < 1e300:
        try:
            step = np.linalg.solve(H + mu * eye, -grad)
        except np.linalg.LinAlgError:
            mu *= 10.0
            continue
        predicted = -float(grad @ step + 0.5 * step @ H @ step)
        g_new, theta_new = dual(nu + step)
        actual = g - g_new
        if np.isfinite(g_new) and (
            actual >= 0.25 * predicted or (actual > -rounding and residual(theta_new) < np.linalg.norm(grad))
        ):
            return nu + step, g_new, theta_new, max(mu / 10.0, 1e-300)
        mu *= 10.0
    return None
