"""Interpolating reference solutions for regression (S6, S7, S8, S9).

- `min_l2_interpolator`: w0 + X^+ (y - X w0), the limit of GD from w0 on the square loss (S7).
- `min_l1_interpolator`: argmin ||w||_1 s.t. Xw = y, the alpha -> 0 limit of a diagonal network (S6).
- `woodworth_q_interpolator`: argmin Q_alpha(w) s.t. Xw = y (Woodworth et al. 2020, S6).
- `min_nuclear_norm_sensing` / `min_nuclear_norm_completion` / `min_nuclear_norm_psd_sensing`: argmin ||W||_*
  s.t. <A_i, W> = y_i (Gunasekar et al. 2017, S8), by ADMM with a certified duality gap (`nuclear_norm`).
- `single_neuron_min_norm`: the minimum-norm zero-loss ReLU neuron (Vardi & Shamir 2021, S9).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.optimize

from implicitbias.reference._common import ReferenceSolverError, as_data, l1_lp_certificate, solve_cvxpy
from implicitbias.reference.nuclear_norm import CompletionConstraints, NuclearNormResult, SensingConstraints, admm, dual_bound


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
    min 1^T (w_+ + w_-) s.t. X (w_+ - w_-) = y, w_+- >= 0, solved by HiGHS and certified by its duality gap
    against the dual max y^T nu s.t. ||X^T nu||_inf <= 1 and its residuals (`l1_lp_certificate`, to `LP_TOL`).
    Raises ValueError when Xw = y has no solution, ReferenceSolverError when the certificate fails."""
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
    w = res.x[:d] - res.x[d:]
    l1_lp_certificate(X, y, w, res.eqlin.marginals, equality=True, what="min-l1 interpolation LP")
    return w


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

_METHODS = ("auto", "admm", "cvxpy")
#: "auto" solves the semidefinite program with Clarabel while d1 + d2 <= this (20 x 20: ~2 s, 30 x 30: ~7 s,
#: 40 x 40: ~30 s measured; its memory grows like (d1 + d2)^4) and runs ADMM above. Below it the interior point
#: method also certifies degenerate instances (a non-unique minimiser), where ADMM can stall above 1e-8.
CVXPY_MAX_SIDES = 40


def _use_cvxpy(method: str, shape) -> bool:
    return method == "cvxpy" or (method == "auto" and shape[0] + shape[1] <= CVXPY_MAX_SIDES)


def _check_solver_args(method: str, tol: float, max_iter: int) -> None:
    if method not in _METHODS:
        raise ValueError(f"method={method!r} is not allowed: expected one of {', '.join(_METHODS)}")
    if not (isinstance(tol, int | float) and 0 < tol < 1):
        raise ValueError(f"tol={tol!r} is not allowed: expected a relative duality gap in (0, 1)")
    if not (isinstance(max_iter, int) and max_iter >= 1):
        raise ValueError(f"max_iter={max_iter!r} is not allowed: expected an integer >= 1")


def _measurements(A, y, shape, *, square: bool):
    A = np.asarray(A, dtype=np.float64)
    if A.ndim == 2:
        if shape is None:
            raise ValueError(f"flattened measurements (n, {'d*d' if square else 'd1*d2'}) need shape=(d1, d2)")
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or shape[0] * shape[1] != A.shape[1]:
            raise ValueError(f"shape={shape} does not match flattened measurements with {A.shape[1]} entries each")
        A = A.reshape(A.shape[0], *shape)
    if A.ndim != 3 or (square and A.shape[1] != A.shape[2]):
        raise ValueError(f"A must have shape (n, {'d, d' if square else 'd1, d2'}) or (n, d1*d2), got {A.shape}")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != A.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but there are {A.shape[0]} measurements")
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(y))):
        raise ValueError("A or y contains NaN or infinite entries")
    return A, y


def _clarabel_tolerances(tol: float) -> dict:
    """Clarabel's gap and feasibility tolerances a tenth of the certificate's (its defaults, 1e-8, left gaps of
    ~2e-8 in our certificate); whether the answer passes is decided by the certificate, not by Clarabel's status."""
    t = min(1e-8, tol / 10)
    return {"tol_gap_abs": t, "tol_gap_rel": t, "tol_feas": t}


