"""Behaviours that had no test (issue 12, item 4): one member of a batch diverging while the others match solo
runs, an experiment resumed across its cells and invalidated by a changed config, a bad-input table over every
data generator, float32 and integer arrays given to `train`, normalised GD against a hand-written loop, and SGD
with batch = n against GD, step for step."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import annotated_types
import numpy as np
import pytest

from implicitbias._spec import ConfigError
from implicitbias.data import GENERATORS, Dataset, data_spec
from implicitbias.losses import Loss
from implicitbias.models import Linear, TwoLayer
from implicitbias.training import GD, SGD, GradientFlow, NormalizedGD, Stop, train

SQUARE, LOGISTIC, EXPONENTIAL = Loss(name="square"), Loss(name="logistic"), Loss(name="exponential")


def _regression(n=8, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return Dataset(X=rng.normal(size=(n, d)), y=rng.normal(size=n), task="regression")


def _classification(n=6, d=3, seed=0, n_test=0):
    rng = np.random.default_rng(seed)
    labels = lambda k: np.where(rng.random(k) < 0.5, -1.0, 1.0)
    X, y = rng.normal(size=(n, d)), labels(n)
    X_test, y_test = (rng.normal(size=(n_test, d)), labels(n_test)) if n_test else (None, None)
    return Dataset(X=X, y=y, X_test=X_test, y_test=y_test)


def _curves(ds) -> list[str]:
    """The float variables recorded over (run, checkpoint), and the final parameters."""
    return [v for v in ds.data_vars if ds[v].dtype.kind == "f" and (ds[v].dims[1:2] == ("checkpoint",)
                                                                   or v.startswith("theta."))]


def _assert_member_equals_solo(batch, r: int, solo, rtol: float = 1e-12) -> None:
    """Member r of a batch against a run of its spec alone: every recorded metric and the final parameters,
    to `rtol` relative to the size of each variable."""
    names = _curves(solo)
    assert "loss" in names and any(n.startswith("theta.") for n in names), names
    assert str(batch.status_name.values[r]) == str(solo.status_name.values[0])
    for name in names:
        a, b = np.asarray(batch[name].values[r]), np.asarray(solo[name].values[0])
        assert a.shape == b.shape, name
        scale = np.max(np.abs(b[np.isfinite(b)]), initial=0.0)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=name)


# -- 1. one member of a batch diverging --------------------------------------------------------------------


def _gd_until_divergence(data: Dataset, w0: np.ndarray, lr: float, factor: float) -> tuple[int, np.ndarray]:
    """GD on the square loss written out, with the stopping rule of `Stop`: the first step k whose loss exceeds
    factor x max(L_0, 1) or whose update exceeds factor x max(|w_k|, 1), and the iterate w_{k-1} before it."""
    X, y, n = data.X, data.y, data.n
    w, previous, limit = w0, w0, factor * max(0.5 * np.mean((X @ w0 - y) ** 2), 1.0)
    for k in range(1000):
        residual = X @ w - y
        update = lr * X.T @ residual / n
        if 0.5 * np.mean(residual**2) > limit or np.linalg.norm(update) > factor * max(np.linalg.norm(w), 1.0):
            return k, previous
        previous, w = w, w - update
    raise AssertionError("no divergence")


def test_gd_batch_with_one_diverging_learning_rate_reports_it_and_leaves_the_others_as_run_alone():
    data = _regression()
    beta = np.linalg.eigvalsh(data.X.T @ data.X / data.n).max()
    lrs = [0.3 / beta, 4.0 / beta, 1.0 / beta]  # |1 - lr beta| = 3 on the top eigendirection: the loss grows 9x a step
    w0 = np.random.default_rng(1).normal(size=data.d)
    kw = dict(stop=Stop(max_steps=100), checkpoints=6, kkt=False, theta0={"w": w0})
    ds = train(Linear(), data, SQUARE, GD(), batch={"lr": lrs}, **kw)
    assert list(ds.status_name.values) == ["budget", "diverged", "budget"]
    fail, last_finite = _gd_until_divergence(data, w0, lrs[1], Stop().divergence_factor)
    assert list(ds.fail_step.values) == [-1, fail, -1] and 1 < fail < 100
    message = str(ds.message.values[1])
    assert f"diverged at step {fail}" in message and f"{lrs[1]:g}" in message and "method.lr" in message, message
    # it stops at its last finite state, the iterate before the step that turned bad; nothing non-finite recorded
    assert int(ds.step.values[1, -1]) == fail - 1
    np.testing.assert_allclose(ds["theta.w"].values[1], last_finite, rtol=1e-12)
    assert np.all(np.isfinite(ds.loss.values)) and np.all(np.isfinite(ds["theta.w"].values))
    for r in (0, 2):
        _assert_member_equals_solo(ds, r, train(Linear(), data, SQUARE, GD(lr=lrs[r]), **kw))
    alone = train(Linear(), data, SQUARE, GD(lr=lrs[1]), **kw)
    assert int(alone.fail_step.values[0]) == fail and str(alone.message.values[0]) == message
    np.testing.assert_allclose(alone["theta.w"].values[0], ds["theta.w"].values[1], rtol=1e-12)


def test_gradient_flow_batch_with_one_overflowing_member_reports_it_and_leaves_the_others_as_run_alone():
    """Gradient flow decreases the loss, so a member can fail only numerically: at init scale 1000 the exponential
    loss of some margins exceeds e^709 and overflows.  That member is diverged at step 0, without a single solver
    step (an adaptive solve would spend all of max_solver_steps on it); the others go on."""
    data = _classification(n=6, d=3)
    scales = [0.5, 1000.0, 1.0, 2.0]  # after the first chunk the three running members go on as a group of 4
    kw = dict(method=GradientFlow(solver="tsit5", rtol=1e-8), stop=Stop(max_time=4.0),
              checkpoints=4, kkt=False)
    ds = train(Linear(), data, EXPONENTIAL, batch={"init_scale": scales}, **kw)
    assert list(ds.status_name.values) == ["budget", "diverged", "budget", "budget"]
    assert list(ds.fail_step.values) == [-1, 0, -1, -1]
    assert int(ds.grad_evals.values[1, -1]) == 0 and int(ds.step.values[1, -1]) == 0
    message = str(ds.message.values[1])
    assert "diverged at step 0 (t = 0)" in message and "method.rtol" in message, message
    assert list(ds.message.values[[0, 2, 3]]) == ["", "", ""]
    np.testing.assert_array_equal(ds.loss.values[1], np.inf)  # the loss at its initial (and final) parameters
    for r in (0, 2, 3):
        _assert_member_equals_solo(ds, r, train(Linear(), data, EXPONENTIAL, init_scale=scales[r], **kw))
    alone = train(Linear(), data, EXPONENTIAL, init_scale=scales[1], **kw)
    assert list(alone.fail_step.values) == [0] and str(alone.message.values[0]) == message
    np.testing.assert_array_equal(ds["theta.w"].values[1], alone["theta.w"].values[0])


# -- 2. an experiment resumed across its cells, and a changed config -------------------------------------------


def _tiny_linear_regression(gd: dict | None = None, sgd: dict | None = None, parts=("gd", "sgd")):
    """linear-regression-implicit-bias made tiny: 2 parts (GD, SGD: two cells) x 2 inits x 2 trials = 8 runs."""
    from implicitbias.papers.gunasekar2018_geometry.experiments import LINEAR_REGRESSION

    declared = {"gd": {"method.lr": 0.2, "stop.max_steps": 300, **(gd or {})},
                "sgd": {"method.kind": "sgd", "method.lr": 0.05, "method.batch_size": 3, "stop.max_steps": 300,
                        **(sgd or {})}}
    overrides = {"data.n": 6, "data.d": 12, "data.k": 2, "trials": 2, "checkpoints": 5,
                 "parts": {name: declared[name] for name in parts}}
    return LINEAR_REGRESSION, LINEAR_REGRESSION.resolve(quick=True, overrides=overrides)


def _run(experiment, config, out, **options):
    """The experiment with this config, through the pipeline: its results and the record of the call."""
    import dataclasses

    import implicitbias

    results = implicitbias.run(dataclasses.replace(experiment, config=config, quick={}), out=out, workers=0,
                               progress=False, log=lambda line: None, **options)
    return results, results.record


def _by_key(results) -> dict:
    return {spec.key(): ds for spec, ds in zip(results.runs, results.arrays)}


def _assert_identical(a, b) -> None:
    """Two experiment results: the same runs, bit-identical arrays, the same checks."""
    assert [r.key() for r in a.runs] == [r.key() for r in b.runs]
    for spec, x, y in zip(a.runs, a.arrays, b.arrays):
        assert set(x.data_vars) == set(y.data_vars)
        for name in x.data_vars:
            if x[name].dtype.kind in "fiu":
                np.testing.assert_array_equal(x[name].values, y[name].values, err_msg=f"{spec.label()}: {name}")
            else:
                assert list(x[name].values) == list(y[name].values), name
    dump = lambda checks: json.dumps(checks, sort_keys=True, default=str)
    assert dump(a.checks) == dump(b.checks)


@pytest.fixture(scope="module")
def tiny_reference(tmp_path_factory):
    """The tiny experiment trained once into a directory of its own: (results, record, directory)."""
    experiment, config = _tiny_linear_regression()
    out = tmp_path_factory.mktemp("reference")
    return (*_run(experiment, config, out), out)


@pytest.mark.xdist_group("tiny-reference")
def test_an_experiment_resumes_across_its_cells_training_only_the_missing_runs(tmp_path, tiny_reference):
    experiment, config = _tiny_linear_regression()
    reference, outcome, _ = tiny_reference
    assert outcome.trained == 8 and not outcome.failed
    assert len(reference.cells) == 2 and {c.spec.part for c in reference.cells} == {"gd", "sgd"}
    assert reference.checks and {c["cell"] for c in reference.checks} >= {c.label for c in reference.cells}
    out = tmp_path / "resumed"
    # a subset first (one cell), then the whole experiment: the first cell is loaded, the second trained
    _, first = _run(experiment, _tiny_linear_regression(parts=("gd",))[1], out)
    assert first.trained == 4
    results, second = _run(experiment, config, out)
    assert (second.reused, second.trained) == (4, 4)
    _assert_identical(reference, results)
    # interrupted: runs of both cells lost (one each); the rerun trains those two only
    lost = [next(r for r in results.runs if r.part == part and r.init_scale > 0) for part in ("gd", "sgd")]
    for spec in lost:
        (out / "runs" / f"{spec.key()}.nc").unlink()
    results, third = _run(experiment, config, out)
    assert (third.reused, third.trained) == (6, 2)
    _assert_identical(reference, results)


def test_a_changed_config_invalidates_the_cached_runs_of_the_changed_cell_only(tmp_path):
    experiment, config = _tiny_linear_regression()
    before, _ = _run(experiment, config, tmp_path)
    old = _by_key(before)
    # a changed stopping rule in one part: that part's four runs are trained again, the other part's loaded
    changed_stop = _tiny_linear_regression(sgd={"stop.max_steps": 120})[1]
    after, outcome = _run(experiment, changed_stop, tmp_path)
    assert (outcome.reused, outcome.trained) == (4, 4)
    for spec, ds in zip(after.runs, after.arrays):
        if spec.part == "sgd":
            assert spec.key() not in old and int(ds.step.values[0, -1]) == 120
        else:
            assert ds is old[spec.key()] or ds.identical(old[spec.key()])
    # a changed traced value (GD's learning rate) in the other part: only its four runs again
    changed_lr = _tiny_linear_regression(gd={"method.lr": 0.15}, sgd={"stop.max_steps": 120})[1]
    last, outcome = _run(experiment, changed_lr, tmp_path)
    assert (outcome.reused, outcome.trained) == (4, 4)
    kept = _by_key(after)
    for spec, ds in zip(last.runs, last.arrays):
        assert (spec.key() in kept) == (spec.part == "sgd")
        if spec.part == "gd":
            assert spec.method.lr == 0.15 and float(ds.time.values[0, 1]) == pytest.approx(0.15 * ds.step.values[0, 1])
    # going back to the first config loads every run again: nothing was overwritten
    again, outcome = _run(experiment, config, tmp_path)
    assert (outcome.reused, outcome.trained) == (8, 0)
    _assert_identical(before, again)


@pytest.mark.xdist_group("tiny-reference")
def test_runs_of_another_directory_under_other_labels_are_reused_and_equal_training_them(tmp_path, tiny_reference):
    experiment, config = _tiny_linear_regression()
    source, _, source_dir = tiny_reference
    # the gd part renamed (the same computations under another label) and the sgd part changed (new computations)
    parts = {"renamed": config.parts["gd"], "sgd": {**config.parts["sgd"], "stop.max_steps": 120}}
    renamed = experiment.resolve(quick=True, overrides={**_flat_overrides(config), "parts": parts})
    results, outcome = _run(experiment, renamed, tmp_path / "reusing", reuse=[source_dir])
    assert (outcome.reused, outcome.trained) == (4, 4)
    theirs = {spec.compute_key(): ds for spec, ds in zip(source.runs, source.arrays)}
    for spec, ds in zip(results.runs, results.arrays):
        assert (spec.compute_key() in theirs) == (spec.part == "renamed")
        if spec.part == "renamed":
            assert ds.attrs["key"] == spec.key() != theirs[spec.compute_key()].attrs["key"]
            for name in _curves(ds):
                np.testing.assert_array_equal(ds[name].values, theirs[spec.compute_key()][name].values, name)
    # what was copied is what training the renamed part gives (one compiled call, as the source trained them)
    from implicitbias.runs.execute import train_group

    mine = [spec for spec in results.runs if spec.part == "renamed"]
    ours = _by_key(results)
    for spec, ds in zip(mine, train_group(mine)):
        for name in _curves(ds):
            np.testing.assert_array_equal(ds[name].values, ours[spec.key()][name].values, name)
    with pytest.raises(ConfigError, match="--reuse .* has no runs/ folder"):
        _run(experiment, renamed, tmp_path / "other", reuse=[tmp_path / "nowhere"])


def _flat_overrides(config) -> dict:
    """The fields `_tiny_linear_regression` overrides, read back from its config (parts left out)."""
    return {"data.n": config.data.n, "data.d": config.data.d, "data.k": config.data.k, "trials": config.trials,
            "checkpoints": config.checkpoints}


# -- 3. a bad-input table over every data generator ---------------------------------------------------------

#: fields a generator requires (no default), with a valid value: a new required field shows up as a failure here
def _arrays_file() -> str:
    """A small .npz data file for the `arrays` source (it reads a file that exists)."""
    import tempfile

    path = Path(tempfile.gettempdir()) / "implicitbias-test-arrays.npz"
    if not path.exists():
        np.savez(path, X=np.eye(3), y=np.array([1.0, -1.0, 1.0]))
    return str(path)


REQUIRED = {"cifar10": {"path": "/nowhere/cifar-10-binary.tar.gz"}, "arrays": {"path": _arrays_file()}}

_BOUNDS = {annotated_types.Ge: ("ge", ">=", -1), annotated_types.Gt: ("gt", ">", 0),
           annotated_types.Le: ("le", "<=", 1), annotated_types.Lt: ("lt", "<", 0)}


def _bad_values(cls) -> list[tuple[str, object, str]]:
    """(field, a value it refuses, what the message must say is allowed) for every declared bound and every
    Literal of a generator's fields, discovered from its pydantic fields."""
    cases = []
    for field, info in cls.model_fields.items():
        for bound in info.metadata:
            for kind, (attr, relation, step) in _BOUNDS.items():
                if isinstance(bound, kind):
                    edge = getattr(bound, attr)
                    value = edge + step if isinstance(edge, int) else edge + 0.5 * step
                    cases.append((field, value, f"{relation} {edge}"))
        if typing.get_origin(info.annotation) is typing.Literal:
            cases.append((field, "no-such-option", "one of " + repr(typing.get_args(info.annotation)[0])))
    return cases


