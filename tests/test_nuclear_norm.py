"""The first-order minimum-nuclear-norm references (ADMM with a certified duality gap) against cvxpy/Clarabel."""

from __future__ import annotations

import numpy as np
import pytest

from implicitbias.reference import (
    ReferenceSolverError,
    min_nuclear_norm_completion,
    min_nuclear_norm_psd_sensing,
    min_nuclear_norm_sensing,
)
from implicitbias.reference.nuclear_norm import dual_bound

# ADMM is asked for 1e-9; Clarabel reaches ~1e-9 to 1e-8 in the same certificate, so it is asked for 1e-8.
# Two answers certified to gaps g1 and g2 have objectives within (g1 + g2) max(1, value) of each other, and each
# answer lies within that of the other solver's lower bound: the 1e-8 agreement below is that sum, rounded up.
TOL_ADMM, TOL_CVXPY, AGREE = 1e-9, 1e-8, 1.1e-8


def _completion(d, rank, n, seed):
    rng = np.random.default_rng(seed)
    W_star = rng.standard_normal((d, rank)) @ rng.standard_normal((rank, d))
    idx = rng.choice(d * d, n, replace=False)
    entries = np.stack(np.unravel_index(idx, (d, d)), axis=1)
    return entries, W_star[entries[:, 0], entries[:, 1]], W_star


def _agree(a, c):
    scale = max(1.0, c.nuclear_norm)
    assert a.method == "admm" and c.method == "cvxpy"
    assert a.gap <= TOL_ADMM and c.gap <= TOL_CVXPY
    assert abs(a.nuclear_norm - c.nuclear_norm) <= AGREE * scale
    # each answer is certified optimal by the other solver's dual bound
    assert a.nuclear_norm - c.lower_bound <= AGREE * scale
    assert c.nuclear_norm - a.lower_bound <= AGREE * scale


def test_completion_matches_cvxpy_at_arora_quick_size():
    """Arora's quick variant: 20 x 20, rank 2; at n = 120 ADMM against Clarabel. At n = 60 (below the 76 degrees
    of freedom: a degenerate, non-unique minimiser, where ADMM can stall above 1e-8) "auto" takes Clarabel, and
    its answer passes the same certificate."""
    entries, y, _ = _completion(20, 2, 120, seed=120)
    a = min_nuclear_norm_completion(entries, y, (20, 20), method="admm", tol=TOL_ADMM)
    c = min_nuclear_norm_completion(entries, y, (20, 20), method="cvxpy", tol=TOL_CVXPY)
    _agree(a, c)
    assert a.residual == 0.0  # the observed entries are set exactly
    entries, y, _ = _completion(20, 2, 60, seed=60)
    auto = min_nuclear_norm_completion(entries, y, (20, 20))
    assert auto.method == "cvxpy" and auto.gap <= TOL_CVXPY and auto.lower_bound <= auto.nuclear_norm


def test_sensing_and_psd_sensing_match_cvxpy():
    rng = np.random.default_rng(3)
    d = 10
    G = rng.standard_normal((d, 2))
    A = rng.standard_normal((20, d, d))
    y = np.einsum("nij,ij->n", A, G @ G.T)
    _agree(min_nuclear_norm_sensing(A, y, method="admm", tol=TOL_ADMM),
           min_nuclear_norm_sensing(A, y, method="cvxpy", tol=TOL_CVXPY))
    # commuting measurements (Gunasekar et al.'s Theorem 1 setting), a rank-6 PSD W*: a degenerate LP inside the SDP
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    A = np.einsum("ij,nj,kj->nik", Q, rng.standard_normal((5, d)), Q)
    H = rng.standard_normal((d, 6))
    y = np.einsum("nij,ij->n", A, H @ H.T)
    a = min_nuclear_norm_psd_sensing(A, y, method="admm", tol=TOL_ADMM)
    _agree(a, min_nuclear_norm_psd_sensing(A, y, method="cvxpy", tol=TOL_CVXPY))
    assert np.linalg.eigvalsh(a.W)[0] >= -1e-12 * np.trace(a.W)
    assert a.residual <= TOL_ADMM * max(1.0, np.abs(y).max())


def test_paper_size_completion_recovers_and_certifies():
    """100 x 100, rank 5, 5000 observed entries (Arora's full variant): certified, and W* recovered (exact
    recovery holds far above the 975 degrees of freedom)."""
    entries, y, W_star = _completion(100, 5, 5000, seed=0)
    res = min_nuclear_norm_completion(entries, y, (100, 100), tol=TOL_ADMM)
    assert res.method == "admm" and res.gap <= TOL_ADMM and res.lower_bound <= res.nuclear_norm * (1 + TOL_ADMM)
    assert np.linalg.norm(res.W - W_star) <= 1e-6 * np.linalg.norm(W_star)


def test_dual_bound_is_a_lower_bound_for_any_candidate():
    """Weak duality for arbitrary dual candidates (scaled, even wrong-signed): never above the optimum."""
    entries, y, _ = _completion(12, 2, 70, seed=5)
    best = min_nuclear_norm_completion(entries, y, (12, 12), method="admm")
    rng = np.random.default_rng(6)
    for _ in range(20):
        G = np.zeros((12, 12))
        G[entries[:, 0], entries[:, 1]] = rng.standard_normal(len(y)) * rng.choice([0.1, 1.0, 10.0])
        assert dual_bound(G, best.W) <= best.nuclear_norm + 1e-12
    # a candidate outside the dual's feasible set only counts once scaled into it
    G = np.zeros((12, 12))
    G[entries[:, 0], entries[:, 1]] = 100.0 * np.sign(y)
    assert dual_bound(G, best.W) <= best.nuclear_norm


def test_uncertified_solve_raises():
    entries, y, _ = _completion(20, 2, 60, seed=60)
    with pytest.raises(ReferenceSolverError, match="ADMM.*duality gap"):
        min_nuclear_norm_completion(entries, y, (20, 20), method="admm", max_iter=5)
    # Clarabel cannot reach a gap of 1e-15: its answer is refused by the certificate, not accepted on its status
    with pytest.raises(ReferenceSolverError, match="Clarabel.*duality gap"):
        min_nuclear_norm_completion(entries, y, (20, 20), method="cvxpy", tol=1e-15)


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "scs"}, "method='scs'"),
    ({"tol": 0.0}, "tol=0.0"),
    ({"max_iter": 0}, "max_iter=0"),
])
def test_bad_solver_arguments_refused(kwargs, match):
    entries, y, _ = _completion(5, 1, 10, seed=1)
    with pytest.raises(ValueError, match=match):
        min_nuclear_norm_completion(entries, y, (5, 5), **kwargs)


def test_bad_observations_refused():
    with pytest.raises(ValueError, match="entries must lie in"):
        min_nuclear_norm_completion([[0, 5]], [1.0], (5, 5))
    with pytest.raises(ValueError, match="observed twice with different values"):
        min_nuclear_norm_completion([[0, 1], [0, 1]], [1.0, 2.0], (5, 5))
    with pytest.raises(ValueError, match="y has 1 entries"):
        min_nuclear_norm_completion([[0, 1], [1, 1]], [1.0], (5, 5))
    A = np.zeros((2, 3, 3))
    A[:, 0, 0] = 1.0
    with pytest.raises(ValueError, match="no matrix satisfies"):
        min_nuclear_norm_sensing(A, [1.0, 2.0])
    with pytest.raises(ValueError, match="shape=\\(2, 2\\) does not match"):
        min_nuclear_norm_sensing(np.ones((3, 9)), np.ones(3), shape=(2, 2))
