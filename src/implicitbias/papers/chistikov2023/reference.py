"""The data measurement M of Chistikov, Englert & Lazic 2023, Sec. 7 (S11): rank-1 versus minimum norm.

Take n = d points. The paper writes the data as the d x d matrix X_paper whose *columns* are the x_i; our
arrays hold the points as *rows*, X = X_paper^T. The paper's chi_1, ..., chi_d are the rows of
X_paper^{-1} = (X^{-1})^T, i.e. chi_k is the k-th *column* of inv(X), so that <chi_k, x_i> = [k = i].
(The chi_k generate the dual of the cone of the training points.) Then

    M = max { cos angle(p, q) - sin angle(p, v*) :  {} != K proper subset of [d],
              0 != p in cone{chi_k : k in K},  0 != q in cone{chi_k : k not in K} }.

If M < 0 the balanced rank-1 interpolators (||theta||^2 = 2 ||v*||) are exactly the minimum-norm ones;
if M > 0 none of them is (some rank-2 interpolator has a smaller norm). Sufficient for M < 0: the inverse
Gram matrix (X X^T)^{-1} = [<chi_k, chi_l>] is a Z-matrix (off-diagonal entries <= 0).

Computing M. For each K (2^d - 2 of them) the inner problem is non-convex but small. For fixed p the best
q is explicit: with p_hat = p / ||p|| and Pi the projection onto C = cone{chi_k : k not in K} (non-negative
least squares), max_q cos angle(p, q) = ||Pi(p_hat)|| when Pi(p_hat) != 0 (Moreau), and otherwise
(p in the polar cone) it is attained at a generator, max_k cos angle(p, chi_k). The outer maximisation
over p = sum_{k in K} c_k chi_k, c >= 0, is a multi-start local optimisation: the objective with the
exact inner maximum is evaluated at the generators, all pairwise sums, the barycentre and random points
of the simplex; from the best starts the smooth joint objective in (c, c') (q = sum c'_k chi_k) is
maximised by BFGS in (c, c') = (s o s, s' o s') with analytic gradients, and the end point is re-scored
with the exact inner maximum (local runs start slightly inside the cones, since in s-coordinates a zero
coefficient cannot move; the unperturbed starts are scored too). The value returned is attained (a
certified lower bound on M) and, by the multi-start, the global maximum for the small d this is meant
for (d <= ~10); tests check it against dense random sampling.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import NamedTuple

import numpy as np
import scipy.optimize

from implicitbias.reference._common import as_data


def dual_generators(X) -> np.ndarray:
    """The paper's chi_1..chi_d as the rows of a (d, d) array: chi = inv(X)^T for X with the points as
    rows (so chi @ X.T = I, <chi_k, x_i> = [k = i]). X must be square and invertible."""
    X, _ = as_data(X)
    n, d = X.shape
    if n != d:
        raise ValueError(f"Chistikov et al.'s measurement needs n = d points, got X of shape {X.shape}")
    if np.linalg.cond(X) > 1e12:
        raise ValueError("X is singular (or nearly so): the chi_k (rows of X^{-1}) are not defined")
    return np.linalg.inv(X).T


class ZMatrixCondition(NamedTuple):
    """holds: <chi_k, chi_l> <= 0 for all k != l (sufficient for M < 0); max_offdiag: max_{k != l}."""

    holds: bool
    max_offdiag: float


def z_matrix_condition(X) -> ZMatrixCondition:
    """Whether the inverse Gram matrix (X X^T)^{-1} = [<chi_k, chi_l>] is a Z-matrix, the sufficient
    condition for M < 0 of Chistikov et al. 2023, Sec. 7. Returns (holds, max_{k != l} <chi_k, chi_l>)."""
    chi = dual_generators(X)
    G = chi @ chi.T
    off = G[~np.eye(G.shape[0], dtype=bool)]
    worst = float(off.max()) if off.size else -np.inf
    return ZMatrixCondition(holds=bool(worst <= 0.0), max_offdiag=worst)


@dataclasses.dataclass(frozen=True)
class ChistikovM:
    """M and where it is attained: K (indices, 0-based), p in cone{chi_k : k in K} and
    q in cone{chi_k : k not in K} (unit vectors); per_subset maps each K to its inner maximum."""

    M: float
    K: tuple[int, ...]
    p: np.ndarray
    q: np.ndarray
    per_subset: dict[tuple[int, ...], float]


def _unit(x):
    return x / np.linalg.norm(x)


def _sin(p_hat, v_hat):
    """sin angle(p, v) for unit vectors, stably: the norm of p's component orthogonal to v."""
    return float(np.linalg.norm(p_hat - (p_hat @ v_hat) * v_hat))


