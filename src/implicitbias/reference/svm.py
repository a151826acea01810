"""Max-margin linear classifiers through the origin: the l2 hard-margin SVM (S1 prediction 5, S4, S5)
and the l1 max-margin predictor (S6, depth-2 diagonal networks).

Soudry et al. 2018 (S4): gradient descent on separable data converges in direction to

    w_hat = argmin ||w||_2  s.t.  y_i <w, x_i> >= 1  (i = 1..n),                      (SVM)

and Gunasekar et al. 2018 (S6): a depth-2 diagonal network converges in direction to

    argmin ||w||_1  s.t.  y_i <w, x_i> >= 1.                                           (L1-SVM)

(SVM) is solved through its dual with a precomputed Gram matrix K = X X^T,

    max_{alpha >= 0}  sum_i alpha_i - 1/2 alpha^T (y y^T o K) alpha,   w = sum_i alpha_i y_i x_i,

which takes about 1.5 s at n = d = 1000 where the primal takes 12-88 s (PERFORMANCE-NOTES, "Convex
references"). The quadratic form is passed to Clarabel as a QP matrix through `cvxpy.psd_wrap` (a Gram
matrix is PSD by construction); writing it as a sum of squares of a factor was 10x slower at that size.
The dual solution is then polished on its support and certified by the KKT conditions.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.optimize

from implicitbias.reference._common import (
    LPCertificate,
    NotSeparableError,
    ReferenceSolverError,
    as_data,
    l1_lp_certificate,
    solve_cvxpy,
)


@dataclasses.dataclass(frozen=True)
class KKTCertificate:
    """KKT residuals of (SVM), all relative (the constraints are normalised to y<w, x> >= 1).

    primal_violation: max(0, 1 - min_i y_i <w, x_i>).
    dual_violation: max(0, -min_i alpha_i) / max_i alpha_i.
    complementary_slackness: max_i |alpha_i (y_i <w, x_i> - 1)| / max_i alpha_i.
    stationarity: ||w - sum_i alpha_i y_i x_i|| / ||w|| (zero up to rounding: w is built that way).
    duality_gap: |sum_i alpha_i - ||w||^2| / ||w||^2 (primal 1/2||w||^2 minus dual objective, relative).
    tol: the tolerance every residual was checked against.
    """

    primal_violation: float
    dual_violation: float
    complementary_slackness: float
    stationarity: float
    duality_gap: float
    tol: float

    @property
    def holds(self) -> bool:
        return max(self.residuals().values()) <= self.tol

    def residuals(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "tol"}


@dataclasses.dataclass(frozen=True)
class SVMResult:
    """Solution of (SVM).

    w: the max-margin vector (d,), scaled so that min_i y_i <w, x_i> = 1.
    margin: the geometric l2 margin min_i y_i <w, x_i> / ||w|| (= 1/||w|| at the optimum).
    alphas: dual variables (n,), >= 0.
    support: indices i with alpha_i > 0 (relative threshold), the support vectors.
    certificate: the KKT residuals, checked when the result was built.
    """

    w: np.ndarray
    margin: float
    alphas: np.ndarray
    support: np.ndarray
    certificate: KKTCertificate

    @property
    def direction(self) -> np.ndarray:
        """The unit vector w / ||w||."""
        return self.w / np.linalg.norm(self.w)


@dataclasses.dataclass(frozen=True)
class L1MaxMarginResult:
    """Solution of (L1-SVM): w (d,) with min_i y_i <w, x_i> = 1, its l1 margin min_i y_i<w,x_i>/||w||_1
    (= 1/||w||_1), the LP's dual variables alphas (n,) >= 0, and the certificate checked when it was built
    (`LPCertificate`: the duality gap ||w||_1 - sum_i alphas_i and the primal and dual residuals)."""

    w: np.ndarray
    margin: float
    alphas: np.ndarray
    certificate: LPCertificate


def _check_labels(y):
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError("max-margin classification needs labels y_i in {-1, +1}")


def _assert_separable(Z):
    """LP feasibility of Z w >= 1 (Z = y o X); raise NotSeparableError when infeasible."""
    n, d = Z.shape
    res = scipy.optimize.linprog(
        np.zeros(d), A_ub=-Z, b_ub=-np.ones(n), bounds=[(None, None)] * d, method="highs"
    )
    if res.status == 2:
        raise NotSeparableError(
            "the data are not linearly separable through the origin: no w satisfies y_i <w, x_i> > 0 "
            "for every i (the max-margin problem has no solution; add a bias feature or drop points)"
        )


def _certificate(Z, alphas, w, tol) -> KKTCertificate:
    q = Z @ w
    scale = max(float(alphas.max(initial=0.0)), np.finfo(float).tiny)
    w2 = float(w @ w)
    return KKTCertificate(
        primal_violation=max(0.0, 1.0 - float(q.min())),
        dual_violation=max(0.0, -float(alphas.min())) / scale,
        complementary_slackness=float(np.max(np.abs(alphas * (q - 1.0)))) / scale,
        stationarity=float(np.linalg.norm(w - Z.T @ alphas)) / max(np.sqrt(w2), np.finfo(float).tiny),
        duality_gap=abs(float(alphas.sum()) - w2) / max(w2, np.finfo(float).tiny),
        tol=tol,
    )


def _polish(Z, alphas, support_tol):
    """Re-solve the support vectors' equations y_i <w, x_i> = 1 exactly (least squares on the support)."""
    S = np.flatnonzero(alphas > support_tol * alphas.max())
    ZS = Z[S]
    a_S, *_ = np.linalg.lstsq(ZS @ ZS.T, np.ones(S.size), rcond=None)
    out = np.zeros_like(alphas)
    out[S] = a_S
    return out


