"""Controls of the S4/S5 theorems (Soudry et al. 2018, Nacson et al. 2019, Ji & Telgarsky 2019): hand-built cells,
no training (see tests/_controls.py).

Linear predictors: a parameter path w(t) (or W(t) for the multiclass model), every recorded quantity computed from
it as the recorder computes it (loss, ||w||, margins, normalised margin, unit distance to the SVM). The positive
paths are Theorem 3's asymptotic form, w(t) = w_hat log t + w_tilde (+ a vanishing part), with w_hat the SVM and
w_tilde from `papers.soudry2018.theorems.common.soudry_w_tilde`; each negative path changes one thing (the norm's
slope, the loss's rate, the direction error's rate, the limit of angle gap x ||w||, ...), with every assumption still holding.

Deep linear networks (depth 2): W_1 = sigma u_1 d(t)^T + eps e_2 p^T, W_2 = sigma e_1^T as in the table's
nominal instance (tests/_table_instances.py::ji_telgarsky, the positive control of every Ji & Telgarsky
prediction), with one of sigma(t), d(t), eps(t) or the direction of W_2 changed.

Issue 24's items 5 and 6: the controls whose `old_threshold` is set are runs the old checks passed. Item 5 (Soudry
et al.): a direction error falling like t^-0.5 has q = 0.5 log t of gap ~ ||w||^-q, about 7 over the fit window,
which the old one-sided q >= 1/2 accepted (the multiclass check accepted any q >= 1e-12); angle gap x ||w|| read at
the last checkpoint accepted a run still moving away from ||P w_tilde||. Item 6 (Ji & Telgarsky): "the slope of
log(unit distance) against log log t is negative" accepted a direction error falling like t^-0.5, and one
levelling off at 0.1 (a different limit direction). tests/test_soudry_ji.py::test_item_controls_passed_the_old_checks
recomputes the old criteria on these cells.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import xarray as xr

import _table_instances as ti
from _controls import Control
from implicitbias.data import KnownSVM2D, MulticlassSeparable, Separable
from implicitbias.losses import Loss
from implicitbias.models import DeepLinear, Linear
from implicitbias.runs import RunSpec
from implicitbias.theorems.base import RunContext
from implicitbias.training import GD, SGD, NormalizedGD
from implicitbias.training.methods import GradientFlow
from test_soudry_ji import _multiclass_cell

LOGISTIC = Loss(name="logistic")
SPEC_2D = KnownSVM2D(n=12)
#: log-spaced times (t = 0 first, as a run records its initialisation); the fit window is the last half, 1e4..1e8
TIME = np.concatenate([[0.0], np.logspace(0, 8, 40)])


# -- binary linear predictors ---------------------------------------------------------------------------------
@functools.cache
def _data2d():
    return SPEC_2D.generate(0)


def _linear(path, time=TIME, method=None) -> RunContext:
    """A one-run cell from the path w(t) (checkpoint, d) on the 2-D data with a closed-form SVM."""
    from implicitbias.reference import max_margin_svm

    data, method = _data2d(), method or GD(lr=1.0)
    svm = max_margin_svm(data.X, data.y)
    path = np.asarray(path, np.float64)
    q = data.y[None, :] * (path @ data.X.T)
    norm = np.linalg.norm(path, axis=1)
    metrics = {"loss": np.mean(np.logaddexp(0.0, -q), axis=1), "param_norm": norm, "min_margin": q.min(axis=1),
               "normalized_margin": q.min(axis=1) / norm,
               "unit_distance_to_reference": np.linalg.norm(path / norm[:, None] - svm.direction, axis=1),
               "time": np.asarray(time, float), "step": np.asarray(time, float) / method.lr}
    ds = xr.Dataset({k: (("run", "checkpoint"), v[None]) for k, v in metrics.items()},
                    coords={"run": [0], "checkpoint": np.arange(len(time))})
    run = RunSpec(model=Linear(), data=SPEC_2D, loss=LOGISTIC, method=method, init_scale=0.0)
    return RunContext(runs=[run], results=ds, data=[data])


@functools.cache
def _pieces():
    """(w_hat, w_tilde, unit vector orthogonal to w_hat) of the 2-D data (w_tilde from the project's function)."""
    from implicitbias.papers.soudry2018.theorems.common import soudry_w_tilde
    from implicitbias.theorems.max_margin import svm_of

    data = _data2d()
    w_hat = data.info["w_svm"]
    probe = _linear(np.outer(np.log(np.maximum(TIME, 1.0)), w_hat) + w_hat)
    w_tilde = soudry_w_tilde(probe, 0, svm_of(probe, 0))
    perp = np.array([-w_hat[1], w_hat[0]]) / np.linalg.norm(w_hat)
    return w_hat, w_tilde, perp


def _log_t(time=TIME):
    return np.log(np.maximum(time, 1.0))


def soudry_path(scale=1.0, shift=0.0, time=TIME):
    """w(t) = scale w_hat log t + w_tilde + shift w_hat: Theorem 3's form at scale = 1, shift = 0."""
    w_hat, w_tilde, _ = _pieces()
    return scale * np.outer(_log_t(time), w_hat) + w_tilde + shift * w_hat


def shrinking_path(time=TIME):
    """Theorem 3's path, except that w shrinks by 20% at the 10th checkpoint: the loss rises at one step."""
    path = soudry_path(time=time)
    path[10] = 0.8 * path[9]
    return path


def fast_direction_path(time=TIME):
    """w(t) = w_hat (log t + 1) + 0.5 ||w_hat|| log t t^-0.5 e_perp: the direction error falls like t^-0.5."""
    w_hat, _, perp = _pieces()
    lt = _log_t(time)
    return np.outer(lt + 1.0, w_hat) + np.outer(0.5 * np.linalg.norm(w_hat) * lt * np.maximum(time, 1.0) ** -0.5, perp)


def wobbly_norm_path(time=TIME):
    """||w|| = ||w_hat|| (log t + 2 sin(2 log t) + 3): not linear in log t."""
    w_hat, w_tilde, _ = _pieces()
    lt = _log_t(time)
    return np.outer(lt + 2.0 * np.sin(2.0 * lt) + 3.0, w_hat) + w_tilde


LIMIT_TIME = np.concatenate([[0.0], np.logspace(7, 8, 24)])


def moving_limit_path(time=LIMIT_TIME):
    """w_hat log t + w_tilde, with its part orthogonal to w_hat scaled by 1.5 - 0.5 (t / t_end)^-nu (nu the
    derived residual rate): P w(t) equals P w_tilde at the last checkpoint but is on its way to 1.5 P w_tilde."""
    from implicitbias.papers.soudry2018.theorems.common import residual_rate
    from implicitbias.theorems.max_margin import svm_of

    w_hat, w_tilde, _ = _pieces()
    u = w_hat / np.linalg.norm(w_hat)
    par, perp = u * (u @ w_tilde), w_tilde - u * (u @ w_tilde)
    probe = _linear(soudry_path())
    nu, _ = residual_rate(probe, 0, svm_of(probe, 0))
    t = np.maximum(time, 1.0)
    factor = 1.5 - 0.5 * (t / t[-1]) ** -nu
    return np.outer(_log_t(time), w_hat) + par + factor[:, None] * perp[None, :]


# -- multiclass ------------------------------------------------------------------------------------------------
MC_SPEC = MulticlassSeparable(n=4, d=10, classes=3, margin=0.3)


@functools.cache
def _mc_data():
    return MC_SPEC.generate(0)


def _multiclass(path, time=TIME, lr=0.5) -> RunContext:
    """A one-run multiclass cell from the path W(t) (checkpoint, k, d), metrics computed as the recorder does."""
    return _multiclass_cell(_mc_data(), np.asarray(path, np.float64), time, lr, data_spec=MC_SPEC)


@functools.cache
def _mc_pieces():
    from implicitbias.papers.soudry2018.theorems.common import soudry_w_tilde
    from implicitbias.reference import multiclass_svm

    data = _mc_data()
    svm = multiclass_svm(data.X, data.y.astype(int), 3)
    W_hat = svm.W
    w_tilde = soudry_w_tilde(_multiclass(np.log(np.maximum(TIME, 1.0))[:, None, None] * W_hat[None] + W_hat), 0, svm)
    assert w_tilde is not None, "every constraint of this draw is on the support: w_tilde is determined"
    rng = np.random.default_rng(0)
    perp = rng.standard_normal(W_hat.size)
    u = W_hat.ravel() / np.linalg.norm(W_hat)
    perp -= u * (u @ perp)
    return W_hat, w_tilde.reshape(W_hat.shape), (perp / np.linalg.norm(perp)).reshape(W_hat.shape)


def mc_path(scale=1.0, shift=0.0, time=TIME):
    W_hat, W_tilde, _ = _mc_pieces()
    return scale * _log_t(time)[:, None, None] * W_hat[None] + W_tilde[None] + shift * W_hat[None]


def mc_fast_direction_path(time=TIME):
    W_hat, _, perp = _mc_pieces()
    lt = _log_t(time)
    amp = 0.5 * np.linalg.norm(W_hat) * lt * np.maximum(time, 1.0) ** -0.5
    return (lt + 1.0)[:, None, None] * W_hat[None] + amp[:, None, None] * perp[None]


def mc_wobbly_path(time=TIME):
    W_hat, W_tilde, _ = _mc_pieces()
    lt = _log_t(time)
    return (lt + 2.0 * np.sin(2.0 * lt) + 3.0)[:, None, None] * W_hat[None] + W_tilde[None]


def mc_moving_limit_path(time=LIMIT_TIME):
    from implicitbias.papers.soudry2018.theorems.common import residual_rate
    from implicitbias.theorems.max_margin import svm_of

    W_hat, W_tilde, _ = _mc_pieces()
    u = W_hat.ravel() / np.linalg.norm(W_hat)
    par = (u * (u @ W_tilde.ravel())).reshape(W_hat.shape)
    perp = W_tilde - par
    probe = _multiclass(mc_path())
    nu, _ = residual_rate(probe, 0, svm_of(probe, 0))
    t = np.maximum(time, 1.0)
    factor = 1.5 - 0.5 * (t / t[-1]) ** -nu
    return _log_t(time)[:, None, None] * W_hat[None] + par[None] + factor[:, None, None] * perp[None]


# -- normalised GD ---------------------------------------------------------------------------------------------
NGD_TIME = np.concatenate([[0.0], np.logspace(0, 6, 30)])


def ngd_path(speed=1.0, slow=False, time=NGD_TIME):
    """||w|| = speed gamma_hat t along w_hat, with an orthogonal part log(t + e) sqrt(t) (direction error ~ log t /
    sqrt t, Nacson et al.'s rate) or, with slow, 0.5 gamma_hat t / log(t + e) (fixed-step GD's 1/log t)."""
    w_hat, _, perp = _pieces()
    gamma = 1.0 / np.linalg.norm(w_hat)
    u = w_hat * gamma
    t = np.asarray(time, float)
    side = 0.5 * gamma * t / np.log(t + math.e) if slow else np.log(t + math.e) * np.sqrt(t)
    return np.outer(speed * gamma * t + 1.0, u) + np.outer(side, perp)


# -- deep linear networks --------------------------------------------------------------------------------------
JI_TIME = np.geomspace(2.0, 1e6, 16)


@functools.cache
def _ji_data():
    from implicitbias.reference import max_margin_svm

    spec = Separable(n=8, d=3, margin=0.2)
    ds = spec.generate(0)
    return spec, ds, max_margin_svm(ds.X, ds.y)


def ji_cell(*, gap=None, sigma2=None, eps=None, tilt=0.0) -> RunContext:
    """Depth 2 (the table's instance unless changed): W_1 = sigma u_1 d(t)^T + eps(t) e_2 p^T, W_2 = sigma (cos tilt
    e_1 + sin tilt e_3)^T, d(t) the unit vector at angle arctan(gap(t)) from the SVM direction (default gap 0.5 /
    log t), sigma^2 = sigma2(t) (default c log t), eps = eps(t) (default 0.3); the loss is that of W_2 W_1."""
    spec, ds, svm = _ji_data()
    w_svm = svm.w / np.linalg.norm(svm.w)
    off = ti._orthogonal_to(w_svm, d=3)
    p = ti._unit(np.cross(w_svm, off))
    t = JI_TIME
    c = 5.0 / svm.margin
    sigma = np.sqrt(c * np.log(t) if sigma2 is None else sigma2(t))
    slope = 0.5 / np.log(t) if gap is None else gap(t)
    direction = np.stack([ti._unit(w_svm + s * off) for s in slope])
    e = np.full(t.shape, 0.3) if eps is None else eps(t)
    e1, e2, e3 = np.eye(3)
    W1 = sigma[:, None, None] * e1[None, :, None] * direction[:, None, :] + e[:, None, None] * np.outer(e2, p)[None]
    top = math.cos(tilt) * e1 + math.sin(tilt) * e3
    W2 = sigma[:, None, None] * top[None, None, :]
    w = np.einsum("tij,tjk->tik", W2, W1)[:, 0, :]
    unit = w / np.linalg.norm(w, axis=1, keepdims=True)
    run = RunSpec(model=DeepLinear(depth=2, hidden=3), data=spec, loss=LOGISTIC, method=GradientFlow(),
                  stop=ti.GF_STOP, init_scale=0.1, reference="svm", keep_trajectory=True)
    return ti.cell([run], [ds], {"loss": [ti.logistic_risk(v, ds.X, ds.y) for v in w],
                                 "unit_distance_to_reference": np.linalg.norm(unit - w_svm, axis=1)},
                   {"trajectory.theta.W1": W1[None], "trajectory.theta.W2": W2[None], "theta.W1": W1[None, -1],
                    "theta.W2": W2[None, -1]}, time=t)


# -- the controls ------------------------------------------------------------------------------------------------
ITEM5_RATE = ("q >= 1 - rate_tol = 1/2 (one-sided) accepted this direction error falling like t^-0.5: q = 0.5 log t, "
              "about 7 over the fit window")
ITEM5_MC = ("q >= 1/2 accepted this direction error falling like t^-0.5 (q about 7); on data whose support vectors do "
            "not span the constraints (soudry2018-logistic's multiclass part) the check was q >= 1e-12, any decay")
ITEM5_LIMIT = ("angle gap x ||w|| read at the last checkpoint, |ratio - 1| <= 0.1, accepted a run equal to ||P w_tilde|| "
               "there but on its way to 1.5 ||P w_tilde||")
ITEM6_RATE = ("'fitted slope of log(unit distance) against log log t < 0' accepted a direction error falling like "
              "t^-0.5 (slope -5.2 over the fit window)")
ITEM6_LIMIT = ("'fitted slope of log(unit distance) against log log t < 0' accepted a direction error levelling off at "
               "0.1 (a different limit direction; slope -0.32)")


def _binary(theorem, method=None, sharp=True):
    def lin(path_fn, time=TIME):
        return lambda: _linear(path_fn(time=time), time, method)

    pos = lin(soudry_path)
    out = [
        Control(theorem, "||w(t)|| grows like", lin(functools.partial(soudry_path, 0.5)), pos),
        Control(theorem, "||w(t)|| is linear in log t", lin(wobbly_norm_path), pos),
        Control(theorem, "L(w(t)) = Theta(1/t)", lin(functools.partial(soudry_path, 0.5)), pos),
        Control(theorem, "angle gap ||w/||w||", lin(fast_direction_path), pos, old_threshold=ITEM5_RATE),
        Control(theorem, "margin gap (gamma_hat", lin(fast_direction_path), pos, old_threshold=ITEM5_RATE),
    ]
    if sharp:
        out += [
            Control(theorem, "t L(w(t)) ->", lin(functools.partial(soudry_path, 1.0, 0.3)), pos),
            Control(theorem, "angle gap x ||w(t)||", lin(moving_limit_path, LIMIT_TIME), pos,
                    old_threshold=ITEM5_LIMIT),
        ]
    return out


def _mc(path_fn, time=TIME):
    return lambda: _multiclass(path_fn(time=time), time)


MC_POS = _mc(mc_path)

CONTROLS = [
    *_binary("SoudryTheorem3"),
    Control("SoudryTheorem3", "decreases at every step", lambda: _linear(shrinking_path()), lambda: _linear(soudry_path())),
    *_binary("NacsonSGD", SGD(lr=0.5, batch_size=4), sharp=False),
    Control("SoudryMulticlass", "||w(t)|| grows like", _mc(functools.partial(mc_path, 0.5)), MC_POS),
    Control("SoudryMulticlass", "||w(t)|| is linear in log t", _mc(mc_wobbly_path), MC_POS),
    Control("SoudryMulticlass", "L(w(t)) = Theta(1/t)", _mc(functools.partial(mc_path, 0.5)), MC_POS),
    Control("SoudryMulticlass", "angle gap ||w/||w||", _mc(mc_fast_direction_path), MC_POS, old_threshold=ITEM5_MC),
    Control("SoudryMulticlass", "margin gap (gamma_hat", _mc(mc_fast_direction_path), MC_POS, old_threshold=ITEM5_MC),
    Control("SoudryMulticlass", "t L(w(t)) ->", _mc(functools.partial(mc_path, 1.0, 0.3)), MC_POS),
    Control("SoudryMulticlass", "angle gap x ||w(t)||", _mc(mc_moving_limit_path, LIMIT_TIME), MC_POS,
            old_threshold=ITEM5_LIMIT),
    Control("NacsonNormalizedGD", "angle gap decays polynomially",
            lambda: _linear(ngd_path(slow=True), NGD_TIME, NormalizedGD(lr=0.1)),
            lambda: _linear(ngd_path(), NGD_TIME, NormalizedGD(lr=0.1))),
    Control("NacsonNormalizedGD", "||w|| grows linearly at rate gamma_hat",
            lambda: _linear(ngd_path(speed=2.0), NGD_TIME, NormalizedGD(lr=0.1)),
            lambda: _linear(ngd_path(), NGD_TIME, NormalizedGD(lr=0.1))),
    Control("JiTelgarskyAlignment", "risk -> 0", lambda: ji_cell(sigma2=lambda t: np.full(t.shape, 30.0 / 0.2),
                                                                 gap=lambda t: np.full(t.shape, 0.05))),
    Control("JiTelgarskyAlignment", "||W_i|| -> infinity", lambda: ji_cell(sigma2=lambda t: 5.0 / 0.2 * np.log(t) ** 2)),
    Control("JiTelgarskyAlignment", "the imbalance D_i", lambda: ji_cell(eps=lambda t: 0.3 + 0.3 * np.log(t / 2.0))),
    Control("JiTelgarskyAlignment", "srank(W_i) -> 1", lambda: ji_cell(eps=lambda t: 0.3 + 0.05 * np.log(t / 2.0))),
    Control("JiTelgarskyAlignment", "adjacent layers align", lambda: ji_cell(tilt=0.3)),
    Control("JiTelgarskyAlignment", "SVM direction at the derived rate", lambda: ji_cell(gap=lambda t: t ** -0.5),
            old_threshold=ITEM6_RATE),
    Control("JiTelgarskyAlignment", "unit distance to the SVM direction -> 0",
            lambda: ji_cell(gap=lambda t: 0.1 + 0.5 / np.log(t)), old_threshold=ITEM6_LIMIT),
]
