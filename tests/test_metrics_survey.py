"""Tests of the survey metrics (SCIENCE.md S5, S6, S8): layer alignment of deep linear networks, Schatten
(quasi-)norms, the l1/l2 soft sparsity count, and the existing effective rank they sit beside. Closed forms,
negative controls, refused inputs, and use under jit."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from implicitbias._spec import ConfigError
from implicitbias.metrics import (
    effective_rank,
    frobenius_norm,
    l1_l2_sparsity,
    layer_alignment,
    nuclear_norm,
    schatten_norm,
    spectral_norm,
)


def unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


# -- layer alignment (S5) ---------------------------------------------------------------------------------


def aligned_chain(dims, seed=0):
    """Rank-1 layers W_i = s_i u_{i+1} u_i^T: the aligned limit of Ji & Telgarsky 2019."""
    rng = np.random.default_rng(seed)
    us = [unit(rng.normal(size=d)) for d in dims]
    return [(i + 2.0) * np.outer(us[i + 1], us[i]) for i in range(len(dims) - 1)]


def test_aligned_layers_give_one():
    Ws = aligned_chain([5, 4, 3, 2])
    np.testing.assert_allclose(layer_alignment(Ws), [1.0, 1.0], atol=1e-12)
    # signs of singular vectors do not matter: flip one layer
    Ws[1] = -Ws[1]
    np.testing.assert_allclose(layer_alignment(Ws), [1.0, 1.0], atol=1e-12)


def test_alignment_by_hand():
    # W1 = diag(2, 1): top left singular vector e_1. W2 = v^T with v = (cos t, sin t): top right singular vector v.
    t = 0.3
    W1 = np.diag([2.0, 1.0])
    W2 = np.array([[np.cos(t), np.sin(t)]])
    assert float(layer_alignment([W1, W2])[0]) == pytest.approx(np.cos(t), rel=1e-12)
    # orthogonal: v = e_2 against e_1 -> 0 (negative control for the aligned case)
    assert float(layer_alignment([W1, np.array([[0.0, 1.0]])])[0]) == pytest.approx(0.0, abs=1e-12)


def test_random_layers_are_not_aligned_and_zero_layer_gives_zero():
    rng = np.random.default_rng(1)
    Ws = [rng.normal(size=(6, 6)) for _ in range(3)]
    a = np.asarray(layer_alignment(Ws))
    assert a.shape == (2,) and np.all((a >= 0) & (a < 0.99))
    assert float(layer_alignment([Ws[0], np.zeros((6, 6))])[0]) == 0.0


def test_layer_alignment_under_jit():
    Ws = aligned_chain([3, 3, 3])
    np.testing.assert_allclose(jax.jit(layer_alignment)(Ws), [1.0], atol=1e-12)


# -- Schatten norms and effective rank (S8) ----------------------------------------------------------------


def test_schatten_closed_forms():
    M = np.diag([4.0, 1.0, 0.0])
    assert float(schatten_norm(M, 1)) == pytest.approx(5.0, rel=1e-14)
    assert float(schatten_norm(M, 2)) == pytest.approx(math.sqrt(17.0), rel=1e-14)
    assert float(schatten_norm(M, 0.5)) == pytest.approx(9.0, rel=1e-14)  # (2 + 1)^2
    assert float(schatten_norm(M, math.inf)) == pytest.approx(4.0, rel=1e-14)
    rng = np.random.default_rng(2)
    A = rng.normal(size=(5, 3))
    assert float(schatten_norm(A, 1)) == pytest.approx(float(nuclear_norm(A)), rel=1e-12)
    assert float(schatten_norm(A, 2)) == pytest.approx(float(frobenius_norm(A)), rel=1e-12)
    assert float(schatten_norm(A, 200.0)) == pytest.approx(float(spectral_norm(A)), rel=1e-2)
    assert float(schatten_norm(np.zeros((3, 3)), 0.5)) == 0.0


def test_schatten_quasi_norm_breaks_the_triangle_inequality():
    A, B = np.diag([1.0, 0.0]), np.diag([0.0, 1.0])
    # p = 1/2: ||A + B|| = (1 + 1)^2 = 4 > ||A|| + ||B|| = 2, so it is only a quasi-norm (negative control: p = 1 holds)
    assert float(schatten_norm(A + B, 0.5)) == pytest.approx(4.0) and float(schatten_norm(A + B, 0.5)) > 2.0
    assert float(schatten_norm(A + B, 1)) <= float(schatten_norm(A, 1)) + float(schatten_norm(B, 1)) + 1e-12


def test_schatten_small_p_does_not_underflow():
    M = np.diag([1e-3, 1e-6])
    expected = 1e-3 * (1.0 + 1e-3**0.01) ** 100  # sigma_1 (sum (sigma_k / sigma_1)^p)^(1/p)
    assert float(schatten_norm(M, 0.01)) == pytest.approx(expected, rel=1e-10)
    assert np.isfinite(float(jax.jit(lambda m: schatten_norm(m, 0.01))(M)))


def test_effective_rank_is_reused_from_spectral():
    assert float(effective_rank(np.eye(4))) == pytest.approx(4.0, rel=1e-12)
    assert float(effective_rank(np.outer([1.0, 2.0], [3.0, 1.0]))) == pytest.approx(1.0, rel=1e-12)
    # sigma = (2, 1): p = (2/3, 1/3), exp(H) = exp(-(2/3) log(2/3) - (1/3) log(1/3))
    h = -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)
    assert float(effective_rank(np.diag([2.0, 1.0]))) == pytest.approx(math.exp(h), rel=1e-12)


# -- l1/l2 sparsity (S6) ----------------------------------------------------------------------------------


def test_l1_l2_sparsity_counts_equal_entries():
    assert float(l1_l2_sparsity([3.0, 0.0, 0.0, -3.0])) == pytest.approx(2.0, rel=1e-14)
    assert float(l1_l2_sparsity(np.ones((2, 3)))) == pytest.approx(6.0, rel=1e-14)  # any shape, flattened
    assert float(l1_l2_sparsity(np.zeros(5))) == 0.0
    # unequal magnitudes count less than the support (negative control for a hard count): (1 + 0.1)^2 / 1.01
    assert float(l1_l2_sparsity([1.0, 0.1])) == pytest.approx(1.21 / 1.01, rel=1e-14) and 1.0 < 1.21 / 1.01 < 2.0


def test_l1_l2_sparsity_of_a_dense_vector_is_near_2d_over_pi():
    w = np.random.default_rng(3).normal(size=20000)
    assert float(jax.jit(l1_l2_sparsity)(jnp.asarray(w))) / 20000 == pytest.approx(2 / math.pi, rel=0.02)


# -- refused inputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: schatten_norm(np.eye(2), 0.0), "p = 0.0"),
        (lambda: schatten_norm(np.eye(2), -1), "p = -1"),
        (lambda: layer_alignment([np.eye(3)]), "Ws with 1 layer"),
        (lambda: layer_alignment([np.ones((4, 3)), np.ones((2, 3))]), "Ws[0], Ws[1] of shapes (4, 3), (2, 3)"),
    ],
)
def test_bad_inputs_are_refused_naming_the_argument(call, names):
    with pytest.raises(ConfigError) as info:
        call()
    assert names in str(info.value) and "not allowed" in str(info.value)
