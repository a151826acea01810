"""One table of every model x loss through the same checks (in the manner of optax's alias tests):
finite-difference gradients in float64, homogeneity, and finite losses at extreme margins."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from implicitbias.losses import Loss, exponential, logistic
from implicitbias.models import (
    DeepLinear,
    DiagonalLinear,
    Linear,
    MatrixFactorization,
    SingleNeuron,
    TwoLayer,
)

MODELS = {
    "frei_leaky": TwoLayer(width=6, activation="leaky_relu", gamma=0.3),
    "kou_relu": TwoLayer(width=6, activation="relu", outer_scale="inv_half_width"),
    "smooth_leaky_bias": TwoLayer(width=5, activation="smooth_leaky_relu", gamma=0.5, bias=True,
                                  outer_signs="random"),
    "chistikov_balanced": TwoLayer(width=6, activation="relu", train_outer=True, init_scheme="balanced"),
    "glorot_trained_bias": TwoLayer(width=5, activation="relu", train_outer=True, bias=True,
                                    init_scheme="glorot_uniform"),
    "identity": TwoLayer(width=4, activation="identity"),
    "linear": Linear(),
    "deep_linear": DeepLinear(depth=3, hidden=4),
    "diagonal_product": DiagonalLinear(depth=3, form="product"),
    "diagonal_difference": DiagonalLinear(depth=2, form="difference"),
    "matrix_factorization": MatrixFactorization(depth=3, dim=3, init_scheme="gaussian"),
    "single_neuron": SingleNeuron(activation="leaky_relu", gamma=0.2),
}
LOSSES = ["logistic", "exponential", "square"]


def _setup(name, model):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    d = 9 if isinstance(model, MatrixFactorization) else 5
    X = jnp.asarray(rng.normal(size=(7, d)))
    theta, const = model.init(jax.random.PRNGKey(1), d, 0.7)
    # move diagonal nets off their symmetric init so that every coordinate matters
    theta = jax.tree_util.tree_map(lambda a: a + 0.3 * jnp.asarray(rng.normal(size=a.shape)), theta)
    return X, theta, const, rng


@pytest.mark.parametrize("loss_name", LOSSES)
@pytest.mark.parametrize("name", list(MODELS))
def test_gradient_matches_finite_differences(name, loss_name):
    model, loss = MODELS[name], Loss(name=loss_name)
    X, theta, const, rng = _setup(name, model)
    y = jnp.asarray(np.sign(rng.normal(size=7)) if loss.is_classification else rng.normal(size=7))
    risk = lambda th: loss.risk(model.predict(th, const, X), y)
    h = 1e-6

    @jax.jit
    def derivatives(v):
        step = lambda s: jax.tree_util.tree_map(lambda a, b: a + s * h * b, theta, v)
        fd = (risk(step(1.0)) - risk(step(-1.0))) / (2 * h)
        g = jax.grad(risk)(theta)
        ad = sum(jnp.vdot(a, b) for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(v)))
        return fd, ad

    for _ in range(3):
        v = jax.tree_util.tree_map(lambda a: jnp.asarray(rng.normal(size=a.shape)), theta)
        fd, ad = derivatives(v)
        assert abs(fd - ad) <= 1e-6 * max(1.0, abs(ad)), (name, loss_name, fd, ad)


@pytest.mark.parametrize("name", list(MODELS))
def test_homogeneity_degree(name):
    model = MODELS[name]
    X, theta, const, _ = _setup(name, model)
    if model.homogeneity is None:
        assert name in ("smooth_leaky_bias", "glorot_trained_bias")
        return
    c = 1.7
    f1 = model.predict(theta, const, X)
    f2 = model.predict(jax.tree_util.tree_map(lambda a: c * a, theta), const, X)
    np.testing.assert_allclose(f2, c**model.homogeneity * f1, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_logistic_loss_finite_and_correct_at_extreme_margins(dtype):
    q = jnp.asarray([-1e3, -30.0, 0.0, 30.0, 1e3], dtype=dtype)
    val = logistic(q)
    grad = jax.vmap(jax.grad(logistic))(q)
    assert jnp.all(jnp.isfinite(val)) and jnp.all(jnp.isfinite(grad))
    np.testing.assert_allclose(val[0], 1e3, rtol=1e-6)
    np.testing.assert_allclose(val[2], np.log(2.0), rtol=1e-6)
    # log(1 + e^-1000) = e^-1000 is below every representable positive number: 0, or at most the dtype's
    # smallest normal number (float32: 1.2e-38, float64: 2.2e-308)
    assert 0.0 <= float(val[4]) <= float(jnp.finfo(dtype).tiny)
    # log(1 + e^-30) in float64 arithmetic: a relative error of a few ulps of the dtype
    np.testing.assert_allclose(float(val[3]), np.log1p(np.exp(-30.0)), rtol=8 * float(jnp.finfo(dtype).eps))
    np.testing.assert_allclose(grad, [-1.0, -1.0, -0.5, -np.exp(-30.0), 0.0], rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("dtype,q_max", [(jnp.float64, 700.0), (jnp.float32, 80.0)])
def test_exponential_loss_finite_where_representable(dtype, q_max):
    q = jnp.asarray([-q_max, 0.0, q_max, 1e3], dtype=dtype)
    val = exponential(q)
    grad = jax.vmap(jax.grad(exponential))(q)
    assert jnp.all(jnp.isfinite(val)) and jnp.all(jnp.isfinite(grad))
    np.testing.assert_allclose(val[:3], np.exp(-np.asarray([-q_max, 0.0, q_max])), rtol=1e-5)
    assert float(val[3]) == 0.0


def test_square_loss_has_the_half_convention():
    assert float(Loss(name="square").risk(jnp.asarray([3.0, 1.0]), jnp.asarray([1.0, 1.0]))) == 1.0
