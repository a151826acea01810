"""Chistikov et al. 2023 (S11) and Boursier et al. 2022 (S12): data families, theorem logic, plateau exit
time, and one small gradient-flow run."""

import math

import numpy as np
import pytest
import xarray as xr

from implicitbias.data import make_dataset
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.boursier2022.theorems import BoursierOrthogonal
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.papers.chistikov2023.experiments.census import DTYPE
from implicitbias.papers.chistikov2023.experiments.fig1 import FIG1
from implicitbias.papers.chistikov2023.experiments.fig2 import FIG2
from implicitbias.papers.chistikov2023.experiments.two_teachers import TWO_TEACHERS
from implicitbias.papers.chistikov2023.families import ChistikovFamily, xi_bound
from implicitbias.papers.chistikov2023.metrics.plateau import plateau_exit_time
from implicitbias.papers.chistikov2023.theorems.census import CensusTheorem7
from implicitbias.papers.chistikov2023.theorems.theorem7 import ChistikovTheorem7
from implicitbias.papers.chistikov2023.theorems.theorem8 import ChistikovTheorem8, chistikov_reference
from implicitbias.reference import memo
from implicitbias.runs import RunSpec
from implicitbias.theorems.base import CellsTheorem, RunContext, Theorem
from implicitbias.training import GD, Stop
from implicitbias.training.methods import GradientFlow
from implicitbias.training.train import train
from test_negative_controls_chistikov import _bundle, _context, _teacher_cell

