"""Mirror descent and the methods that own their stepping (S7): limits against the Bregman projection on fresh
seeds, GD against X^+, bad potentials refused before training, a method added in one place, and the S7 theorem
with a positive case, a negative control and an outside-scope case."""

import dataclasses
from typing import Literal

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from implicitbias._spec import ConfigError
from implicitbias.data import Dataset, SparseRegression
from implicitbias.losses import Loss
from implicitbias.models import Linear, TwoLayer
from implicitbias.papers.gunasekar2018_geometry.theorems import BregmanLimit
from implicitbias.reference import HyperbolicPotential, LpPotential, bregman_projection, min_l2_interpolator
from implicitbias.runs.execute import dataset_of, train_group
from implicitbias.runs.results import stack_runs
from implicitbias.runs.spec import RunSpec, group_runs
from implicitbias.theorems.base import RunContext
from implicitbias.training import GD, SGD, GradientFlow, HyperbolicEntropy, Lp, MirrorDescent, NormalizedGD, Stop, train
from implicitbias.training.methods import DiscreteMethod

SQUARE = Loss(name="square")


def _regression(n=6, d=15, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    return Dataset(X=X, y=rng.normal(size=n), task="regression"), rng.normal(size=d) * 0.5


def _beta(data) -> float:
    return float(np.linalg.eigvalsh(data.X.T @ data.X / data.n).max())


# -- limits ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("potential, reference", [
    (Lp(p=1.5), LpPotential(1.5)),
    (Lp(p=1.25), LpPotential(1.25)),
    (HyperbolicEntropy(beta=0.3), HyperbolicPotential(0.3)),
])
def test_mirror_descent_reaches_the_bregman_projection(seed, potential, reference):
    data, w0 = _regression(seed=seed)
    expected = bregman_projection(data.X, data.y, w0, reference).w
    # lr below 1 / (beta sup 1/psi'') on the box of the iterates (relative smoothness)
    box = np.max(np.abs(np.concatenate([w0, expected]))) * 1.5
    lr = 0.5 / (_beta(data) * float(np.max(potential.inverse_curvature(np.array([box, 0.0])))))
    ds = train(Linear(), data, SQUARE, MirrorDescent(lr=lr, potential=potential),
               stop=Stop(max_steps=300_000, loss_tol=1e-30), theta0={"w": w0}, checkpoints=[300_000], kkt=False)
    w = ds["theta.w"].values[0]
    assert np.linalg.norm(w - expected) <= 1e-6 * np.linalg.norm(expected), (ds.step.values, w - expected)
    # and not the l2 projection: the geometry matters
    assert np.linalg.norm(w - min_l2_interpolator(data.X, data.y, w0)) > 1e-3 * np.linalg.norm(expected)


def test_mirror_descent_with_p_2_is_gradient_descent():
    data, w0 = _regression()
    kw = dict(stop=Stop(max_steps=500), theta0={"w": w0}, checkpoints=6, kkt=False)
    lr = 1.0 / _beta(data)
    gd = train(Linear(), data, SQUARE, GD(lr=lr), **kw)
    md = train(Linear(), data, SQUARE, MirrorDescent(lr=lr, potential=Lp(p=2.0)), **kw)
    np.testing.assert_allclose(md["theta.w"].values, gd["theta.w"].values, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(md.time.values, gd.time.values)


@pytest.mark.parametrize("seed", [3, 4])
def test_gd_and_sgd_reach_the_interpolator_closest_to_w0(seed):
    data, w0 = _regression(n=8, d=20, seed=seed)
    expected = w0 + np.linalg.pinv(data.X) @ (data.y - data.X @ w0)
    gd = train(Linear(), data, SQUARE, GD(lr=1.0 / _beta(data)), stop=Stop(max_steps=50_000, loss_tol=1e-30),
               theta0={"w": w0}, checkpoints=4, kkt=False)
    lr_sgd = 1.0 / float(np.max(np.sum(data.X**2, axis=1)))
    sgd = train(Linear(), data, SQUARE, SGD(lr=lr_sgd, batch_size=2), stop=Stop(max_steps=100_000),
                theta0={"w": w0}, checkpoints=4, kkt=False)
    for ds in (gd, sgd):
        np.testing.assert_allclose(ds["theta.w"].values[0], expected, rtol=0, atol=1e-8 * np.linalg.norm(expected))


# -- potentials ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("potential", [Lp(p=1.1), Lp(p=1.5), Lp(p=2.0), HyperbolicEntropy(beta=1.0),
                                       HyperbolicEntropy(beta=1e-12)])
