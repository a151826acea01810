"""`kink_max_angle`: Figure 1's max angle with the neurons that end sitting on a ReLU kink counted as inactive."""

import jax.numpy as jnp
import numpy as np
import pytest

from implicitbias.metrics.angles import active_neurons, neuron_angles
from implicitbias.metrics.neurons import KINK_COS, kink_max_angle


def _bundle_and_stray(cos_stray: float, d: int = 8, seed: int = 0):
    """Ten neurons within ~1e-3 rad of e_1, the training inputs, and one small stray neuron whose largest cosine to
    a training input is `cos_stray` (its only input on the positive side is x_0) and far from the bundle."""
    rng = np.random.default_rng(seed)
    e1 = np.eye(d)[0]
    bundle = e1 + 1e-3 * rng.standard_normal((10, d))
    X = np.vstack([e1 + 0.1 * np.eye(d)[1], e1 + 0.1 * np.eye(d)[2], e1 - 0.1 * np.eye(d)[1]])
    x0 = X[0] / np.linalg.norm(X[0])
    # a direction orthogonal to x0, negative on the other inputs, tilted towards x0 by cos_stray
    u = -e1 + 10.0 * np.eye(d)[1] - np.eye(d)[3]
    u = u - (u @ x0) * x0
    u /= np.linalg.norm(u)
    stray = 1e-7 * (cos_stray * x0 + np.sqrt(1 - cos_stray**2) * u)
    return np.vstack([bundle, stray]), X


def test_kink_zero_is_the_recorded_max_angle():
    rng = np.random.default_rng(1)
    W, X = rng.standard_normal((30, 5)), rng.standard_normal((7, 5))
    recorded, _ = neuron_angles(jnp.asarray(W), active_neurons(jnp.asarray(W), jnp.asarray(X)))
    assert kink_max_angle(W, X, kink=0.0) == pytest.approx(float(recorded), rel=1e-12)


def test_a_neuron_on_a_kink_does_not_set_the_max_angle():
    W, X = _bundle_and_stray(1e-7)
    cos = (X @ W[-1]) / (np.linalg.norm(X, axis=1) * np.linalg.norm(W[-1]))
    assert 0 < cos.max() < KINK_COS and np.sum(cos > 0) == 1
    recorded, _ = neuron_angles(jnp.asarray(W), active_neurons(jnp.asarray(W), jnp.asarray(X)))
    assert float(recorded) > 1.0  # the recorded max angle counts the stray neuron: active by 1e-7
    assert kink_max_angle(W, X) < 1e-2  # off the kink only the bundle is left


def test_a_neuron_active_beyond_the_kink_resolution_still_counts():
    # negative control: the same stray neuron, now at cos 1e-3 to x_0, is active by any tolerance and sets the angle
    W, X = _bundle_and_stray(1e-3)
    assert kink_max_angle(W, X) > 1.0
    assert kink_max_angle(W, X) == pytest.approx(kink_max_angle(W, X, kink=0.0), rel=1e-12)


def test_a_zero_neuron_is_not_active():
    W, X = _bundle_and_stray(1e-3)
    W[-1] = 0.0
    assert kink_max_angle(W, X) < 1e-2


def test_stored_with_every_two_layer_run_without_a_bias():
    from types import SimpleNamespace

    from implicitbias.metrics.final import final_metrics

    W, X = _bundle_and_stray(1e-7)
    spec = SimpleNamespace(model=SimpleNamespace(kind="two_layer"), init_scale=1.0)
    data = SimpleNamespace(X=X, info={})
    theta = {"W": W, "a": np.linalg.norm(W, axis=1)}
    out = final_metrics(spec, theta, data)
    assert float(out["kink_max_angle"]) == kink_max_angle(W, X) < 1e-2
    assert "kink_max_angle" not in final_metrics(spec, {**theta, "b": np.zeros(len(W))}, data)
