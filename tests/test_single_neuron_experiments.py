"""Vardi & Shamir 2021 (S9): the neuron-teacher data, the two theorems on real gradient-flow runs (positive cases)
and on zero-loss points moved along the null space of X (negative controls: the loss stays 0, the prediction
must fail), and the experiment's declaration."""

import numpy as np
import pytest

import _table_instances as ti
from implicitbias._spec import ConfigError
from implicitbias.experiments import get
from implicitbias.losses import Loss
from implicitbias.models import SingleNeuron
from implicitbias.papers.vardi2021.data import NeuronTeacher
from implicitbias.papers.vardi2021.experiments import not_min_norm_threshold
from implicitbias.papers.vardi2021.theorems import VardiLeakyNeuron, VardiReluNeuron, relu_min_norm
from implicitbias.reference import neuron_preimage_projection, single_neuron_min_norm
from implicitbias.reference.single_neuron import certified_relu_min_norm
from implicitbias.runs import RunSpec
from implicitbias.theorems.base import RunContext
from implicitbias.training.methods import GD, GradientFlow
from implicitbias.training.stopping import Stop
from implicitbias.training.train import train

GF = GradientFlow(rtol=1e-8)


def _run(activation, seeds, scale, loss_tol):
    """Real gradient-flow runs, one per seed (fresh data and init), as a RunContext."""
    spec = NeuronTeacher(n=6, d=15, activation=activation, teacher_cos=0.15)
    model = SingleNeuron(activation=activation, gamma=0.5)
    stop = Stop(loss_tol=loss_tol, max_time=1e5)
    data = [spec.generate(s) for s in seeds]
    ds = train(model, data, Loss(name="square"), GF, stop=stop, batch={"seed": list(seeds), "init_scale": [scale] * len(
        seeds)}, checkpoints=10, keep_trajectory=True, kkt=False, compact=False)
    runs = [RunSpec(model=model, data=spec, data_seed=s, loss=Loss(name="square"), method=GF, stop=stop, seed=s,
                    init_scale=scale, checkpoints=10, kkt=False, keep_trajectory=True) for s in seeds]
    return RunContext(runs=runs, results=ds, data=data)


def _outcomes(verdicts, kind="prediction"):
    return [v.outcome for v in verdicts if v.kind == kind]


def _null_direction(X, rng):
    """A unit vector v with X v = 0 (n < d)."""
    _, _, Vt = np.linalg.svd(X)
    v = Vt[X.shape[0]:].T @ rng.standard_normal(X.shape[1] - X.shape[0])
    return v / np.linalg.norm(v)


def test_neuron_teacher_data():
    ds = NeuronTeacher(n=5, d=12, activation="leaky_relu", gamma=0.3, n_test=4).generate(0)
    w = ds.info["w_star"]
    z = ds.X @ w
    np.testing.assert_allclose(ds.y, np.where(z > 0, z, 0.3 * z))
    assert np.linalg.norm(w) == pytest.approx(1.0) and ds.X_test.shape == (4, 12)
    relu = NeuronTeacher(n=200, d=12).generate(1)
    assert 0.2 < np.mean(relu.y == 0) < 0.8  # teacher orthogonal to the mean: about half the labels are 0
    with pytest.raises(ConfigError, match="gamma"):
        NeuronTeacher(gamma=0.0)


def test_leaky_limit_is_the_closest_interpolator_and_a_moved_point_fails():
    run = _run("leaky_relu", [0, 1], 0.5, 1e-18)
    verdicts = VardiLeakyNeuron().check(run)
    assert set(_outcomes(verdicts, "assumption")) == {"holds"}, [v.line() for v in verdicts]
    assert set(_outcomes(verdicts)) == {"holds"}, [v.line() for v in verdicts]
    # negative control: the final point moved by 1e-6 along the null space of X (still zero loss)
    w = run.results["theta.w"].values.copy()
    w[1] += 1e-6 * np.linalg.norm(w[1]) * _null_direction(run.data[1].X, np.random.default_rng(0))
    moved = RunContext(run.runs, run.results.assign({"theta.w": (run.results["theta.w"].dims, w)}), run.data)
    out = VardiLeakyNeuron().check(moved)
    assert set(_outcomes(out, "assumption")) == {"holds"}
    assert _outcomes(out) == ["fails", "fails"], [v.line() for v in out]


def test_relu_norm_bound_holds_and_a_large_zero_loss_point_fails():
    run = _run("relu", [1, 4, 5], 3e-5, 1e-20)  # seeds that reach zero loss (some stop at a spurious point)
    verdicts = VardiReluNeuron().check(run)
    assert set(_outcomes(verdicts, "assumption")) == {"holds"}, [v.line() for v in verdicts]
    assert _outcomes(verdicts) == ["holds"], [v.line() for v in verdicts]
    # negative control: w_min + 3 ||w_min|| v with X v = 0 has zero loss and ||w|| = sqrt(10) ||w_min|| > 2 ||w_min||
    w = run.results["theta.w"].values.copy()
    wm = single_neuron_min_norm(run.data[0].X, run.data[0].y)
    w[0] = wm + 3.0 * np.linalg.norm(wm) * _null_direction(run.data[0].X, np.random.default_rng(1))
    big = RunContext(run.runs, run.results.assign({"theta.w": (run.results["theta.w"].dims, w)}), run.data)
    out = VardiReluNeuron().check(big)
    assert _outcomes(out) == ["fails"], [v.line() for v in out]
    assert "run 0" in [v for v in out if v.kind == "prediction"][0].note