def test_mirror_map_is_inverted_and_matches_the_reference(potential):
    w = np.array([-1e3, -2.5, -1e-7, 0.0, 3e-9, 0.4, 7.0, 1e4])
    z = potential.mirror_map(jnp.asarray(w))
    assert np.all(np.isfinite(z))
    np.testing.assert_allclose(potential.inverse_mirror_map(z), w, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(z, potential.reference().mirror_map(w), rtol=1e-12, atol=0)


@pytest.mark.parametrize("build, field", [
    (lambda: Lp(p=1.0), "p"),
    (lambda: Lp(p=0.5), "p"),
    (lambda: Lp(p=2.5), "p"),
    (lambda: Lp(p=float("nan")), "p"),
    (lambda: HyperbolicEntropy(beta=0.0), "beta"),
    (lambda: HyperbolicEntropy(beta=-1.0), "beta"),
    (lambda: HyperbolicEntropy(beta=float("inf")), "beta"),
    (lambda: MirrorDescent(lr=0.1, potential={"kind": "entropy"}), "potential"),
    (lambda: MirrorDescent(lr=0.0, potential=Lp(p=1.5)), "lr"),
    (lambda: MirrorDescent(lr=0.1), "potential"),
])
def test_bad_potential_is_refused_naming_the_field(build, field):
    with pytest.raises(ConfigError) as info:
        build()
    message = str(info.value)
    assert field in message and "not allowed" in message


def test_bad_potential_in_a_run_spec_names_its_path_before_training():
    with pytest.raises(ConfigError, match=r"method\.potential\.p = 1\.0 is not allowed.*not invertible"):
        RunSpec(model=Linear(), data=SparseRegression(n=5, d=10, k=2), loss=SQUARE,
                method={"kind": "mirror_descent", "lr": 0.1, "potential": {"kind": "lp", "p": 1.0}})


# -- methods own their stepping --------------------------------------------------------------------------------
class HeavyBall(DiscreteMethod):
    """A method added in one place (here, a test): Polyak's heavy ball as an optax transformation."""

    kind: Literal["heavy_ball"] = "heavy_ball"
    momentum: float = 0.5

    def optimizer(self, hp):
        return optax.sgd(hp["lr"], momentum=self.momentum)


def test_a_new_method_trains_through_train_unchanged():
    data, w0 = _regression()
    ds = train(Linear(), data, SQUARE, HeavyBall(lr=0.5 / _beta(data)), stop=Stop(max_steps=20_000, loss_tol=1e-30),
               theta0={"w": w0}, checkpoints=5, kkt=False, batch={"lr": [0.5 / _beta(data), 0.25 / _beta(data)]})
    expected = min_l2_interpolator(data.X, data.y, w0)  # momentum steps stay in w0 + row(X) too
    np.testing.assert_allclose(ds["theta.w"].values, np.stack([expected] * 2), atol=1e-8)
    np.testing.assert_allclose(ds.time.values[:, -1], ds.step.values[:, -1] * ds.lr.values)


@pytest.mark.parametrize("method", [GD(lr=0.05), SGD(lr=0.05, batch_size=2), NormalizedGD(lr=0.05),
                                    MirrorDescent(lr=0.05, potential=Lp(p=1.5)),
                                    MirrorDescent(lr=0.05, potential=HyperbolicEntropy(beta=0.2)),
                                    GradientFlow(rtol=1e-6)])
def test_every_method_declares_its_grid_clock_and_traced_fields(method):
    rng = np.random.default_rng(0)
    data = Dataset(X=rng.normal(size=(6, 4)), y=np.where(rng.random(6) < 0.5, -1.0, 1.0))
    stop = Stop(max_steps=40, max_time=2.0)
    ds = train(TwoLayer(width=4), data, method=method, stop=stop, checkpoints=5, kkt=False)
    grid = method.checkpoint_grid(5, stop)
    np.testing.assert_array_equal(ds.target.values, grid[: ds.sizes["checkpoint"]])
    assert ds.loss.values[0, -1] < ds.loss.values[0, 0]
    if isinstance(method, DiscreteMethod):
        assert method.traced_fields == ("lr",) and not method.is_adaptive
        np.testing.assert_allclose(ds.time.values[0], ds.step.values[0] * method.lr)
        np.testing.assert_array_equal(ds.grad_evals.values[0], ds.step.values[0])
    else:
        assert method.traced_fields == () and method.is_adaptive
        assert np.all(ds.grad_evals.values[0, 1:] > 0)


def test_run_specs_group_by_potential_and_batch_learning_rates():
    data = SparseRegression(n=5, d=10, k=2)
    spec = lambda lr, p: RunSpec(model=Linear(), data=data, loss=SQUARE, stop=Stop(max_steps=10),
                                 method=MirrorDescent(lr=lr, potential=Lp(p=p)), kkt=False)
    runs = [spec(0.1, 1.5), spec(0.2, 1.5), spec(0.1, 1.25)]
    assert runs[0].static_key() == runs[1].static_key() != runs[2].static_key()
    assert [len(g) for g in group_runs(runs)] == [2, 1]
    assert "lr 0.2" in runs[1].label()


# -- the S7 theorem: holds, fails (negative control), outside scope ------------------------------------------------
def _context(method, max_steps, loss_tol=1e-28, init_scale=0.3):
    data = SparseRegression(n=8, d=20, k=2)
    runs = [RunSpec(model=Linear(), data=data, loss=SQUARE, method=method, init_scale=init_scale, seed=s,
                    stop=Stop(max_steps=max_steps, loss_tol=loss_tol), checkpoints=8, kkt=False,
                    keep_trajectory=True) for s in (0, 1)]
    arrays = train_group(runs)
    return RunContext(runs, stack_runs(arrays, runs), [dataset_of(r) for r in runs])


def _outcomes(verdicts, kind):
    return [v.outcome for v in verdicts if v.kind == kind]


@pytest.mark.parametrize("method", [GD(lr=0.02), MirrorDescent(lr=0.01, potential=Lp(p=1.5))])
def test_bregman_limit_holds_on_converged_runs_and_fails_off_the_projection(method):
    ctx = _context(method, max_steps=100_000)
    verdicts = BregmanLimit().check(ctx)
    assert set(_outcomes(verdicts, "assumption")) == {"holds"}, [v.line() for v in verdicts]
    assert _outcomes(verdicts, "prediction") == ["holds"], [v.line() for v in verdicts]
    # negative control: move one run's end point along null(X): still an interpolator, but not the projection
    X = ctx.data[0].X
    v = np.linalg.svd(X)[2][-1]
    w = ctx.results["theta.w"].values.copy()
    w[1] += 1e-4 * v
    bad = dataclasses.replace(ctx, results=ctx.results.assign({"theta.w": (ctx.results["theta.w"].dims, w)}))
    verdicts = BregmanLimit().check(bad)
    assert set(_outcomes(verdicts, "assumption")) == {"holds"}, [v.line() for v in verdicts]
    assert _outcomes(verdicts, "prediction") == ["fails"], [v.line() for v in verdicts]


def test_bregman_limit_is_outside_scope_before_interpolation():
    ctx = _context(GD(lr=0.02), max_steps=20)
    verdicts = BregmanLimit().check(ctx)
    assert "fails" in _outcomes(verdicts, "assumption")
    assert _outcomes(verdicts, "prediction") == ["outside_scope"], [v.line() for v in verdicts]


def test_step_size_above_the_bound_is_an_assumption_failure():
    data = SparseRegression(n=8, d=20, k=2).generate(0)
    beta = _beta(data)
    ctx = _context(GD(lr=2.5 / beta), max_steps=5)
    verdicts = BregmanLimit().check(ctx)
    step = [v for v in verdicts if v.kind == "assumption" and "step size" in v.statement]
    assert step[0].outcome == "fails"
    assert _outcomes(verdicts, "prediction") in (["outside_scope"], ["not_evaluated"])