def _best_q(p_hat, G):
    """max_{q in cone(columns of G)} cos angle(p, q) and a maximising unit q."""
    c, _ = scipy.optimize.nnls(G, p_hat)
    proj = G @ c
    if np.linalg.norm(proj) > 1e-12:
        return float(np.linalg.norm(proj)), _unit(proj), c
    Gn = G / np.linalg.norm(G, axis=0)
    k = int(np.argmax(p_hat @ Gn))
    return float(p_hat @ Gn[:, k]), Gn[:, k], np.eye(G.shape[1])[k]


def _score(c, P, G, v_hat):
    p_hat = _unit(P @ c)
    cos, q, cq = _best_q(p_hat, G)
    return cos - _sin(p_hat, v_hat), p_hat, q, cq


def _neg_joint(x, P, G, v_hat):
    """-(cos angle(Pc, Gc') - sin angle(Pc, v)) and its gradient in x = (c, c')."""
    k = P.shape[1]
    p, q = P @ x[:k], G @ x[k:]
    np_, nq = np.linalg.norm(p), np.linalg.norm(q)
    if np_ < 1e-300 or nq < 1e-300:
        return 10.0, np.zeros_like(x)
    ph, qh = p / np_, q / nq
    cos = ph @ qh
    cv = ph @ v_hat
    sin = max(_sin(ph, v_hat), 1e-300)
    d_cos_p = (qh - cos * ph) / np_
    d_cos_q = (ph - cos * qh) / nq
    d_sin_p = -(cv / sin) * (v_hat - cv * ph) / np_
    grad = np.concatenate([P.T @ (d_cos_p - d_sin_p), G.T @ d_cos_q])
    return -(cos - sin), -grad


def _neg_joint_squared(s, P, G, v_hat):
    """_neg_joint in the unconstrained variables s with (c, c') = s o s (so c, c' >= 0 for free)."""
    val, grad = _neg_joint(s * s, P, G, v_hat)
    return val, 2.0 * s * grad


def _starts(k, rng, n_random):
    eye = np.eye(k)
    starts = list(eye) + [eye[i] + eye[j] for i, j in itertools.combinations(range(k), 2)]
    starts.append(np.ones(k))
    starts.extend(rng.dirichlet(np.ones(k), size=n_random))
    return starts


def _subset_max(P, G, v_hat, rng, n_random, n_local):
    scored = []
    for c in _starts(P.shape[1], rng, n_random):
        c = c / c.sum()
        val, p, q, cq = _score(c, P, G, v_hat)
        scored.append((val, c, cq, p, q))
    scored.sort(key=lambda s: -s[0])
    best = scored[0][0], scored[0][3], scored[0][4]
    for _, c, cq, _, _ in scored[:n_local]:
        # nudge into the interior: in s-coordinates a zero coefficient has zero gradient and never moves
        cq = cq / max(cq.sum(), 1e-300)
        x0 = np.sqrt(np.concatenate([0.98 * c + 0.02 / c.size, 0.98 * cq + 0.02 / cq.size]))
        res = scipy.optimize.minimize(
            _neg_joint_squared,
            x0,
            args=(P, G, v_hat),
            jac=True,
            method="BFGS",
            options={"gtol": 1e-10, "maxiter": 500},
        )
        c_opt = res.x[: P.shape[1]] ** 2
        if np.linalg.norm(P @ c_opt) == 0:
            continue
        val, p, q, _ = _score(c_opt, P, G, v_hat)
        if val > best[0]:
            best = val, p, q
    return best


def chistikov_M(X, v_star, *, n_random: int = 16, n_local: int = 6, seed: int = 0) -> ChistikovM:
    """M of Chistikov et al. 2023, Sec. 7 (see the module docstring), exactly for small d.

    X: (d, d) data with the points as rows (transposed relative to the paper); v_star: the teacher (any
    positive scale; only its direction enters). n_random: random simplex starts per subset K; n_local:
    how many of the best starts are refined by local optimisation; seed: for the random starts.
    Cost: 2^d - 2 subsets, each a few NNLS solves and n_local small BFGS runs.
    M is defined for any invertible X; its meaning (Sec. 7's theorem) assumes the paper's setting,
    teacher labels with every <v*, x_i> > 0 (and a positive Gram matrix X X^T).
    """
    chi = dual_generators(X)
    d = chi.shape[0]
    if d < 2:
        raise ValueError("M needs d >= 2 (a nonempty proper subset K of [d])")
    v_hat = _unit(np.asarray(v_star, dtype=np.float64).reshape(-1))
    if v_hat.shape[0] != d:
        raise ValueError(f"v_star has {v_hat.shape[0]} entries, expected d = {d}")
    rng = np.random.default_rng(seed)
    per_subset, best = {}, None
    for r in range(1, d):
        for K in itertools.combinations(range(d), r):
            Kc = [k for k in range(d) if k not in K]
            val, p, q = _subset_max(chi[list(K)].T, chi[Kc].T, v_hat, rng, n_random, n_local)
            per_subset[K] = val
            if best is None or val > best[0]:
                best = val, K, p, q
    val, K, p, q = best
    return ChistikovM(M=float(val), K=K, p=p, q=q, per_subset=per_subset)
