"""Greedy low-rank learning (GLRL) for matrix sensing and completion (S8; Li, Luo & Lyu 2021, "Towards
resolving the implicit bias of gradient descent for matrix factorization: greedy low-rank learning",
Algorithm 1): the saddle-to-saddle path that gradient flow on a factorisation follows from a tiny init.

Loss f(W) = (1/(2n)) sum_i (<A_i, W> - y_i)^2 (this project's square loss), grad f(W) = (1/n) sum_i r_i A_i.
Starting from W_0 = 0 with no factor columns, phase r = 1, 2, ...:

1. take the top singular pair (s, u, v) of -grad f(W_{r-1}) (symmetric: top eigenpair of the symmetric
   part, W = U U^T); stop if s <= tol (W_{r-1} is then a global minimum of f: f is convex and, for the
   symmetric case, -grad f is negative semidefinite);
2. append the tiny balanced column: U <- [U, sqrt(eps) u], V <- [V, sqrt(eps) v];
3. W_r = the end point of gradient flow on (U, V) -> f(U V^T) from there (integrated by LSODA until
   ||grad|| <= gtol, then polished by L-BFGS if the flow has not got there in time).

The paper's GLRL takes eps -> 0; a small fixed eps approximates it (the escape direction is set by u, v).
The reference is the depth-2 factorisation W = U V^T; deeper products follow the same incremental path
(Arora et al. 2019) but on a different time scale.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np
import scipy.optimize

from implicitbias._spec import ConfigError


@dataclasses.dataclass(frozen=True)
class GreedyLowRankResult:
    """The GLRL path: iterates[r - 1] = W_r (d1, d2) of rank r for r = 1..len(iterates); losses[r - 1] = f(W_r);
    singular_values[r - 1]: those of W_r; top_gradient_singular_value[r]: s of -grad f(W_r) (entry 0: at W_0 = 0);
    converged: whether the last s <= tol (a global minimum of f was reached) rather than max_rank stopping."""

    iterates: list[np.ndarray]
    losses: list[float]
    singular_values: list[np.ndarray]
    top_gradient_singular_value: list[float]
    converged: bool

    @property
    def ranks(self) -> list[int]:
        """The rank of each iterate, 1, 2, ... (the number of factor columns)."""
        return list(range(1, len(self.iterates) + 1))


def _measurements(A, y, shape):
    A = np.asarray(A, dtype=np.float64)
    if A.ndim == 2:
        if shape is None:
            raise ConfigError("shape = None is not allowed with flattened measurements A of shape (n, d1*d2): give (d1, d2)")
        A = A.reshape(A.shape[0], *shape)
    if A.ndim != 3:
        raise ConfigError(f"A of shape {A.shape} is not allowed: expected (n, d1, d2) or (n, d1*d2) with shape=(d1, d2)")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != A.shape[0]:
        raise ConfigError(f"y with {y.shape[0]} entries is not allowed: expected one per measurement ({A.shape[0]})")
    return A, y


def _check(max_rank, eps, symmetric, shape):
    if not (isinstance(max_rank, numbers.Integral) and not isinstance(max_rank, bool) and max_rank >= 1):
        raise ConfigError(f"max_rank = {max_rank!r} is not allowed: expected an integer >= 1")
    if not (isinstance(eps, numbers.Real) and 0 < eps < 1):
        raise ConfigError(f"eps = {eps!r} is not allowed: expected a small initial column scale in (0, 1)")
    if symmetric and shape[0] != shape[1]:
        raise ConfigError(f"symmetric = True is not allowed for {shape[0]} x {shape[1]} matrices: expected square W")


def greedy_low_rank(
    A, y, *, max_rank: int, shape: tuple[int, int] | None = None, symmetric: bool = False,
    eps: float = 1e-6, tol: float = 1e-8, gtol: float = 1e-10,
) -> GreedyLowRankResult:
    """Greedy low-rank learning (Li, Luo & Lyu 2021, Algorithm 1; module docstring) for matrix sensing
    y_i = <A_i, W*>, with the input conventions of `min_nuclear_norm_sensing`.

    A: (n, d1, d2) measurement matrices, or (n, d1 * d2) row-major flattened with shape = (d1, d2);
    max_rank: the most phases; symmetric: W = U U^T (the paper's setting) instead of U V^T; eps: the squared
    norm of each new column; tol: stop when the top singular value of -grad f is <= tol; gtol: gradient norm
    at which each phase's flow counts as converged.
    """
    A, y = _measurements(A, y, shape)
    n, d1, d2 = A.shape
    _check(max_rank, eps, symmetric, (d1, d2))
    Af = A.reshape(n, -1)

    def grad_f(W):
        r = Af @ W.ravel() - y
        return 0.5 * float(r @ r) / n, (Af.T @ r / n).reshape(d1, d2)

    U, V = np.zeros((d1, 0)), np.zeros((d2, 0))
    W = np.zeros((d1, d2))
    iterates, losses, spectra, tops = [], [], [], []
    converged = False
    while True:
        s, u, v = _top_direction(-grad_f(W)[1], symmetric)
        tops.append(s)
        converged = s <= tol
        if converged or len(iterates) == max_rank:
            break
        U = np.hstack([U, np.sqrt(eps) * u[:, None]])
        V = U if symmetric else np.hstack([V, np.sqrt(eps) * v[:, None]])
        U, V = _flow(U, V, grad_f, symmetric, min(gtol, 1e-3 * np.sqrt(eps) * s))
        W = U @ V.T
        iterates.append(W)
        losses.append(grad_f(W)[0])
        spectra.append(np.linalg.svd(W, compute_uv=False))
    return GreedyLowRankResult(iterates, losses, spectra, tops, converged)


def greedy_low_rank_completion(entries, y, shape: tuple[int, int], **kwargs) -> GreedyLowRankResult:
    """GLRL for matrix completion, A_i = e_{p_i} e_{q_i}^T (entries: (n, 2) positions (p_i, q_i)), with the
    conventions of `min_nuclear_norm_completion`; keyword arguments as in `greedy_low_rank`."""
    entries = np.asarray(entries, dtype=int).reshape(-1, 2)
    A = np.zeros((entries.shape[0], *shape))
    A[np.arange(entries.shape[0]), entries[:, 0], entries[:, 1]] = 1.0
    return greedy_low_rank(A, y, **kwargs)


def _top_direction(M, symmetric):
    """(s, u, v): the top singular triplet of M, or for symmetric M's symmetric part its top eigenpair (u = v)."""
    if symmetric:
        vals, vecs = np.linalg.eigh(0.5 * (M + M.T))
        return float(vals[-1]), vecs[:, -1], vecs[:, -1]
    Us, s, Vt = np.linalg.svd(M)
    return float(s[0]), Us[:, 0], Vt[0]


def _flow(U, V, grad_f, symmetric, gtol):
    """Gradient flow on the factors from (U, V) until ||grad|| <= gtol (LSODA), then an L-BFGS polish."""
    d1, r = U.shape

    def split(z):
        Uz = z[: d1 * r].reshape(d1, r)
        return (Uz, Uz) if symmetric else (Uz, z[d1 * r :].reshape(-1, r))

    def fun(z):
        Uz, Vz = split(z)
        val, G = grad_f(Uz @ Vz.T)
        if symmetric:
            return val, ((G + G.T) @ Uz).ravel()
        return val, np.concatenate([(G @ Vz).ravel(), (G.T @ Uz).ravel()])

    def small_gradient(t, z):
        return float(np.linalg.norm(fun(z)[1])) - gtol

    small_gradient.terminal = True
    z0 = U.ravel() if symmetric else np.concatenate([U.ravel(), V.ravel()])
    from scipy.integrate import solve_ivp  # deferred: see implicitbias/_deferred.py

    sol = solve_ivp(
        lambda t, z: -fun(z)[1], (0.0, 1e9), z0, method="LSODA", rtol=1e-10, atol=1e-14, events=small_gradient
    )
    z = sol.y[:, -1]
    if np.linalg.norm(fun(z)[1]) > gtol:
        z = scipy.optimize.minimize(fun, z, jac=True, method="L-BFGS-B", options={"gtol": gtol, "ftol": 0.0}).x
    return split(z)