def max_margin_svm(X, y, *, tol: float = 1e-6, support_tol: float = 1e-6) -> SVMResult:
    """The l2 hard-margin SVM through the origin, argmin ||w|| s.t. y_i <w, x_i> >= 1 (Soudry et al. 2018,
    the limit direction of S4; the reference of S1 prediction 5 and S5).

    X: (n, d) data (rows are points); y: (n,) labels in {-1, +1}.
    tol: relative tolerance of the KKT certificate; support_tol: alpha_i > support_tol * max(alpha)
    marks a support vector.
    Raises NotSeparableError when no linear classifier through the origin separates the data, and
    ReferenceSolverError when the solution fails its KKT certificate.
    """
    import cvxpy as cp

    X, y = as_data(X, y)
    _check_labels(y)
    Z = y[:, None] * X
    n = X.shape[0]
    Q = Z @ Z.T
    Q = 0.5 * (Q + Q.T)
    alpha = cp.Variable(n, nonneg=True)
    problem = cp.Problem(cp.Maximize(cp.sum(alpha) - 0.5 * cp.quad_form(alpha, cp.psd_wrap(Q))))
    status = solve_cvxpy(problem, "hard-margin SVM dual")
    if status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE) or alpha.value is None:
        _assert_separable(Z)  # raises when the data are not separable
        raise ReferenceSolverError(f"hard-margin SVM dual: Clarabel returned status {status!r}")

    candidates = []
    raw = np.asarray(alpha.value, dtype=np.float64)
    for alphas in (_polish(Z, np.maximum(raw, 0.0), support_tol), np.maximum(raw, 0.0)):
        w = Z.T @ alphas
        candidates.append((_certificate(Z, alphas, w, tol), alphas, w))
    cert, alphas, w = min(candidates, key=lambda c: max(c[0].residuals().values()))
    if not cert.holds:
        _assert_separable(Z)
        raise ReferenceSolverError(
            f"hard-margin SVM: the KKT certificate fails at tol = {tol:g}: {cert.residuals()} "
            "(the data may be separable only with a tiny margin; rescale X or loosen tol)"
        )
    support = np.flatnonzero(alphas > support_tol * alphas.max())
    q = Z @ w
    return SVMResult(
        w=w, margin=float(q.min() / np.linalg.norm(w)), alphas=alphas, support=support, certificate=cert
    )


def l1_max_margin(X, y) -> L1MaxMarginResult:
    """The l1 max-margin predictor argmin ||w||_1 s.t. y_i <w, x_i> >= 1 (Gunasekar et al. 2018: the limit
    direction of a depth-2 diagonal linear network, S6), as a linear program in w = w_+ - w_-, w_+- >= 0,
    solved by HiGHS (a vertex solution, exact to rounding) and certified by its duality gap and residuals
    (`l1_lp_certificate`, to `LP_TOL`).

    Raises NotSeparableError when the data are not linearly separable through the origin, ReferenceSolverError
    when the certificate fails.
    """
    X, y = as_data(X, y)
    _check_labels(y)
    Z = y[:, None] * X
    n, d = Z.shape
    res = scipy.optimize.linprog(
        np.ones(2 * d),
        A_ub=-np.hstack([Z, -Z]),
        b_ub=-np.ones(n),
        bounds=[(0, None)] * (2 * d),
        method="highs",
    )
    if res.status == 2:
        _assert_separable(Z)
    if res.status != 0:
        raise ReferenceSolverError(f"l1 max-margin LP: HiGHS returned status {res.status} ({res.message})")
    w = res.x[:d] - res.x[d:]
    alphas = -res.ineqlin.marginals
    cert = l1_lp_certificate(Z, np.ones(n), w, alphas, equality=False, what="l1 max-margin LP")
    return L1MaxMarginResult(w=w, margin=float((Z @ w).min() / np.abs(w).sum()), alphas=alphas, certificate=cert)