def test_assumptions_failing_make_predictions_outside_scope():
    run = _run("relu", [1], 3e-5, 1e-20)
    # the leaky theorem on a ReLU run: its activation assumption fails
    out = VardiLeakyNeuron().check(run)
    assert "fails" in _outcomes(out, "assumption")
    assert set(_outcomes(out)) <= {"outside_scope", "not_evaluated"}
    # a large init (||w0|| not small against ||w_min||): outside scope, never a failed bound
    out = VardiReluNeuron(init_ratio_max=1e-9).check(run)
    assert "fails" in _outcomes(out, "assumption") and _outcomes(out) == ["outside_scope"]
    # no run reached zero loss: the hypothesis fails and the bound is not evaluated (nothing to measure it on)
    out = VardiReluNeuron(loss_tol=1e-40).check(run)
    assert "fails" in _outcomes(out, "assumption")
    assert _outcomes(out) == ["not_evaluated"] and "no run reached zero loss" in out[-1].note


def test_leaky_reference_matches_the_closed_form():
    ds = NeuronTeacher(n=4, d=9, activation="leaky_relu", gamma=0.25).generate(3)
    w0 = np.random.default_rng(0).standard_normal(9)
    w = neuron_preimage_projection(ds.X, ds.y, w0, 0.25)
    z = ds.X @ w
    np.testing.assert_allclose(np.where(z > 0, z, 0.25 * z), ds.y, atol=1e-12)
    assert np.linalg.matrix_rank(np.vstack([ds.X, w - w0]), tol=1e-10) == ds.n  # w - w0 in the row space


def test_experiment_is_catalogued_with_two_parts_and_100_relu_seeds():
    exp = get("vardi2021-single-neuron")
    for quick in (True, False):
        runs = exp.runs(exp.resolve(quick=quick))
        relu = [r for r in runs if r.part == "relu"]
        assert len(relu) >= 100 and len({(r.seed, r.data_seed) for r in relu}) == len(relu)
        assert all(r.keep_trajectory and r.method.kind == "gf" for r in runs)
    with pytest.raises(ConfigError, match="model.gamma"):
        exp.resolve(quick=True, overrides={"model.gamma": -1.0})


def test_gd_is_read_as_an_approximation_not_a_failure():
    run = _run("relu", [1], 3e-5, 1e-20)
    specs = [r.replace(method=GD(lr=0.01)) for r in run.runs]
    out = VardiReluNeuron().check(RunContext(specs, run.results, run.data))
    flow = [v for v in out if "gradient flow" in v.statement][0]
    assert flow.outcome == "not_evaluated" and _outcomes(out) == ["holds"]


def test_relu_reference_is_certified_and_the_claim_threshold_covers_its_error():
    """Issue 24, item 9: the QP reference w_min is polished on its active set and certified by a duality gap; the
    claim "some seed ends away from w_min" needs a distance above the certified error plus the final loss's
    allowance (a threshold of 1e-4 was 1.5x the Clarabel answer's error of up to 6.5e-5), so a limit at w_min fails
    it and one moved 10x the threshold along the null space of X (zero loss kept) passes."""
    for seed in range(3):
        ds = NeuronTeacher(n=10, d=30, teacher_cos=0.15).generate(seed)
        ref = certified_relu_min_norm(ds.X, ds.y)
        pos, z = ds.y > 0, ds.X @ ref.w
        assert np.max(np.abs(z[pos] - ds.y[pos])) <= 1e-12 and np.max(z[~pos], initial=-1.0) <= 1e-12
        assert ref.error <= 1e-6 * np.linalg.norm(ref.w)
        # from a start 1e-3 off, the same active set and the same point
        start = single_neuron_min_norm(ds.X, ds.y) + 1e-3 * np.random.default_rng(seed).standard_normal(ds.d)
        assert np.linalg.norm(certified_relu_min_norm(ds.X, ds.y, start).w - ref.w) <= 1e-10 * np.linalg.norm(ref.w)
    ctx = ti.vardi_relu()
    threshold, what = not_min_norm_threshold(ctx, 0)
    assert "certified" in what and 0 < threshold < 1e-6
    w, X = ctx.results["theta.w"].values[0], ctx.data[0].X
    w_min = relu_min_norm(ctx.data[0])
    assert not np.linalg.norm(w - w_min) / np.linalg.norm(w) > threshold
    moved = w + 10 * threshold * np.linalg.norm(w) * _null_direction(X, np.random.default_rng(0))
    assert np.linalg.norm(moved - w_min) / np.linalg.norm(w) > threshold
