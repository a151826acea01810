"""Tests of the survey references (SCIENCE.md S4-S9): separability certificates, the multiclass SVM, Bregman
projections and their potentials, Woodworth et al.'s Q_alpha^D interpolators, the leaky-ReLU neuron and greedy
low-rank learning. Closed forms, independent solvers (cvxpy, scipy), integrated gradient flows, KKT checks,
negative controls and a table of refused inputs."""

import cvxpy as cp
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.optimize

from implicitbias._spec import ConfigError
from implicitbias.reference import (
    HyperbolicPotential,
    LpPotential,
    NonSeparableDataError,
    NotSeparableError,
    ReferenceSolverError,
    bregman_kkt,
    bregman_projection,
    check_separable,
    greedy_low_rank,
    greedy_low_rank_completion,
    l1_max_margin,
    max_margin_svm,
    min_l2_interpolator,
    multiclass_svm,
    multiclass_svm_kkt,
    neuron_preimage_projection,
    woodworth_q,
    woodworth_q_interpolator,
)
from implicitbias.reference.diagonal_nets import (
    DeepDiagonalPotential,
    diagonal_net_potential,
    diagonal_net_time_scale,
    q_alpha,
    q_alpha_interpolator,
)


def regression(n=4, d=9, seed=0, sparse=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_star = np.zeros(d)
    w_star[:2] = [1.0, -2.0]
    return X, (X @ w_star if sparse else rng.normal(size=n))


def rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(b)


def null_direction(X, seed=1):
    """A unit vector in the null space of X."""
    N = scipy.linalg.null_space(X)
    v = N @ np.random.default_rng(seed).normal(size=N.shape[1])
    return v / np.linalg.norm(v)


# -- separability and max-margin (S4, S6) -----------------------------------------------------------------


def test_l1_max_margin_by_hand():
    # min |w1| + |w2| s.t. 2 w1 + w2 >= 1, w1 + 3 w2 >= 1: both constraints active, w = (2/5, 1/5), ||w||_1 = 3/5
    res = l1_max_margin([[2.0, 1.0], [1.0, 3.0]], [1.0, 1.0])
    np.testing.assert_allclose(res.w, [0.4, 0.2], atol=1e-12)
    assert res.margin == pytest.approx(5.0 / 3.0, rel=1e-12)
    # LP duality: the dual alphas (2/5, 1/5) have the same value 3/5, and ||sum alpha_i y_i x_i||_inf <= 1
    np.testing.assert_allclose(res.alphas, [0.4, 0.2], atol=1e-12)
    # negative control: the other vertex (0, 1) is feasible but not optimal
    assert np.abs([0.0, 1.0]).sum() > np.abs(res.w).sum()


@pytest.mark.parametrize(
    "X, y, points",
    [
        ([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]], [1, -1, 1], [0, 1]),  # one ray, different labels
        ([[1.0, 1.0], [0.0, 0.0], [0.0, 1.0]], [1, 1, -1], [1]),  # a zero point
        ([[1.0, 2.0], [0.5, 1.0], [-2.0, -4.0]], [1, -1, 1], [0, 1]),  # the first pair is reported
        ([[1.0, 1.0], [-2.0, -2.0], [0.0, 1.0]], [1, 1, -1], [0, 1]),  # opposite rays, same label
        ([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]], [1, 1, 1], [0, 1, 2]),  # they sum to zero
    ],
)
def test_non_separable_data_names_the_points(X, y, points):
    with pytest.raises(NonSeparableDataError) as info:
        check_separable(X, y)
    assert info.value.points.tolist() == points
    assert str(points) in str(info.value) and "(X, y)" in str(info.value)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, NotSeparableError)


