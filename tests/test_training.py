"""The training engine against closed forms: least squares, linear gradient flow, GD -> GF as eta -> 0,
batching, determinism, validation and divergence."""

import gc
import importlib
import subprocess
import sys
import typing
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.linalg

from implicitbias._spec import ConfigError
from implicitbias.data import Dataset
from implicitbias.losses import Loss
from implicitbias.metrics.kkt import kkt_system
from implicitbias.models import AnyModel, Linear, MatrixFactorization, TwoLayer
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.runs import RunSpec
from implicitbias.storage import load, save
from implicitbias.training import GD, SGD, GradientFlow, Status, Stop, train
from implicitbias.training.batch import Batch
from implicitbias.training.dataset import theta_of
from implicitbias.training.train import train_runs

#: the module `implicitbias.training.train` (the package's attribute `train` is the function)
TRAIN_MODULE = importlib.import_module("implicitbias.training.train")

SQUARE = Loss(name="square")


def _regression(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    return Dataset(X=X, y=rng.normal(size=n), task="regression")


def _classification(n=12, d=40, seed=0):
    rng = np.random.default_rng(seed)
    return Dataset(X=rng.normal(size=(n, d)), y=np.where(rng.random(n) < 0.5, -1.0, 1.0),
                   X_test=rng.normal(size=(30, d)), y_test=np.where(rng.random(30) < 0.5, -1.0, 1.0))


def test_gd_least_squares_reaches_the_interpolator_closest_to_w0():
    data = _regression(8, 20)
    w0 = np.random.default_rng(1).normal(size=20)
    ds = train(Linear(), data, SQUARE, GD(lr=2.0), stop=Stop(max_steps=20_000, loss_tol=1e-30),
               theta0={"w": w0}, checkpoints=[20_000], kkt=False)
    expected = w0 + np.linalg.pinv(data.X) @ (data.y - data.X @ w0)
    np.testing.assert_allclose(ds["theta.w"].values[0], expected, atol=1e-8)


def _quadratic_flow(data, w0, t):
    """Closed form of GF on L = |Xw - y|^2 / (2n): w(t) = w* + expm(-A t)(w0 - w*), A = X^T X / n."""
    n = data.X.shape[0]
    A = data.X.T @ data.X / n
    w_star = np.linalg.solve(A, data.X.T @ data.y / n)
    return w_star + scipy.linalg.expm(-A * t) @ (w0 - w_star)


@pytest.mark.parametrize("solver, rtol, tol", [("tsit5", 1e-8, 1e-7), ("rkc", 1e-10, 1e-7)])
def test_gradient_flow_matches_matrix_exponential(solver, rtol, tol):
    """Tsit5's global error here is about its rtol; the second-order RKC's is larger (about 20 x rtol at
    1e-6 and 500 x at 1e-10: its error estimate controls local O(h^3) errors), hence its tighter rtol."""
    data = _regression(30, 6)
    w0 = np.random.default_rng(2).normal(size=6)
    times = [0.5, 2.0, 10.0]
    ds = train(Linear(), data, SQUARE, GradientFlow(solver=solver, rtol=rtol, atol=rtol * 1e-2, atol_rel=None),
               stop=Stop(max_time=10.0), theta0={"w": w0}, checkpoints=times, kkt=False)
    assert ds.status.values[0] == Status.BUDGET
    np.testing.assert_allclose(ds.time.values[0], [0.0, *times])
    np.testing.assert_allclose(ds["theta.w"].values[0], _quadratic_flow(data, w0, 10.0), rtol=0, atol=tol)


def test_gd_tracks_gradient_flow_with_first_order_error():
    data = _regression(30, 6)
    w0 = np.random.default_rng(3).normal(size=6)
    T, lrs = 2.0, [0.08, 0.04, 0.02, 0.01]
    ds = train(Linear(), data, SQUARE, GD(), stop=Stop(max_time=T, max_steps=1000), theta0={"w": w0},
               batch={"lr": lrs}, checkpoints=[int(T / min(lrs))], kkt=False)
    np.testing.assert_allclose(ds.time.values[:, -1], T)
    errors = np.linalg.norm(ds["theta.w"].values - _quadratic_flow(data, w0, T), axis=1)
    slope = np.polyfit(np.log(lrs), np.log(errors), 1)[0]
    assert 0.9 < slope < 1.1, (slope, errors)


def test_batch_equals_runs_one_by_one():
    data = _classification()
    model, method, stop = TwoLayer(width=8), GD(lr=0.3), Stop(max_steps=200)
    batch = {"seed": [0, 1, 2], "init_scale": [0.01, 0.1, 0.5], "lr": [0.3, 0.1, 0.2]}
    together = train(model, data, method=method, stop=stop, batch=batch, checkpoints=6)
    for r in range(3):
        alone = train(model, data, method=method, stop=stop, checkpoints=6,
                      batch={k: [v[r]] for k, v in batch.items()})
        for name in ("loss", "W.stable_rank", "normalized_margin", "theta.W"):
            np.testing.assert_allclose(together[name].values[r], alone[name].values[0], rtol=1e-10, atol=1e-13)


def test_traced_fields_are_declared_once_on_the_spec_types():
    # a model's traced fields are float fields of it; the batch of a direct call allows exactly them
    for cls in typing.get_args(typing.get_args(AnyModel)[0]):
        assert all(cls.model_fields[name].annotation is float for name in cls.traced_fields), cls
    assert TwoLayer.traced_fields == ("gamma",) and MatrixFactorization.traced_fields == ("init_noise",)
    with pytest.raises(ConfigError, match=r"batch\.model\.width is not allowed.*'model\.gamma'"):
        train(TwoLayer(), _classification(), batch={"model.width": [2, 3]})


def _members(gammas):
    return [SimpleNamespace(model=TwoLayer(width=4, gamma=g), method=GD(lr=lr), seed=s, init_scale=c, loss=Loss(),
                            stop=Stop(max_steps=30), checkpoints=3, kkt=True, keep_trajectory=False)
            for g, lr, s, c in zip(gammas, [0.1, 0.2, 0.3], [0, 1, 2], [0.5, 0.1, 1.0])]


def test_the_batch_of_a_group_of_runs_is_read_from_their_fields():
    members = _members([0.5, 0.3, 0.5])
    batch = Batch.of(members)
    lists = Batch.from_lists(TwoLayer(width=4), GD(), 0, 1.0, {"seed": [0, 1, 2], "init_scale": [0.5, 0.1, 1.0],
                                                              "lr": [0.1, 0.2, 0.3], "model.gamma": [0.5, 0.3, 0.5]})
    for a, b in ((batch.hp(), lists.hp()), (batch.hp()["model"], lists.hp()["model"])):
        assert list(a) == list(b)
        for k in a:
            if k != "model":
                np.testing.assert_array_equal(a[k], b[k])
                assert a[k].dtype == b[k].dtype
    assert batch.model_overrides == ("gamma",) and batch.size == 3
    assert batch.member(1) == {"seed": 1, "init_scale": 0.1, "lr": 0.2, "model": {"gamma": 0.3}}
    assert Batch.of(_members([0.5, 0.5, 0.5])).model == {}  # one value for all: a static field of the model


def test_train_runs_is_train_with_the_runs_batch():
    members, data = _members([0.5, 0.3, 0.5]), _classification(n=6, d=10)
    grouped = train_runs(members, data)
    direct = train(TwoLayer(width=4), data, Loss(), GD(), stop=Stop(max_steps=30), checkpoints=3,
                   batch={"seed": [0, 1, 2], "init_scale": [0.5, 0.1, 1.0], "lr": [0.1, 0.2, 0.3],
                          "model.gamma": [0.5, 0.3, 0.5]})
    for name in ("loss", "theta.W", "kkt_stationarity", "model.gamma"):
        np.testing.assert_array_equal(grouped[name].values, direct[name].values)


def test_gc_is_paused_until_the_first_checkpoint_and_restored(monkeypatch):
    T = TRAIN_MODULE
    states = []
    record = T.Recorder.host
    monkeypatch.setattr(T.Recorder, "host", staticmethod(lambda row: (states.append(gc.isenabled()), record(row))[1]))
    data = _classification(n=6, d=10)
    train(TwoLayer(width=4), data, method=GD(lr=0.1), stop=Stop(max_steps=20), checkpoints=3)
    assert states[0] is False and states[-1] is True  # off while the first checkpoint is recorded, then on
    assert gc.isenabled()
    gc.disable()  # a user who turned it off keeps it off
    try:
        train(TwoLayer(width=4), data, method=GD(lr=0.1), stop=Stop(max_steps=20), checkpoints=3)
        assert not gc.isenabled()
    finally:
        gc.enable()
    # pauses nest (threads of one process): the collector comes back with the last one, once
    first, second = T._GcPause(), T._GcPause()
    first.end()
    first.end()
    assert not gc.isenabled()
    second.end()
    assert gc.isenabled()


def test_a_second_train_call_compiles_no_kkt_program():
    """The KKT residual's jitted part takes the model function as a static argument: one function object per
    problem, so a second `train` with the same shapes finds it compiled (it was a bound method of a new recorder
    per call, and every call compiled it again)."""
    data = _classification(n=6, d=10)
    run = lambda seed: train(TwoLayer(width=4), data, method=GD(lr=0.1), stop=Stop(max_steps=20), checkpoints=2,
                             seed=seed)
    run(0)
    before = kkt_system._cache_size()
    assert before >= 1  # the first call compiled it (whether or not the residual is defined yet)
    run(1)
    assert kkt_system._cache_size() == before


def test_converged_member_stops_changing_while_others_go_on():
    data = _classification(n=6, d=60)
    ds = train(TwoLayer(width=8), data, method=GD(), stop=Stop(max_steps=3000, loss_tol=0.05),
               batch={"init_scale": [0.5, 0.5], "lr": [0.05, 0.005]}, checkpoints=12)
    assert ds.status.values[0] == Status.CONVERGED
    k = int(np.argmax(ds.loss.values[0] < 0.05))
    np.testing.assert_array_equal(ds.loss.values[0, k:], ds.loss.values[0, k])
    assert ds.step.values[1, -1] > ds.step.values[0, -1]


def test_same_seed_gives_identical_arrays_and_netcdf_round_trip(tmp_path):
    data = _classification()
    kw = dict(method=SGD(lr=0.2, batch_size=4), stop=Stop(max_steps=100), checkpoints=5, seed=7)
    a, b = train(TwoLayer(width=6), data, **kw), train(TwoLayer(width=6), data, **kw)
    for name in a.data_vars:
        np.testing.assert_array_equal(a[name].values, b[name].values)
    loaded = load(save(a, tmp_path / "r.nc"))
    for name in a.data_vars:
        np.testing.assert_array_equal(a[name].values, loaded[name].values)
    assert loaded.attrs == a.attrs
    theta, const = theta_of(loaded, 0)
    np.testing.assert_array_equal(theta["W"], a["theta.W"].values[0])


SCRIPT = """
import numpy as np, sys
from implicitbias.data import Dataset
from implicitbias.models import TwoLayer
from implicitbias.training import train, GD, Stop
rng = np.random.default_rng(0)
data = Dataset(X=rng.normal(size=(10, 20)), y=np.where(rng.random(10) < 0.5, -1.0, 1.0))
ds = train(TwoLayer(width=5), data, method=GD(lr=0.5), stop=Stop(max_steps=50), checkpoints=4, seed=3)
sys.stdout.write(ds["theta.W"].values.tobytes().hex())
"""


def test_identical_in_a_fresh_process(capsys):
    # the same script in a fresh process and in this one (whose JAX state other tests have touched)
    fresh = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
    capsys.readouterr()
    exec(SCRIPT, {})
    here = capsys.readouterr().out
    assert fresh == here and len(fresh) > 0


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda d: (TwoLayer(), Dataset(X=np.full((3, 2), np.nan), y=np.ones(3))), "X"),
        (lambda d: (TwoLayer(), Dataset(X=np.ones((3, 2)), y=np.array([1.0, 0.5, -1.0]))), "y"),
        (lambda d: (TwoLayer(), Dataset(X=np.ones((3, 2)), y=np.ones(4))), "y"),
        (lambda d: (TwoLayer(width=0), d), "width"),
        (lambda d: (TwoLayer(gamma=2.0), d), "gamma"),
        (lambda d: (TwoLayer(gamma=0.0), d), "gamma"),
        (lambda d: (TwoLayer(activation="tanh"), d), "activation"),
        (lambda d: (TwoLayer(), d, GD(lr=0.0)), "lr"),
        (lambda d: (TwoLayer(), d, GD(lr=-1.0)), "lr"),
    ],
)
def test_bad_input_is_rejected_before_compiling(build, field):
    data = _classification(n=3, d=2)
    with pytest.raises(ConfigError) as info:
        args = build(data)
        train(*args[:2], method=args[2] if len(args) > 2 else GD())
    message = str(info.value)
    assert field in message and ("allowed" in message or "expects" in message or "expected" in message)