GENERATOR_CASES = [(name, *case) for name, cls in GENERATORS.items() for case in _bad_values(cls)]


def test_every_generator_has_refusable_fields_beyond_its_name():
    named = {name for name, field, *_ in GENERATOR_CASES if field != "name"}
    assert named == set(GENERATORS) - {"razin_cohen"}  # razin_cohen is a fixed data set: its only field is its name
    assert {name for name, field, *_ in GENERATOR_CASES if field == "name"} == set(GENERATORS)


@pytest.mark.parametrize("name, field, value, allowed", GENERATOR_CASES,
                         ids=[f"{n}.{f}={v!r}" for n, f, v, _ in GENERATOR_CASES])
def test_a_bad_generator_field_is_refused_at_construction_naming_field_value_and_range(name, field, value, allowed,
                                                                                      monkeypatch):
    import implicitbias.data.dataset as dataset_module

    cls = GENERATORS[name]
    cls(**REQUIRED.get(name, {}))  # the valid base builds
    monkeypatch.setattr(dataset_module.np.random, "default_rng", lambda *a: pytest.fail("drew data"))
    with pytest.raises(ConfigError) as info:
        cls(**{**REQUIRED.get(name, {}), field: value})
    message = str(info.value)
    assert f"{cls.__name__}.{field} = {value!r} is not allowed: expected" in message, message
    assert allowed in message, message
    # the same through a config dict (`data_spec`) and inside a run spec, with the dotted path of the field
    config = {"name": name, **REQUIRED.get(name, {}), field: value}
    with pytest.raises(ConfigError, match="is not allowed"):
        data_spec(config)
    if field != "name":
        from implicitbias.runs.spec import RunSpec

        with pytest.raises(ConfigError) as info:
            RunSpec(model=Linear(), data=config, method=GD())
        assert f"RunSpec.data.{field} = {value!r} is not allowed" in str(info.value), str(info.value)


