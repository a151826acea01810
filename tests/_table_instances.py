"""Tiny hand-built cells for the table of every theorem (tests/test_theorem_table.py): no training.

Each builder returns a `RunContext` whose recorded quantities are computed from hand-set parameters with the
project's own functions (references, metrics, mirror flow), so the instance is consistent: the parameters are
those of a run that shows the theorem's behaviour, and the curves the checks read follow from them. They are
cached (the nominal instance of a row is built once; references memoized by data key, `reference.memo`, are
then shared by the row's breaking inputs that keep the data).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import xarray as xr

from implicitbias.data import Dataset, NearlyOrthogonal
from implicitbias.losses import Loss
from implicitbias.models import DeepLinear, DiagonalLinear, Linear, MatrixFactorization, SingleNeuron, TwoLayer
from implicitbias.runs import RunSpec
from implicitbias.theorems.base import RunContext
from implicitbias.training import GD, Stop
from implicitbias.training.methods import GradientFlow

LOGISTIC = Loss(name="logistic")
SQUARE = Loss(name="square")
GF_STOP = Stop(loss_tol=1e-10, max_time=1e4)


def cell(specs, data, curves, arrays=None, time=None) -> RunContext:
    """A cell over len(specs) runs: `curves` {name: (run, checkpoint)} (with `time` (run, checkpoint)),
    `arrays` {name: (run, ...)} (final parameters `theta.*`, `const.*`, trajectories `trajectory.*` of shape
    (run, checkpoint, ...)); `data[r]` is run r's training data."""
    runs = len(specs)
    time = np.asarray(time, np.float64)
    ckpts = time.shape[-1]
    time = np.broadcast_to(time, (runs, ckpts))
    vars_ = {k: (("run", "checkpoint"), np.broadcast_to(np.asarray(v, np.float64), (runs, ckpts)))
             for k, v in curves.items()}
    vars_["time"] = (("run", "checkpoint"), time)
    lr = np.array([getattr(s.method, "lr", 1.0) for s in specs])
    vars_["step"] = (("run", "checkpoint"), time / lr[:, None])
    for k, v in (arrays or {}).items():
        v = np.asarray(v, np.float64)
        lead = ("run", "checkpoint") if k.startswith("trajectory.") else ("run",)
        vars_[k] = (lead + tuple(f"{k}_{i}" for i in range(v.ndim - len(lead))), v)
    coords = {"run": np.arange(runs), "checkpoint": np.arange(ckpts),
              "seed": ("run", [s.seed for s in specs]), "init_scale": ("run", [s.init_scale for s in specs])}
    return RunContext(runs=list(specs), results=xr.Dataset(vars_, coords=coords), data=list(data))


def logistic_risk(w, X, y) -> float:
    return float(np.mean(np.logaddexp(0.0, -y * (X @ w))))


def _unit(v):
    return v / np.linalg.norm(v)


def _orthogonal_to(*vs, d):
    """A unit vector orthogonal to the vectors vs (in R^d)."""
    Q = np.linalg.qr(np.stack(list(vs) + [np.eye(d)[k] for k in range(d)], axis=1))[0]
    return Q[:, len(vs)]


# -- Frei et al. 2023 and Lyu & Li 2020: the hand-built cells of test_negative_controls_frei.py ----------------
@functools.cache
def frei32():
    """Theorem 3.2's KKT-like cell: every neuron sign(a_j) 5 w_svm, curves approaching their limits like 1/log t."""
    from test_negative_controls_frei import LEAKY, _aligned, _ctx, _data, frei32_curves

    data = _data(n_test=400)
    W, a = _aligned(data, 8)
    a = a / np.sqrt(8)
    return _ctx(frei32_curves(data, W, a), data, LEAKY, W, a)


