"""The KKT residual of S10: ~0 at KKT points constructed in closed form, clearly > 0 away from them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from implicitbias.metrics import KKTResidual, kkt_residual, nonnegative_least_squares
from implicitbias.models import TwoLayer

GAMMA = 0.5
FREI = TwoLayer(width=6, activation="leaky_relu", gamma=GAMMA, outer_scale="inv_sqrt_width")
BOTH_LAYERS = TwoLayer(width=2, activation="relu", train_outer=True, outer_scale=1.0)


def linear(theta, x):
    return jnp.dot(theta["w"], x)


def frei(theta, x, const):
    return FREI.apply(theta, const, x)


def both_layers(theta, x):
    return BOTH_LAYERS.apply(theta, {}, x)


# -- (a) the hard-margin SVM, a KKT point of the linear model (degree 1) -------------------------------


@pytest.fixture(scope="module")
def svm():
    """w and data with w = sum_i lambda_i y_i x_i over three support points (y_i <w, x_i> = 1) and two more
    points at margins 1.5 and 2.5: the KKT conditions of the (convex) hard-margin SVM, so w is its solution.
    Support points are x_i = y_i (w / ||w||^2 + u_i) with u_i orthogonal to w and sum_i lambda_i u_i = 0."""
    rng = np.random.default_rng(0)
    d = 5
    w = rng.standard_normal(d)
    P = np.eye(d) - np.outer(w, w) / (w @ w)
    lam = (w @ w) * np.array([0.2, 0.3, 0.5])
    u = [P @ rng.standard_normal(d) for _ in range(2)]
    u.append(-(lam[0] * u[0] + lam[1] * u[1]) / lam[2])
    u += [P @ rng.standard_normal(d) for _ in range(2)]
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    c = np.array([1.0, 1.0, 1.0, 1.5, 2.5])
    X = np.stack([y[i] * (c[i] * w / (w @ w) + u[i]) for i in range(5)])
    return {"w": jnp.asarray(w)}, jnp.asarray(X), jnp.asarray(y), np.concatenate([lam, [0.0, 0.0]])


def test_svm_solution_is_a_kkt_point(svm):
    theta, X, y, lam = svm
    res = kkt_residual(linear, theta, X, y, 1)
    assert isinstance(res, KKTResidual) and res.valid and res.message == ""
    assert res.stationarity < 1e-8
    assert abs(res.complementarity) < 1e-8
    np.testing.assert_allclose(res.min_margin, 1.0, rtol=1e-12)
    np.testing.assert_allclose(res.multipliers, lam, rtol=1e-8, atol=1e-10)


def test_residual_is_invariant_under_rescaling(svm):
    theta, X, y, _ = svm
    away = {"w": theta["w"] + 0.3 * jnp.asarray(np.random.default_rng(1).standard_normal(5))}
    assert np.all(y * (X @ away["w"]) > 0)
    ref = kkt_residual(linear, away, X, y, 1)
    assert ref.stationarity > 1e-2
    for c in (1e-3, 3.7, 1e4):
        got = kkt_residual(linear, {"w": c * away["w"]}, X, y, 1)
        np.testing.assert_allclose(got.stationarity, ref.stationarity, rtol=1e-10)
        np.testing.assert_allclose(got.complementarity, ref.complementarity, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got.multipliers, ref.multipliers, rtol=1e-9, atol=1e-12)


def test_more_points_than_parameters():
    """P = 2 < n = 4: w = (1, 0) is the SVM of these points; the multipliers of the two support points are
    not unique (only their sum, 1), those of the points at margins 2 and 3 must vanish."""
    X = jnp.array([[1.0, 0.0], [-1.0, 0.0], [2.0, 1.0], [-3.0, -2.0]])
    y = jnp.array([1.0, -1.0, 1.0, -1.0])
    res = kkt_residual(linear, {"w": jnp.array([2.0, 0.0])}, X, y, 1)
    assert res.stationarity < 1e-12 and abs(res.complementarity) < 1e-12
    np.testing.assert_allclose(res.multipliers[:2].sum(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(res.multipliers[2:], 0.0, atol=1e-12)


def test_misclassified_point_gives_an_invalid_result(svm):
    theta, X, y, _ = svm
    res = kkt_residual(linear, theta, X, y.at[0].set(-1.0), 1)
    assert not res.valid and "classified correctly" in res.message
    assert np.isnan(res.stationarity) and np.isnan(res.complementarity) and np.all(np.isnan(res.multipliers))


def test_non_homogeneous_degree_is_rejected(svm):
    theta, X, y, _ = svm
    with pytest.raises(ValueError, match="homogeneous"):
        kkt_residual(linear, theta, X, y, None)


# -- (b) Frei's network: leaky ReLU, fixed outer layer +-1/sqrt(m), degree 1, orthogonal inputs ------------


@pytest.fixture(scope="module")
def frei_kkt_point():
    """All positive neurons equal to w_+, all negative ones equal to w_-, on x_i = r_i e_i.

    With a_j = +-1/sqrt(m) and m/2 neurons of each sign, stationarity
    w_j = sum_i lambda_i y_i a_j phi'(<w_j, x_i>) x_i and q_i = 1 give, for y_i = +1,
    <w_+, e_i> = lambda_i r_i / sqrt(m) and <w_-, e_i> = -gamma lambda_i r_i / sqrt(m)
    (signs swapped for y_i = -1), with lambda_i = 2 / (r_i^2 (1 + gamma^2)).
    """
    m, d = FREI.width, 6
    r = np.array([1.0, 2.0, 0.5, 1.5])
    y = np.array([1.0, -1.0, 1.0, -1.0])
    lam = 2.0 / (r**2 * (1 + GAMMA**2))
    big = lam * r / np.sqrt(m)
    w_plus = np.zeros(d)
    w_minus = np.zeros(d)
    w_plus[:4] = np.where(y > 0, big, -GAMMA * big)
    w_minus[:4] = np.where(y > 0, -GAMMA * big, big)
    _, const = FREI.init(jax.random.PRNGKey(0), d, 1.0)
    assert np.all(np.asarray(const["a"])[: m // 2] > 0) and np.all(np.asarray(const["a"])[m // 2 :] < 0)
    W = np.concatenate([np.tile(w_plus, (m // 2, 1)), np.tile(w_minus, (m // 2, 1))])
    X = np.zeros((4, d))
    X[np.arange(4), np.arange(4)] = r
    return {"W": jnp.asarray(W)}, const, jnp.asarray(X), jnp.asarray(y), lam


def test_frei_network_kkt_point(frei_kkt_point):
    theta, const, X, y, lam = frei_kkt_point
    res = kkt_residual(frei, theta, X, y, FREI.homogeneity, args=(const,))
    assert FREI.homogeneity == 1
    np.testing.assert_allclose(res.min_margin, 1.0, rtol=1e-12)
    assert res.stationarity < 1e-8 and abs(res.complementarity) < 1e-8
    np.testing.assert_allclose(res.multipliers, lam, rtol=1e-8)


def test_frei_network_away_from_kkt(frei_kkt_point):
    theta, const, X, y, _ = frei_kkt_point
    noise = jnp.asarray(np.random.default_rng(2).standard_normal(theta["W"].shape))
    away = {"W": theta["W"] + 0.1 * noise}
    assert np.all(y * FREI.predict(away, const, X) > 0)
    res = kkt_residual(frei, away, X, y, 1, args=(const,))
    assert res.valid and res.stationarity > 1e-2
    rescaled = kkt_residual(frei, {"W": 5.0 * away["W"]}, X, y, 1, args=(const,))
    np.testing.assert_allclose(rescaled.stationarity, res.stationarity, rtol=1e-10)


# -- a degree-2 model: both layers trained, ReLU, one neuron per label sign ---------------------------------


def test_two_layer_relu_degree_two_kkt_point_with_kinks():
    """One neuron per sign of the labels on x_i = r_i e_i: w_s = sum_{i: y_i = s} beta_i e_i, a_s = s ||w_s||,
    beta_i = lambda_i |a_s| r_i, lambda_i = 1 / (a_s^2 r_i^2) and a_s^4 = sum_{i: y_i = s} 1 / r_i^2.
    Each neuron's pre-activation is exactly 0 on the other sign's points, where ReLU'(0) = 0 is used."""
    r = np.array([1.0, 2.0, 0.5, 1.5, 0.8])
    y = np.array([1.0, -1.0, 1.0, -1.0, -1.0])
    W, a, lam = np.zeros((2, 5)), np.zeros(2), np.zeros(5)
    for j, s in enumerate((1.0, -1.0)):
        idx = y == s
        size = np.sum(1.0 / r[idx] ** 2) ** 0.25
        lam[idx] = 1.0 / (size**2 * r[idx] ** 2)
        W[j, idx] = lam[idx] * size * r[idx]
        a[j] = s * size
    theta = {"W": jnp.asarray(W), "a": jnp.asarray(a)}
    X, yj = jnp.asarray(np.diag(r)), jnp.asarray(y)
    assert BOTH_LAYERS.homogeneity == 2
    res = kkt_residual(both_layers, theta, X, yj, 2)
    np.testing.assert_allclose(res.min_margin, 1.0, rtol=1e-12)
    assert res.stationarity < 1e-8 and abs(res.complementarity) < 1e-8
    np.testing.assert_allclose(res.multipliers, lam, rtol=1e-8)
    away = jax.tree_util.tree_map(lambda p: p * 1.3, theta)
    away["W"] = away["W"].at[0, 1].set(-0.2).at[1, 0].set(0.1)
    ref = kkt_residual(both_layers, away, X, yj, 2)
    assert ref.valid and ref.stationarity > 1e-2
    wrong = kkt_residual(both_layers, away, X, yj, 1)  # min q = 1.53: a wrong degree misses the unit margin
    assert not wrong.valid and "not homogeneous of degree 1" in wrong.message
    got = kkt_residual(both_layers, jax.tree_util.tree_map(lambda p: 7.0 * p, away), X, yj, 2)
    np.testing.assert_allclose(
        [got.stationarity, got.complementarity], [ref.stationarity, ref.complementarity], rtol=1e-9
    )


# -- the host-side NNLS -------------------------------------------------------------------------------------


def test_nnls_matches_an_exact_nonnegative_combination_with_tall_g():
    rng = np.random.default_rng(4)
    G = rng.standard_normal((400, 6))
    lam = np.array([0.5, 0.0, 2.0, 0.0, 1e-3, 3.0])
    t = G @ lam
    got = nonnegative_least_squares(G, t)
    np.testing.assert_allclose(got, lam, rtol=1e-10, atol=1e-13)
    # a target with a negative coefficient: the constraint binds and the residual is positive
    t2 = G @ np.array([1.0, -1.0, 0, 0, 0, 0])
    got2 = nonnegative_least_squares(G, t2)
    assert np.all(got2 >= 0) and np.linalg.norm(t2 - G @ got2) > 0.1 * np.linalg.norm(t2)
