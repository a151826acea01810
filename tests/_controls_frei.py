"""Controls of Frei et al. 2023 (Theorems 3.2, 3.4, 4.2, Lemma 3.3; S1, S2), Kou et al. 2023 (S3) and Lyu & Li 2020
(S10): a negative and a positive control for every prediction (see tests/_controls.py).

Every cell is hand-built (no training), in the forms the checks read: the builders of
tests/test_negative_controls_frei.py (a KKT-like network, every neuron sign(a_j) 5 w_svm, with curves approaching
their limits like 1/log t over t = 1..10^5). A negative control changes one thing the way a run that violates the
prediction would end: a limit that stalls above its bound, a rate that is a wrong power, a network that is no more
linear than at init, a margin that drops. The positive control is the theorem table's nominal instance unless
given (Kou et al.'s nominal instance is a short trained run, so its controls give their own).

Issue 24's items on these checks, and where their controls are:
- item 12 (limits not held to the quantity's range; the worst run chosen by the extrapolation alone): the old
  check read the extrapolation y_inf of y_inf + c / log t as an upper estimate of the limit, so a run still
  falling fast passed whatever its last value, and a run whose extrapolation left the quantity's range could not
  be the worst. A run that has not converged is not_evaluated now, never failed (none of these theorems gives a
  time by which its limit is reached), so the cells the old threshold passed are checked in
  tests/test_negative_controls_frei.py::test_limit_not_converged_* (the issue's examples: a stable rank ending at
  14.36 with an extrapolation of -18.3 beside three converged runs, a margin spread extrapolated to 0.86,
  sigma_3/sigma_1 to -0.083, all above their bounds at the last checkpoint), and ::test_limit_accelerating_* (a
  KKT residual that had only begun to fall, which the old check failed). A failing verdict needs the limit's whole
  interval, between the last value and the extrapolation, above the bound, which the old check failed too: the
  new reading fails nothing the old one passed, it stops passing (and failing) runs that have not converged. The
  negative controls of the limit predictions here stall above the bound.
- item 10 (the linear decision boundary could never pass): its negative control is a network no more linear than
  at init; the item's own cells, where the old check gave not_evaluated on every run (k0 <= 4 inputs), are the
  positive controls (10^5 inputs drawn in the span of the neurons): tests/test_negative_controls_frei.py::
  test_linear_rule_*.
"""

from __future__ import annotations

import functools

import numpy as np

from _controls import Control
from implicitbias.data import Dataset
from implicitbias.models import TwoLayer
from implicitbias.reference import max_margin_svm
from test_negative_controls_frei import KOU_MODEL, LEAKY, LOGT, T, _aligned, _ctx, _data, frei32_curves

FREI_Z = "(5) z = W^T a"


# -- Frei et al. 2023, Theorem 3.2 (and 3.4: the same cell) ---------------------------------------------------
@functools.cache
def _frei32_data():
    return _data(n_test=400)


@functools.cache
def _frei32_aligned():
    return _aligned(_frei32_data(), 8)  # one SVM solve for every cell


def _frei32(W=None, **over):
    """The nominal Theorem 3.2 cell of tests/_table_instances.py with the curves in `over` replaced."""
    data = _frei32_data()
    W0, a = _frei32_aligned()
    W = W0 if W is None else W
    a = a / np.sqrt(8)
    return _ctx({**frei32_curves(data, W, a), **over}, data, LEAKY, W, a)


def _noisy_W():
    """Neurons of one sign no longer equal: the aligned W plus noise of twice a neuron's norm (over sqrt d)."""
    data = _frei32_data()
    W, _ = _frei32_aligned()
    return W + 2.0 * np.linalg.norm(W[0]) * np.random.default_rng(1).standard_normal(W.shape) / np.sqrt(data.d)


def _half_svm_margin():
    data = _frei32_data()
    return np.full(T.size, 0.5 * max_margin_svm(data.X, data.y).margin)