@functools.cache
def frei42():
    """Theorem 4.2's cell: GD (lr 0.1) from W(0) ~ 1e-5 with a smoothed leaky ReLU, the rank drop after one step."""
    from test_negative_controls_frei import T, _ctx, _data

    model = TwoLayer(width=8, activation="smooth_leaky_relu", gamma=0.9, outer_signs="balanced")
    data = _data()
    W, a = np.zeros((8, data.d)), np.r_[np.ones(4), -np.ones(4)] / np.sqrt(8)
    curves = {"loss": np.r_[0.69, 0.1 / T[1:]], "W.spectral": 1e-3 + np.log1p(T), "W.frobenius": 1e-5 + np.log1p(T),
              "W.stable_rank": np.r_[6.4, np.full(T.size - 1, 1.5)]}
    return _ctx(curves, data, model, W, a, lr=0.1)


@functools.cache
def lemma33():
    from test_negative_controls_frei import LEAKY, T, _ctx, _data

    return _ctx({"loss": np.full(T.size, 0.5)}, _data(), LEAKY, np.zeros((8, 20_000)), np.ones(8))


@functools.cache
def lyu_li():
    """Margins q = gbar rho with gbar rising to 1 like 1/log t and rho = 1 + 3 log(1 + t); the loss follows."""
    from test_negative_controls_frei import LEAKY, T, _ctx, _data

    rho = 1.0 + 3.0 * np.log1p(T)
    margin = 1.0 - 0.5 / (1.0 + np.log1p(T))
    data = _data()
    a = np.r_[np.ones(4), -np.ones(4)]
    return _ctx({"loss": np.log1p(np.exp(-margin * rho)), "param_norm": rho, "normalized_margin": margin}, data,
                LEAKY, np.zeros((8, data.d)), a)


# -- Ji & Telgarsky 2019: a depth-2 linear network aligning along the SVM ------------------------------------
@functools.cache
def ji_telgarsky():
    """W_1 = sigma u_1 w(t)^T + eps e_2 p^T, W_2 = sigma u_1^T with w(t) -> w_svm (unit) like 1/log t and p
    orthogonal to every w(t): the imbalance D_1 = -eps^2 e_2 e_2^T is conserved, srank(W_1) - 1 = eps^2 /
    sigma^2 = B_1 / sigma^2, the layers are aligned, sigma^2 = c log t; the loss is that of W_2 W_1."""
    from implicitbias.data import Separable
    from implicitbias.reference import max_margin_svm

    spec = Separable(n=8, d=3, margin=0.2)
    ds = spec.generate(0)
    svm = max_margin_svm(ds.X, ds.y)
    w_svm = _unit(svm.w)
    off = _orthogonal_to(w_svm, d=3)
    p = _unit(np.cross(w_svm, off))
    t = np.geomspace(2.0, 1e6, 16)
    c = 5.0 / svm.margin
    sigma = np.sqrt(c * np.log(t))
    direction = np.stack([_unit(w_svm + 0.5 / math.log(s) * off) for s in t])
    eps, e1, e2 = 0.3, np.eye(3)[0], np.eye(3)[1]
    W1 = sigma[:, None, None] * e1[None, :, None] * direction[:, None, :] + eps * np.outer(e2, p)[None]
    W2 = sigma[:, None, None] * e1[None, None, :]
    w = sigma[:, None] ** 2 * direction
    run = RunSpec(model=DeepLinear(depth=2, hidden=3), data=spec, loss=LOGISTIC, method=GradientFlow(), stop=GF_STOP,
                  init_scale=0.1, reference="svm", keep_trajectory=True)
    return cell([run], [ds], {"loss": [logistic_risk(v, ds.X, ds.y) for v in w],
                              "unit_distance_to_reference": np.linalg.norm(direction - w_svm, axis=1)},
                {"trajectory.theta.W1": W1[None], "trajectory.theta.W2": W2[None], "theta.W1": W1[None, -1],
                 "theta.W2": W2[None, -1]}, time=t)