def _cvxpy_certified(W, G, problem, *, psd: bool, tol: float, what: str) -> NuclearNormResult:
    """Certify a cvxpy answer W with the dual candidate G = A^*(nu) from the constraint's dual value (either
    sign: every nu gives a valid bound, so the larger one is kept)."""
    W_feasible = problem.project_affine(W)
    bound = max(dual_bound(G, W_feasible, psd=psd), dual_bound(-G, W_feasible, psd=psd))
    value = float(np.trace(W)) if psd else float(np.linalg.svd(W, compute_uv=False).sum())
    gap = (value - bound) / max(1.0, abs(value))
    residual = float(np.max(np.abs(problem.measure(W) - problem.y), initial=0.0))
    y_scale = max(1.0, float(np.max(np.abs(problem.y), initial=0.0)))
    if not (abs(gap) <= tol and residual <= tol * y_scale):
        raise ReferenceSolverError(f"{what} (cvxpy, Clarabel): relative duality gap {gap:.3g} and residual "
                                   f"{residual:.3g}, not within tol = {tol:g}; use method='admm' or a larger tol")
    return NuclearNormResult(W=W, nuclear_norm=value, residual=residual, lower_bound=bound, gap=gap,
                             method="cvxpy", iterations=0)


def min_nuclear_norm_sensing(A, y, shape: tuple[int, int] | None = None, *, method: str = "auto",
                             tol: float = 1e-8, max_iter: int = 100_000) -> NuclearNormResult:
    """argmin ||W||_* s.t. <A_i, W> = tr(A_i^T W) = y_i (Gunasekar et al. 2017's conjectured limit of
    matrix factorisation from alpha -> 0, S8), with its certificate (`NuclearNormResult`: the relative
    duality gap `gap` <= tol, or ReferenceSolverError).

    A: (n, d1, d2) measurement matrices, or (n, d1 * d2) with each row a row-major flattened A_i and
    `shape` = (d1, d2). method: "admm" runs the first-order solver of `implicitbias.reference.nuclear_norm`
    (seconds and megabytes at 100 x 100; the projection onto the measurements costs one SVD of the (n, d1 d2)
    matrix); "cvxpy" solves the semidefinite program with Clarabel (small problems only: its memory grows like
    (d1 + d2)^4) and certifies it the same way; "auto" takes cvxpy while d1 + d2 <= `CVXPY_MAX_SIDES`, ADMM above.
    Raises ValueError when no matrix satisfies the measurements.
    """
    _check_solver_args(method, tol, max_iter)
    A, y = _measurements(A, y, shape, square=False)
    problem = SensingConstraints(A, y, A.shape[1:])
    if not _use_cvxpy(method, A.shape[1:]):
        return admm(problem, psd=False, tol=tol, max_iter=max_iter)
    import cvxpy as cp

    W = cp.Variable(A.shape[1:])
    constraints = [A.reshape(A.shape[0], -1) @ cp.vec(W, order="C") == y]
    status = solve_cvxpy(cp.Problem(cp.Minimize(cp.normNuc(W)), constraints), "nuclear-norm minimisation",
                         **_clarabel_tolerances(tol))
    if W.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ReferenceSolverError(f"nuclear-norm minimisation: Clarabel returned status {status!r}")
    nu = np.asarray(constraints[0].dual_value, dtype=np.float64).reshape(-1)
    G = np.einsum("n,nij->ij", nu, A)
    return _cvxpy_certified(np.asarray(W.value), G, problem, psd=False, tol=tol, what="nuclear-norm minimisation")