STALLED = {
    "margin_spread": np.r_[np.inf, np.full(T.size - 1, 1.5)],  # margins never equalise
    "kkt_stationarity": np.r_[np.nan, 0.3 + 0.3 / LOGT[1:]],  # approaching a residual of 0.3, not 0
    "W.sigma3_ratio": np.full(T.size, 0.5),  # a third direction that stays
    "W.stable_rank": np.full(T.size, 6.0),  # possible at width 8
}

FREI32 = [
    Control("FreiTheorem32", "(1) every margin is tight", lambda: _frei32(margin_spread=STALLED["margin_spread"])),
    Control("FreiTheorem32", "(2) converges to a KKT point",
            lambda: _frei32(kkt_stationarity=STALLED["kkt_stationarity"])),
    Control("FreiTheorem32", "(2) global optimum", lambda: _frei32(W=_noisy_W())),
    Control("FreiTheorem32", "(3) rank(W) <= 2: sigma_3", lambda: _frei32(**{"W.sigma3_ratio": STALLED["W.sigma3_ratio"]})),
    Control("FreiTheorem32", "(3) rank(W) <= 2: stable rank",
            lambda: _frei32(**{"W.stable_rank": STALLED["W.stable_rank"]})),
    Control("FreiTheorem32", "(3) all positive neurons are equal", lambda: _frei32(W=_noisy_W())),
    Control("FreiTheorem32", "(4) linear decision boundary",
            lambda: _frei32(linear_agreement=np.full(T.size, 0.9)),  # no more linear than the untrained network
            old_threshold="k <= k0 - 2 sqrt(k0) with not_evaluated for k0 <= 4: on 1000 fresh inputs (no test set) "
                          "the old check never gave a verdict; this negative failed before too (k0 = 40 test points)"),
    Control("FreiTheorem32", FREI_Z, lambda: _frei32(z_margin=_half_svm_margin())),
    Control("FreiTheorem34", "GF reaches L < l(0)/n", lambda: _frei32(loss=np.r_[0.69, np.full(T.size - 1, 0.5)])),
]


