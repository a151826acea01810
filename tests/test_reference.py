"""Tests of the reference solutions (implicitbias.reference): closed forms, primal/dual agreement,
optimality certificates, and the two data families of SCIENCE.md S11 with known sign of M."""

import itertools

import cvxpy as cp
import numpy as np
import pytest

from implicitbias.papers.chistikov2023.reference import chistikov_M, dual_generators, z_matrix_condition
from implicitbias.reference import (
    NotSeparableError,
    ReferenceSolverError,
    activation_patterns,
    interpolation_norm_lower_bound,
    l1_max_margin,
    max_margin_svm,
    min_l1_interpolator,
    min_l2_interpolator,
    min_norm_relu_interpolator,
    min_nuclear_norm_completion,
    min_nuclear_norm_sensing,
    orthogonal_min_norm,
    rank_one_interpolator,
    rank_one_norm,
    relu_network,
    single_neuron_min_norm,
    woodworth_q,
    woodworth_q_interpolator,
)

# -- data families of SCIENCE.md S11 (Chistikov et al. 2023, Appendix G); points are rows --------------


def negative_family(d, xi=None):
    """M < 0: x_i = (1 - (d-1)(1-xi)/d) e_i + ((1-xi)/d) sum_{k != i} e_k, v* = 1/sqrt(d)."""
    if xi is None:
        xi = 0.5 * np.sqrt(2 * (np.sqrt(2) - 1) / (d - 1))
    eye = np.eye(d)
    X = (1 - (d - 1) * (1 - xi) / d) * eye + ((1 - xi) / d) * (np.ones((d, d)) - eye)
    return X, np.ones(d) / np.sqrt(d)


def positive_family(d, b=11.0):
    """M > 0: x_1 = b e_1, x_{2,3} = b e_1 -+ sqrt(b) e_2 + e_3, x_i = b e_1 + e_i (i >= 4),
    v* = (4/5) e_1 + (3/5) e_3."""
    X = np.zeros((d, d))
    X[:, 0] = b
    X[1, 1], X[1, 2] = -np.sqrt(b), 1.0
    X[2, 1], X[2, 2] = np.sqrt(b), 1.0
    for i in range(3, d):
        X[i, i] = 1.0
    v = np.zeros(d)
    v[0], v[2] = 0.8, 0.6
    return X, v


def teacher(X, v):
    return np.maximum(X @ v, 0.0)


def orthogonal_rows(rng, n, d):
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return Q[:n] * rng.uniform(0.5, 2.0, size=(n, 1))


# -- max-margin classifiers (S4, S6) -----------------------------------------------------------------


def test_svm_closed_form_and_certificate():
    # constraints 2 w_1 >= 1 and -w_2 >= 1 are tight; the third point is not a support vector
    X = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, -1.0]])
    y = np.array([1.0, -1.0, 1.0])
    res = max_margin_svm(X, y)
    np.testing.assert_allclose(res.w, [0.5, -1.0], atol=1e-9)
    np.testing.assert_allclose(res.alphas, [0.25, 1.0, 0.0], atol=1e-9)
    assert list(res.support) == [0, 1]
    assert res.margin == pytest.approx(1 / np.sqrt(1.25), rel=1e-9)
    assert res.certificate.holds
    assert max(res.certificate.residuals().values()) < 1e-8


@pytest.mark.parametrize(
    "X, y",
    [
        ([[1.0, 0.0], [-1.0, 0.0]], [1.0, 1.0]),  # x and -x with one label: not through the origin
        ([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]], [1.0, 1.0, -1.0, -1.0]),  # XOR
    ],
)
def test_not_separable(X, y):
    with pytest.raises(NotSeparableError, match="not linearly separable"):
        max_margin_svm(X, y)
    with pytest.raises(ValueError, match="not linearly separable"):
        l1_max_margin(X, y)


def test_svm_rejects_non_binary_labels():
    with pytest.raises(ValueError, match="-1, \\+1"):
        max_margin_svm([[1.0, 0.0]], [0.5])


