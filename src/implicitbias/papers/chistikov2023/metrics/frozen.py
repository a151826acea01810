"""Frozen neurons of a two-layer ReLU network trained from a small balanced init: the neurons that end active
without having taken part in training, and when a neuron ends that way.

Setting (square loss L = (1/2n) sum_i (f(x_i) - y_i)^2, f(x) = sum_j a_j [<w_j, x>]_+, balanced init
w_j(0) = lambda z_j, a_j(0) = s_j ||w_j(0)||). While the network is still small its outputs are ~0, every
residual is r_i = f(x_i) - y_i ~ -y_i, and neuron j moves by

    dw_j/dt = s_j ||w_j|| (1/n) sum_{i in A_j} y_i x_i,        A_j = {i : <w_j, x_i> > 0},

so the cosine q_l = <w_j, x_l> / ||w_j(0)|| of every training point moves at the constant rate
s_j (1/n) sum_{i in A_j} y_i <x_i, x_l> (with ||w_j|| at its initial value: the norm of a neuron that does not
grow changes by a factor exp(O(k max_i q_i / n) t), negligible here) until a point enters or leaves A_j. The path
is piecewise linear with an event at each change of A_j; `early_phase` integrates it exactly, event by event.

A negative neuron (s_j = -1) active on k of the n points moves at a rate of order k / n (each of its points
pulls it by y_i <x_i, x_l> / n) and leaves its points one by one; its *deactivation time* T_j is the time its
active set needs to empty. The phase lasts while the residuals do: they vanish when the aligned bundle of
positive neurons has grown from lambda to O(1), at t* ~ ln(1 / lambda) / ||gamma||, gamma = (1/n) sum_i y_i x_i.
With the residual profile h(t) = |r(t)| / |r(0)|, the phase runs for the path time tau = int_0^inf h(t) dt
(`growth_time` reads it from the bundle's growth: tau = ln(G) / ||gamma||, ~ ln(1 / lambda)), and the prediction is

    neuron j (s_j = -1) ends active (frozen: unmoved since, at its init norm)  <=>  T_j > tau(lambda),

and it ends active on the k_j(tau) points `early_phase` leaves in A_j at time tau. The number of frozen neurons is
#{j : s_j = -1, T_j > tau(lambda)}. The same trial draws the same z_j at every lambda (only the scale differs),
so its T_j are the same at every lambda, tau grows like ln(1 / lambda), and the count falls as lambda does, to 0
once tau(lambda) > max_j T_j. How T_j scales with d (n = d, x_i = mu + xi_i with ||xi_i|| ~ 1): the initial
cosines spread like 1 / sqrt(d), and the last points leave at a rate ~ 2 / n, so T_j ~ n / sqrt(d) = sqrt(d) up
to logarithms: a few time units at d = 4..64, where every lambda of Figure 1's grid resolves them, and tens at
d = 1024, where the slowest of the ~m/2 negative neurons outlasts tau even at lambda = 4^-13 (tau ~ 19).

Positive neurons grow instead of leaving, at a rate of order k / n as well: one active on a handful of points at
large d grows by a factor ~exp(k tau / n) ~ 1 and stays frozen too (`early_phase` gives its k_j(tau) for the same
reason; it has no deactivation time, NaN).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class EarlyPhase:
    """The paths of `early_phase`: per neuron its sign, deactivation time T (NaN for a positive neuron, inf for a
    negative one that never empties), and per neuron and training point whether the point starts active
    (`active0`), the time it last entered or left the active set (`switch`, inf if never) and the active sets where
    the integration stopped (`active_end`).  Where every point
    switches at most once (`monotone`: always when every <x_i, x_l> >= 0 and y >= 0), `k_at(tau)` gives the active
    counts at any time from these alone: one integration serves every lambda of a trial."""

    sign: np.ndarray
    T: np.ndarray
    active0: np.ndarray
    switch: np.ndarray
    monotone: bool
    #: the active sets where the integration stopped (at `tau` when it was given)
    active_end: np.ndarray

    def k_at(self, tau: float) -> np.ndarray:
        """The number of training points each neuron is active on at time tau."""
        if not self.monotone:
            raise ValueError("k_at: some point entered and left again (a negative <x_i, x_l>): integrate with "
                             "early_phase(..., tau) for each tau")
        return np.sum(self.active0 != (self.switch <= tau), axis=1)


def early_phase(W0, s, X, y, tau=None) -> EarlyPhase:
    """The small-output phase with residuals held at -y (module docstring), integrated exactly: every neuron
    follows its own piecewise-linear path from event to event (a point entering or leaving its active set), all
    neurons at once, until its active set empties (a negative neuron), no event is left, or time `tau` (None: no
    limit; with `tau` the state at tau is exact even where points switch twice: `EarlyPhase.k_at(tau)`).

    W0: (m, d) initial input weights (any positive scale: only directions enter); s: (m,) signs of the outer
    weights; X: (n, d) training inputs; y: (n,) labels."""
    W0 = np.asarray(W0, dtype=np.float64)
    sign = np.sign(np.asarray(s, dtype=np.float64).reshape(-1))
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    n, m = X.shape[0], W0.shape[0]
    pull = (X @ X.T) * y[:, None] / n  # row i: the rate at which point i, while active, moves every cosine
    norms = np.linalg.norm(W0, axis=1)
    live = (norms > 0) & (sign != 0)
    q = np.where(live[:, None], (W0 @ X.T) / np.where(norms > 0, norms, 1.0)[:, None], 0.0)
    active = (q > 0) & live[:, None]
    active0 = active.copy()
    rate = sign[:, None] * (active.astype(np.float64) @ pull)
    switch = np.full((m, n), np.inf)
    t = np.zeros(m)
    limit = np.inf if tau is None else float(tau)
    T = np.full(m, np.nan)
    monotone = True
    g = np.flatnonzero(live)
    for _ in range(4 * n + 4):
        if g.size == 0:
            break
        empty = (sign[g] < 0) & ~active[g].any(axis=1)
        T[g[empty]] = t[g[empty]]
        g = g[~empty]
        if g.size == 0:
            break
        qg, rg, ag = q[g], rate[g], active[g]
        with np.errstate(divide="ignore", invalid="ignore"):
            dt = np.where(ag & (rg < 0), -qg / rg, np.where(~ag & (rg > 0), -qg / rg, np.inf))
        dt = np.maximum(dt, 0.0)
        hit = np.argmin(dt, axis=1)
        step = dt[np.arange(g.size), hit]
        ends = ~np.isfinite(step) | (t[g] + step > limit)
        g, hit, step = g[~ends], hit[~ends], step[~ends]
        if g.size == 0:
            break
        t[g] += step
        q[g] += step[:, None] * rate[g]
        q[g, hit] = 0.0
        monotone &= bool(np.all(np.isinf(switch[g, hit])))
        switch[g, hit] = t[g]
        flip = np.where(active[g, hit], -1.0, 1.0)  # leaving: its pull is removed; entering: added
        active[g, hit] = ~active[g, hit]
        rate[g] += (sign[g] * flip)[:, None] * pull[hit]
    T[(sign < 0) & live & np.isnan(T)] = np.inf
    T[sign > 0] = np.nan
    return EarlyPhase(sign, T, active0, switch, monotone, active)


def growth_time(W, W0, X, y) -> float:
    """tau = ln(G) / ||gamma||, the time the residuals lasted, read from the final and initial weights: G =
    max_j ||w_j(T)|| / ||w_j(0)|| (the bundle's growth) and gamma = (1/n) sum_i y_i x_i.

    Why: with the residuals r_i(t) = -y_i h(t) of a common profile h, a balanced neuron aligned with gamma and
    active on every point grows at d ln||w_j|| / dt = h(t) <w_j / ||w_j||, gamma>, so ln G = ||gamma|| int h dt =
    ||gamma|| tau: tau is the same path time that the early phase of every other neuron ran for.  It does not
    depend on how finely the loss curve was recorded (its checkpoints do not resolve the drop of the loss at
    small lambda)."""
    W, W0 = np.asarray(W, dtype=np.float64), np.asarray(W0, dtype=np.float64)
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64).reshape(-1)
    n0 = np.linalg.norm(W0, axis=1)
    ok = n0 > 0
    growth = float(np.max(np.linalg.norm(W[ok], axis=1) / n0[ok])) if ok.any() else float("nan")
    gamma = float(np.linalg.norm(y @ X) / X.shape[0])
    return math.log(growth) / gamma if growth > 0 and gamma > 0 else float("nan")


def frozen_counts(W, X, y, W0, s0, tau, paths: EarlyPhase | None = None) -> dict[str, float]:
    """One run, measured against predicted: ``negative_active`` (neurons of sign s_j = -1 active at the end),
    ``negative_predicted`` (#{s_j = -1 : T_j > tau}), ``agree`` (the fraction of the negative neurons whose end
    state, active or not, the prediction gets right), ``max_T`` (the slowest negative neuron's deactivation time),
    ``tau``, and the median number of training points the negative neurons active at the end are active on,
    measured (``k_measured``) and predicted at tau (``k_predicted``; NaN with none).

    W: final input weights; X, y: training data; W0: initial input weights; s0: initial signs of a; tau: the
    run's residual time (`growth_time`); paths: `early_phase(W0, s0, X, y)` if already at hand (it is the same
    for every lambda of a trial)."""
    W = np.asarray(W, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    pre = X @ W.T
    active = np.any(pre > 0, axis=0) & (np.linalg.norm(W, axis=1) > 0)
    neg = np.sign(np.asarray(s0, dtype=np.float64).reshape(-1)) < 0
    phase = early_phase(W0, s0, X, y) if paths is None else paths
    if not phase.monotone:
        k = early_phase(W0, s0, X, y, tau).active_end.sum(axis=1)
    else:
        k = phase.k_at(tau)
    T = phase.T
    predicted = neg & (T > tau)
    measured = neg & active
    k_measured = np.sum(pre[:, measured] > 0, axis=0)
    return {
        "negative_active": float(measured.sum()),
        "negative_predicted": float(predicted.sum()),
        "agree": float(np.mean(predicted[neg] == measured[neg])) if neg.any() else float("nan"),
        "max_T": float(np.max(T[neg])) if neg.any() else float("nan"),
        "tau": float(tau),
        "k_measured": float(np.median(k_measured)) if k_measured.size else float("nan"),
        "k_predicted": float(np.median(k[predicted])) if predicted.any() else float("nan"),
    }
