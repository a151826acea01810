"""Minimum-norm two-layer ReLU interpolators (S11, S12).

Network N_theta(x) = sum_j a_j [<w_j, x>]_+ (no biases, both layers trained), ||theta||^2 =
sum_j (a_j^2 + ||w_j||^2). Gradient flow from a small balanced init ends at (S12, Boursier et al. 2022)
or near (S11, Chistikov et al. 2023) a minimum-||theta||^2 interpolator; this module computes that
minimum exactly (for small n) and its closed forms.

The convex program (Pilanci & Ergen 2020, Theorem 1, specialised to interpolation without biases).
Since (a, w) -> (a/c, c w) leaves N unchanged, min ||theta||^2 = 2 min sum_j |a_j| ||w_j|| (AM-GM,
attained at |a_j| = ||w_j||). Group the neurons by their activation pattern D = diag(1[X w >= 0]) on the
data and by the sign of a_j; then u_D = sum |a_j| w_j over positive neurons (u'_D over negative ones)
satisfy D X u = [X u]_+ as long as (2D - I) X u >= 0, and the triangle inequality merges neurons of one
pattern and sign without increasing the cost. Hence

    min ||theta||^2 = 2 min sum_D (||u_D|| + ||u'_D||)
                      s.t. sum_D D X (u_D - u'_D) = y,  (2D - I) X u_D >= 0,  (2D - I) X u'_D >= 0,

a second-order cone program, exact when D runs over every chamber of the arrangement of the hyperplanes
{u : <x_i, u> = 0} (each u lies in the closure of one chamber); any subset of patterns gives an upper
bound. Each nonzero u_D is returned as the balanced neuron w = u_D / sqrt(||u_D||), a = +sqrt(||u_D||)
(a = -sqrt(||u'_D||) for u'_D), whose ||theta||^2 is exactly twice the optimum.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.optimize

from implicitbias.reference._common import ReferenceSolverError, as_data, solve_cvxpy


def _strictly_feasible(X, signs):
    """A u with signs_i <x_i, u> >= 1 for every row of X (an open chamber), or None if there is none."""
    n, d = X.shape
    if n == 0:
        return np.zeros(d)
    res = scipy.optimize.linprog(
        np.zeros(d), A_ub=-(signs[:, None] * X), b_ub=-np.ones(n), bounds=[(None, None)] * d, method="highs"
    )
    return res.x if res.status == 0 else None


def activation_patterns(
    X, *, method: str = "exact", n_samples: int = 20_000, seed: int = 0, max_patterns: int = 20_000
) -> np.ndarray:
    """The activation patterns 1[X u >= 0] of ReLU neurons on the data, as a (P, n) boolean array.

    method="exact": every chamber of the hyperplane arrangement {<x_i, u> = 0}, found incrementally (add
    one point at a time and keep the sign extensions that a linear program proves strictly feasible,
    reusing each chamber's witness u for one of the two sides); at most 2^n patterns, so for small n or
    small d (raises ValueError once more than max_patterns chambers appear). Zero rows of X are always
    inactive.
    method="sampled": the patterns of n_samples Gaussian directions u (seeded); a subset of the chambers,
    so the convex program built on it gives an upper bound.
    The all-inactive pattern is included when it occurs; it never carries a neuron.
    """
    X, _ = as_data(X)
    n, d = X.shape
    if method == "sampled":
        U = np.random.default_rng(seed).normal(size=(d, n_samples))
        return np.unique((X @ U >= 0).T, axis=0)
    if method != "exact":
        raise ValueError(f"method must be 'exact' or 'sampled', got {method!r}")
    nonzero = np.linalg.norm(X, axis=1) > 0
    chambers = [(np.zeros(0, dtype=bool), np.zeros(d))]
    for i in range(n):
        if not nonzero[i]:
            chambers = [(np.append(s, False), u) for s, u in chambers]
            continue
        rows = np.flatnonzero(nonzero[: i + 1])
        grown = []
        for s, u in chambers:
            ext = np.append(s, False)
            side = float(X[i] @ u)
            known = side > 1e-9 * np.linalg.norm(X[i]) * np.linalg.norm(u)
            unknown = side < -1e-9 * np.linalg.norm(X[i]) * np.linalg.norm(u)
            for active in (True, False):
                cand = ext.copy()
                cand[i] = active
                if (active and known) or (not active and unknown):
                    grown.append((cand, u))
                    continue
                witness = _strictly_feasible(X[rows], np.where(cand[rows], 1.0, -1.0))
                if witness is not None:
                    grown.append((cand, witness))
        chambers = grown
        if len(chambers) > max_patterns:
            raise ValueError(
                f"activation_patterns: more than max_patterns = {max_patterns} chambers after {i + 1} of {n} "
                "points; use method='sampled' (an upper bound on the minimum norm) or raise max_patterns"
            )
    return np.array([s for s, _ in chambers], dtype=bool).reshape(-1, n)


@dataclasses.dataclass(frozen=True)
class MinNormReLUResult:
    """A minimum-||theta||^2 two-layer ReLU interpolator N(x) = sum_j a_j [<w_j, x>]_+.

    theta_sq_norm: min sum_j (a_j^2 + ||w_j||^2) = 2 x the optimum of the convex program.
    W: (m, d) hidden neurons (rows); a: (m,) outer weights (balanced: |a_j| = ||w_j||).
    n_patterns: number of activation patterns in the program; exact: whether they were all chambers.
    residual: max_i |N(x_i) - y_i| of the recovered network.
    """

    theta_sq_norm: float
    W: np.ndarray
    a: np.ndarray
    n_patterns: int
    exact: bool
    residual: float

    @property
    def rank(self) -> int:
        """Number of distinct neuron directions (numerical rank of W, relative tolerance 1e-6)."""
        if self.W.shape[0] == 0:
            return 0
        s = np.linalg.svd(self.W, compute_uv=False)
        return int(np.sum(s > 1e-6 * s[0]))


def relu_network(W, a, X) -> np.ndarray:
    """N(x_i) = sum_j a_j [<w_j, x_i>]_+ for the rows x_i of X."""
    return np.maximum(np.asarray(X) @ np.asarray(W).T, 0.0) @ np.asarray(a)


def min_norm_relu_interpolator(
    X, y, *, patterns: str | np.ndarray = "exact", neuron_tol: float = 1e-7
) -> MinNormReLUResult:
    """min ||theta||^2 over two-layer ReLU networks without biases (any width) with N(x_i) = y_i, by the
    convex program over activation patterns of Pilanci & Ergen 2020 (see the module docstring).

    patterns: "exact" (every chamber; for small n or d), "sampled" (Gaussian directions; an upper bound),
    or a (P, n) boolean array of patterns to use. neuron_tol: pattern blocks with ||u|| below
    neuron_tol * max ||u|| are dropped from the recovered network.
    """
    import cvxpy as cp

    X, y = as_data(X, y)
    exact = isinstance(patterns, str) and patterns == "exact"
    if isinstance(patterns, str):
        patterns = activation_patterns(X, method=patterns)
    mask = np.asarray(patterns, dtype=bool)
    mask = mask[mask.any(axis=1)]  # the all-inactive pattern cannot contribute
    P, d = mask.shape[0], X.shape[1]
    if P == 0:
        raise ReferenceSolverError("min_norm_relu_interpolator: no activation pattern activates any point")
    M, S = mask.astype(float), np.where(mask, 1.0, -1.0)
    U, V = cp.Variable((P, d)), cp.Variable((P, d))
    XU, XV = U @ X.T, V @ X.T
    constraints = [
        cp.sum(cp.multiply(M, XU - XV), axis=0) == y,
        cp.multiply(S, XU) >= 0,
        cp.multiply(S, XV) >= 0,
    ]
    objective = cp.sum(cp.norm(U, 2, axis=1)) + cp.sum(cp.norm(V, 2, axis=1))
    status = solve_cvxpy(cp.Problem(cp.Minimize(objective), constraints), "min-norm ReLU interpolation")
    if U.value is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            raise ValueError(
                "min_norm_relu_interpolator: no network with these activation patterns interpolates"
            )
        raise ReferenceSolverError(f"min-norm ReLU interpolation: Clarabel returned status {status!r}")
    blocks = np.vstack([U.value, V.value])
    signs = np.concatenate([np.ones(P), -np.ones(P)])
    norms = np.linalg.norm(blocks, axis=1)
    keep = norms > neuron_tol * norms.max()
    W = blocks[keep] / np.sqrt(norms[keep])[:, None]
    a = signs[keep] * np.sqrt(norms[keep])
    residual = float(np.max(np.abs(relu_network(W, a, X) - y)))
    return MinNormReLUResult(
        theta_sq_norm=float(2.0 * norms.sum()), W=W, a=a, n_patterns=P, exact=exact, residual=residual
    )


@dataclasses.dataclass(frozen=True)
class OrthogonalMinNorm:
    """Boursier et al. 2022's minimum-norm interpolator for orthogonal inputs (S12).

    theta_sq_norm: 2 (||v_+|| + ||v_-||); v_plus, v_minus: the two neuron directions' products a w;
    W, a: the network (one neuron per nonzero v, balanced).
    """

    theta_sq_norm: float
    v_plus: np.ndarray
    v_minus: np.ndarray
    W: np.ndarray
    a: np.ndarray


def orthogonal_min_norm(X, y, *, tol: float = 1e-10) -> OrthogonalMinNorm:
    """Closed-form minimum-||theta||^2 ReLU interpolator for pairwise orthogonal inputs (Boursier et al.
    2022, Appendix C; S12): with v_+ = sum_{y_i > 0} y_i x_i / ||x_i||^2 and
    v_- = sum_{y_i < 0} |y_i| x_i / ||x_i||^2, min ||theta||^2 = 2 (||v_+|| + ||v_-||), attained by the
    two neurons (w, a) = (v_+ / sqrt||v_+||, sqrt||v_+||) and (v_- / sqrt||v_-||, -sqrt||v_-||).

    Raises ValueError unless |<x_i, x_j>| <= tol ||x_i|| ||x_j|| for all i != j and every x_i != 0.
    """
    X, y = as_data(X, y)
    norms = np.linalg.norm(X, axis=1)
    if np.any(norms == 0):
        raise ValueError("orthogonal_min_norm: every input must be nonzero")
    cos = (X @ X.T) / np.outer(norms, norms)
    off = np.abs(cos - np.diag(np.diag(cos))).max(initial=0.0)
    if off > tol:
        raise ValueError(
            f"orthogonal_min_norm needs pairwise orthogonal inputs: max |cos angle(x_i, x_j)| = {off:.3g} > "
            f"tol = {tol:g}; use min_norm_relu_interpolator for general data"
        )
    scaled = X / norms[:, None] ** 2
    v_plus = np.where(y > 0, y, 0.0) @ scaled
    v_minus = np.where(y < 0, -y, 0.0) @ scaled
    W, a = [], []
    for v, sign in ((v_plus, 1.0), (v_minus, -1.0)):
        r = np.linalg.norm(v)
        if r > 0:
            W.append(v / np.sqrt(r))
            a.append(sign * np.sqrt(r))
    return OrthogonalMinNorm(
        theta_sq_norm=float(2.0 * (np.linalg.norm(v_plus) + np.linalg.norm(v_minus))),
        v_plus=v_plus,
        v_minus=v_minus,
        W=np.array(W).reshape(-1, X.shape[1]),
        a=np.array(a),
    )


# -- Teacher-neuron data (S11) ------------------------------------------------------------------------


def rank_one_norm(v_star) -> float:
    """||theta||^2 = 2 ||v*|| of the balanced rank-1 interpolators of teacher labels y_i = [<v*, x_i>]_+
    (Chistikov et al. 2023, Sec. 7: neurons positive multiples of v*, a_j = ||w_j||, sum_j ||w_j||^2 =
    ||v*||; = 2 for a unit teacher, the limit of S11 as lambda -> 0)."""
    return float(2.0 * np.linalg.norm(np.asarray(v_star, dtype=np.float64)))


def rank_one_interpolator(v_star) -> tuple[np.ndarray, np.ndarray]:
    """The one-neuron balanced rank-1 interpolator (W, a) = (v*/sqrt||v*|| as a (1, d) row,
    [sqrt||v*||]); N(x) = [<v*, x>]_+ for every x, so it interpolates teacher labels on any data."""
    v = np.asarray(v_star, dtype=np.float64).reshape(-1)
    r = np.linalg.norm(v)
    return (v / np.sqrt(r))[None, :], np.array([np.sqrt(r)])


def interpolation_norm_lower_bound(X, y) -> float:
    """2 max_i |y_i| / ||x_i||: every interpolator has ||theta||^2 >= this, since
    |N(x)| <= sum_j |a_j| ||w_j|| ||x|| <= ||theta||^2 ||x|| / 2. For teacher labels
    y_i = [<v*, x_i>]_+ it is 2 ||v*|| max_i cos+ angle(v*, x_i) >= 2 cos angle(v*, x_1) ||v*|| (the bound of
    Chistikov et al. 2023, Sec. 7, stated for ||v*|| = 1)."""
    X, y = as_data(X, y)
    norms = np.linalg.norm(X, axis=1)
    ok = norms > 0
    return float(2.0 * np.max(np.abs(y[ok]) / norms[ok], initial=0.0))
