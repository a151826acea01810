"""Linear separability with a certificate that names the points which cannot be separated (S4, S6).

A max-margin problem min ||w|| s.t. <a_j, w> >= 1 (rows a_j of A; a_j = y_i x_i for binary labels,
(e_{y_i} - e_c) (x) x_i for the multiclass SVM) is feasible exactly when some w has A w > 0. By Gordan's
theorem of the alternative, this fails exactly when

    lambda >= 0,  sum_j lambda_j = 1,  A^T lambda = 0                                   (Farkas)

has a solution: a convex combination of the constraint rows vanishes, so those rows (points) cannot all
be put on their correct side. A vertex solution of (Farkas) (dual simplex, HiGHS) has at most rank(A) + 1
nonzero entries; a deletion filter then shrinks its points to an irreducible set (dropping any one point
makes the rest separable), and the obvious causes are named directly: {i} for x_i = 0, {i, j} for two
points on one ray with different labels or on opposite rays with the same label.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from implicitbias._spec import ConfigError
from implicitbias.reference._common import NotSeparableError, as_data


class NonSeparableDataError(ConfigError, NotSeparableError):
    """The data given to a max-margin reference are not linearly separable through the origin.

    A ConfigError (a bad input, named with the offending points) and a NotSeparableError (what the
    existing max-margin solvers raise), so callers catching either see it. `points` holds the indices of
    an irreducible non-separable set of points (`unseparable_points`).
    """

    def __init__(self, message: str, points: np.ndarray):
        super().__init__(message)
        self.points = points


def farkas_certificate(A, *, tol: float = 1e-9) -> np.ndarray | None:
    """lambda >= 0 with sum lambda = 1 and A^T lambda = 0 (a vertex solution), or None when some w has
    A w > 0 (then A w >= 1 is feasible). tol: entries below tol are set to 0 in the returned lambda."""
    A = np.asarray(A, dtype=np.float64)
    m, d = A.shape
    scale = np.maximum(np.linalg.norm(A, axis=1), 1.0)  # rows of very different size: same certificate
    res = scipy.optimize.linprog(
        np.zeros(m),
        A_eq=np.vstack([(A / scale[:, None]).T, np.ones((1, m))]),
        b_eq=np.concatenate([np.zeros(d), [1.0]]),
        bounds=[(0, None)] * m,
        method="highs-ds",
    )
    if res.status != 0:
        return None
    lam = res.x / scale
    lam = lam / lam.sum()
    return np.where(lam > tol, lam, 0.0)


def _conflicting_pair(X, labels) -> np.ndarray | None:
    """The most common causes, found directly: a zero point, or two points on one ray with different labels
    (or on opposite rays with the same label). Skipped for n > 2000 (the Gram matrix would be large)."""
    norms = np.linalg.norm(X, axis=1)
    if np.any(norms == 0):
        return np.flatnonzero(norms == 0)[:1]
    if X.shape[0] > 2000:
        return None
    U = X / norms[:, None]
    G = U @ U.T
    same = labels[:, None] == labels[None, :]
    bad = np.triu((same & (G < -1 + 1e-12)) | (~same & (G > 1 - 1e-12)), k=1)
    return np.argwhere(bad)[0] if bad.any() else None


def unseparable_points(A, groups, X=None, labels=None) -> np.ndarray | None:
    """An irreducible set of points (values of `groups`) whose constraint rows a_j (rows of A, row j
    belonging to point groups[j]) admit no w with <a_j, w> > 0 for all of them, while dropping any one point
    of the set leaves a separable rest; None when A w >= 1 is feasible.

    Found from the Farkas certificate, shrunk by a deletion filter (re-solve without each point in turn and
    keep the smaller certificate when one exists). With X and labels, a zero point or a conflicting pair of
    points on one line (`_conflicting_pair`) is reported first.
    """
    A, groups = np.asarray(A, dtype=np.float64), np.asarray(groups)
    lam = farkas_certificate(A)
    if lam is None:
        return None
    if X is not None:
        pair = _conflicting_pair(np.asarray(X, dtype=np.float64), np.asarray(labels))
        if pair is not None:
            return np.sort(pair)
    keep = np.unique(groups[lam > 0])
    for point in list(keep):
        if point not in keep:
            continue
        rows = np.isin(groups, keep[keep != point])
        smaller = farkas_certificate(A[rows])
        if smaller is not None:
            keep = np.unique(groups[rows][smaller > 0])
    return keep


def check_separable(X, y) -> None:
    """Raise NonSeparableDataError naming the points when no w has y_i <w, x_i> > 0 for every i.

    X: (n, d) points as rows; y: (n,) labels in {-1, +1}. The points named form an irreducible
    non-separable set (`unseparable_points`).
    """
    X, y = as_data(X, y)
    points = unseparable_points(y[:, None] * X, np.arange(X.shape[0]), X, y)
    if points is not None:
        raise_not_separable(points)


def raise_not_separable(points) -> None:
    """Raise NonSeparableDataError for an irreducible non-separable set of points."""
    points = np.asarray(points, dtype=int)
    raise NonSeparableDataError(
        f"(X, y) is not allowed: the data are not linearly separable through the origin. The points "
        f"{points.tolist()} cannot all be classified correctly by one linear predictor (a nonnegative "
        "combination of their margin constraints vanishes), while dropping any one of them leaves the rest of "
        "this set separable. Drop or relabel one of them, or add a bias feature.",
        points=points,
    )