@pytest.mark.parametrize("name, fields, says", [
    ("sparse_regression", {"n": 20, "d": 10}, "n = 20 >= d = 10"),
    ("sparse_regression", {"n": 5, "d": 10, "k": 11}, "k = 11 > d = 10"),
    ("orthogonal", {"n": 6, "d": 4}, "d = 4 < n = 6"),
    ("orthogonal", {"norm_min": 2.0, "norm_max": 1.0}, "norm_min = 2.0 > norm_max = 1.0"),
    ("separable", {"d": 3, "sparsity": 4}, "sparsity = 4 > d = 3"),
    ("xor", {"d": 1}, "d = 1"),
    ("chistikov_family", {"family": "m_positive", "d": 2}, "d = 2"),
    ("matrix_sensing", {"d": 3, "rank": 4}, "rank = 4 > d = 3"),
    ("matrix_completion", {"d": 2, "observed": [[0, 2]]}, "observed[0] = (0, 2)"),
    ("teacher_neuron", {"include_x0": True}, "include_x0 = true"),
    ("digits", {"classes": [3, 3]}, "classes = (3, 3)"),
    ("cifar10", {"path": "x", "classes": [1, 1]}, "classes = (1, 1)"),
])
def test_a_bad_combination_of_generator_fields_names_the_fields_and_values(name, fields, says):
    with pytest.raises(ConfigError) as info:
        GENERATORS[name](**fields)
    assert says in str(info.value), str(info.value)