# -- diagonal linear networks ------------------------------------------------------------------------------
def diagonal_factors(w, alpha):
    """(u, v) with u^2 - v^2 = w and u v = alpha^2: where the depth-2 flow from u = v = alpha 1 puts w (it
    conserves u_i v_i)."""
    r = np.sqrt(w**2 + 4.0 * alpha**4)
    u2 = np.where(w >= 0, 0.5 * (w + r), 2.0 * alpha**4 / np.maximum(r - w, np.finfo(float).tiny))  # no cancellation
    u = np.sqrt(u2)
    return u, alpha**2 / u


def l1_dual_path(ds, alpha, kappa):
    """w(kappa) = 2 alpha^2 sinh(Z^T (kappa lambda + mu)) (Z = diag(y) X, lambda the l1 LP's dual optimum): the form
    the depth-2 flow takes late on (`GunasekarDiagonal`), with mu on the LP's active points chosen so that the
    support's coordinates are those of the LP's w*: off the support |w_j| / ||w||_inf ~ exp(-delta_j kappa)."""
    from implicitbias.reference import l1_max_margin

    lp = l1_max_margin(ds.X, ds.y)
    Z = ds.y[:, None] * ds.X
    lam = lp.alphas / np.max(np.abs(Z.T @ lp.alphas))
    support, active = np.abs(lp.w) > 1e-9 * np.abs(lp.w).max(), lam > 1e-9 * lam.max()
    target = np.sign(lp.w[support]) * np.log(np.abs(lp.w[support]) / np.abs(lp.w).max())
    mu = np.zeros(ds.n)
    mu[active] = np.linalg.solve(Z[active][:, support].T, target)
    theta = np.asarray(kappa)[:, None] * (Z.T @ lam)[None] + (Z.T @ mu)[None]
    return 2.0 * alpha**2 * np.sinh(theta)


def diagonal_classification_cell(w, ds, spec, alpha, depth=2, curves=None, time=None):
    """A depth-`depth` diagonal network on separable data with the path w (checkpoint, d) (factors from u v =
    alpha^2 for depth 2); the loss is that of w, extra `curves` recorded beside it."""
    u, v = diagonal_factors(w, alpha)
    run = RunSpec(model=DiagonalLinear(depth=depth), data=spec, loss=LOGISTIC, method=GradientFlow(), stop=GF_STOP,
                  init_scale=alpha, keep_trajectory=True)
    t = np.geomspace(1.0, 1e5, len(w)) if time is None else time
    return cell([run], [ds], {"loss": [logistic_risk(x, ds.X, ds.y) for x in w], **(curves or {})},
                {"theta.u": u[None, -1], "theta.v": v[None, -1], "trajectory.theta.u": u[None],
                 "trajectory.theta.v": v[None]}, time=t)


def classification_data():
    """The data of the diagonal-network classification cells: an l1 LP with a nondegenerate vertex (6 nonzero
    coordinates, 6 points with a positive dual weight) and smallest complementarity slack delta* = 0.43."""
    from implicitbias.data import Separable

    spec = Separable(n=8, d=10, sparsity=2, margin=0.2)
    return spec, spec.generate(0)


@functools.cache
def gunasekar_diagonal():
    """Depth 2, logistic loss, alpha = 1e-5: w = 2 alpha^2 sinh(Z^T (kappa lambda + mu)) over kappa in [14, 30]
    (`l1_dual_path`: the late form of the flow, approaching the l1 max-margin direction at the theorem's rates);
    (u, v) from the conserved u v = alpha^2; the loss is that of w."""
    spec, ds = classification_data()
    alpha = 1e-5
    return diagonal_classification_cell(l1_dual_path(ds, alpha, np.linspace(14.0, 30.0, 33)), ds, spec, alpha)