def test_separable_data_pass_and_irreducible_certificate():
    check_separable([[1.0, 0.0], [0.0, 1.0]], [1, 1])  # no error
    # XOR with a bias feature: all four points are needed
    X = np.array([[1.0, 1.0, 1.0], [-1.0, -1.0, 1.0], [1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
    with pytest.raises(NonSeparableDataError) as info:
        check_separable(X, [1, 1, -1, -1])
    assert info.value.points.tolist() == [0, 1, 2, 3]
    for drop in range(4):  # irreducible: dropping any one point leaves a separable set
        keep = np.arange(4) != drop
        check_separable(X[keep], np.array([1, 1, -1, -1])[keep])


def test_multiclass_svm_closed_forms_and_kkt():
    # x_i = e_i with label i: column i solves min a^2 + 2 (a - 1)^2, so W = I - J/3
    res = multiclass_svm(np.eye(3), [0, 1, 2], 3)
    np.testing.assert_allclose(res.W, np.eye(3) - 1.0 / 3.0, atol=1e-7)
    assert max(res.kkt.values()) <= 1e-6
    # k = 2 reduces to the binary SVM: W = [-w_hat / 2, w_hat / 2]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    y = np.sign(X @ np.array([1.0, -0.5, 0.3]))
    w_hat = max_margin_svm(X, y).w
    res2 = multiclass_svm(X, (y > 0).astype(int), 2)
    np.testing.assert_allclose(res2.W, np.stack([-w_hat / 2, w_hat / 2]), atol=1e-6 * np.linalg.norm(w_hat))
    # negative control: a perturbed W fails the KKT check
    bad = multiclass_svm_kkt(X, (y > 0).astype(int), 1.01 * res2.W, res2.multipliers)
    assert max(bad.values()) > 1e-3


def test_multiclass_non_separable_names_points():
    X = np.eye(3)[[0, 1, 2, 0]] + 0.0
    with pytest.raises(NonSeparableDataError) as info:
        multiclass_svm(X, [0, 1, 2, 1], 3)  # x_3 = x_0 with another label
    assert info.value.points.tolist() == [0, 3]


# -- Bregman projections (S7) -------------------------------------------------------------------------------


def test_p2_bregman_is_the_pseudo_inverse_formula():
    X, y = regression(sparse=False)
    w0 = np.random.default_rng(3).normal(size=X.shape[1])
    res = bregman_projection(X, y, w0, LpPotential(2.0))
    np.testing.assert_allclose(res.w, w0 + np.linalg.pinv(X) @ (y - X @ w0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.w, min_l2_interpolator(X, y, w0), rtol=1e-12, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate", "ignore:Power atom")
@pytest.mark.parametrize("p", [1.2, 1.5, 1.8])
def test_lp_bregman_against_cvxpy_primal(p):
    X, y = regression(sparse=False, seed=1)
    w0 = np.random.default_rng(4).normal(size=X.shape[1])
    pot = LpPotential(p)
    res = bregman_projection(X, y, w0, pot)
    w = cp.Variable(X.shape[1])  # D_psi(w, w0) up to a constant: (1/p) sum |w|^p - <grad psi(w0), w>
    objective = cp.sum(cp.power(cp.abs(w), p)) / p - pot.mirror_map(w0) @ w
    cp.Problem(cp.Minimize(objective), [X @ w == y]).solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12)
    assert rel(res.w, w.value) <= 1e-6
    assert max(res.kkt.values()) <= 1e-12
    assert pot.divergence(res.w, w0) <= pot.divergence(w.value, w0) + 1e-9


def primal_projection(X, y, w0, pot):
    """Independent primal solve: w = w_p + N z over the null space N of X, Newton (trust-exact) on z."""
    w_p = np.linalg.pinv(X) @ y
    N = scipy.linalg.null_space(X)

    def fun(z):
        w = w_p + N @ z
        return pot.divergence(w, w0), N.T @ (pot.mirror_map(w) - pot.mirror_map(w0))

    def hess(z):
        w = w_p + N @ z
        return (N.T / pot.conjugate_curvature(pot.mirror_map(w))) @ N  # hess psi = 1 / hess psi*

    res = scipy.optimize.minimize(fun, np.zeros(N.shape[1]), jac=True, hess=hess, method="trust-exact",
                                  options={"gtol": 1e-13})
    return w_p + N @ res.x


@pytest.mark.parametrize("beta", [0.05, 1.0, 20.0])
def test_hyperbolic_bregman_against_scipy_primal(beta):
    X, y = regression(seed=2)
    w0 = 0.3 * np.random.default_rng(5).normal(size=X.shape[1])
    pot = HyperbolicPotential(beta)
    res = bregman_projection(X, y, w0, pot)
    assert rel(res.w, primal_projection(X, y, w0, pot)) <= 1e-8
    assert max(res.kkt.values()) <= 1e-12


def test_bregman_is_the_limit_of_mirror_descent():
    X, y = regression(n=3, d=6, seed=3, sparse=False)
    w0 = np.random.default_rng(6).normal(size=6)
    for pot in (LpPotential(1.5), HyperbolicPotential(0.5)):
        w, eta = w0.copy(), 0.05 / np.linalg.norm(X, 2) ** 2
        for _ in range(20000):  # grad psi(w_{k+1}) = grad psi(w_k) - eta grad L(w_k), L = ||Xw - y||^2 / 2
            w = pot.inverse_mirror_map(pot.mirror_map(w) - eta * X.T @ (X @ w - y))
        assert rel(w, bregman_projection(X, y, w0, pot).w) <= 1e-7


def test_bregman_kkt_negative_control():
    X, y = regression(seed=4)
    pot = HyperbolicPotential(0.1)
    res = bregman_projection(X, y, None, pot)
    moved = res.w + 1e-3 * null_direction(X)  # still interpolates, but no longer stationary
    kkt = bregman_kkt(X, y, moved, None, pot)
    assert kkt["feasibility"] <= 1e-12 and kkt["stationarity"] > 1e-5
    assert pot.divergence(moved, np.zeros_like(moved)) > pot.divergence(res.w, np.zeros_like(moved))


def test_potentials_are_legendre_pairs():
    theta = np.linspace(-3, 3, 13)
    for pot in (LpPotential(1.3), HyperbolicPotential(0.2), DeepDiagonalPotential(0.5, 3), DeepDiagonalPotential(0.3, 5)):
        t = 0.9 * theta / 3 if isinstance(pot, DeepDiagonalPotential) else theta
        w = pot.inverse_mirror_map(t)
        np.testing.assert_allclose(pot.mirror_map(w), t, rtol=1e-10, atol=1e-12)
        h = 1e-6  # grad psi* by central differences, and Fenchel-Young equality psi(w) + psi*(t) = <w, t>
        fd = [(pot.conjugate(t + h * e) - pot.conjugate(t - h * e)) / (2 * h) for e in np.eye(t.size)]
        np.testing.assert_allclose(fd, w, rtol=1e-6, atol=1e-8)
        assert pot.value(w) + pot.conjugate(t) == pytest.approx(w @ t, rel=1e-10, abs=1e-12)


# -- Diagonal networks: Q_alpha^D (S6) --------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
@pytest.mark.parametrize("alpha", [0.05, 0.5, 3.0])
def test_q_alpha_minimiser_against_independent_solves(alpha):
    X, y = regression(seed=5)
    res = q_alpha_interpolator(X, y, alpha)
    pot = HyperbolicPotential(2 * alpha**2)
    assert rel(res.w, primal_projection(X, y, np.zeros(X.shape[1]), pot)) <= 1e-8
    assert rel(res.w, woodworth_q_interpolator(X, y, alpha).w) <= 1e-8  # the older solver stops at ~1e-10
    # cvxpy on the dual: min 2 alpha^2 sum cosh(X^T nu) - <nu, y> (exponential cone), w = 2 alpha^2 sinh(X^T nu)
    nu = cp.Variable(X.shape[0])
    s = X.T @ nu
    tight = {"tol_gap_abs": 1e-14, "tol_gap_rel": 1e-14, "tol_feas": 1e-14, "max_iter": 500}
    cp.Problem(cp.Minimize(alpha**2 * cp.sum(cp.exp(s) + cp.exp(-s)) - y @ nu)).solve(solver=cp.CLARABEL, **tight)
    assert rel(2 * alpha**2 * np.sinh(X.T @ nu.value), res.w) <= 1e-8
    assert q_alpha(res.w, alpha) == pytest.approx(woodworth_q(res.w, alpha), rel=1e-12)
    assert max(res.kkt.values()) <= 1e-12


def gradient_flow_diagonal(X, y, alpha, depth, T):
    """Gradient flow on (u, v) for w = u^D - v^D from u = v = alpha 1, L = ||Xw - y||^2 / (2n)."""
    n, d = X.shape

    def rhs(t, z):
        u, v = z[:d], z[d:]
        g = X.T @ (X @ (u**depth - v**depth) - y) / n
        return np.concatenate([-depth * u ** (depth - 1) * g, depth * v ** (depth - 1) * g])

    return scipy.integrate.solve_ivp(rhs, (0, T), np.full(2 * d, alpha), method="LSODA", rtol=1e-12, atol=1e-14,
                                     dense_output=True)


@pytest.mark.parametrize("depth, alpha", [(2, 0.5), (2, 0.1), (3, 0.5), (4, 0.5)])
def test_q_alpha_is_the_gradient_flow_limit(depth, alpha):
    X, y = regression(n=3, d=6, seed=6, sparse=False)
    sol = gradient_flow_diagonal(X, y, alpha, depth, 2000.0)
    u, v = sol.y[:6, -1], sol.y[6:, -1]
    w_gf = u**depth - v**depth
    assert np.linalg.norm(X @ w_gf - y) <= 1e-12
    assert rel(w_gf, q_alpha_interpolator(X, y, alpha, depth).w) <= 1e-8


@pytest.mark.parametrize("depth, alpha", [(2, 0.3), (3, 0.4)])
def test_mirror_flow_time_scale(depth, alpha):
    """Gradient flow on (u, v) and mirror flow d/dt grad psi(w) = -c grad L(w) follow the same path; a wrong c does not."""
    X, y = regression(n=3, d=6, seed=7, sparse=False)
    sol = gradient_flow_diagonal(X, y, alpha, depth, 10.0)
    z = sol.sol(2.0)
    w_gf = z[:6] ** depth - z[6:] ** depth
    pot, c = diagonal_net_potential(alpha, depth), diagonal_net_time_scale(alpha, depth)

    def mirror(c):
        rhs = lambda t, th: -c * X.T @ (X @ pot.inverse_mirror_map(th) - y) / 3
        th = scipy.integrate.solve_ivp(rhs, (0, 2.0), np.zeros(6), rtol=1e-12, atol=1e-14).y[:, -1]
        return pot.inverse_mirror_map(th)

    assert rel(mirror(c), w_gf) <= 1e-8
    assert rel(mirror(c / 2), w_gf) > 1e-3  # negative control


def test_q_alpha_limits_are_trends():
    X, y = regression(n=5, d=12, seed=0)
    x = cp.Variable(12)  # min-l1 interpolator by a cvxpy LP
    cp.Problem(cp.Minimize(cp.norm1(x)), [X @ x == y]).solve(solver=cp.CLARABEL)
    w_l1, w_l2 = x.value, np.linalg.pinv(X) @ y
    to_l1 = [rel(q_alpha_interpolator(X, y, a).w, w_l1) for a in (1e-1, 1e-3, 1e-10, 1e-30, 1e-100)]
    to_l2 = [rel(q_alpha_interpolator(X, y, a).w, w_l2) for a in (0.3, 1.0, 10.0, 100.0)]
    assert all(a > b for a, b in zip(to_l1, to_l1[1:])) and to_l1[-1] <= 1e-4
    assert all(a > b for a, b in zip(to_l2, to_l2[1:])) and to_l2[-1] <= 1e-4
    # depth 3 reaches the l1 solution at a far larger alpha than depth 2 (the sharper transition)
    assert rel(q_alpha_interpolator(X, y, 1e-2, depth=4).w, w_l1) < 1e-3 < rel(q_alpha_interpolator(X, y, 1e-2).w, w_l1)


def test_deep_q_alpha_refuses_alpha_below_float64_reach():
    X, y = regression(n=5, d=12, seed=0)
    res = q_alpha_interpolator(X, y, 1e-2, depth=5)
    assert res.rounding_error <= 1e-7 and max(res.kkt.values()) <= 1e-10
    with pytest.raises(ReferenceSolverError, match="alpha"):
        q_alpha_interpolator(X, y, 1e-5, depth=5)  # 1 - |theta_i| ~ 1e-15: w would be wrong in its 2nd digit


# -- The leaky-ReLU neuron (S9) ---------------------------------------------------------------------------


def test_leaky_neuron_limit_is_the_preimage_projection():
    rng = np.random.default_rng(8)
    X, w_star, w0, leak = rng.normal(size=(3, 6)), rng.normal(size=6), 0.3 * rng.normal(size=6), 0.2
    sigma = lambda z: np.where(z > 0, z, leak * z)
    y = sigma(X @ w_star)
    w = neuron_preimage_projection(X, y, w0, leak)
    np.testing.assert_allclose(sigma(X @ w), y, atol=1e-12)
    np.testing.assert_allclose(null_direction(X) @ (w - w0), 0.0, atol=1e-12)  # w - w0 in the row space

    def rhs(t, w):
        z = X @ w
        return -X.T @ ((sigma(z) - y) * np.where(z > 0, 1.0, leak)) / 3

    w_gf = scipy.integrate.solve_ivp(rhs, (0, 3000.0), w0, method="LSODA", rtol=1e-11, atol=1e-13).y[:, -1]
    assert rel(w_gf, w) <= 1e-6
    assert rel(w_gf, min_l2_interpolator(X, y, w0)) > 1e-3  # negative control: ignoring sigma^{-1} is wrong


# -- Greedy low-rank learning (S8) ------------------------------------------------------------------------


def sensing(d=4, n=14, seed=9, symmetric=True):
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    W_star = U @ np.diag([3.0, 1.0]) @ (U if symmetric else np.linalg.qr(rng.normal(size=(d, 2)))[0]).T
    A = rng.normal(size=(n, d, d))
    return A, np.einsum("nij,ij->n", A, W_star), W_star


@pytest.mark.parametrize("symmetric", [True, False])
def test_greedy_low_rank_sensing(symmetric):
    A, y, W_star = sensing(n=20, symmetric=symmetric)
    res = greedy_low_rank(A, y, max_rank=3, symmetric=symmetric)
    assert res.ranks == [1, 2] and res.converged
    assert all(a > b for a, b in zip(res.losses, res.losses[1:]))
    assert rel(res.iterates[-1], W_star) <= 1e-6
    for r, W in enumerate(res.iterates, start=1):  # each iterate has rank r and is stationary for its factorisation
        s = res.singular_values[r - 1]
        assert s[r - 1] > 1e-3 * s[0] and (r == len(s) or s[r] <= 1e-8 * s[0])
        G = np.einsum("n,nij->ij", np.einsum("nij,ij->n", A, W) - y, A) / len(y)
        Us, _, Vt = np.linalg.svd(W)
        # first-order stationarity of the factorised loss: sym(G) U = 0 for W = U U^T; G V = 0 = G^T U for U V^T
        blocks = [(G + G.T) @ Us[:, :r]] if symmetric else [G @ Vt[:r].T, G.T @ Us[:, :r]]
        assert max(np.linalg.norm(b) for b in blocks) <= 1e-6
        assert r == len(res.iterates) or np.linalg.norm(G) > 1e-3  # negative control: not a global minimum yet
    # flattened measurements with shape give the same path
    flat = greedy_low_rank(A.reshape(len(y), -1), y, max_rank=3, symmetric=symmetric, shape=W_star.shape)
    np.testing.assert_allclose(flat.iterates[-1], res.iterates[-1], atol=1e-8)


def test_greedy_low_rank_tracks_small_init_gradient_flow():
    """Gradient flow on W = U U^T (full width) from a tiny init passes near the GLRL rank-1 iterate W_1."""
    A, y, _ = sensing(seed=10)
    W1 = greedy_low_rank(A, y, max_rank=1, symmetric=True).iterates[0]
    d, n = 4, len(y)
    U0 = 1e-6 * np.random.default_rng(11).normal(size=(d, d))

    def rhs(t, z):
        U = z.reshape(d, d)
        G = np.einsum("n,nij->ij", np.einsum("nij,ij->n", A, U @ U.T) - y, A) / n
        return -((G + G.T) @ U).ravel()

    sol = scipy.integrate.solve_ivp(rhs, (0, 60.0), U0.ravel(), method="LSODA", rtol=1e-9, atol=1e-14,
                                    t_eval=np.linspace(0, 60.0, 3001))
    dist = [rel(z.reshape(d, d) @ z.reshape(d, d).T, W1) for z in sol.y.T]
    assert min(dist) <= 1e-2
    assert dist[-1] > 0.1  # negative control: the flow then leaves W_1 for the rank-2 solution


def test_greedy_low_rank_completion_recovers_rank_one():
    u, v = np.array([1.0, 2.0, -1.0]), np.array([2.0, 1.0, 1.0])
    M = np.outer(u, v)
    entries = [(i, j) for i in range(3) for j in range(3) if (i, j) != (2, 2)]
    res = greedy_low_rank_completion(entries, [M[e] for e in entries], (3, 3), max_rank=2)
    assert res.ranks == [1] and res.converged
    assert res.iterates[0][2, 2] == pytest.approx(M[2, 2], rel=1e-6)


# -- Refused inputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: LpPotential(1.0), "p = 1.0"),
        (lambda: LpPotential(2.5), "p = 2.5"),
        (lambda: HyperbolicPotential(0.0), "beta = 0.0"),
        (lambda: HyperbolicPotential(-1.0), "beta = -1.0"),
        (lambda: q_alpha_interpolator(*regression(), 0.0), "alpha = 0.0"),
        (lambda: q_alpha_interpolator(*regression(), -0.5), "alpha = -0.5"),
        (lambda: q_alpha_interpolator(*regression(), float("nan")), "alpha = nan"),
        (lambda: q_alpha_interpolator(*regression(), 0.5, depth=1), "depth = 1"),
        (lambda: DeepDiagonalPotential(0.5, 2), "depth = 2"),
        (lambda: diagonal_net_time_scale(0.5, 2.5), "depth = 2.5"),
        (lambda: neuron_preimage_projection(np.eye(2), [1.0, -1.0], None, 0.0), "leak = 0.0"),
        (lambda: multiclass_svm(np.eye(3), [0, 1, 3], 3), "labels = [3]"),
        (lambda: multiclass_svm(np.eye(3), [0, 0, 0], 1), "k = 1"),
        (lambda: greedy_low_rank(*sensing()[:2], max_rank=0), "max_rank = 0"),
        (lambda: greedy_low_rank(*sensing()[:2], max_rank=2, eps=0.0), "eps = 0.0"),
        (lambda: greedy_low_rank(np.ones((2, 2, 3)), [1.0, 2.0], max_rank=1, symmetric=True), "symmetric = True"),
    ],
)
def test_bad_inputs_are_refused_naming_the_argument(call, names):
    with pytest.raises(ConfigError) as info:
        call()
    assert names in str(info.value) and "not allowed" in str(info.value)
