"""Controls of the S6, S7 and S9 theorems: Gunasekar et al. 2018 on diagonal networks, Woodworth et al. 2020's limit
and mirror-flow path, the Bregman limit of linear regression, and Vardi & Shamir 2021's single neurons: hand-built
cells, no training (see tests/_controls.py).

The positive cells are the theorems' own forms: the depth-2 classification path w = 2 alpha^2 sinh(Z^T (kappa
lambda + mu)) (`_table_instances.l1_dual_path`), the mirror-flow path of a regression, the closed-form limits. Each
negative cell changes one thing, with every assumption still holding: the direction's approach, the init scale the
limit is compared at, the time axis of a path, a final point moved along the null space of X (the loss unchanged).

Issue 24, item 7 (`GunasekarDiagonal`): the controls whose `old_threshold` is set are cells the old checks passed.
The old D = 2 margin check accepted gamma_1(w) / gamma_1* >= 1 - 1 / log(||w||_inf / alpha^2) and the old direction
check a negative slope of log(unit distance) against log log(1/L): both passed the path w = rho (w1 + 0.05 / log rho
e) / ||.|| (the table's old nominal instance), whose error decays like 1 / log rho, the rate that bound assumed,
where the theorem's form decays like exp(-delta* s) (here delta* = 0.43). The old D >= 3 check fitted the slope on
every late checkpoint from 3 on, and passed a KKT residual that falls early and rises over the last half of the run.
`tests/test_diagonal_experiments.py::test_old_checks_passed_the_item_7_negative_controls` recomputes the old checks
on these cells.
"""

from __future__ import annotations

import functools
import math

import numpy as np

import _table_instances as ti
from _controls import Control
from implicitbias.models import DiagonalLinear
from implicitbias.runs import RunSpec
from implicitbias.theorems.base import RunContext

ALPHA_OLD = 0.01
#: rho of the old-form path: L from ~0.1 to ~1e-170 on the classification data
RHO = np.geomspace(3.0, 3000.0, 40)


def _unit(v):
    return v / np.linalg.norm(v)


# -- Gunasekar et al. 2018, depth 2 ---------------------------------------------------------------------------
@functools.cache
def old_form_path() -> RunContext:
    """w = rho (w1 + 0.05 / log rho e) / ||.||, e a unit vector orthogonal to the l1 LP's w1: the error decays like
    1 / log rho (passed by the old checks, fails the theorem's rate exp(-delta* s))."""
    from implicitbias.reference import l1_max_margin

    spec, ds = ti.classification_data()
    w1 = _unit(l1_max_margin(ds.X, ds.y).w)
    off = ti._orthogonal_to(w1, d=ds.d)
    w = np.stack([r * _unit(w1 + 0.05 / math.log(r) * off) for r in RHO])
    return ti.diagonal_classification_cell(w, ds, spec, ALPHA_OLD)


# -- depth 1 and depth >= 3 -----------------------------------------------------------------------------------
def _depth_cell(depth, w, curves=None, time=None) -> RunContext:
    """A depth-`depth` (1 or 3) cell on the classification data with the path w: u - v = w (depth 1) or u^3 - v^3 =
    w (depth 3) from the positive and negative parts, the loss that of w."""
    spec, ds = ti.classification_data()
    alpha = 0.1
    u = (np.maximum(w, 0.0) + alpha**depth) ** (1.0 / depth)
    v = (np.maximum(-w, 0.0) + alpha**depth) ** (1.0 / depth)
    run = RunSpec(model=DiagonalLinear(depth=depth), data=spec, loss=ti.LOGISTIC, method=ti.GradientFlow(),
                  stop=ti.GF_STOP, init_scale=alpha, keep_trajectory=True)
    t = np.geomspace(1.0, 1e5, len(w)) if time is None else time
    return ti.cell([run], [ds], {"loss": [ti.logistic_risk(x, ds.X, ds.y) for x in w], **(curves or {})},
                   {"theta.u": u[None, -1], "theta.v": v[None, -1], "trajectory.theta.u": u[None],
                    "trajectory.theta.v": v[None]}, time=t)


def _svm_path(c):
    """Depth 1: w(t) = log t (w_svm + c(t) e) / ||.|| x 20 over t in [e, 1e5]."""
    from implicitbias.reference import max_margin_svm

    _, ds = ti.classification_data()
    svm = _unit(max_margin_svm(ds.X, ds.y).w)
    off = ti._orthogonal_to(svm, d=ds.d)
    t = np.geomspace(math.e, 1e5, 20)
    w = np.stack([20.0 * math.log(s) * _unit(svm + c(s) * off) for s in t])
    return _depth_cell(1, w, time=t)


def _rate(s):
    return math.log(math.log(s)) / math.log(s) if math.log(s) > 1.0 else 1.0


@functools.cache
def depth1_positive():
    """The direction error 0.3 log log t / log t: within Soudry et al.'s rate bound."""
    return _svm_path(lambda s: 0.3 * _rate(s))


@functools.cache
def depth1_negative():
    """The direction error 3 log log t / log t: three times the bound."""
    return _svm_path(lambda s: 3.0 * _rate(s))