def min_nuclear_norm_completion(entries, y, shape: tuple[int, int], *, method: str = "auto", tol: float = 1e-8,
                                max_iter: int = 100_000) -> NuclearNormResult:
    """Matrix completion: argmin ||W||_* s.t. W[p_i, q_i] = y_i (A_i = e_{p_i} e_{q_i}^T, S8), with its
    certificate (`NuclearNormResult`: the relative duality gap `gap` <= tol, or ReferenceSolverError).

    entries: (n, 2) integer array of observed positions (p_i, q_i); y: (n,) observed values;
    shape: (d1, d2) of W. method as in `min_nuclear_norm_sensing` (ADMM's projection onto the observations
    sets the observed entries; a 100 x 100 completion from 2000 entries certifies to 1e-9 in about a second).
    An entry observed twice must carry the same value twice (ValueError otherwise).
    """
    _check_solver_args(method, tol, max_iter)
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"shape={shape} is not allowed: expected (d1, d2) with d1, d2 >= 1")
    entries = np.asarray(entries)
    if entries.size and not np.issubdtype(entries.dtype, np.integer):
        if not np.all(entries == np.round(entries)):
            raise ValueError("entries must be integer positions (p_i, q_i)")
    entries = entries.astype(int).reshape(-1, 2)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != entries.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but there are {entries.shape[0]} observed positions")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinite entries")
    if entries.size and (entries.min() < 0 or np.any(entries.max(axis=0) >= np.array(shape))):
        raise ValueError(f"entries must lie in [0, {shape[0]}) x [0, {shape[1]}), got rows {entries[:, 0].min()}.."
                         f"{entries[:, 0].max()} and columns {entries[:, 1].min()}..{entries[:, 1].max()}")
    unique, first, inverse = np.unique(entries, axis=0, return_index=True, return_inverse=True)
    if np.any(y != y[first][inverse.reshape(-1)]):
        raise ValueError("an entry is observed twice with different values: no matrix completes these observations")
    problem = CompletionConstraints(unique, y[first], shape)
    if not _use_cvxpy(method, shape):
        return admm(problem, psd=False, tol=tol, max_iter=max_iter)
    import cvxpy as cp

    # the constraints index W directly (no n x d1 d2 measurement matrix)
    W = cp.Variable(shape)
    constraints = [W[unique[:, 0], unique[:, 1]] == y[first]]
    status = solve_cvxpy(cp.Problem(cp.Minimize(cp.normNuc(W)), constraints), "nuclear-norm completion",
                         **_clarabel_tolerances(tol))
    if W.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ReferenceSolverError(f"nuclear-norm completion: Clarabel returned status {status!r}")
    G = np.zeros(shape)
    G[unique[:, 0], unique[:, 1]] = np.asarray(constraints[0].dual_value, dtype=np.float64).reshape(-1)
    return _cvxpy_certified(np.asarray(W.value), G, problem, psd=False, tol=tol, what="nuclear-norm completion")


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


def min_nuclear_norm_psd_sensing(A, y, shape: tuple[int, int] | None = None, *, method: str = "auto",
                                 tol: float = 1e-8, max_iter: int = 100_000) -> NuclearNormResult:
    """argmin ||W||_* = trace(W) over PSD W with <A_i, W> = y_i: the limit Gunasekar et al. 2017 (Theorem 1) prove
    for gradient flow on W = U U^T from U(0) = alpha I, alpha -> 0, with commuting measurements (S8), with its
    certificate (`NuclearNormResult`; the answer is exactly PSD and `residual` is its measurement error, both the
    gap and the residual within tol). A as in `min_nuclear_norm_sensing` (d1 = d2; only the symmetric parts of the
    A_i act on a symmetric W); method as there ("cvxpy": the semidefinite program with Clarabel). Raises ValueError
    when no matrix (cvxpy: no PSD matrix) interpolates; ADMM reports a PSD-infeasible problem as a
    ReferenceSolverError (no certificate reached)."""
    _check_solver_args(method, tol, max_iter)
    A, y = _measurements(A, y, shape, square=True)
    problem = SensingConstraints(A, y, A.shape[1:], symmetric=True)
    if not _use_cvxpy(method, A.shape[1:]):
        return admm(problem, psd=True, tol=tol, max_iter=max_iter)
    import cvxpy as cp

    W = cp.Variable(A.shape[1:], PSD=True)
    constraints = [A.reshape(A.shape[0], -1) @ cp.vec(W, order="C") == y]
    status = solve_cvxpy(cp.Problem(cp.Minimize(cp.trace(W)), constraints), "PSD nuclear-norm minimisation",
                         **_clarabel_tolerances(tol))
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise ValueError("min_nuclear_norm_psd_sensing: no PSD matrix satisfies the measurements")
    if W.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ReferenceSolverError(f"PSD nuclear-norm minimisation: Clarabel returned status {status!r}")
    nu = np.asarray(constraints[0].dual_value, dtype=np.float64).reshape(-1)
    G = np.einsum("n,nij->ij", nu, 0.5 * (A + np.swapaxes(A, 1, 2)))
    Wv = np.asarray(W.value)
    return _cvxpy_certified(0.5 * (Wv + Wv.T), G, problem, psd=True, tol=tol, what="PSD nuclear-norm minimisation")