NET = TwoLayer(width=20, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
#: Theorem 7 read as in the paper's experiments (angles up to pi/2, the redraw rule of TeacherNeuron)
T7_EXTENDED = ChistikovTheorem7(max_data_angle=math.pi / 2)


# -- data families ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [3, 4])
def test_family_m_negative_has_m_below_zero_and_rank_one_min_norm(d):
    ds = ChistikovFamily(family="m_negative", d=d).generate(0)
    ref = chistikov_reference(ds.X, ds.info["v_star"], ds.y)
    assert ref["z_holds"] and ref["M"] < 0
    assert ref["min_norm"] == pytest.approx(2.0, rel=1e-6)
    cos = ds.X @ ds.info["v_star"] / np.linalg.norm(ds.X, axis=1)
    assert np.all(np.arccos(cos) < math.pi / 4)  # xi = half of its pi/4 bound


@pytest.mark.parametrize("d", [3, 4])
def test_family_m_positive_has_m_above_zero_and_a_smaller_min_norm(d):
    ds = ChistikovFamily(family="m_positive", d=d).generate(0)
    ref = chistikov_reference(ds.X, ds.info["v_star"], ds.y)
    assert not ref["z_holds"] and ref["M"] > 0
    assert ref["min_norm"] < 2.0 * (1 - 1e-5)
    assert ds.info["M_sign"] == 1 and ds.X_test.shape == (64, d)


def test_reference_numbers_are_solved_once_per_data_set():
    """M and the convex minimum norm come from the one memo of reference solutions (`reference.memo`): a second
    call on the same data solves nothing, another seed of M is another reference."""
    ds = ChistikovFamily(family="m_negative", d=3).generate(0)
    memo.clear_memory()
    before = memo.solves()
    first = chistikov_reference(ds.X, ds.info["v_star"], ds.y)
    again = chistikov_reference(ds.X.copy(), ds.info["v_star"], ds.y)
    after = memo.solves()
    assert first == again
    assert after.get("chistikov_M", 0) - before.get("chistikov_M", 0) == 1
    assert after.get("min_norm_relu_interpolator", 0) - before.get("min_norm_relu_interpolator", 0) == 1
    chistikov_reference(ds.X, ds.info["v_star"], ds.y, seed=1)
    assert memo.solves()["chistikov_M"] - after["chistikov_M"] == 1


@pytest.mark.parametrize("cls", [ChistikovTheorem7, ChistikovTheorem8, BoursierOrthogonal, CensusTheorem7])
def test_theorems_are_declarations(cls):
    """Every assumption and prediction is a declared method with its source; none of the classes evaluates them
    itself (the base class's assumptions / predictions / check do)."""
    kinds = [d.kind for d in cls.declarations()]
    assert kinds == sorted(kinds) and "assumption" in kinds and "prediction" in kinds  # assumptions first
    assert all(d.source.strip() and d.statement.strip() for d in cls.declarations())
    for name in ("assumptions", "predictions", "check"):
        assert getattr(cls, name) is getattr(Theorem, name)
    fields = set(cls.model_fields)
    for d in cls.declarations():
        assert {f.strip() for f in d.threshold.split(",") if f.strip()} <= fields, d


@pytest.mark.parametrize("experiment", [FIG1, FIG2, TWO_TEACHERS, DTYPE], ids=lambda e: e.name)
def test_cross_cell_claims_are_declared_theorems(experiment):
    """The paper's claims across cells are CellsTheorem objects whose predictions are declared, each with its source."""
    assert experiment.claims and all(isinstance(c, CellsTheorem) for c in experiment.claims)
    for claim in experiment.claims:
        declared = type(claim).declarations()
        assert declared and {d.kind for d in declared} == {"prediction"}
        assert all(d.source.strip() for d in declared)


def test_family_config_validation_and_training_set_does_not_depend_on_seed():
    a, b = make_dataset({"name": "chistikov_family", "family": "m_negative", "d": 5}, 0), \
        make_dataset({"name": "chistikov_family", "family": "m_negative", "d": 5}, 7)
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.array_equal(a.X_test, b.X_test)
    assert a.info["xi"] == pytest.approx(0.5 * xi_bound(5))
    with pytest.raises(ValueError):
        ChistikovFamily(family="m_positive", d=2)


# -- plateau exit time ------------------------------------------------------------------------------------
def test_plateau_exit_time_on_synthetic_curves():
    t = np.concatenate([[0.0], np.geomspace(0.01, 1e4, 201)])
    # L = L0 until t1, then L0 (t/t1)^-2: log L is linear in log t, so the interpolation is exact
    t1, L0 = 7.3, 0.4
    L = L0 * np.minimum(1.0, (np.maximum(t, t1) / t1) ** -2.0)
    assert plateau_exit_time(t, L) == pytest.approx(t1 * math.sqrt(2.0), rel=1e-10)
    assert plateau_exit_time(t, L, fraction=0.01) == pytest.approx(t1 * 10.0, rel=1e-10)
    # smooth exponential drop after a plateau: exit at T + ln 2
    T = 20.0
    L2 = L0 * np.exp(-np.maximum(t - T, 0.0))
    assert plateau_exit_time(t, L2) == pytest.approx(T + math.log(2.0), rel=0.02)
    # batched, and a curve that never leaves its plateau
    out = plateau_exit_time(np.stack([t, t]), np.stack([L, np.full_like(t, L0)]))
    assert out.shape == (2,) and out[0] == pytest.approx(t1 * math.sqrt(2.0)) and np.isnan(out[1])
    with pytest.raises(ValueError):
        plateau_exit_time(t, L, fraction=1.5)


# -- theorem verdicts on hand-built results ---------------------------------------------------------------
def _fake_results(lams, trials, angle, *, loss=1e-10, nuclear_gap=1e-4, bal=1e-9, data=None):
    """Hand-built results over (lambda x trials); with `data`, final parameters of two balanced neurons at the
    angle angle(lambda) next to v* (so the weighted max angle equals the recorded one)."""
    runs = [(lam, t) for t in range(trials) for lam in lams]
    lam = np.array([r[0] for r in runs])
    n = len(runs)
    ck = 3

    def over(v):
        return (("run", "checkpoint"), np.repeat(np.asarray(v, float)[:, None], ck, axis=1))

    a = np.array([angle(x) for x in lam])
    nuc = 1.0 + nuclear_gap + lam
    ds = xr.Dataset(
        {"max_angle": over(a), "loss": over(np.full(n, loss)), "W.nuclear": over(nuc),
         "param_norm": over(np.sqrt(2.0 * nuc)), "balancedness_max": over(np.full(n, bal)),
         "status_name": (("run",), np.array(["converged"] * n, dtype=object))},
        coords={"init_scale": ("run", lam), "trial": ("run", np.array([r[1] for r in runs])),
                "seed": ("run", np.array([1000 * r[1] for r in runs]))},
    )
    if data is not None:
        W = np.zeros((n, 2, data[0].d))
        for i, (_, t) in enumerate(runs):
            v = data[t].info["v_star"] / np.linalg.norm(data[t].info["v_star"])
            e = np.linalg.qr(np.stack([v, np.eye(v.size)[np.argmin(np.abs(v))]], axis=1))[0][:, 1]
            W[i, 0], W[i, 1] = v, np.cos(a[i]) * v + np.sin(a[i]) * e
        ds["theta.W"] = (("run", "theta.W_0", "theta.W_1"), W)
        ds["theta.a"] = (("run", "theta.a_0"), np.ones((n, 2)))
    return ds


def _ctx(ds, data, data_spec, data_seeds=None, method="gf", model=NET):
    """The context of hand-built results `ds`: one RunSpec per run with the init scale, trial and seed of its
    run coordinates, and `data[trial]` (drawn by `data_spec` from `data_seeds[trial]`) as its training data."""
    lam, trial, seed = (np.asarray(ds[c].values).reshape(-1) for c in ("init_scale", "trial", "seed"))
    seeds = [1000 * t for t in range(len(data))] if data_seeds is None else data_seeds
    method = GradientFlow() if method == "gf" else GD(lr=0.01)
    stop = Stop(loss_tol=1e-9, max_time=1e4)
    specs = [RunSpec(model=model, data=data_spec, data_seed=seeds[t], loss=Loss(name="square"), method=method,
                     stop=stop, seed=int(s), init_scale=float(x), trial=int(t)) for x, t, s in zip(lam, trial, seed)]
    return RunContext(runs=specs, results=ds, data=[data[int(t)] for t in trial])


def _outcomes(verdicts):
    return {v.statement: v.outcome for v in verdicts}


def test_theorem7_unmet_assumptions_put_predictions_outside_scope():
    """The predictions themselves have their negative controls in test_negative_controls_chistikov.py."""
    bad = _teacher_cell(angle=lambda x: 0.01)  # a flat angle: the rate prediction fails
    assert any(v.outcome == "fails" for v in T7_EXTENDED.check(bad))
    # a model without the balanced init: assumption fails, predictions become outside_scope
    other = TwoLayer(width=20, activation="relu", train_outer=True, init_scheme="gaussian")
    ctx = RunContext([s.replace(model=other) for s in bad.runs], bad.results, bad.data)
    v = T7_EXTENDED.check(ctx)
    assert any(x.kind == "assumption" and x.outcome == "fails" for x in v)
    assert {x.outcome for x in v if x.kind == "prediction"} <= {"outside_scope", "not_evaluated"}
    # the proofs' pi/4 bound (the default) fails on centred d = 4 data: predictions outside scope, not failed
    v = ChistikovTheorem7().check(bad)
    assert any(x.outcome == "fails" and "angle between v*" in x.statement for x in v)
    assert not any(x.outcome == "fails" for x in v if x.kind == "prediction")


def test_theorem7_balancedness_bound_for_gd_scales_with_lr_and_initial_loss():
    data = [TeacherNeuron(d=4).generate(0)]
    lams = [4.0**-k for k in range(1, 6)]
    ok = T7_EXTENDED.check(_ctx(_fake_results(lams, 1, lambda x: x, bal=1e-4), data, TeacherNeuron(d=4), [0],
                                method="gd"))
    # 1e-4 > 2 x 0.01 x L(0) = 2e-12 with the fake L(0) = 1e-10
    assert [v for v in ok if "balancedness" in v.statement][0].outcome == "fails"
    gf = T7_EXTENDED.check(_ctx(_fake_results(lams, 1, lambda x: x, bal=1e-4), data, TeacherNeuron(d=4), [0]))
    assert [v for v in gf if "balancedness" in v.statement][0].outcome == "fails"


# -- one small real training ------------------------------------------------------------------------------
def test_gradient_flow_small_teacher_neuron_run():
    data = TeacherNeuron(d=4).generate(0)
    lams = [4.0**-2, 4.0**-4, 4.0**-6]
    method = GradientFlow(solver="tsit5")
    stop = Stop(loss_tol=1e-7, max_time=2e4)
    ds = train(NET, data, Loss(name="square"), method, stop=stop, batch={"init_scale": lams}, checkpoints=12,
               kkt=False)
    assert np.all(ds["loss"].values[:, -1] < 1e-7)
    assert np.max(ds["balancedness_max"].values) < 1e-6
    angle = ds["max_angle"].values[:, -1]
    assert angle[0] > angle[1] > angle[2] > 0
    specs = [RunSpec(model=NET, data=TeacherNeuron(d=4), loss=Loss(name="square"), method=method, stop=stop,
                     init_scale=lam, checkpoints=12, kkt=False) for lam in lams]
    verdicts = T7_EXTENDED.check(RunContext(runs=specs, results=ds, data=[data] * len(lams)))
    assert all(v.outcome != "fails" for v in verdicts), [v.line() for v in verdicts]
    held = " ".join(v.statement for v in verdicts if v.outcome == "holds")
    assert "loss -> 0 exponentially" in held and "||theta||^2 -> 2" in held and "balancedness" in held, held


def test_theorem8_learned_norm_is_outside_scope_beyond_the_proofs_angle():
    spec = TeacherNeuron(d=3)
    data = [spec.generate(2000)]  # largest angle between v* and an x_i ~ 1.5 rad > pi/4
    lams = [4.0**-4, 4.0**-6]
    params = {(0, lam): _bundle(data[0].info["v_star"], 0.3 * lam, lam, 1.0) for lam in lams}
    ctx = _context(params, data, spec, lams, 1, param_norm=[math.sqrt(2.1)] * 2)  # not the rank-1 value
    out = [v for v in ChistikovTheorem8().check(ctx) if "learned" in v.statement]
    assert out and all(v.outcome == "outside_scope" for v in out), [v.line() for v in out]