@functools.cache
def diagonal_regression():
    """Depth 2, square loss, alpha = 0.5: the trajectory is the mirror flow of the hyperbolic entropy
    (`mirror_flow_path`, what gradient flow on u^2 - v^2 follows), integrated to interpolation."""
    from implicitbias.data import SparseRegression
    from implicitbias.papers.woodworth2020.theorems import mirror_flow_path
    from implicitbias.reference.diagonal_nets import (
        diagonal_net_potential,
        diagonal_net_time_scale,
        q_alpha_interpolator,
    )

    spec, alpha = SparseRegression(n=4, d=8, k=2), 0.5
    ds = spec.generate(0)
    ref = q_alpha_interpolator(ds.X, ds.y, alpha, 2)
    t = np.r_[0.0, np.geomspace(1e-2, 1e4, 14)]
    w = mirror_flow_path(ds.X, ds.y, diagonal_net_potential(alpha, 2), diagonal_net_time_scale(alpha, 2), t,
                         nu_scale=float(np.max(np.abs(ref.nu))))
    u, v = diagonal_factors(w, alpha)
    run = RunSpec(model=DiagonalLinear(depth=2), data=spec, loss=SQUARE, method=GradientFlow(), stop=GF_STOP,
                  init_scale=alpha, keep_trajectory=True)
    loss = [float(np.sum((ds.X @ x - ds.y) ** 2) / (2 * ds.n)) for x in w]
    return cell([run], [ds], {"loss": loss}, {"theta.u": u[None, -1], "theta.v": v[None, -1],
                                              "trajectory.theta.u": u[None], "trajectory.theta.v": v[None]}, time=t)


# -- linear regression (S7) -----------------------------------------------------------------------------------
@functools.cache
def bregman():
    """GD on the square loss with lr = 1 / beta: w_k = w0 + (I - (I - lr X^T X / n)^k) (w_psi - w0) along the
    row space, ending at the closed form w_psi = w0 + X^+ (y - X w0) (the final checkpoint is the limit)."""
    from implicitbias.data import SparseRegression
    from implicitbias.reference import min_l2_interpolator

    spec = SparseRegression(n=4, d=8, k=2)
    ds = spec.generate(0)
    w0 = 0.01 * np.random.default_rng(0).standard_normal(ds.d)
    limit = min_l2_interpolator(ds.X, ds.y, w0)
    lr = 1.0 / float(np.linalg.eigvalsh(ds.X.T @ ds.X / ds.n)[-1])
    steps = np.r_[0, 1, 4, 16, 64]
    M = np.eye(ds.d) - lr * ds.X.T @ ds.X / ds.n
    path = np.stack([limit - np.linalg.matrix_power(M, int(k)) @ (limit - w0) for k in steps])
    path[-1] = limit
    run = RunSpec(model=Linear(), data=spec, loss=SQUARE, method=GD(lr=lr), init_scale=0.01, keep_trajectory=True)
    loss = [float(np.sum((ds.X @ x - ds.y) ** 2) / (2 * ds.n)) for x in path]
    return cell([run], [ds], {"loss": loss}, {"theta.w": path[None, -1], "trajectory.theta.w": path[None]},
                time=lr * steps)


# -- single neurons (S9) -----------------------------------------------------------------------------------
def _neuron_cell(activation, w0, w, spec, ds):
    model = SingleNeuron(activation=activation, gamma=0.5)
    path = np.stack([w0 + f * (w - w0) for f in (0.0, 0.5, 0.9, 0.99, 1.0)])
    z = path @ ds.X.T
    pred = np.where(z > 0, z, (0.5 if activation == "leaky_relu" else 0.0) * z)
    loss = np.sum((pred - ds.y) ** 2, axis=1) / (2 * ds.n)
    run = RunSpec(model=model, data=spec, loss=SQUARE, method=GradientFlow(), stop=Stop(loss_tol=1e-16, max_time=1e4),
                  init_scale=0.01, keep_trajectory=True)
    return cell([run], [ds], {"loss": loss}, {"theta.w": path[None, -1], "trajectory.theta.w": path[None]},
                time=[0.0, 1.0, 10.0, 100.0, 1000.0])