def test_bad_batch_value_names_its_entry():
    with pytest.raises(ConfigError, match=r"batch\.lr\[1\] = -0\.1"):
        train(TwoLayer(), _classification(), batch={"lr": [0.1, -0.1]})


def test_gd_far_above_two_over_beta_reports_divergence_with_its_step():
    data = _regression(20, 5)
    beta = np.linalg.eigvalsh(data.X.T @ data.X / 20).max()
    ds = train(Linear(), data, SQUARE, GD(lr=50.0 / beta), stop=Stop(max_steps=500), init_scale=1.0,
               checkpoints=5, kkt=False)
    assert ds.status_name.values[0] == "diverged"
    assert 0 < ds.fail_step.values[0] < 500
    assert f"step {ds.fail_step.values[0]}" in ds.message.values[0] and "method.lr" in ds.message.values[0]
    assert np.all(np.isfinite(ds.loss.values)) and np.all(np.isfinite(ds["theta.w"].values))


def test_gradient_flow_batch_goes_on_with_its_running_members_only_in_groups(monkeypatch):
    # members with a large init converge early; the rest go on as a batch of 2^k, with the same results
    train_module = TRAIN_MODULE
    data = TeacherNeuron(d=3, scheme="centred").generate(seed=0)
    model = TwoLayer(width=12, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
    kwargs = dict(method=GradientFlow(solver="rkc", rtol=1e-6), stop=Stop(loss_tol=1e-6, max_time=300.0),
                  batch={"init_scale": [0.5, 0.5, 0.5, 0.01], "seed": [0, 1, 2, 4]}, checkpoints=12, kkt=False)
    sizes = []
    real = train_module._Active._regroup

    def spy(self, carry, steps):
        real(self, carry, steps)
        if self.groups is not None:
            sizes.append([len(members) for members, _, _ in self.groups])

    monkeypatch.setattr(train_module._Active, "_regroup", spy)
    compact = train(model, data, Loss(name="square"), **kwargs)
    # ~400 steps for three members, 12 000 for the third (seed 2): it goes on alone
    assert sizes and sum(sizes[-1]) < 4, "only the running members go on"
    full = train(model, data, Loss(name="square"), compact=False, **kwargs)
    for name in ("loss", "max_angle", "time", "grad_evals", "step", "theta.W", "theta.a", "status"):
        # equal up to the last bits of batch-size-dependent arithmetic, carried through the adaptive steps
        # (the largest difference: the loss at an early stop, 5e-7 relative, as the stop time moves a little)
        np.testing.assert_allclose(compact[name].values, full[name].values, rtol=1e-6, atol=1e-12, err_msg=name)


def test_gd_batch_goes_on_with_its_running_members_once_they_fit_half_of_it(monkeypatch):
    # six of eight members converge within ~1e3 steps; the other two go on alone, as a batch of 2
    train_module = TRAIN_MODULE
    data = TeacherNeuron(d=3, scheme="centred").generate(seed=0)
    model = TwoLayer(width=12, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
    kwargs = dict(method=GD(lr=0.05), stop=Stop(loss_tol=1e-6, max_steps=40_000),
                  batch={"init_scale": [0.5] * 6 + [0.01, 0.001], "seed": list(range(8))}, checkpoints=12,
                  kkt=False)
    sizes = []
    real = train_module._Active._shrink

    def spy(self, carry):
        real(self, carry)
        sizes.append(8 if self.groups is None else len(self.groups[0][0]))

    monkeypatch.setattr(train_module._Active, "_shrink", spy)
    compact = train(model, data, Loss(name="square"), **kwargs)
    full = train(model, data, Loss(name="square"), compact=False, **kwargs)
    steps = full["step"].values[:, -1]
    assert np.sum(steps < steps.max()) >= 4, "the members must stop at different steps for this test to mean something"
    assert min(sizes) <= 4, "once at most half of the batch runs, only the running members go on"
    for name in ("loss", "max_angle", "step", "theta.W", "theta.a", "status"):
        np.testing.assert_allclose(compact[name].values, full[name].values, rtol=1e-12, atol=0, err_msg=name)


def test_gradient_flow_tail_tolerance_changes_nothing_before_the_tail_and_saves_evaluations_in_it():
    # the tail tolerance applies from the first checkpoint whose loss is below tail_below x L(0): every record
    # up to and including that checkpoint is the plain run's, and the chunks after it take fewer evaluations
    data = TeacherNeuron(d=3, scheme="uncentred").generate(seed=0)
    model = TwoLayer(width=12, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
    kwargs = dict(stop=Stop(loss_tol=1e-10, max_time=2e3), batch={"init_scale": [0.01], "seed": [1]},
                  checkpoints=24, kkt=False)
    plain = train(model, data, SQUARE, method=GradientFlow(solver="rkc", rtol=1e-6), **kwargs)
    tail = train(model, data, SQUARE, method=GradientFlow(solver="rkc", rtol=1e-6, tail_rtol=1e-3,
                                                          tail_below=1e-3), **kwargs)
    loss = plain.loss.values[0]
    switch = int(np.flatnonzero(loss < 1e-3 * loss[0])[0])  # the first checkpoint in the tail
    assert 2 <= switch < len(loss) - 2, "the tail starts inside the run"
    for name in ("loss", "time", "grad_evals", "max_angle"):
        # the same steps up to the switch (the compiled programs differ, so equal up to the last bits)
        np.testing.assert_allclose(tail[name].values[0, :switch + 1], plain[name].values[0, :switch + 1],
                                   rtol=1e-12, atol=0, err_msg=name)
    spent = lambda ds: ds.grad_evals.values[0, -1] - ds.grad_evals.values[0, switch]  # noqa: E731
    assert spent(tail) < 0.75 * spent(plain), (spent(tail), spent(plain))
    # a looser tail moves the end point, by about the tail's rtol relative to the parameters' size
    gap = np.abs(tail["theta.W"].values[0] - plain["theta.W"].values[0]).max() / np.abs(plain["theta.W"].values[0]).max()
    assert 1e-9 < gap < 1e-2, gap
    # the key of a flow without a tail tolerance ignores tail_below (runs stored before the fields keep theirs)
    spec = lambda **m: RunSpec(model=model, data=TeacherNeuron(d=3), method=GradientFlow(**m),  # noqa: E731
                               stop=Stop(max_time=1.0))
    assert spec().key() == spec(tail_below=0.5).key() != spec(tail_rtol=1e-3).key()