def test_svm_dual_matches_primal():
    rng = np.random.default_rng(0)
    n, d = 200, 50
    X = rng.normal(size=(n, d))
    y = np.sign(X @ rng.normal(size=d))
    res = max_margin_svm(X, y)
    w = cp.Variable(d)
    cp.Problem(cp.Minimize(cp.sum_squares(w)), [cp.multiply(y, X @ w) >= 1]).solve(**_tight_clarabel())
    assert np.linalg.norm(res.w - w.value) / np.linalg.norm(res.w) < 1e-8
    assert res.margin == pytest.approx(1 / np.linalg.norm(w.value), rel=1e-8)
    assert res.certificate.holds
    assert np.allclose(y[res.support] * (X[res.support] @ res.w), 1.0, atol=1e-6)


def test_l1_max_margin_matches_cvxpy():
    rng = np.random.default_rng(1)
    n, d = 15, 20
    X = rng.normal(size=(n, d))
    y = np.sign(rng.normal(size=n))
    X[:, 0] = 2 * y
    res = l1_max_margin(X, y)
    w = cp.Variable(d)
    cp.Problem(cp.Minimize(cp.norm1(w)), [cp.multiply(y, X @ w) >= 1]).solve(solver=cp.CLARABEL)
    assert np.abs(res.w).sum() == pytest.approx(np.abs(w.value).sum(), rel=1e-7)
    assert np.min(y * (X @ res.w)) == pytest.approx(1.0, abs=1e-9)
    assert res.margin == pytest.approx(1 / np.abs(res.w).sum(), rel=1e-9)
    assert np.all(res.alphas >= -1e-12)
    # certified: the dual sum_i alpha_i meets ||w||_1 (weak duality makes it a lower bound for any feasible alpha)
    cert = res.certificate
    assert cert.holds and abs(cert.duality_gap) <= 1e-12 and cert.primal_residual <= 1e-12
    assert np.abs(res.w).sum() - res.alphas.sum() == pytest.approx(0.0, abs=1e-10)