@functools.cache
def vardi_leaky():
    """The leaky-ReLU neuron: w(inf) = the preimage projection of w0 (the closed form of the theorem)."""
    from implicitbias.papers.vardi2021.data import NeuronTeacher
    from implicitbias.reference import neuron_preimage_projection

    spec = NeuronTeacher(n=4, d=8, activation="leaky_relu", gamma=0.5)
    ds = spec.generate(0)
    w0 = 0.01 * np.random.default_rng(1).standard_normal(ds.d)
    return _neuron_cell("leaky_relu", w0, neuron_preimage_projection(ds.X, ds.y, w0, 0.5), spec, ds)


@functools.cache
def vardi_relu():
    """The ReLU neuron from ||w0|| = 1e-3 ||w_min||, ending at w_min (zero loss, ratio 1 to the bound 2)."""
    from implicitbias.papers.vardi2021.data import NeuronTeacher
    from implicitbias.papers.vardi2021.theorems import relu_min_norm

    spec = NeuronTeacher(n=4, d=8)
    ds = spec.generate(0)
    w_min = relu_min_norm(ds)
    w0 = 1e-3 * np.linalg.norm(w_min) * _unit(np.random.default_rng(1).standard_normal(ds.d))
    return _neuron_cell("relu", w0, w_min, spec, ds)


# -- matrix factorisation (S8) ----------------------------------------------------------------------------
def _psd_root(W):
    lam, Q = np.linalg.eigh(W)
    return (Q * np.sqrt(np.maximum(lam, 0.0))) @ Q.T


@functools.cache
def razin_cohen():
    """W(t) = [[2/delta, 1 - delta], [1 - delta, delta]] (det > 1 > 0) from delta = 0.5 to 1e-6, factored as
    W_1 = W_2 = W^(1/2) (balanced); L = (1/6)[2 (W_12 - 1)^2 + W_22^2] = delta^2 / 2 and ||W|| ~ 2 / delta."""
    from implicitbias.data import RazinCohen

    spec = RazinCohen()
    ds = spec.generate(0)
    delta = np.geomspace(0.5, 1e-6, 20)
    W = np.stack([[[2.0 / x, 1.0 - x], [1.0 - x, x]] for x in delta])
    S = np.stack([_psd_root(M) for M in W])
    loss = np.sum((np.stack([M.reshape(-1) for M in W]) @ ds.X.T - ds.y) ** 2, axis=1) / (2 * ds.n)
    run = RunSpec(model=MatrixFactorization(depth=2, dim=2, init_scheme="balanced", positive_det=True), data=spec,
                  loss=SQUARE, method=GradientFlow(), stop=GF_STOP, init_scale=0.5, keep_trajectory=True)
    return cell([run], [ds], {"loss": loss}, {"trajectory.theta.W1": S[None], "trajectory.theta.W2": S[None],
                                              "theta.W1": S[None, -1], "theta.W2": S[None, -1]},
                time=np.r_[0.0, np.geomspace(1.0, 1e6, 19)])


ALPHAS = (1e-2, 1e-3, 1e-4, 1e-5)


def _sensing_cell(measurements, n):
    """Gunasekar et al. 2017: W = U U^T from alpha I over three alphas; ||W(inf)||_* = (1 + alpha) x the minimum
    over PSD interpolators (the excess falling like alpha), final loss 1e-14."""
    from implicitbias.data import MatrixSensing
    from implicitbias.theorems.matrix_common import min_nuclear_norm_psd

    spec = MatrixSensing(n=n, d=3, rank=1, psd=True, measurements=measurements)
    ds = spec.generate(0)
    best = min_nuclear_norm_psd(ds).nuclear_norm
    model = MatrixFactorization(depth=2, dim=3, symmetric=True, init_scheme="identity")
    runs = [RunSpec(model=model, data=spec, loss=SQUARE, method=GradientFlow(), stop=Stop(loss_tol=1e-14, max_time=1e4),
                    init_scale=a) for a in ALPHAS]
    t = np.r_[0.0, np.geomspace(1.0, 1e4, 9)]
    loss = np.geomspace(1.0, 1e-14, t.size)
    nuclear = np.stack([np.r_[3 * a**2, np.full(t.size - 1, best * (1.0 + a))] for a in ALPHAS])
    return cell(runs, [ds] * len(runs), {"loss": loss, "W.nuclear": nuclear}, time=t)