# -- Frei et al. 2023, Theorem 4.2 and Lemma 3.3 ---------------------------------------------------------------
def _frei42(width=8, **over):
    """Theorem 4.2's cell (tests/_table_instances.py::frei42) at `width`, with the curves in `over` replaced."""
    model = TwoLayer(width=width, activation="smooth_leaky_relu", gamma=0.9, outer_signs="balanced")
    data = _data()
    W, a = np.zeros((width, data.d)), np.r_[np.ones(width // 2), -np.ones(width // 2)] / np.sqrt(width)
    curves = {"loss": np.r_[0.69, 0.1 / T[1:]], "W.spectral": 1e-3 + np.log1p(T), "W.frobenius": 1e-5 + np.log1p(T),
              "W.stable_rank": np.r_[0.8 * width, np.full(T.size - 1, 1.5)]}
    return _ctx({**curves, **over}, data, model, W, a, lr=0.1)


def _twin_data_cell():
    """Lemma 3.3 on data with x_4 = x_1: max |<x_i, x_j>| = ||x_1||^2, the condition of Theorem 3.2 fails."""
    base = _data()
    twin = Dataset(X=np.r_[base.X[:3], base.X[:1]], y=np.array([1.0, -1.0, 1.0, -1.0]))
    return _ctx({"loss": np.full(T.size, 0.5)}, twin, LEAKY, np.zeros((8, base.d)), np.ones(8))


FREI42 = [
    Control("FreiTheorem42", "the training loss -> 0", lambda: _frei42(loss=np.r_[0.69, 0.1 + 0.1 / T[1:]])),  # levels off
    Control("FreiTheorem42", "||W(t)||_2 -> infinity", lambda: _frei42(**{"W.spectral": 5.0 - 4.0 / (1.0 + T)})),  # bounded
    Control("FreiTheorem42", "srank(W(k)) <= C",
            lambda: _frei42(64, **{"W.stable_rank": np.r_[50.0, np.full(T.size - 1, 20.0)]})),  # width 64, srank 20
    Control("FreiLemma33", "the condition of Theorem 3.2 holds", _twin_data_cell),
]


# -- Kou et al. 2023 -------------------------------------------------------------------------------------------
@functools.cache
def _kou_data():
    data = _data()
    return data, *_aligned(data, 8)


def _kou(activation="leaky_relu", **over):
    """A Kou et al. cell: the aligned network (every neuron active on the points of its sign) with outer weights
    +-1/m, the loss like 1/t (with a 1/log t correction), ||W||_F like log t, spread and srank approaching their
    limits like 1/log t."""
    model = KOU_MODEL if activation == "leaky_relu" else KOU_MODEL.replace(activation=activation)
    data, W, a = _kou_data()
    good = {"loss": np.r_[0.69, 1.0 / (T[1:] * (1 - 0.3 / LOGT[1:]) ** 2)],
            "W.frobenius": 2.0 + 3.0 * np.log1p(T), "margin_spread": np.r_[np.inf, 1.0 + 0.5 / LOGT[1:]],
            "W.stable_rank": (2.0 if activation == "relu" else 1.0) + 0.2 / LOGT}
    return _ctx({**good, **over}, data, model, W / 4, a / 4)


KOU = [
    Control("KouTheorem", "ReLU: srank(W) bounded", lambda: _kou("relu", **{"W.stable_rank": np.full(T.size, 3.0)}),
            positive=lambda: _kou("relu")),
    Control("KouTheorem", "leaky ReLU: srank(W) ->", lambda: _kou(**{"W.stable_rank": np.full(T.size, 1.3)}),
            positive=_kou),
    Control("KouTheorem", "||W||_F = Theta(log t)", lambda: _kou(**{"W.frobenius": 2.0 + T**0.2}), positive=_kou),
    Control("KouTheorem", "L = Theta(1/t)", lambda: _kou(loss=np.r_[0.69, T[1:] ** -0.75]), positive=_kou),
    Control("KouTheorem", "every point reaches the same normalised margin",
            lambda: _kou(margin_spread=np.r_[np.inf, 1.2 + 0.5 / LOGT[1:]]), positive=_kou),  # a limit of 1.2
]


# -- Lyu & Li 2020 ------------------------------------------------------------------------------------------------
def _lyu_li_dropping():
    """The table's Lyu & Li cell (gamma_bar rising to 1 like 1/log t, ||theta|| = 1 + 3 log(1 + t)) whose normalised
    margin drops to 0.7 after the 8th checkpoint: both the smoothed and the normalised margin fall."""
    rho = 1.0 + 3.0 * np.log1p(T)
    margin = np.r_[1.0 - 0.5 / (1.0 + np.log1p(T[:8])), np.full(T.size - 8, 0.7)]
    data = _data()
    a = np.r_[np.ones(4), -np.ones(4)]
    return _ctx({"loss": np.log1p(np.exp(-margin * rho)), "param_norm": rho, "normalized_margin": margin}, data,
                LEAKY, np.zeros((8, data.d)), a)


def _lyu_li_loss_rising():
    """The table's Lyu & Li cell, whose loss rises by 10% at the 8th checkpoint (a step that did not descend)."""
    rho = 1.0 + 3.0 * np.log1p(T)
    margin = 1.0 - 0.5 / (1.0 + np.log1p(T))
    data = _data()
    a = np.r_[np.ones(4), -np.ones(4)]
    loss = np.log1p(np.exp(-margin * rho))
    loss[8] = 1.1 * loss[7]
    return _ctx({"loss": loss, "param_norm": rho, "normalized_margin": margin}, data, LEAKY, np.zeros((8, data.d)), a)


LYU_LI = [
    Control("LyuLiMonotoneMargin", "smoothed normalised margin gamma_tilde is non-decreasing", _lyu_li_dropping),
    Control("LyuLiMonotoneMargin", "normalised margin stays above every earlier smoothed margin", _lyu_li_dropping),
    Control("LyuLiMonotoneMargin", "training loss is non-increasing", _lyu_li_loss_rising),
]

CONTROLS = FREI32 + FREI42 + KOU + LYU_LI