def _kkt_cell(kkt_of):
    """Depth 3 on the theorem's depth-2 form path (for the loss) with the KKT residual kkt_of(log log(1/L)) recorded
    from the first checkpoint with L < l(0)/n on."""
    spec, ds = ti.classification_data()
    w = ti.l1_dual_path(ds, 1e-5, np.linspace(14.0, 30.0, 33))
    L = np.array([ti.logistic_risk(x, ds.X, ds.y) for x in w])
    with np.errstate(divide="ignore"):
        x = np.log(np.log(1.0 / L))
    late = (L < math.log(2.0) / ds.n) & (L > 0)
    kkt = np.where(late, kkt_of(x, late), np.nan)
    return _depth_cell(3, w, {"kkt_stationarity": kkt})


@functools.cache
def depth3_positive():
    """KKT residual 0.6 / log log(1/L): falling to 0."""
    return _kkt_cell(lambda x, late: 0.6 / x)


@functools.cache
def depth3_negative():
    """KKT residual falling like 0.6 / log log(1/L) over the first half of the late checkpoints and rising by 4% per
    checkpoint over the second: a run leaving the KKT point. The least-squares slope over every late checkpoint is
    negative (-0.20: the old check passed it); over the last half it is positive (0.08)."""
    def kkt(x, late):
        idx = np.flatnonzero(late)
        cut = idx[idx.size // 2]
        base = 0.6 / x
        out = base.copy()
        out[cut:] = base[cut] * 1.04 ** np.arange(1, out.size - cut + 1)
        return out
    return _kkt_cell(kkt)


# -- Woodworth et al. 2020, the Bregman limit, Vardi & Shamir 2021 ---------------------------------------------
def wrong_alpha() -> RunContext:
    """The regression path of alpha = 0.5 read as a run from alpha = 0.05: its limit is not that Q_alpha's."""
    ctx = ti.diagonal_regression()
    return RunContext([s.replace(init_scale=0.05) for s in ctx.runs], ctx.results, ctx.data)


def slowed_path() -> RunContext:
    """The mirror-flow path with its time axis doubled: w(t/2) stored at t (the same limit, another path)."""
    ctx = ti.diagonal_regression()
    return RunContext(ctx.runs, ctx.results.assign(time=2.0 * ctx.results["time"]), ctx.data)


def _null_move(ctx, size: float, name: str = "theta.w") -> RunContext:
    """The final point moved by size x ||w|| along a null direction of X (Xw, hence the loss, unchanged)."""
    X = ctx.data[0].X
    _, _, Vt = np.linalg.svd(X)
    v = _unit(Vt[X.shape[0]:].T @ np.random.default_rng(5).standard_normal(X.shape[1] - X.shape[0]))
    res = ctx.results.copy(deep=True)
    w = res[name].values[0]
    res[name].values[0] = w + size * np.linalg.norm(w) * v
    return RunContext(ctx.runs, res, ctx.data)


def bregman_moved() -> RunContext:
    """GD's limit moved by 1e-6 relative along the null space of X: 100x the tolerance 1e-8, interpolation kept."""
    return _null_move(ti.bregman(), 1e-6)


def leaky_moved() -> RunContext:
    """The leaky neuron's limit moved by 1e-6 relative along the null space of X (zero loss kept)."""
    return _null_move(ti.vardi_leaky(), 1e-6)


def relu_far() -> RunContext:
    """The ReLU neuron's limit w_min moved along the null space of X to ||w|| = sqrt(1 + 2.3^2) ||w_min|| > 2
    ||w_min|| (the preactivations, hence zero loss, unchanged)."""
    return _null_move(ti.vardi_relu(), 2.3)


_D2 = "a cell approaching like 1 / log rho (the table's old nominal instance)"
CONTROLS = [
    Control("GunasekarDiagonal", "D = 2: the l1-normalised margin", old_form_path,
            old_threshold=f"gamma_1(w) / gamma_1* >= 1 - 1 / log(||w||_inf / alpha^2) passed {_D2}"),
    Control("GunasekarDiagonal", "D = 2: w/||w|| approaches the l1 max-margin direction", old_form_path,
            old_threshold=f"a negative slope of log(unit distance) against log log(1/L) passed {_D2}"),
    Control("GunasekarDiagonal", "D = 1: w/||w|| -> the l2 hard-margin SVM direction", depth1_negative,
            positive=depth1_positive),
    Control("GunasekarDiagonal", "D = 3: a KKT point of the parameter-space margin problem", depth3_negative,
            positive=depth3_positive, old_threshold="the slope of log(KKT residual) against log log(1/L) over every late "
            "checkpoint (3 were enough) was negative for a residual rising over the last half of the run"),
    Control("WoodworthLimit", "GF limit = argmin Q_alpha^D s.t. Xw = y", wrong_alpha),
    Control("MirrorFlowPath", "GF path = mirror-flow path", slowed_path),
    Control("BregmanLimit", "|w_K - w_psi| / |w_psi| <= tol", bregman_moved),
    Control("VardiLeakyNeuron", "the distance the final loss allows", leaky_moved),
    Control("VardiLeakyNeuron", "w(inf) = w0 + X^+ (sigma^-1(y) - X w0): ||w(inf) - w_ref|| / ||w_ref||", leaky_moved),
    Control("VardiReluNeuron", "||w(inf)|| <= 2 ||w_min||", relu_far),
]
