"""Interpolating reference solutions for regression (S6, S7, S8, S9).

- `min_l2_interpolator`: w0 + X^+ (y - X w0), the limit of GD from w0 on the square loss (S7).
- `min_l1_interpolator`: argmin ||w||_1 s.t. Xw = y, the alpha -> 0 limit of a diagonal network (S6).
- `woodworth_q_interpolator`: argmin Q_alpha(w) s.t. Xw = y (Woodworth et al. 2020, S6).
- `min_nuclear_norm_sensing` / `min_nuclear_norm_completion`: argmin ||W||_* s.t. <A_i, W> = y_i
  (Gunasekar et al. 2017, S8).
- `single_neuron_min_norm`: the minimum-norm zero-loss ReLU neuron (Vardi & Shamir 2021, S9).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.optimize

from implicitbias.reference._common import ReferenceSolverError, as_data, solve_cvxpy


def min_l2_interpolator(X, y, w0=None) -> np.ndarray:
    """w0 + X^+ (y - X w0): the interpolator of Xw = y closest to w0 in l2, the limit of gradient descent
    (and flow) from w0 on the square loss when X has full row rank (S7). Computed by a minimum-norm
    least-squares solve; when Xw = y has no solution it returns the least-squares point closest to w0."""
    X, y = as_data(X, y)
    w0 = np.zeros(X.shape[1]) if w0 is None else np.asarray(w0, dtype=np.float64).reshape(-1)
    if w0.shape[0] != X.shape[1]:
        raise ValueError(f"w0 has {w0.shape[0]} entries but X has {X.shape[1]} columns")
    delta, *_ = np.linalg.lstsq(X, y - X @ w0, rcond=None)
    return w0 + delta


def min_l1_interpolator(X, y) -> np.ndarray:
    """argmin ||w||_1 s.t. Xw = y (basis pursuit; the alpha -> 0 limit of S6), as the linear program
    min 1^T (w_+ + w_-) s.t. X (w_+ - w_-) = y, w_+- >= 0, solved by HiGHS. Raises ValueError when Xw = y
    has no solution."""
    X, y = as_data(X, y)
    d = X.shape[1]
    res = scipy.optimize.linprog(
        np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=[(0, None)] * (2 * d), method="highs"
    )
    if res.status == 2:
        raise ValueError("min_l1_interpolator: Xw = y has no solution (no interpolator exists)")
    if res.status != 0:
        raise ReferenceSolverError(
            f"min-l1 interpolation LP: HiGHS returned status {res.status} ({res.message})"
        )
    return res.x[:d] - res.x[d:]


# -- Woodworth et al. 2020: the kernel/rich interpolation ---------------------------------------------


def woodworth_q(w, alpha: float) -> float:
    """Q_alpha(w) = alpha^2 sum_i q(w_i / alpha^2), q(z) = 2 - sqrt(4 + z^2) + z arcsinh(z/2)
    (Woodworth et al. 2020, Theorem 1; S6). q(z) is written as z arcsinh(z/2) - z^2/(2 + sqrt(4 + z^2))
    to avoid cancellation for small z."""
    z = np.asarray(w, dtype=np.float64) / alpha**2
    q = z * np.arcsinh(z / 2) - z**2 / (2.0 + np.sqrt(4.0 + z**2))
    return float(alpha**2 * q.sum())


@dataclasses.dataclass(frozen=True)
class QInterpolatorResult:
    """w: argmin Q_alpha(w) s.t. Xw = y; nu: the dual variable, with w = 2 alpha^2 sinh(X^T nu);
    residual: ||Xw - y|| / max(1, ||y||); n_iter: Newton iterations."""

    w: np.ndarray
    nu: np.ndarray
    residual: float
    n_iter: int


def woodworth_q_interpolator(
    X, y, alpha: float, *, tol: float = 1e-10, max_iter: int = 500
) -> QInterpolatorResult:
    """argmin Q_alpha(w) s.t. Xw = y: the limit of gradient flow on the diagonal network
    w = u o u - v o v from u = v = alpha 1 with the square loss (Woodworth et al. 2020, Theorem 1; S6).

    Solved through the dual. Q_alpha is strictly convex with gradient arcsinh(w / (2 alpha^2)), so the
    optimality condition grad Q_alpha(w) = X^T nu gives w(nu) = 2 alpha^2 sinh(X^T nu), and nu minimises
    the smooth strictly convex dual

        g(nu) = 2 alpha^2 sum_i cosh((X^T nu)_i) - <nu, y>,   grad g = X w(nu) - y,
        hess g = X diag(2 alpha^2 cosh(X^T nu)) X^T,

    by Newton's method with a backtracking line search from nu = 0 (X needs full row rank). The result
    is accepted when ||X w(nu) - y|| <= tol max(1, ||y||) (primal feasibility; stationarity holds by
    construction). alpha -> 0 gives the min-l1 interpolator, alpha -> infinity the min-l2 one.
    """
    X, y = as_data(X, y)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    c = 2.0 * alpha**2
    scale = max(1.0, float(np.linalg.norm(y)))

    def dual(nu):
        with np.errstate(over="ignore"):
            s = X.T @ nu
            return c * np.sum(np.cosh(s)) - nu @ y, s

    nu = np.zeros(X.shape[0])
    g, s = dual(nu)
    for it in range(1, max_iter + 1):
        w = c * np.sinh(s)
        grad = X @ w - y
        if np.linalg.norm(grad) <= tol * scale:
            return QInterpolatorResult(
                w=w, nu=nu, residual=float(np.linalg.norm(grad)) / scale, n_iter=it - 1
            )
        hess = (X * (c * np.cosh(s))) @ X.T
        step = -np.linalg.lstsq(hess, grad, rcond=None)[0]
        slope = float(grad @ step)
        t = 1.0
        while True:
            g_new, s_new = dual(nu + t * step)
            if np.isfinite(g_new) and g_new <= g + 0.25 * t * slope:
                break
            t *= 0.5
            if t < 1e-20:
                break
        if t < 1e-20:  # no decrease possible: converged as far as rounding allows
            break
        nu, g, s = nu + t * step, g_new, s_new
    w = c * np.sinh(s)
    residual = float(np.linalg.norm(X @ w - y)) / scale
    if residual > np.sqrt(tol):
        raise ReferenceSolverError(
            f"woodworth_q_interpolator: Newton's method on the dual stopped with ||Xw - y|| / max(1, ||y||) "
            f"= {residual:.3g} (alpha = {alpha:g}); does X have full row rank?"
        )
    return QInterpolatorResult(w=w, nu=nu, residual=residual, n_iter=it)


# -- Nuclear norm (S8) --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NuclearNormResult:
    """W: argmin ||W||_* s.t. <A_i, W> = y_i; nuclear_norm: ||W||_*; residual: max_i |<A_i, W> - y_i|."""

    W: np.ndarray
    nuclear_norm: float
    residual: float


def min_nuclear_norm_sensing(A, y, shape: tuple[int, int] | None = None) -> NuclearNormResult:
    """argmin ||W||_* s.t. <A_i, W> = tr(A_i^T W) = y_i (Gunasekar et al. 2017's conjectured limit of
    matrix factorisation from alpha -> 0, S8), solved by cvxpy (normNuc) with Clarabel.

    A: (n, d1, d2) measurement matrices, or (n, d1 * d2) with each row a row-major flattened A_i and
    `shape` = (d1, d2).
    """
    import cvxpy as cp

    A = np.asarray(A, dtype=np.float64)
    if A.ndim == 2:
        if shape is None:
            raise ValueError("flattened measurements (n, d1*d2) need shape=(d1, d2)")
        A = A.reshape(A.shape[0], *shape)
    if A.ndim != 3:
        raise ValueError(f"A must have shape (n, d1, d2) or (n, d1*d2), got {A.shape}")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != A.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but there are {A.shape[0]} measurements")
    W = cp.Variable(A.shape[1:])
    constraints = [A.reshape(A.shape[0], -1) @ cp.vec(W, order="C") == y]
    status = solve_cvxpy(cp.Problem(cp.Minimize(cp.normNuc(W)), constraints), "nuclear-norm minimisation")
    if W.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ReferenceSolverError(f"nuclear-norm minimisation: Clarabel returned status {status!r}")
    Wv = np.asarray(W.value)
    residual = float(np.max(np.abs(np.einsum("nij,ij->n", A, Wv) - y), initial=0.0))
    return NuclearNormResult(
        W=Wv, nuclear_norm=float(np.linalg.svd(Wv, compute_uv=False).sum()), residual=residual
    )


def min_nuclear_norm_completion(entries, y, shape: tuple[int, int]) -> NuclearNormResult:
    """Matrix completion: argmin ||W||_* s.t. W[p_i, q_i] = y_i (A_i = e_{p_i} e_{q_i}^T, S8).

    entries: (n, 2) integer array of observed positions (p_i, q_i); y: (n,) observed values;
    shape: (d1, d2) of W.
    """
    import cvxpy as cp

    entries = np.asarray(entries, dtype=int).reshape(-1, 2)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != entries.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but there are {entries.shape[0]} observed positions")
    # the constraints index W directly (no n x d1 d2 measurement matrix: completion of large matrices stays cheap)
    W = cp.Variable(tuple(shape))
    status = solve_cvxpy(cp.Problem(cp.Minimize(cp.normNuc(W)), [W[entries[:, 0], entries[:, 1]] == y]),
                         "nuclear-norm completion")
    if W.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ReferenceSolverError(f"nuclear-norm completion: Clarabel returned status {status!r}")
    Wv = np.asarray(W.value)
    residual = float(np.max(np.abs(Wv[entries[:, 0], entries[:, 1]] - y), initial=0.0))
    return NuclearNormResult(W=Wv, nuclear_norm=float(np.linalg.svd(Wv, compute_uv=False).sum()), residual=residual)


# -- A single ReLU neuron (S9) ------------------------------------------------------------------------


def single_neuron_min_norm(X, y) -> np.ndarray:
    """w_min = argmin ||w|| s.t. <w, x_i> = y_i where y_i > 0 and <w, x_i> <= 0 where y_i = 0: the
    minimum-norm zero-loss solution of a ReLU neuron sigma(<w, x>) (Vardi & Shamir 2021, S9; from small
    init GF ends with ||w(inf)|| <= 2 ||w_min||). A quadratic program, solved by cvxpy with Clarabel.
    Labels must be >= 0 (outputs of a ReLU)."""
    import cvxpy as cp

    X, y = as_data(X, y)
    if np.any(y < 0):
        raise ValueError("single_neuron_min_norm: ReLU labels must be >= 0")
    pos = y > 0
    w = cp.Variable(X.shape[1])
    constraints = []
    if pos.any():
        constraints.append(X[pos] @ w == y[pos])
    if (~pos).any():
        constraints.append(X[~pos] @ w <= 0)
    status = solve_cvxpy(cp.Problem(cp.Minimize(cp.sum_squares(w)), constraints), "single-neuron min norm")
    if w.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            raise ValueError("single_neuron_min_norm: no ReLU neuron fits these labels with zero loss")
        raise ReferenceSolverError(f"single-neuron min norm QP: Clarabel returned status {status!r}")
    return np.asarray(w.value)


def min_nuclear_norm_psd_sensing(A, y, shape: tuple[int, int] | None = None) -> NuclearNormResult:
    """argmin ||W||_* = trace(W) over PSD W with <A_i, W> = y_i: the limit Gunasekar et al. 2017 (Theorem 1) prove
    for gradient flow on W = U U^T from U(0) = alpha I, alpha -> 0, with commuting measurements (S8). A semidefinite
    program solved by cvxpy with Clarabel; A as in `min_nuclear_norm_sensing` (d1 = d2). Raises ValueError when no
    PSD matrix interpolates."""
    import cvxpy as cp

    A = np.asarray(A, dtype=np.float64)
    if A.ndim == 2:
        if shape is None:
            raise ValueError("flattened measurements (n, d*d) need shape=(d, d)")
        A = A.reshape(A.shape[0], *shape)
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (n, d, d) or (n, d*d), got {A.shape}")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != A.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but there are {A.shape[0]} measurements")
    W = cp.Variable(A.shape[1:], PSD=True)
    constraints = [A.reshape(A.shape[0], -1) @ cp.vec(W, order="C") == y]
    status = solve_cvxpy(cp.Problem(cp.Minimize(cp.trace(W)), constraints), "PSD nuclear-norm minimisation")
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise ValueError("min_nuclear_norm_psd_sensing: no PSD matrix satisfies the measurements")
    if W.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ReferenceSolverError(f"PSD nuclear-norm minimisation: Clarabel returned status {status!r}")
    Wv = np.asarray(W.value)
    residual = float(np.max(np.abs(np.einsum("nij,ij->n", A, Wv) - y), initial=0.0))
    return NuclearNormResult(W=Wv, nuclear_norm=float(np.linalg.svd(Wv, compute_uv=False).sum()), residual=residual)
