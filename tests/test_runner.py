"""The experiment runner: trials batched or one call each give the same runs; an interrupted cell
resumes after its last finished trial and trains nothing twice."""

import numpy as np
import pytest

from implicitbias.data import TeacherNeuron
from implicitbias.experiments import runner
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.training.methods import GD, GradientFlow
from implicitbias.training.stopping import Stop

CONFIG = ExperimentConfig(
    model=TwoLayer(width=12, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random"),
    data=TeacherNeuron(d=3, scheme="centred", n_test=8),
    loss=Loss(name="square"),
    method=GradientFlow(solver="rkc", rtol=1e-6),
    # loss_tol stops the larger init early: the trials then record different numbers of checkpoints
    stop=Stop(loss_tol=1e-6, max_time=300.0),
    trials=3,
    checkpoints=8,
    kkt=False,
    grid={"init_scale": [0.5, 0.01]},
)


def _metrics(ds):
    return {k: ds[k].values for k in ("loss", "max_angle", "param_norm", "time", "theta.W", "theta.a")}


def test_gradient_flow_trials_run_one_call_each_and_gradient_descent_trials_together():
    assert not CONFIG.trials_batched()
    assert CONFIG.replace(method=GD(lr=0.01)).trials_batched()
    assert CONFIG.replace(batch_trials=True).trials_batched()


def test_trials_one_call_each_equal_trials_in_one_batch():
    separate = runner.run_cell(0, {}, CONFIG, False, None).results
    together = runner.run_cell(0, {}, CONFIG.replace(batch_trials=True), False, None).results
    assert separate.sizes == together.sizes
    np.testing.assert_array_equal(separate.trial.values, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(separate.init_scale.values, together.init_scale.values)
    for name, value in _metrics(separate).items():
        assert np.all(np.isfinite(value)), name
        np.testing.assert_allclose(value, _metrics(together)[name], rtol=1e-9, atol=1e-12, err_msg=name)


def test_an_interrupted_cell_resumes_after_its_last_finished_trial(tmp_path, monkeypatch):
    calls = []
    real = runner._train_trials

    def failing_on_the_third_trial(config, runs, datasets, which, progress):
        if which == [2]:
            raise KeyboardInterrupt
        calls.append(which)
        return real(config, runs, datasets, which, progress)

    monkeypatch.setattr(runner, "_train_trials", failing_on_the_third_trial)
    with pytest.raises(KeyboardInterrupt):
        runner.run_cell(0, {}, CONFIG, False, tmp_path)
    assert calls == [[0], [1]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cell_000.trial_000.nc", "cell_000.trial_001.nc"]

    calls.clear()
    monkeypatch.setattr(runner, "_train_trials", lambda *a: (calls.append(a[3]), real(*a))[1])
    resumed = runner.run_cell(0, {}, CONFIG, False, tmp_path).results
    assert calls == [[2]], "the finished trials are loaded, not trained again"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cell_000.nc"]
    fresh = runner.run_cell(0, {}, CONFIG, False, None).results
    for name, value in _metrics(resumed).items():
        np.testing.assert_array_equal(value, _metrics(fresh)[name], err_msg=name)