# -- 4. float32 and integer arrays given to `train` -------------------------------------------------------------


def _as(data: Dataset, kind) -> Dataset:
    cast = (lambda a: None if a is None else np.asarray(a).astype(kind))
    return Dataset(cast(data.X), cast(data.y), cast(data.X_test), cast(data.y_test), data.task)


@pytest.mark.parametrize("method, stop", [
    (GD(lr=0.2), Stop(max_steps=30)),
    (GD(lr=0.2, dtype="float32"), Stop(max_steps=30)),
    (GradientFlow(solver="tsit5", rtol=1e-8), Stop(max_time=2.0)),
], ids=["gd", "gd-float32", "gf"])
def test_float32_and_integer_data_train_as_their_float64_values(method, stop):
    """A researcher's float32 (e.g. from PyTorch) or integer arrays hold exact float64 values: `train` converts
    them (a Dataset holds float64) and the run is the run of those values.  A float32 method casts from there."""
    base = _classification(n=6, d=3, seed=1, n_test=4)
    exact = Dataset(np.round(4 * base.X) / 4, base.y, np.round(4 * base.X_test) / 4, base.y_test)  # float32-exact
    integers = Dataset(np.round(2 * base.X), base.y, np.round(2 * base.X_test), base.y_test)
    kw = dict(method=method, stop=stop, checkpoints=4, kkt=False)
    runs = {id(exact): train(TwoLayer(width=4), exact, LOGISTIC, **kw),
            id(integers): train(TwoLayer(width=4), integers, LOGISTIC, **kw)}
    for reference, kind in ((exact, np.float32), (integers, np.int64), (integers, np.int32)):
        given = _as(reference, kind)
        assert given.X.dtype == given.y.dtype == given.X_test.dtype == np.float64
        a, b = runs[id(reference)], train(TwoLayer(width=4), given, LOGISTIC, **kw)
        names = [v for v in a.data_vars if a[v].dtype.kind in "fiu"]
        assert {"loss", "test_loss", "normalized_margin", "max_angle", "theta.W"} <= set(names), names
        for name in names:
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=f"{np.dtype(kind)}: {name}")


