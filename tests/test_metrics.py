"""Spectral, margin and angle metrics against matrices and vectors whose answers are known in closed form."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from implicitbias.metrics import (
    accuracy,
    active_neurons,
    angle_between,
    balancedness,
    cosine,
    effective_rank,
    frobenius_norm,
    margin_spread,
    margins,
    neuron_angles,
    normalized_margin,
    nuclear_norm,
    numerical_rank,
    singular_value_ratio,
    singular_values,
    spectral_norm,
    stable_rank,
    unit_distance,
)


def with_singular_values(s, m, d, seed=0):
    """U diag(s) V^T with U (m x k), V (d x k) random with orthonormal columns."""
    rng = np.random.default_rng(seed)
    k = len(s)
    U, _ = np.linalg.qr(rng.standard_normal((m, k)))
    V, _ = np.linalg.qr(rng.standard_normal((d, k)))
    return jnp.asarray(U @ np.diag(s) @ V.T)


# -- spectral --------------------------------------------------------------------------------------------


def test_ranks_and_norms_from_known_singular_values():
    s = np.array([3.0, 2.0, 1.0, 1e-9])
    W = with_singular_values(s, 7, 5)
    np.testing.assert_allclose(singular_values(W)[:4], s, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(spectral_norm(W), 3.0, rtol=1e-12)
    np.testing.assert_allclose(frobenius_norm(W), np.sqrt(np.sum(s**2)), rtol=1e-12)
    np.testing.assert_allclose(nuclear_norm(W), np.sum(s), rtol=1e-12)
    np.testing.assert_allclose(stable_rank(W), np.sum(s**2) / 9.0, rtol=1e-12)
    assert int(numerical_rank(W)) == 3
    assert int(numerical_rank(W, tol=1e-12)) == 4
    p = s / s.sum()
    np.testing.assert_allclose(effective_rank(W), np.exp(-np.sum(p * np.log(p))), rtol=1e-8)
    np.testing.assert_allclose(singular_value_ratio(W, 3), 1.0 / 3.0, rtol=1e-12)
    np.testing.assert_allclose(singular_value_ratio(W, 1), 1.0, rtol=1e-14)
    assert float(singular_value_ratio(W, 6)) == 0.0  # beyond min(m, d)


def test_rank_extremes():
    flat = with_singular_values(np.full(4, 2.0), 7, 5, seed=1)
    np.testing.assert_allclose(stable_rank(flat), 4.0, rtol=1e-12)
    np.testing.assert_allclose(effective_rank(flat), 4.0, rtol=1e-12)
    rank_one = jnp.outer(jnp.arange(1.0, 8.0), jnp.arange(1.0, 6.0))
    np.testing.assert_allclose(stable_rank(rank_one), 1.0, rtol=1e-12)
    np.testing.assert_allclose(effective_rank(rank_one), 1.0, rtol=1e-12)
    assert int(numerical_rank(rank_one)) == 1


def test_zero_matrix_gives_zeros_not_nan():
    Z = jnp.zeros((7, 5))
    for fn in (stable_rank, effective_rank, numerical_rank, spectral_norm, nuclear_norm, frobenius_norm):
        assert float(fn(Z)) == 0.0, fn.__name__
    assert float(singular_value_ratio(Z, 2)) == 0.0


def test_spectral_under_jit_and_vmap():
    Ws = jnp.stack([with_singular_values(np.array([2.0, 1.0]), 7, 5, seed=i) for i in range(3)])
    out = jax.jit(jax.vmap(lambda W: jnp.stack([stable_rank(W), effective_rank(W)])))(Ws)
    np.testing.assert_allclose(out[:, 0], 1.25, rtol=1e-12)
    p = np.array([2.0, 1.0]) / 3.0
    np.testing.assert_allclose(out[:, 1], np.exp(-np.sum(p * np.log(p))), rtol=1e-10)


def test_singular_value_ratio_rejects_k_zero():
    with pytest.raises(ValueError, match="counted from k = 1"):
        singular_value_ratio(jnp.eye(5), 0)


# -- margins ---------------------------------------------------------------------------------------------


def test_margins_normalized_margin_and_spread():
    pred = jnp.array([2.0, -1.0, 0.5])
    y = jnp.array([1.0, -1.0, 1.0])
    q = margins(pred, y)
    np.testing.assert_allclose(q, [2.0, 1.0, 0.5])
    np.testing.assert_allclose(normalized_margin(q, 2.0, 2), 0.5 / 4.0)
    np.testing.assert_allclose(margin_spread(q), 4.0)
    assert float(margin_spread(jnp.array([1.0, -0.1]))) == np.inf
    assert float(margin_spread(jnp.array([1.0, 0.0]))) == np.inf


def test_accuracy_counts_zero_prediction_as_wrong():
    pred = jnp.array([1.0, -2.0, 0.0, 3.0])
    y = jnp.array([1.0, -1.0, 1.0, -1.0])
    np.testing.assert_allclose(accuracy(pred, y), 0.5)


def test_cosine_and_unit_distance():
    u = jnp.array([1.0, 0.0, 0.0])
    v = jnp.array([3.0, 3.0, 0.0])
    np.testing.assert_allclose(cosine(u, v), 1 / np.sqrt(2), rtol=1e-14)
    np.testing.assert_allclose(unit_distance(u, v), 2 * np.sin(np.pi / 8), rtol=1e-14)
    np.testing.assert_allclose(cosine(u, -2.0 * u), -1.0)
    np.testing.assert_allclose(unit_distance(u, -2.0 * u), 2.0)
    assert float(cosine(u, jnp.zeros(3))) == 0.0
    tree_a, tree_b = (
        {"W": jnp.ones((2, 2)), "a": jnp.ones(2)},
        {"W": 5 * jnp.ones((2, 2)), "a": 5 * jnp.ones(2)},
    )
    np.testing.assert_allclose(cosine(tree_a, tree_b), 1.0, rtol=1e-14)
    np.testing.assert_allclose(unit_distance(tree_a, tree_b), 0.0, atol=1e-15)


# -- angles ----------------------------------------------------------------------------------------------


def rotated_pair(t, d=5, seed=0):
    """Two vectors of different lengths at angle exactly t (up to rounding of the inputs)."""
    rng = np.random.default_rng(seed)
    e, f = np.linalg.qr(rng.standard_normal((d, 2)))[0].T
    return 2.5 * e, 0.3 * (np.cos(t) * e + np.sin(t) * f)


@pytest.mark.parametrize("t", [1e-9, 1e-12, np.pi - 1e-9, 0.7])
def test_angle_between_is_accurate(t):
    u, v = rotated_pair(t)
    got = float(angle_between(jnp.asarray(u), jnp.asarray(v)))
    np.testing.assert_allclose(got, t, rtol=0, atol=1e-15)  # absolute accuracy ~ machine epsilon
    if t < 1e-6:
        np.testing.assert_allclose(got, t, rtol=1e-2)
    if np.pi - t < 1e-6:
        np.testing.assert_allclose(np.pi - got, np.pi - t, rtol=1e-2)  # the distance to pi is resolved too


def test_angle_between_edge_cases():
    u = jnp.array([1.0, 2.0])
    assert float(angle_between(u, 3 * u)) < 1e-15
    np.testing.assert_allclose(angle_between(u, -u), np.pi, rtol=1e-15)
    np.testing.assert_allclose(angle_between(u, jnp.zeros(2)), np.pi / 2)


def test_neuron_angles_against_a_loop():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((7, 4))
    W[2] = W[1] * 4.0 + 1e-10 * rng.standard_normal(4)  # a nearly parallel pair
    mask = np.array([True, True, True, False, True, False, True])
    angles = [
        float(angle_between(jnp.asarray(W[j]), jnp.asarray(W[k])))
        for j, k in itertools.combinations(np.flatnonzero(mask), 2)
    ]
    got_max, got_mean = neuron_angles(jnp.asarray(W), jnp.asarray(mask))
    np.testing.assert_allclose(got_max, max(angles), rtol=1e-13)
    np.testing.assert_allclose(got_mean, np.mean(angles), rtol=1e-13)
    only_near = np.zeros(7, bool)
    only_near[[1, 2]] = True
    tiny_max, tiny_mean = neuron_angles(jnp.asarray(W), jnp.asarray(only_near))
    ref = float(angle_between(jnp.asarray(W[1]), jnp.asarray(W[2])))
    np.testing.assert_allclose([tiny_max, tiny_mean], [ref, ref], rtol=1e-12)
    assert 1e-12 < ref < 1e-9


def test_neuron_angles_with_fewer_than_two_active():
    W = jnp.asarray(np.random.default_rng(0).standard_normal((7, 4)))
    for mask in ([False] * 7, [False, True] + [False] * 5):
        mx, mean = neuron_angles(W, jnp.asarray(mask))
        assert float(mx) == 0.0 and float(mean) == 0.0


def test_active_neurons_and_balancedness():
    X = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    W = jnp.array([[1.0, 1.0], [-1.0, -1.0], [-1.0, 0.0], [0.0, 0.0], [-1.0, 2.0]])
    np.testing.assert_array_equal(active_neurons(W, X), [True, False, False, False, True])
    b = jnp.array([0.0, 3.0, 0.0, 0.0, -5.0])
    np.testing.assert_array_equal(active_neurons(W, X, b), [True, True, False, False, False])
    a = jnp.array([2.0, 0.0, 1.0, 0.0, 1.0])
    np.testing.assert_allclose(balancedness(a, W), [2.0, -2.0, 0.0, 0.0, -4.0])