@functools.cache
def gunasekar_commuting():
    return _sensing_cell("commuting", 2)


@functools.cache
def gunasekar_conjecture():
    return _sensing_cell("gaussian", 5)


@functools.cache
def li_incremental():
    """GLRL's saddles W_1 (rank 1) and W_2 (rank 2) reached in turn: W(t) = g_1(t) W_1 + g_2(t) (W_2 - W_1) with
    logistic steps g_k rising at t = k ln(1/alpha) / sigma_1(M_0) (rate 3 sigma_1(M_0); M_0 = -grad L(0), so the
    first escape takes ln(1/alpha) / sigma_1(M_0) as the theorem says), over t in [0, 3 ln(1/alpha) / sigma_1(M_0)];
    factors W_1 = S^(1/2) V^T, W_2 = U S^(1/2); the loss is that of W(t) on the measurements."""
    return _li_cell(lambda t, span, top: [1.0 / (1.0 + np.exp(-3.0 * top * (t - k * span / top))) for k in (1, 2)])


def _li_cell(steps, alphas=ALPHAS, saddles=None):
    """A LiIncremental cell: W(t) = g_1 W_1 + g_2 (W_2 - W_1) with (g_1, g_2) = steps(t, ln(1/alpha), sigma_1(M_0))
    on t in [0, 3 ln(1/alpha) / sigma_1(M_0)] (40 checkpoints); `saddles` replaces GLRL's (W_1, W_2) on the path."""
    from implicitbias.data import MatrixSensing
    from implicitbias.theorems.matrix_common import greedy_path

    spec = MatrixSensing(n=12, d=3, rank=2, singular_values=(2.0, 1.0))
    ds = spec.generate(0)
    glrl = greedy_path(ds, 2)
    top = glrl.top_gradient_singular_value[0]
    W1, W2 = saddles if saddles is not None else glrl.iterates[:2]
    runs, Wa, Wb, loss, times = [], [], [], [], []
    for a in alphas:
        span = math.log(1.0 / a)
        t = np.linspace(0.0, 3.0 * span / top, 40)
        g = steps(t, span, top)
        W = g[0][:, None, None] * W1 + g[1][:, None, None] * (W2 - W1)
        U, s, Vt = np.linalg.svd(W)
        root = np.sqrt(s)
        Wa.append(root[:, :, None] * Vt)
        Wb.append(U * root[:, None, :])
        loss.append(np.sum((W.reshape(t.size, -1) @ ds.X.T - ds.y) ** 2, axis=1) / (2 * ds.n))
        times.append(t)
        runs.append(RunSpec(model=MatrixFactorization(depth=2, dim=3), data=spec, loss=SQUARE, method=GradientFlow(),
                            stop=Stop(loss_tol=1e-12, max_time=1e4), init_scale=a, keep_trajectory=True))
    Wa, Wb = np.stack(Wa), np.stack(Wb)
    return cell(runs, [ds] * len(runs), {"loss": np.stack(loss)},
                {"trajectory.theta.W1": Wa, "trajectory.theta.W2": Wb, "theta.W1": Wa[:, -1], "theta.W2": Wb[:, -1]},
                time=np.stack(times))


# -- shared pieces for breaking inputs ------------------------------------------------------------------------
def duplicate_row(ds: Dataset, flip: bool = False) -> Dataset:
    """x_1 := x_0 (and y_1 := y_0, or -y_0 with `flip`: then no linear predictor separates them)."""
    X, y = ds.X.copy(), ds.y.copy()
    X[1], y[1] = X[0], (-y[0] if flip else y[0])
    return dataclasses.replace(ds, X=X, y=y)


def nearly_orthogonal_spec(ds):
    return NearlyOrthogonal(n=ds.n, d=ds.d)