@pytest.mark.parametrize("field", ["X", "y", "X_test", "y_test"])
@pytest.mark.parametrize("bad", [lambda a: a.astype(bool), lambda a: a.astype(complex), lambda a: a.astype(str)],
                         ids=["bool", "complex", "str"])
def test_data_of_a_type_that_is_not_real_numbers_is_refused_naming_the_field(field, bad):
    base = _classification(n=4, d=2, n_test=3)
    arrays = {name: getattr(base, name) for name in ("X", "y", "X_test", "y_test")}
    arrays[field] = bad(np.abs(arrays[field]) > 0)
    with pytest.raises(ConfigError, match=rf"data\.{field} has dtype \S+: expected real numbers"):
        train(Linear(), Dataset(**arrays), LOGISTIC, GD(), stop=Stop(max_steps=2))


# -- 5. normalised GD against a hand-written loop ---------------------------------------------------------------


def test_normalized_gd_equals_a_hand_written_loop_step_for_step():
    """theta_{k+1} = theta_k - lr grad L(theta_k) / L(theta_k) for the logistic loss of a linear model, written out."""
    data = _classification(n=5, d=3, seed=2)
    X, y = data.X, data.y
    w0, lr, steps = np.array([0.3, -0.2, 0.5]), 0.4, 8

    def loss_and_grad(w):
        q = y * (X @ w)
        return np.mean(np.logaddexp(0.0, -q)), -(X.T @ (y / (1.0 + np.exp(q)))) / len(y)

    expected, w = [w0], w0
    for _ in range(steps):
        L, g = loss_and_grad(w)
        w = w - lr * g / L
        expected.append(w)
    ds = train(Linear(), data, LOGISTIC, NormalizedGD(lr=lr), stop=Stop(max_steps=steps), theta0={"w": w0},
               checkpoints=list(range(1, steps + 1)), keep_trajectory=True, kkt=False)
    np.testing.assert_array_equal(ds.step.values[0], np.arange(steps + 1))
    np.testing.assert_allclose(ds["trajectory.theta.w"].values[0], np.array(expected), rtol=1e-12, atol=0)
    np.testing.assert_allclose(ds.loss.values[0], [loss_and_grad(v)[0] for v in expected], rtol=1e-12, atol=0)
    assert not np.allclose(expected[1], w0 - lr * loss_and_grad(w0)[1], rtol=1e-3)  # not a GD step: 1 / L longer


# -- 6. SGD with batch = n is GD ----------------------------------------------------------------------------


def test_sgd_with_the_whole_data_as_its_batch_equals_gd_step_for_step():
    data = _classification(n=6, d=3, seed=3)
    steps = 12
    kw = dict(stop=Stop(max_steps=steps), checkpoints=list(range(1, steps + 1)), keep_trajectory=True, kkt=False,
              seed=5, init_scale=0.5)
    gd = train(TwoLayer(width=4), data, LOGISTIC, GD(lr=0.3), **kw)
    sgd = train(TwoLayer(width=4), data, LOGISTIC, SGD(lr=0.3, batch_size=data.n), **kw)
    np.testing.assert_array_equal(sgd.step.values, gd.step.values)
    for name in ("trajectory.theta.W", "loss", "normalized_margin", "theta.W"):
        scale = np.max(np.abs(gd[name].values))
        np.testing.assert_allclose(sgd[name].values, gd[name].values, rtol=1e-12, atol=1e-12 * scale, err_msg=name)
    assert np.linalg.norm(gd["theta.W"].values - gd["trajectory.theta.W"].values[:, 0]) > 1e-2  # it moved
