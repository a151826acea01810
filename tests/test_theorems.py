"""Theorem checks on hand-built cells (verdict logic: holds, fails, outside scope, worst run, slopes) and one
real training run of Frei et al.'s Theorem 3.2 setting."""

import math

import numpy as np
import pytest
import xarray as xr

from implicitbias.data import Dataset, GaussianMixture, NearlyOrthogonal
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.frei2023.theorems.flow import FreiTheorem32, FreiTheorem34
from implicitbias.papers.frei2023.theorems.gd import FreiLemma33, FreiTheorem42
from implicitbias.papers.kou2023.theorems import KouTheorem
from implicitbias.reference import max_margin_svm
from implicitbias.runs import RunSpec
from implicitbias.theorems import RunContext, fitted_slope
from implicitbias.theorems.fitting import late_window, over_runs
from implicitbias.theorems.smoothed_margin import LyuLiMonotoneMargin
from implicitbias.training import GD, Stop, train

LOGISTIC = Loss(name="logistic")
LEAKY = TwoLayer(width=8, activation="leaky_relu", gamma=0.9, outer_signs="balanced")


def _data(n=4, d=20_000, seed=0):
    rng = np.random.default_rng(seed)
    return Dataset(X=rng.standard_normal((n, d)) / np.sqrt(d), y=np.array([1.0, -1.0] * (n // 2)))


def _outer(m1, m2):
    m = m1 + m2
    return np.concatenate([np.ones(m1), -np.ones(m2)]) / np.sqrt(m)


def _cell(metrics, data, model=LEAKY, *, W=None, a=None, time=None, lr=1.0, data_spec=None):
    """A one-cell context built by hand: metrics {name: (runs, checkpoints)}, final W (runs, m, d), one RunSpec
    per run (GD on the logistic loss; `data_spec` the generator spec, by default nearly orthogonal data of the
    shape of `data`) and `data` as every run's training data."""
    first = np.atleast_2d(next(iter(metrics.values())))
    runs, ckpts = first.shape
    time = np.broadcast_to(np.arange(ckpts, dtype=float) if time is None else np.asarray(time, float),
                           (runs, ckpts))
    vars_ = {k: (("run", "checkpoint"), np.broadcast_to(np.atleast_2d(v), (runs, ckpts)).astype(float))
             for k, v in metrics.items()}
    vars_["time"] = (("run", "checkpoint"), time)
    vars_["step"] = (("run", "checkpoint"), time / lr)
    if W is not None:
        vars_["theta.W"] = (("run", "theta.W_0", "theta.W_1"), np.asarray(W))
        vars_["const.a"] = (("run", "const.a_0"), np.asarray(a))
    coords = {"run": np.arange(runs), "checkpoint": np.arange(ckpts), "seed": ("run", np.arange(runs)),
              "lr": ("run", np.full(runs, lr)), "init_scale": ("run", np.full(runs, 1e-4))}
    data_spec = NearlyOrthogonal(n=data.n, d=data.d) if data_spec is None else data_spec
    specs = [RunSpec(model=model, data=data_spec, loss=LOGISTIC, method=GD(lr=lr), seed=r, init_scale=1e-4)
             for r in range(runs)]
    return RunContext(runs=specs, results=xr.Dataset(vars_, coords=coords), data=[data] * runs)


def _kkt_like(data, m1=4, m2=4, scale=5.0):
    """W with every positive neuron = +s w_svm and every negative one = -s w_svm: rank 1, linear."""
    w = max_margin_svm(data.X, data.y).w
    a = _outer(m1, m2)
    W = scale * np.sign(a)[:, None] * w[None, :]
    return W[None], a[None]


def _outcomes(verdicts):
    return [v.outcome for v in verdicts]


T32 = np.logspace(0, 5, 8)
_APPROACH = 1.0 / np.log(np.maximum(T32, 2.0))  # the 1/log t approach of the limits
GOOD_32 = {"loss": 0.5 / T32, "margin_spread": np.r_[np.inf, 1.0 + 0.05 * _APPROACH[1:]],
           "kkt_stationarity": np.r_[np.nan, 0.05 * _APPROACH[1:]], "W.sigma3_ratio": 0.01 * _APPROACH,
           "W.stable_rank": np.r_[5.0, 1.0 + 0.1 * _APPROACH[1:]],
           "linear_agreement": np.r_[0.97, np.ones(7)]}


# -- fitting -------------------------------------------------------------------------------------------
def test_fitted_slope_and_late_window():
    x = np.linspace(0, 3, 10)
    slope, r2 = fitted_slope(x, 2 * x + 1)
    assert slope == pytest.approx(2.0) and r2 == pytest.approx(1.0)
    noisy = 2 * x + np.random.default_rng(0).normal(size=10)
    assert fitted_slope(x, noisy)[1] < 0.99
    assert all(math.isnan(v) for v in fitted_slope([1.0], [2.0]))
    keep = late_window([0.0, 1.0, 2.0, 4.0, 4.0, 8.0])  # a repeated time (stopped run) is dropped
    assert keep.tolist() == [False, False, False, True, False, True]


def test_extrapolated_limit_is_held_to_the_range_and_bracketed_by_the_last_value():
    from implicitbias.theorems.fitting import Limit, extrapolated_limit, quantity_range

    t = np.logspace(1, 5, 9)
    exact = extrapolated_limit(t, 1.2 + 0.5 / np.log(t), lo=1.0, hi=np.inf)
    assert exact.y_inf == pytest.approx(1.2) and exact.se == pytest.approx(0.0, abs=1e-12) and not exact.outside
    assert exact.bracket() == pytest.approx((1.2, 1.2 + 0.5 / np.log(1e5)))  # between y_inf and the last value
    fast = extrapolated_limit(t, 1.0 + 3.0 * t**-0.5, lo=1.0, hi=np.inf)  # faster than 1/log t: overshoots below 1
    assert fast.outside and fast.bracket() == pytest.approx((1.0, 1.0 + 3.0 * 10**-2.5))
    rising = Limit(y_inf=2.0, se=0.1, c=-1.0, last=1.5, lo=1.0, hi=3.0)
    assert rising.bracket() == pytest.approx((1.5, 2.2)) and "the limit lies in [1.5, 2.2]" in rising.describe()
    assert quantity_range("W.stable_rank") == (1.0, np.inf) and quantity_range("kkt_stationarity") == (0.0, 1.0)
    with pytest.raises(KeyError, match="no range declared"):
        quantity_range("W.frobenius")


def test_worst_case_over_runs_names_the_failing_run():
    v = over_runs("T", "prediction", "spread", [1.0, 1.2, 1.01], "<=", 1.05)
    assert v.outcome == "fails" and v.measured == pytest.approx(1.2) and "run 1" in v.note
    v = over_runs("T", "prediction", "spread", [1.0, np.nan], "<=", 1.05)
    assert v.outcome == "not_evaluated" and "run 1" in v.note


# -- Frei et al. 2023 ----------------------------------------------------------------------------------
def test_frei32_holds_on_a_kkt_like_cell():
    data = _data()
    W, a = _kkt_like(data)
    z = W[0].T @ a[0]
    z_margin = np.min(data.y * (data.X @ z)) / np.linalg.norm(z)
    verdicts = FreiTheorem32().check(_cell({**GOOD_32, "z_margin": z_margin}, data, W=W, a=a, time=T32))
    # (4) on 10^5 fresh inputs (no test set): the untrained network at gamma = 0.9 disagrees on hundreds of them
    # (on 1000, the former default, only 4: too few to compare), the aligned W, linear, on none
    linear = next(v for v in verdicts if v.statement.startswith("(4)"))
    assert linear.measured == 0.0 and "of 100000" in linear.note, linear.line()
    assert _outcomes(verdicts) == ["holds"] * len(verdicts), "\n".join(v.line() for v in verdicts)
    assert "R_min^2 >= 3 gamma^-3 R^2 n max_(i!=j) |<x_i,x_j>|" in verdicts[0].line()
    assert "kappa = min(m1,m2)/max(m1,m2) = 4/4 = 1" in verdicts[-1].note


def test_frei32_failed_prediction_and_the_kappa_bound():
    data = _data()
    W, a = _kkt_like(data, m1=6, m2=2)
    svm = max_margin_svm(data.X, data.y).margin
    metrics = {**GOOD_32, "margin_spread": np.r_[np.inf, np.full(7, 1.5)], "z_margin": 0.5 * svm}
    verdicts = {v.statement[:3]: v for v in FreiTheorem32().check(_cell(metrics, data, W=W, a=a, time=T32))
                if v.statement.startswith("(")}
    assert verdicts["(1)"].outcome == "fails"
    kappa = 2 / 6
    assert verdicts["(5)"].bound == pytest.approx((kappa + 0.9) / 2)
    assert verdicts["(5)"].measured == pytest.approx(0.5) and verdicts["(5)"].outcome == "fails"


def test_frei32_unmet_condition_puts_predictions_outside_scope():
    data = _data(d=20)  # not nearly orthogonal
    W, a = _kkt_like(data)
    verdicts = FreiTheorem32().check(_cell({**GOOD_32, "margin_spread": np.r_[np.inf, np.full(7, 1.5)]}, data,
                                           W=W, a=a, time=T32))
    assert verdicts[0].kind == "assumption" and verdicts[0].outcome == "fails"
    predictions = [v for v in verdicts if v.kind == "prediction"]
    assert {v.outcome for v in predictions} <= {"outside_scope", "not_evaluated"}
    assert "measured fails" in predictions[0].note


def test_frei32_structure_assumptions():
    data = _data()
    relu = TwoLayer(width=8, activation="relu", outer_signs="balanced")
    W, a = _kkt_like(data, m1=8, m2=0)
    verdicts = FreiTheorem32().assumptions(_cell(GOOD_32, data, relu, W=W, a=a, time=T32))
    assert _outcomes(verdicts)[1:3] == ["fails", "fails"]


def test_frei_lemma33_on_large_and_small_dimension():
    big = FreiLemma33().check(_cell({"loss": [0.5]}, _data(d=20_000)))
    assert _outcomes(big) == ["holds", "holds", "holds"]
    small = FreiLemma33().check(_cell({"loss": [0.5]}, _data(d=50), data_spec=GaussianMixture(n=4, d=50)))
    assert _outcomes(small)[:2] == ["fails", "fails"] and small[2].outcome == "outside_scope"


def test_frei34_loss_threshold_and_first_time():
    data = _data()
    t = np.array([0.0, 1.0, 10.0, 100.0])
    ok = FreiTheorem34().predictions(_cell({"loss": [0.69, 0.3, 0.1, 0.01]}, data, time=t))[0]
    assert ok.outcome == "holds" and ok.bound == pytest.approx(math.log(2) / 4) and "t = 10" in ok.note
    bad = FreiTheorem34().predictions(_cell({"loss": [0.69, 0.6, 0.5, 0.4]}, data, time=t))[0]
    assert bad.outcome == "fails" and "never below" in bad.note


def test_frei42_rank_drop_after_one_step():
    data = _data()
    model = TwoLayer(width=8, activation="smooth_leaky_relu", gamma=0.9, outer_signs="balanced")
    a = _outer(4, 4)
    W = np.zeros((1, 8, data.d))
    # the first GD step from W = 0: lr |l'(0)| phi'(0) ||a|| ||sum_i y_i x_i|| / n, phi'(0) = (1 + gamma)/2
    step1 = 0.1 * 0.5 * 0.95 * np.linalg.norm(a) * np.linalg.norm(data.y @ data.X) / 4
    t = np.r_[0.0, np.logspace(-1, 4, 8)]
    metrics = {"loss": np.r_[0.69, 0.5, 0.3, 0.1 / t[3:]], "W.spectral": np.r_[1e-3, 0.5 + np.log1p(t[1:])],
               "W.stable_rank": np.r_[7.9, np.linspace(1.4, 1.1, 8)], "W.frobenius": np.r_[0.1 * step1, 0.6 + np.log1p(t[1:])]}
    ctx = _cell(metrics, data, model, W=W, a=a[None], time=t, lr=0.1)
    verdicts = FreiTheorem42().check(ctx)
    assert _outcomes(verdicts) == ["holds"] * len(verdicts), "\n".join(v.line() for v in verdicts)
    assert "md/(sqrt m + sqrt d)^2" in verdicts[-1].note
    worse = FreiTheorem42().check(_cell({**metrics, "W.stable_rank": np.r_[7.9, np.full(7, 6.0), 12.0]}, data, model,
                                        W=W, a=a[None], time=t, lr=0.1))
    assert worse[-1].outcome == "fails" and worse[-1].measured == pytest.approx(12.0)
    big_init = FreiTheorem42().assumptions(_cell({**metrics, "W.frobenius": np.r_[10 * step1, np.ones(8)]}, data,
                                                 model, W=W, a=a[None], time=t, lr=0.1))
    assert big_init[-1].outcome == "fails"


# -- Kou et al. 2023 -----------------------------------------------------------------------------------
def _kou_cell(loss, t, activation="leaky_relu", srank=1.02):
    model = TwoLayer(width=8, activation=activation, outer_scale="inv_half_width", outer_signs="balanced")
    a = np.concatenate([np.ones(4), -np.ones(4)]) / 4
    metrics = {"loss": loss, "W.frobenius": np.log(t), "W.stable_rank": np.full(t.size, srank),
               "margin_spread": np.full(t.size, 1.01)}
    data = _data()
    W = 5.0 * np.sign(a)[None, :, None] * max_margin_svm(data.X, data.y).w[None, None, :]
    return _cell(metrics, data, model, W=W, a=a[None], time=t)


def test_kou_slopes_on_synthetic_curves():
    t = np.logspace(0, 6, 20)
    verdicts = KouTheorem().check(_kou_cell(1.0 / t, t))
    assert _outcomes(verdicts) == ["holds"] * len(verdicts), "\n".join(v.line() for v in verdicts)
    slow = KouTheorem().predictions(_kou_cell(t**-0.5, t))
    assert slow[2].outcome == "fails" and "fitted -0.5 " in slow[2].note
    relu = KouTheorem().predictions(_kou_cell(1.0 / t, t, activation="relu", srank=1.02))
    assert relu[0].statement.startswith("ReLU") and relu[0].outcome == "holds"
    # negative control: a stable rank that stays at 2.5 above the limit structure's (about 2 for ReLU)
    stuck = KouTheorem().predictions(_kou_cell(1.0 / t, t, activation="relu", srank=2.5))
    assert stuck[0].outcome == "fails" and stuck[0].measured == pytest.approx(2.5)


# -- Lyu & Li 2020 -------------------------------------------------------------------------------------
def _lyu_li_cell(margin, model=LEAKY):
    """Margins q_i = gbar * rho for rho = t: the loss follows from the margins (4 points, equal margins)."""
    t = np.arange(1.0, 1.0 + len(margin))
    q = np.asarray(margin) * t
    return _cell({"loss": np.log1p(np.exp(-q)), "param_norm": t, "normalized_margin": margin}, _data(), model,
                 time=t)


def test_lyu_li_increasing_and_decreasing_margin():
    def margins(verdicts):  # the two margin predictions, read by statement
        return [v.outcome for v in verdicts if "margin" in v.statement and v.kind == "prediction"]

    up = LyuLiMonotoneMargin().check(_lyu_li_cell([0.1, 0.5, 0.8, 1.0, 1.1, 1.2]))
    assert _outcomes(up) == ["holds"] * len(up)
    down = LyuLiMonotoneMargin().check(_lyu_li_cell([0.1, 0.5, 0.8, 1.2, 0.9, 0.7]))
    assert margins(down) == ["fails", "fails"]
    never = LyuLiMonotoneMargin().check(_lyu_li_cell([0.001, 0.002, 0.003]))
    assert margins(never) == ["not_evaluated"] * 2
    smooth = TwoLayer(width=8, activation="smooth_leaky_relu", outer_signs="balanced")
    outside = LyuLiMonotoneMargin().check(_lyu_li_cell([0.1, 0.5, 0.8, 1.2, 1.1, 1.0], smooth))
    assert _outcomes(outside)[:3] == ["fails", "holds", "holds"] and margins(outside) == ["not_evaluated"] * 2


# -- end to end ----------------------------------------------------------------------------------------
def test_frei32_on_a_trained_network():
    data = NearlyOrthogonal(n=4, d=4000, scale="unit").generate(0)
    method = GD(lr=2.0)
    results = train(LEAKY, data, LOGISTIC, method, stop=Stop(max_steps=2000), init_scale=1e-4, checkpoints=8)
    spec = RunSpec(model=LEAKY, data=NearlyOrthogonal(n=4, d=4000, scale="unit"), loss=LOGISTIC, method=method,
                   stop=Stop(max_steps=2000), init_scale=1e-4, checkpoints=8)
    ctx = RunContext(runs=[spec], results=results, data=[data])
    verdicts = FreiTheorem32().check(ctx)
    lines = "\n".join(v.line() for v in verdicts)
    assert all(v.outcome == "holds" for v in verdicts if v.kind == "assumption"), lines
    by_item = {v.statement[:3]: v for v in verdicts if v.kind == "prediction"}
    assert by_item["(1)"].outcome == "holds", lines
    assert all(v.outcome == "holds" for v in verdicts if v.statement.startswith("(3)")), lines
