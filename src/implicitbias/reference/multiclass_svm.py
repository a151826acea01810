"""The multiclass hard-margin SVM (S4): the limit direction of gradient descent on the multiclass
cross-entropy loss with linearly separable data (Soudry et al. 2018, Section 4.3 / Theorem 7).

With k classes and a linear predictor W in R^{k x d} (row w_c scores class c), the limit direction is

    W_hat = argmin ||W||_F^2  s.t.  <w_{y_i} - w_c, x_i> >= 1  for every i and every c != y_i.   (MSVM)

Each constraint is <A_ic, W> >= 1 with A_ic = (e_{y_i} - e_c) x_i^T. (MSVM) is solved as a QP by cvxpy
(Clarabel) and certified by its KKT conditions with multipliers lambda_ic >= 0:
W = sum_ic lambda_ic A_ic (stationarity of 1/2 ||W||_F^2), primal feasibility, complementary slackness.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.reference._common import ReferenceSolverError, as_data, solve_cvxpy
from implicitbias.reference.separability import raise_not_separable, unseparable_points


@dataclasses.dataclass(frozen=True)
class MulticlassSVMResult:
    """Solution of (MSVM).

    W: (k, d), scaled so that min_{i, c != y_i} <w_{y_i} - w_c, x_i> = 1.
    margin: min_{i, c != y_i} <w_{y_i} - w_c, x_i> / ||W||_F (= 1 / ||W||_F at the optimum).
    multipliers: (n, k) with lambda_ic >= 0 for c != y_i and 0 at c = y_i.
    kkt: the relative KKT residuals (see `multiclass_svm_kkt`).
    """

    W: np.ndarray
    margin: float
    multipliers: np.ndarray
    kkt: dict[str, float]

    @property
    def direction(self) -> np.ndarray:
        """W / ||W||_F, the direction GD on the cross-entropy converges to."""
        return self.W / np.linalg.norm(self.W)


def _labels(labels, n: int, k) -> np.ndarray:
    if not (isinstance(k, (int, np.integer)) and k >= 2):
        raise ConfigError(f"k = {k!r} is not allowed: expected an integer number of classes >= 2")
    lab = np.asarray(labels).reshape(-1)
    if lab.shape[0] != n:
        raise ConfigError(f"labels has {lab.shape[0]} entries, which is not allowed: expected n = {n} (one per row of X)")
    if not np.all(np.isin(lab, np.arange(k))):
        bad = np.flatnonzero(~np.isin(lab, np.arange(k)))
        raise ConfigError(
            f"labels = {lab[bad][:5].tolist()} at rows {bad[:5].tolist()} is not allowed: expected integers in 0..{k - 1}"
        )
    return lab.astype(int)


def _constraint_rows(X, lab, k):
    """The rows vec(A_ic) (row-major, (k*d,)) for every i and c != y_i, and the (i, c) of each row."""
    n, d = X.shape
    pairs = [(i, c) for i in range(n) for c in range(k) if c != lab[i]]
    rows = np.zeros((len(pairs), k * d))
    for r, (i, c) in enumerate(pairs):
        rows[r, lab[i] * d : (lab[i] + 1) * d] = X[i]
        rows[r, c * d : (c + 1) * d] = -X[i]
    return rows, np.array(pairs, dtype=int).reshape(-1, 2)


def multiclass_svm_kkt(X, labels, W, multipliers) -> dict[str, float]:
    """Relative KKT residuals of (MSVM) at (W, lambda):

    primal_violation: max(0, 1 - min_{i, c != y_i} <w_{y_i} - w_c, x_i>);
    dual_violation: max(0, -min lambda) / max lambda;
    complementary_slackness: max |lambda_ic (<w_{y_i} - w_c, x_i> - 1)| / max lambda;
    stationarity: ||W - sum_ic lambda_ic (e_{y_i} - e_c) x_i^T||_F / ||W||_F.
    """
    X, _ = as_data(X)
    W = np.asarray(W, dtype=np.float64)
    lam = np.asarray(multipliers, dtype=np.float64)
    k = W.shape[0]
    lab = _labels(labels, X.shape[0], k)
    onehot = np.eye(k)[lab]
    scores = X @ W.T
    gaps = scores[np.arange(X.shape[0]), lab][:, None] - scores  # (n, k), 0 at c = y_i
    off = onehot == 0
    lam_off = np.where(off, lam, 0.0)
    scale = max(float(lam_off.max(initial=0.0)), np.finfo(float).tiny)
    coeff = onehot * lam_off.sum(axis=1, keepdims=True) - lam_off  # (n, k): sum_c lambda_ic (e_{y_i} - e_c)
    return {
        "primal_violation": max(0.0, 1.0 - float(gaps[off].min(initial=np.inf))),
        "dual_violation": max(0.0, -float(lam[off].min(initial=0.0))) / scale,
        "complementary_slackness": float(np.max(np.abs(lam_off * (gaps - 1.0))[off], initial=0.0)) / scale,
        "stationarity": float(np.linalg.norm(W - coeff.T @ X)) / max(float(np.linalg.norm(W)), np.finfo(float).tiny),
    }


def multiclass_svm(X, labels, k: int, *, tol: float = 1e-6) -> MulticlassSVMResult:
    """argmin ||W||_F^2 s.t. <w_{y_i} - w_c, x_i> >= 1 for c != y_i (MSVM): the limit direction of GD on
    the multiclass cross-entropy with separable data (Soudry et al. 2018, Theorem 7; S4).

    X: (n, d) points as rows; labels: (n,) integers in 0..k-1; k: number of classes (classes without
    points are allowed: their rows of W are pushed below the others). tol: relative KKT tolerance.
    Raises NonSeparableDataError (a ConfigError) naming the points when no W satisfies the constraints,
    ConfigError for bad labels or k, and ReferenceSolverError when the solution fails its KKT check.
    """
    import cvxpy as cp

    X, _ = as_data(X)
    n, d = X.shape
    lab = _labels(labels, n, k)
    rows, pairs = _constraint_rows(X, lab, k)
    points = unseparable_points(rows, pairs[:, 0], X, lab)
    if points is not None:
        raise_not_separable(points)
    w = cp.Variable(k * d)
    constraint = rows @ w >= 1
    status = solve_cvxpy(cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), [constraint]), "multiclass SVM")
    if w.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ReferenceSolverError(f"multiclass SVM: Clarabel returned status {status!r}")
    lam = np.maximum(np.asarray(constraint.dual_value, dtype=np.float64), 0.0)
    # polish: W = rows^T lambda exactly, lambda from the active constraints' equations rows_S rows_S^T lambda_S = 1
    active = lam > 1e-6 * lam.max()
    lam_S, *_ = np.linalg.lstsq(rows[active] @ rows[active].T, np.ones(active.sum()), rcond=None)
    polished = np.zeros_like(lam)
    polished[active] = lam_S
    best = None
    for cand in (polished, lam):
        W = (rows.T @ cand).reshape(k, d)
        mult = np.zeros((n, k))
        mult[pairs[:, 0], pairs[:, 1]] = cand
        kkt = multiclass_svm_kkt(X, lab, W, mult)
        if best is None or max(kkt.values()) < max(best[2].values()):
            best = W, mult, kkt
    W, mult, kkt = best
    if max(kkt.values()) > tol:
        raise ReferenceSolverError(f"multiclass SVM: the KKT check fails at tol = {tol:g}: {kkt}")
    gaps = (X @ W.T)[np.arange(n), lab][:, None] - X @ W.T
    margin = float(gaps[np.eye(k)[lab] == 0].min()) / float(np.linalg.norm(W))
    return MulticlassSVMResult(W=W, margin=margin, multipliers=mult, kkt=kkt)