def _tight_clarabel():
    return {"solver": cp.CLARABEL, "tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12}


def test_l1_lps_agree_with_cvxpy_to_1e_8():
    """Both l1 linear programs against cvxpy (Clarabel at tight tolerances), optimal values to 1e-8 relative."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(12, 30))
    y = np.sign(rng.normal(size=12))
    w = cp.Variable(30)
    mm = cp.Problem(cp.Minimize(cp.norm1(w)), [cp.multiply(y, X @ w) >= 1])
    mm.solve(**_tight_clarabel())
    assert np.abs(l1_max_margin(X, y).w).sum() == pytest.approx(mm.value, rel=1e-8)
    t = rng.normal(size=12)
    bp = cp.Problem(cp.Minimize(cp.norm1(w)), [X @ w == t])
    bp.solve(**_tight_clarabel())
    assert np.abs(min_l1_interpolator(X, t)).sum() == pytest.approx(bp.value, rel=1e-8)


@pytest.mark.parametrize("which", ["max_margin", "interpolator"])
def test_an_lp_answer_off_the_optimum_fails_its_certificate(monkeypatch, which):
    """Negative control: HiGHS' answer moved by 1e-6 along a feasible direction (the dual left as it was) leaves a
    duality gap of ~1e-7 or a residual, and the reference raises instead of returning it."""
    import scipy.optimize

    real = scipy.optimize.linprog

    def off(*args, **kwargs):
        res = real(*args, **kwargs)
        res.x = res.x * (1 + 1e-6)  # w_+- scaled up: ||w||_1 grows, the constraints move off equality
        return res

    monkeypatch.setattr(scipy.optimize, "linprog", off)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(8, 20))
    y = np.sign(rng.normal(size=8))
    with pytest.raises(ReferenceSolverError, match="LP certificate fails"):
        l1_max_margin(X, y) if which == "max_margin" else min_l1_interpolator(X, y)


# -- interpolators (S6, S7, S8, S9) ------------------------------------------------------------------


@pytest.fixture
def sparse_regression():
    rng = np.random.default_rng(1)
    n, d = 10, 30
    X = rng.normal(size=(n, d))
    w_star = np.zeros(d)
    w_star[:3] = [1.0, -2.0, 1.5]
    return X, X @ w_star, w_star


def test_min_l2_interpolator(sparse_regression):
    X, y, _ = sparse_regression
    np.testing.assert_allclose(min_l2_interpolator(X, y), np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-12)
    w0 = np.random.default_rng(2).normal(size=X.shape[1])
    w = min_l2_interpolator(X, y, w0)
    np.testing.assert_allclose(X @ w, y, atol=1e-10)
    np.testing.assert_allclose(w, w0 + np.linalg.pinv(X) @ (y - X @ w0), atol=1e-10)


def test_min_l1_interpolator_recovers_sparse(sparse_regression):
    X, y, w_star = sparse_regression
    np.testing.assert_allclose(min_l1_interpolator(X, y), w_star, atol=1e-9)


def test_woodworth_q_limits_and_optimality(sparse_regression):
    X, y, _ = sparse_regression
    w_l1, w_l2 = min_l1_interpolator(X, y), min_l2_interpolator(X, y)
    dist_l1 = []
    for alpha in (1e-2, 1e-4, 1e-6, 1e-10):
        res = woodworth_q_interpolator(X, y, alpha)
        assert res.residual < 1e-9
        np.testing.assert_allclose(res.w, 2 * alpha**2 * np.sinh(X.T @ res.nu), rtol=1e-12)
        dist_l1.append(np.linalg.norm(res.w - w_l1) / np.linalg.norm(w_l1))
    assert all(a > b for a, b in zip(dist_l1, dist_l1[1:]))  # rich regime: -> min-l1 as alpha -> 0
    assert dist_l1[-1] < 0.02
    res = woodworth_q_interpolator(X, y, 100.0)  # kernel regime
    assert np.linalg.norm(res.w - w_l2) / np.linalg.norm(w_l2) < 1e-8
    # Q_alpha is minimal among interpolators: no null-space perturbation decreases it
    alpha = 0.1
    w = woodworth_q_interpolator(X, y, alpha).w
    null = np.linalg.svd(X)[2][X.shape[0] :]
    for direction in np.random.default_rng(3).normal(size=(5, null.shape[0])) @ null:
        for t in (1e-3, -1e-3, 1e-1):
            assert woodworth_q(w + t * direction, alpha) >= woodworth_q(w, alpha)


def test_woodworth_q_small_and_large_scale():
    w = np.array([0.3, -1.0, 2.0])
    assert woodworth_q(w, 1e3) == pytest.approx(w @ w / (4 * 1e6), rel=1e-6)  # q(z) ~ z^2/4
    alpha = 1e-5  # q(z) ~ |z| log|z| for large z: Q_alpha / (alpha^2 ln(1/alpha^2)) -> ||w||_1 slowly
    assert woodworth_q(w, alpha) / np.log(1 / alpha**2) == pytest.approx(np.abs(w).sum(), rel=0.2)


def test_nuclear_norm_completion_razin_cohen():
    # W_12 = W_21 = 1, W_22 = 0 observed: ||[[t, 1], [1, 0]]||_* = sqrt(t^2 + 4), minimal at t = 0
    res = min_nuclear_norm_completion([(0, 1), (1, 0), (1, 1)], [1.0, 1.0, 0.0], (2, 2))
    np.testing.assert_allclose(res.W, [[0.0, 1.0], [1.0, 0.0]], atol=1e-7)
    assert res.nuclear_norm == pytest.approx(2.0, rel=1e-7)
    assert res.residual < 1e-8


def test_nuclear_norm_recovers_rank_one():
    rng = np.random.default_rng(0)
    W_star = np.outer(rng.normal(size=6), rng.normal(size=6))
    mask = rng.random((6, 6)) < 0.7
    res = min_nuclear_norm_completion(np.argwhere(mask), W_star[mask], (6, 6))
    assert np.linalg.norm(res.W - W_star) / np.linalg.norm(W_star) < 1e-6
    # the same as sensing with flattened A_i = e_p e_q^T
    A = np.zeros((mask.sum(), 36))
    A[np.arange(mask.sum()), np.flatnonzero(mask.ravel())] = 1.0
    res2 = min_nuclear_norm_sensing(A, W_star[mask], shape=(6, 6))
    assert res2.nuclear_norm == pytest.approx(res.nuclear_norm, rel=1e-6)


def test_single_neuron_min_norm():
    # w_1 = 1 from the positive label, then <w, x_2> <= 0 forces w_2 <= -1
    w = single_neuron_min_norm([[1.0, 0.0], [1.0, 1.0]], [1.0, 0.0])
    np.testing.assert_allclose(w, [1.0, -1.0], atol=1e-7)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 10))
    y = np.abs(X @ rng.normal(size=10))  # all positive: the min-l2 interpolator
    np.testing.assert_allclose(single_neuron_min_norm(X, y), min_l2_interpolator(X, y), atol=1e-7)
    with pytest.raises(ValueError, match=">= 0"):
        single_neuron_min_norm(X, -y)


# -- two-layer ReLU networks (S11, S12) ------------------------------------------------------------------


def test_activation_patterns():
    rng = np.random.default_rng(0)
    assert activation_patterns(rng.normal(size=(4, 4))).shape == (16, 4)  # invertible: every sign pattern
    X = rng.normal(size=(5, 2))  # 5 lines through the origin of R^2 cut it into 10 chambers
    exact = activation_patterns(X)
    assert exact.shape == (10, 5)
    sampled = activation_patterns(X, method="sampled", n_samples=2000)
    assert {tuple(s) for s in sampled} <= {tuple(s) for s in exact}
    with pytest.raises(ValueError, match="sampled"):
        activation_patterns(rng.normal(size=(12, 12)), max_patterns=100)


def test_orthogonal_closed_form_equals_convex_program():
    rng = np.random.default_rng(0)
    X = orthogonal_rows(rng, 4, 6)
    y = np.array([1.0, -2.0, 0.5, -0.3])
    closed = orthogonal_min_norm(X, y)
    np.testing.assert_allclose(relu_network(closed.W, closed.a, X), y, atol=1e-12)
    assert np.sum(closed.a**2 + np.sum(closed.W**2, axis=1)) == pytest.approx(closed.theta_sq_norm)
    convex = min_norm_relu_interpolator(X, y)
    assert convex.exact and convex.residual < 1e-6
    assert convex.theta_sq_norm == pytest.approx(closed.theta_sq_norm, rel=1e-6)
    with pytest.raises(ValueError, match="orthogonal"):
        orthogonal_min_norm(X + 0.1, y)


def test_min_norm_between_bounds_for_teacher_data():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(5, 3)) + np.array([1.0, 0.5, 0.0])
    v = np.array([0.6, 0.8, 0.0])
    y = teacher(X, v)
    W, a = rank_one_interpolator(v)
    np.testing.assert_allclose(relu_network(W, a, X), y, atol=1e-12)
    assert rank_one_norm(v) == pytest.approx(2.0)
    res = min_norm_relu_interpolator(X, y)
    assert res.residual < 1e-6
    assert interpolation_norm_lower_bound(X, y) - 1e-7 <= res.theta_sq_norm <= rank_one_norm(v) + 1e-7
    assert np.allclose(np.abs(res.a), np.linalg.norm(res.W, axis=1))  # balanced neurons


@pytest.mark.parametrize("d", [3, 4])
def test_min_norm_interpolator_on_m_families(d):
    X, v = negative_family(d)  # M < 0: the rank-1 value 2 ||v*|| is the minimum
    res = min_norm_relu_interpolator(X, teacher(X, v))
    assert res.theta_sq_norm == pytest.approx(rank_one_norm(v), rel=1e-6)
    assert res.rank == 1
    X, v = positive_family(d)  # M > 0: some interpolator beats every rank-1 one
    y = teacher(X, v)
    res = min_norm_relu_interpolator(X, y)
    assert res.residual < 1e-6
    assert interpolation_norm_lower_bound(X, y) <= res.theta_sq_norm < rank_one_norm(v) - 1e-4
    assert interpolation_norm_lower_bound(X, y) >= 2 * 0.8  # SCIENCE.md's 2 cos angle(v*, x_1)
    assert res.rank >= 2


# -- Chistikov et al.'s M (S11, Sec. 7) -------------------------------------------------------------


def test_dual_generators_transpose_convention():
    X = np.random.default_rng(0).normal(size=(4, 4))  # rows are points
    chi = dual_generators(X)
    np.testing.assert_allclose(chi @ X.T, np.eye(4), atol=1e-12)  # <chi_k, x_i> = [k = i]
    with pytest.raises(ValueError, match="n = d"):
        dual_generators(np.ones((3, 2)))


@pytest.mark.parametrize("d", [3, 4, 5])
def test_m_negative_family(d):
    X, v = negative_family(d)
    assert z_matrix_condition(X).holds
    assert chistikov_M(X, v).M < -0.1


@pytest.mark.parametrize("d", [3, 4, 5])
def test_m_positive_family(d):
    X, v = positive_family(d)
    holds, worst = z_matrix_condition(X)
    assert not holds and worst > 0
    res = chistikov_M(X, v)
    assert res.M > 0.01
    chi = dual_generators(X)
    # the maximiser lies in the claimed cones and attains the value
    for vec, idx in ((res.p, list(res.K)), (res.q, [k for k in range(d) if k not in res.K])):
        coef = np.linalg.solve(chi.T, vec)
        assert np.all(coef[idx] >= -1e-9) and np.allclose(np.delete(coef, idx), 0, atol=1e-9)
    sin = np.linalg.norm(res.p - (res.p @ v) * v)
    assert res.p @ res.q - sin == pytest.approx(res.M, abs=1e-9)


def test_m_negative_for_orthogonal_data_and_d2():
    rng = np.random.default_rng(0)
    X = orthogonal_rows(rng, 4, 4)
    v = rng.uniform(0.5, 1.0, size=4) @ X  # all <v*, x_i> > 0
    assert chistikov_M(X, v).M < 0
    for _ in range(5):  # d = 2 with a positive Gram matrix and v* strictly between the points
        X = np.abs(rng.normal(size=(2, 2))) + 0.1
        assert chistikov_M(X, rng.uniform(0.1, 1.0, size=2) @ X).M < 0


def _sampled_m(X, v, n_samples, rng):
    chi, d = dual_generators(X), X.shape[0]
    v = v / np.linalg.norm(v)
    best = -np.inf
    for r in range(1, d):
        for K in itertools.combinations(range(d), r):
            Kc = [k for k in range(d) if k not in K]
            p = rng.dirichlet(0.5 * np.ones(len(K)), size=n_samples) @ chi[list(K)]
            q = rng.dirichlet(0.5 * np.ones(len(Kc)), size=n_samples) @ chi[Kc]
            p /= np.linalg.norm(p, axis=1, keepdims=True)
            q /= np.linalg.norm(q, axis=1, keepdims=True)
            sin = np.linalg.norm(p - (p @ v)[:, None] * v, axis=1)
            best = max(best, float(np.max(np.sum(p * q, axis=1) - sin)))
    return best


def test_m_is_the_maximum_against_sampling():
    rng = np.random.default_rng(5)
    cases = [positive_family(3)] + [
        (rng.normal(size=(d, d)) + 1.5, np.abs(rng.normal(size=d)) + 0.5) for d in (3, 4)
    ]
    for X, v in cases:
        M = chistikov_M(X, v).M
        sampled = _sampled_m(X, v, 50_000, rng)
        assert sampled <= M + 1e-9
        assert sampled >= M - 1e-3
