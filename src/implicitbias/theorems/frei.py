"""Frei, Vardi, Bartlett, Srebro, Hu 2023 (ICLR), "Implicit bias in leaky ReLU networks trained on
high-dimensional data" (seed 000; SCIENCE.md S1, S2): Theorem 3.2, Lemma 3.3, Theorem 3.4, Theorem 4.2.

The network is `TwoLayer` with a fixed outer layer a_j = +-c (m1 positive and m2 negative neurons) and
no bias, f(x; W) = sum_j a_j phi(<w_j, x>). Every prediction is evaluated on every run of the cell and
the verdict reports the worst run (see `fitting.over_runs`).

kappa and the margin bound of Theorem 3.2 (5). The seed text lost the equations; it says that z = W^T a
"maximizes the margin approximately within a factor of 2/(kappa + gamma)" and that "if kappa = 1 (i.e.
m1 = m2) and gamma is roughly 1, then we get margin maximization also in predictor space". A factor that
is 1 exactly at kappa = gamma = 1 and never claims more than the SVM margin needs kappa <= 1, so we take
kappa = min(m1, m2) / max(m1, m2) in (0, 1] and check

    margin(z) / margin(SVM) >= (kappa + gamma) / 2,  margin(z) = min_i y_i <z, x_i> / ||z||,

i.e. ||z|| <= 2/(kappa + gamma) ||z*|| once z is scaled to y_i <z, x_i> >= 1. Sanity check (ours): at a
KKT point on exactly orthogonal data with equal norms, z = sum_i beta_i y_i x_i with beta_+ proportional
to (m1 + gamma m2)/(m1 + gamma^2 m2) and beta_- to (gamma m1 + m2)/(gamma^2 m1 + m2), so the ratio is at
least min(beta)/max(beta), which is >= (kappa + gamma)/2 for all kappa, gamma in (0, 1] (checked on a grid).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pydantic

from implicitbias.data.stats import near_orthogonality
from implicitbias.models.activations import activation
from implicitbias.models.two_layer import TwoLayer
from implicitbias.theorems.base import Theorem, Verdict
from implicitbias.theorems.fitting import (
    asymptotic_window,
    curve,
    final,
    fitted_loss_level,
    fitted_slope,
    flag,
    growth_exponent,
    initial,
    limit_verdict,
    over_runs,
    run_labels,
    why_missing,
)

CONDITION = "R_min^2 >= {C:g} gamma^-3 R^2 n max_(i!=j) |<x_i,x_j>|"


def leaky_slope(run, r: int) -> float | None:
    """gamma of run r (its model's `gamma`); identity counts as gamma = 1; None for a model without one."""
    model = run.runs[r].model
    if not hasattr(model, "gamma"):
        return None
    if getattr(model, "activation", None) == "identity":
        return 1.0
    return float(model.gamma)


def _stats(run, r: int, cache: dict):
    """Near-orthogonality statistics of run r's data, computed once per data set (spec and seed)."""
    key = run.runs[r].data_key()
    if key not in cache:
        cache[key] = near_orthogonality(run.data[r].X)
    return cache[key]


def condition_verdict(
    theorem: str, run, C: float = 3.0, kind="assumption", statement: str | None = None
) -> Verdict:
    """Frei et al.'s near-orthogonality condition R_min^2 >= C gamma^-3 R^2 n max|<x_i,x_j>| on every
    run's data (C = 3 in Theorem 3.2), both sides printed, worst run reported."""
    cache: dict = {}
    lhs, rhs, notes = [], [], []
    for r in range(run.n_runs):
        s, g = _stats(run, r, cache), leaky_slope(run, r)
        need = C * s.R**2 * s.n * s.max_inner
        lhs.append(s.frei_lhs)
        rhs.append(math.nan if g is None else need / g**3)
        g_min = np.cbrt(need / s.frei_lhs) if s.frei_lhs > 0 else math.inf
        notes.append(
            f"gamma = {g}, n = {s.n}, R = {s.R:.4g}, max|<x_i,x_j>| = {s.max_inner:.4g}; "
            + (
                f"holds for gamma >= {g_min:.4g}"
                if g_min <= 1
                else f"no gamma in (0, 1] (would need {g_min:.4g})"
            )
        )
    statement = statement or CONDITION.format(C=C)
    return over_runs(
        theorem,
        kind,
        statement,
        lhs,
        ">=",
        rhs,
        where="on the training data",
        labels=run_labels(run),
        run_notes=notes,
    )


def activation_verdict(theorem: str, run, allowed: tuple[str, ...], statement: str) -> Verdict:
    name = getattr(run.spec.model, "activation", None)
    gammas = {leaky_slope(run, r) for r in range(run.n_runs)}
    ok = name in allowed and all(g is not None and 0 < g <= 1 for g in gammas)
    return flag(
        theorem,
        "assumption",
        statement,
        ok,
        f"activation = {name}, gamma = "
        f"{', '.join(f'{g:g}' for g in sorted(gammas) if g is not None) or 'n/a'}",
    )


def outer_signs(run, r: int) -> np.ndarray | None:
    if "const.a" not in run.results.data_vars:
        return None
    return np.asarray(run.results["const.a"].values[r], dtype=np.float64)


def outer_layer_verdict(theorem: str, run, equal_halves: bool = False) -> Verdict:
    """Fixed outer layer a_j = +-c (both signs present; Kou: m1 = m2), no hidden bias."""
    model = run.spec.model
    statement = (
        "outer layer fixed, a_j = +-c in two equal halves (m1 = m2; Kou: c = 1/m), no bias"
        if equal_halves
        else "outer layer fixed, a_j = +-c with both signs present (m1, m2 >= 1), no bias"
    )
    if not hasattr(model, "train_outer"):
        return flag(theorem, "assumption", statement, None, "no two-layer model in this cell")
    if model.train_outer or model.bias:
        return flag(
            theorem, "assumption", statement, False, f"train_outer = {model.train_outer}, bias = {model.bias}"
        )
    worst, ok = "", True
    for r in range(run.n_runs):
        a = outer_signs(run, r)
        if a is None:
            return flag(theorem, "assumption", statement, None, "const.a not stored")
        m1, m2 = int(np.sum(a > 0)), int(np.sum(a < 0))
        equal = bool(np.allclose(np.abs(a), np.abs(a[0]), rtol=1e-12, atol=0.0))
        good = m1 >= 1 and m2 >= 1 and equal and (m1 == m2 or not equal_halves)
        if not good or not worst:
            worst = f"m1 = {m1}, m2 = {m2}, |a_j| = {abs(a[0]):.4g}" + ("" if equal else " (unequal)")
        ok &= good
    return flag(theorem, "assumption", statement, ok, worst + ("" if ok else " (a failing run)"))


def loss_verdict(theorem: str, run, allowed=("logistic", "exponential")) -> Verdict:
    name = run.spec.loss.name
    return flag(theorem, "assumption", f"loss is {' or '.join(allowed)}", name in allowed, f"loss = {name}")


def two_layer_outputs(model, gamma: float, W, a, X, chunk: int = 256) -> np.ndarray:
    """f(x; W) = sum_j a_j phi(<w_j, x>) on the rows of X, in chunks (fresh inputs can be large)."""
    out = []
    for k in range(0, X.shape[0], chunk):
        pre = X[k : k + chunk] @ W.T
        out.append(np.asarray(activation(model.activation, pre, gamma)) @ a)
    return np.concatenate(out) if out else np.zeros(0)


def _two_layer(run, r: int) -> TwoLayer | None:
    model = run.runs[r].model
    return model if isinstance(model, TwoLayer) else None


def _stored_W(run, r: int) -> np.ndarray | None:
    if "theta.W" not in run.results.data_vars:
        return None
    return np.asarray(run.results["theta.W"].values[r], dtype=np.float64)


def _first_below(run, r: int, threshold: float) -> float:
    loss, time = curve(run.results, "loss"), curve(run.results, "time")
    if loss is None or time is None:
        return math.nan
    below = np.flatnonzero(loss[r] < threshold)
    return float(time[r, below[0]]) if below.size else math.inf


# -- Theorem 3.2 -----------------------------------------------------------------------------------
class FreiTheorem32(Theorem):
    """Frei et al. 2023, Theorem 3.2 (S1): under R_min^2 >= 3 gamma^-3 R^2 n max_(i!=j)|<x_i,x_j>|, every
    KKT point of Problem (1) (min 1/2 ||W||_F^2 s.t. y_i f(x_i; W) >= 1) -- hence the limit direction of
    gradient flow (Lyu & Li 2020, Ji & Telgarsky 2020, with Theorem 3.4) -- has (1) equal margins,
    (2) is a global optimum, (3) rank <= 2, (4) a linear decision boundary sign f(x) = sign <z, x>, z = W^T a,
    (5) an approximately max-margin z. The predictions are about the limit; how each is read at finite time:

    (1), (2) KKT residual, (3) sigma_3/sigma_1 and stable rank: limits, read from the checkpoints from the
        first with L < l(0)/n on (`fitting.limit_verdict`): the limit lies between the last value and the
        extrapolation y_inf -+ 2 se of the trend y = y_inf + c / log t, within the quantity's range (spread >= 1,
        residual and sigma_3/sigma_1 in [0, 1], srank in [1, min(m, d)]); holds when that whole interval is
        within target + tol, fails when it is above, and a run whose interval straddles the bound has not
        converged: not_evaluated (the theorem describes the limit of gradient flow and gives no time by which
        it is reached).
    spread_tol: (1) extrapolated limit of max_i q_i / min_i q_i <= 1 + spread_tol (default 0.05, ours).
    kkt_tol: (2) extrapolated limit of the KKT stationarity residual of S10 <= kkt_tol (default 0.05, ours).
        Global optimality is what the theorem adds for KKT points.
    optimum_tol: (2) a necessary condition of global optimality, on the stored final W: the rank-2 network
        W_bar (each neuron replaced by the mean of its sign group) does not have a larger normalised margin:
        gamma_bar(W_bar) / gamma_bar(W) <= 1 + optimum_tol.
    rank_tol: (3) extrapolated limit of sigma_3/sigma_1 <= rank_tol, and, on the stored final W (no trajectory
        is stored), neurons of one sign coincide: max_j ||w_j - mean of its group|| / ||mean|| <= rank_tol.
    The checks on the stored final W ((2) optimum, (3) equal neurons, (4), (5)) describe a KKT point, so they
        are read only on the runs whose final KKT stationarity residual is <= kkt_tol (`_near_kkt`): a run
        still farther from one has not converged and cannot make the cell hold (not_evaluated, with its
        residual), while a run near one that fails fails the cell.
    srank_tol: (3) extrapolated limit of the stable rank <= 2 + srank_tol; not evaluated where
        min(m, d) <= 2 + srank_tol, where every matrix of the shape passes (the note shows srank(W(0))).
    (4) the disagreement fraction sign f(x) != sign <z, x> of the trained W against the untrained W(0) on the
        same inputs (test inputs when the data have a test set -- the recorded `linear_agreement` at the
        first and last checkpoint --, else n_fresh fresh Gaussian inputs N(0, s^2 I_d), s^2 = mean ||x_i||^2
        / d, from fresh_seed, drawn in the span of the neurons, `sampled_disagreement`): the limit has none, so
        it must be below the baseline count k0 by its binomial noise, k <= k0 - 2 sqrt(k0)
        (`linear_rule_verdict`); with k0 < 4 no count can pass and the verdict is not_evaluated (too few
        inputs: an untrained net at gamma near 1 is already almost linear). n_fresh: default 10^5 (the
        untrained network at gamma = 0.9 disagrees on about 1% of inputs: k0 ~ 10^3).
    (5) margin(z) / margin(SVM) >= (kappa + gamma)/2 with kappa = min(m1, m2)/max(m1, m2) on the final W: see
        the module docstring for how kappa and this form of the 2/(kappa + gamma) factor were derived.
    """

    spread_tol: float = pydantic.Field(0.05, gt=0.0)
    kkt_tol: float = pydantic.Field(0.05, gt=0.0)
    optimum_tol: float = pydantic.Field(0.01, ge=0.0)
    rank_tol: float = pydantic.Field(0.05, gt=0.0)
    srank_tol: float = pydantic.Field(0.1, ge=0.0)
    n_fresh: int = pydantic.Field(100_000, ge=1)
    fresh_seed: int = pydantic.Field(0, ge=0)

    @property
    def title(self) -> str:
        return "Frei et al. 2023, Theorem 3.2"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        return [
            condition_verdict(T, run),
            activation_verdict(
                T, run, ("leaky_relu", "identity"), "activation is leaky ReLU with gamma in (0, 1]"
            ),
            outer_layer_verdict(T, run),
            loss_verdict(T, run),
        ]

    def predictions(self, run) -> list[Verdict]:
        T, res = self.title, run.results
        comp = final(res, "kkt_complementarity")
        limit = functools.partial(limit_verdict, T, run, window=asymptotic_window)
        return [
            limit("(1) every margin is tight: max_i q_i / min_i q_i -> 1", "margin_spread", 1.0, self.spread_tol),
            self._kkt(run, limit, comp),
            self._optimum(run),
            limit("(3) rank(W) <= 2: sigma_3 / sigma_1 -> 0", "W.sigma3_ratio", 0.0, self.rank_tol),
            self._srank(run, limit),
            self._groups(run),
            self._linear_boundary(run),
            self._z_margin(run),
        ]

    def _kkt(self, run, limit, comp) -> Verdict:
        v = limit("(2) converges to a KKT point of Problem (1): KKT stationarity residual -> 0",
                  "kkt_stationarity", 0.0, self.kkt_tol)
        if comp is None or not np.isfinite(comp).any():
            return v
        return dataclasses.replace(v, note=v.note + f"; complementarity residual up to {np.nanmax(comp):.3g} "
                                   "(all runs, final)")

    def _srank(self, run, limit) -> Verdict:
        """srank <= 2 says something only where a matrix of the shape can exceed 2: min(m, d) > 2 + srank_tol."""
        W = run.results["theta.W"].values if "theta.W" in run.results else None
        s0 = initial(run.results, "W.stable_rank")
        room = min(W.shape[-2:]) if W is not None else math.inf
        v = limit("(3) rank(W) <= 2: stable rank ||W||_F^2 / ||W||_2^2 <= 2", "W.stable_rank", 2.0, self.srank_tol,
                  hi=room)
        if W is None:
            return v
        note = f"any {W.shape[-2]} x {W.shape[-1]} matrix has srank <= {room}" + (
            "" if s0 is None else f"; srank at init up to {np.nanmax(s0):.4g}")
        if room <= 2.0 + self.srank_tol:
            return dataclasses.replace(v, outcome="not_evaluated", note=v.note + "; vacuous: " + note)
        return dataclasses.replace(v, note=v.note + "; " + note)

    # (2) global optimality, necessary condition ----------------------------------------------------
    def _optimum(self, run) -> Verdict:
        ratios = []
        for r in range(run.n_runs):
            W, a, g, model = _stored_W(run, r), outer_signs(run, r), leaky_slope(run, r), _two_layer(run, r)
            if W is None or a is None or model is None or g is None:
                ratios.append(math.nan)
                continue
            ds = run.data[r]
            Wb = W.copy()
            for group in (a > 0, a < 0):
                if group.any():
                    Wb[group] = W[group].mean(axis=0)
            gbar = [
                np.min(ds.y * two_layer_outputs(model, g, M, a, ds.X)) / np.linalg.norm(M) for M in (W, Wb)
            ]
            ratios.append(gbar[1] / gbar[0] if gbar[0] > 0 else math.nan)
        labels = run_labels(run)
        return self._near_kkt(run, lambda keep: over_runs(
            self.title,
            "prediction",
            "(2) global optimum of Problem (1): the rank-2 average W_bar of W has no larger "
            "normalised margin (gamma_bar(W_bar) / gamma_bar(W))",
            [ratios[k] for k in keep],
            "<=",
            1.0 + self.optimum_tol,
            labels=[labels[k] for k in keep],
            note="necessary condition, from the stored W; W_bar: each neuron replaced by the mean "
            "of its sign group",
        ))

    def _near_kkt(self, run, build) -> Verdict:
        """(2) global optimality, (3) equal neurons, (4) the linear boundary and (5) the max-margin z describe a
        KKT point; the stored final W is one only to within its KKT stationarity residual. `build(keep)` makes
        the verdict on the runs `keep` (indices); a run whose final residual exceeds kkt_tol (the tolerance of
        (2)) has not reached the limit these statements describe, so it is left out: a run near a KKT point that
        fails still fails the cell, but the cell holds only when every run is near one; otherwise it is
        not_evaluated (not converged), with the residuals in the note, instead of failing a structure the
        theorem does not claim at that time (plain GD after 10^5 steps: residual 0.28, neuron spread 0.28;
        gradient flow from init scale 1 to s = 500 in the loss clock: residual 0.86, margin(z)/margin(SVM)
        0.93)."""
        residual = final(run.results, "kkt_stationarity")
        labels, every = run_labels(run), list(range(run.n_runs))
        far = [] if residual is None else [r for r in every if np.isfinite(residual[r]) and residual[r] > self.kkt_tol]
        if not far:
            return build(every)
        keep = [r for r in every if r not in far]
        note = ("not converged: the final W is not yet near a KKT point (final stationarity residual > kkt_tol = "
                f"{self.kkt_tol:g}) on " + ", ".join(f"{labels[r]}: {residual[r]:.3g}" for r in far))
        v = build(keep if keep else every)
        if not keep or v.outcome == "holds":
            v = dataclasses.replace(v, outcome="not_evaluated")
        return dataclasses.replace(v, note=f"{v.note}; {note}" if v.note else note)

    # (3) neurons of one sign coincide --------------------------------------------------------------
    def _groups(self, run) -> Verdict:
        spread = []
        for r in range(run.n_runs):
            W, a = _stored_W(run, r), outer_signs(run, r)
            if W is None or a is None:
                spread.append(math.nan)
                continue
            worst = 0.0
            for group in (a > 0, a < 0):
                if group.any():
                    mean = W[group].mean(axis=0)
                    dev = np.linalg.norm(W[group] - mean, axis=1).max()
                    worst = max(worst, dev / np.linalg.norm(mean) if np.linalg.norm(mean) > 0 else math.inf)
            spread.append(worst)
        labels = run_labels(run)
        return self._near_kkt(run, lambda keep: over_runs(
            self.title,
            "prediction",
            "(3) all positive neurons are equal and all negative neurons "
            "are equal: max_j ||w_j - group mean|| / ||group mean||",
            [spread[k] for k in keep],
            "<=",
            self.rank_tol,
            labels=[labels[k] for k in keep],
            note="from the stored W",
        ))

    # (4) linear decision boundary ---------------------------------------------------------------------
    def _linear_boundary(self, run) -> Verdict:
        """Disagreement sign f(x; W) != sign <z, x> of the trained network against the untrained one (W(0), the
        same inputs): see `linear_rule_verdict`. Inputs: the test set when the data have one (the recorded
        `linear_agreement` at the first and last checkpoint), else n_fresh inputs of N(0, s^2 I_d)
        (`sampled_disagreement`)."""
        statement = ("(4) linear decision boundary: sign f(x; W) = sign <z, x>, z = W^T a: fraction of inputs "
                     "where they disagree, trained vs untrained W(0) on the same inputs")
        ds0, res = run.data[0], run.results
        recorded = curve(res, "linear_agreement")
        trained, base, n_in = [], [], []
        if ds0.X_test is not None and recorded is not None:
            where = f"on the {len(ds0.X_test)} test inputs"
            for r in range(run.n_runs):
                row = recorded[r][np.isfinite(recorded[r])]
                trained.append(1.0 - row[-1] if row.size else math.nan)
                base.append(1.0 - recorded[r, 0])
                n_in.append(len(run.data[r].X_test))
        else:
            where = f"on {self.n_fresh} fresh N(0, s^2 I_d) inputs, s^2 = mean ||x_i||^2 / d (no test set)"
            for r in range(run.n_runs):
                pair = linear_rule_disagreement(run, r, self.n_fresh, self.fresh_seed, distribution="isotropic")
                trained.append(pair[0])
                base.append(pair[1])
                n_in.append(self.n_fresh)
        labels = run_labels(run)
        return self._near_kkt(run, lambda keep: linear_rule_verdict(
            self.title, statement, [trained[k] for k in keep], [base[k] for k in keep], [n_in[k] for k in keep],
            where=where, labels=[labels[k] for k in keep]))

    # (5) approximately max-margin z ----------------------------------------------------------------
    def _z_margin(self, run) -> Verdict:
        from implicitbias.reference import NotSeparableError, ReferenceSolverError, max_margin_svm

        res, svm, issues = run.results, {}, []
        zm = final(res, "z_margin")
        ratio, bound, notes = [], [], []
        for r in range(run.n_runs):
            t, ds = run.runs[r].data_key(), run.data[r]
            if t not in svm:
                try:
                    svm[t] = max_margin_svm(ds.X, ds.y).margin
                except (NotSeparableError, ReferenceSolverError) as exc:
                    svm[t] = math.nan
                    issues.append(f"SVM of trial {run.runs[r].trial}: {exc}")
            W, a, g = _stored_W(run, r), outer_signs(run, r), leaky_slope(run, r)
            if zm is not None:
                z_margin = zm[r]
            elif W is not None and a is not None:
                z = W.T @ a
                z_margin = np.min(ds.y * (ds.X @ z)) / np.linalg.norm(z)
            else:
                z_margin = math.nan
            ratio.append(z_margin / svm[t])
            if a is None or g is None:
                bound.append(math.nan)
                notes.append("")
                continue
            m1, m2 = int(np.sum(a > 0)), int(np.sum(a < 0))
            kappa = min(m1, m2) / max(m1, m2) if max(m1, m2) > 0 else math.nan
            bound.append((kappa + g) / 2.0)
            notes.append(
                f"margin(z) = {z_margin:.4g}, SVM margin = {svm[t]:.4g}; kappa = min(m1,m2)/max(m1,m2) "
                f"= {m1 if m1 <= m2 else m2}/{max(m1, m2)} = {kappa:.4g}, gamma = {g:g}: bound "
                f"(kappa + gamma)/2, i.e. within a factor 2/(kappa + gamma) = {2 / (kappa + g):.4g}"
            )
        labels = run_labels(run)
        return self._near_kkt(run, lambda keep: over_runs(
            self.title,
            "prediction",
            "(5) z = W^T a is approximately max-margin: margin(z) / margin(SVM) >= (kappa + gamma)/2",
            [ratio[k] for k in keep],
            ">=",
            [bound[k] for k in keep],
            labels=[labels[k] for k in keep],
            run_notes=[notes[k] for k in keep],
            note="; ".join(issues),
        ))


# -- Lemma 3.3 -------------------------------------------------------------------------------------
class FreiLemma33(Theorem):
    """Frei et al. 2023, Lemma 3.3 (S1): for x_i ~ N(0, I_d), the condition of Theorem 3.2 holds with high
    probability once n <= c gamma^3 sqrt(d / log n). The lemma's constant is not in the seed text; c is
    derived (ours) from a union bound: for x_i, x_j ~ N(0, I_d), <x_i, x_j> is about N(0, d), so
    P(|<x_i,x_j>| > s sqrt d) <= 2 exp(-s^2/2), and over the n(n-1)/2 pairs max|<x_i,x_j>| <= 2 sqrt(2 d log n)
    except with probability <= 1/n^2 (s = 2 sqrt(2 log n)). With R_min^2 ~ d and R ~ 1 (norm fluctuations are
    O(sqrt(log n / d)) and neglected), the condition d >= 3 gamma^-3 n 2 sqrt(2 d log n) reads
    n <= gamma^3 sqrt(d / log n) / (6 sqrt 2): c = 1/(6 sqrt 2) = 0.118. The prediction is measured on the drawn
    data; a finite-time reading is not needed (no limit is involved).
    """

    c: float = pydantic.Field(1.0 / (6.0 * math.sqrt(2.0)), gt=0.0)

    @property
    def title(self) -> str:
        return "Frei et al. 2023, Lemma 3.3"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        names = sorted({spec.data.name for spec in run.runs})
        gauss = flag(
            T,
            "assumption",
            "inputs x_i ~ N(0, s^2 I_d) (isotropic Gaussian)",
            names == ["nearly_orthogonal"],
            f"data = {', '.join(names)}",
        )
        n, bound, notes = [], [], []
        for r in range(run.n_runs):
            ds, g = run.data[r], leaky_slope(run, r)
            n.append(ds.n)
            notes.append(f"gamma = {g}, d = {ds.d}")
            bound.append(math.nan if g is None else self.c * g**3 * math.sqrt(ds.d / math.log(max(ds.n, 2))))
        size = over_runs(
            T,
            "assumption",
            f"n <= c gamma^3 sqrt(d / log n), c = {self.c:.4g}",
            n,
            "<=",
            bound,
            where="on the training data",
            labels=run_labels(run),
            run_notes=notes,
        )
        return [gauss, size]

    def predictions(self, run) -> list[Verdict]:
        return [
            condition_verdict(
                self.title,
                run,
                kind="prediction",
                statement="the condition of Theorem 3.2 holds (w.h.p.): " + CONDITION.format(C=3),
            )
        ]


# -- Theorem 3.4 -----------------------------------------------------------------------------------
class FreiTheorem34(Theorem):
    """Frei et al. 2023, Theorem 3.4 (S1): under the Theorem 3.2 condition, gradient flow from any
    initialisation reaches L(W(t)) < l(0)/n (log(2)/n for the logistic loss, 1/n for the exponential),
    after which Lyu & Li's theorem applies (S10). Checked on the final checkpoint of every run; the note
    gives the first recorded time it happened. GD runs stand for gradient flow at t = lr k."""

    @property
    def title(self) -> str:
        return "Frei et al. 2023, Theorem 3.4"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        return [
            condition_verdict(T, run),
            activation_verdict(
                T, run, ("leaky_relu", "identity"), "activation is leaky ReLU with gamma in (0, 1]"
            ),
            outer_layer_verdict(T, run),
            loss_verdict(T, run),
        ]

    def predictions(self, run) -> list[Verdict]:
        loss = final(run.results, "loss")
        thresholds = [fitted_loss_level(run, r) for r in range(run.n_runs)]
        firsts = [_first_below(run, r, thresholds[r]) for r in range(run.n_runs)]
        notes = [
            f"first below at t = {f:.4g}" if math.isfinite(f) else "never below at a checkpoint"
            for f in firsts
        ]
        kind = run.spec.method.kind
        return [
            over_runs(
                self.title,
                "prediction",
                "GF reaches L < l(0)/n (log(2)/n for logistic)",
                loss,
                "<",
                thresholds,
                labels=run_labels(run),
                run_notes=notes,
                note="" if kind == "gf" else f"method {kind}: t = lr k stands for GF time",
            )
        ]


# -- Theorem 4.2 -----------------------------------------------------------------------------------
class FreiTheorem42(Theorem):
    """Frei et al. 2023, Theorem 4.2 (S2): GD with a gamma-leaky, H-smooth activation (the smoothed leaky
    ReLU, H = (1 - gamma)/4), logistic loss, small step size and small init, on nearly orthogonal data:
    the loss -> 0, ||W(t)||_2 -> infinity, and srank(W(t)) <= C for every t >= 1 (an absolute constant),
    while at init srank(W(0)) ~ md / (sqrt m + sqrt d)^2.

    The paper's constants are not in the seed text; these stand-ins are ours:
    data_constant: the data condition "as in Theorem 3.2 up to constants": R_min^2 >= C gamma^-3 R^2 n
        max|<x_i,x_j>| with C = data_constant (default 3: exactly the Theorem 3.2 condition).
    lr_factor: step size lr <= lr_factor / beta, with beta = lambda_max(X X^T)/n (||a||^2/4 + H ||a||_inf),
        an upper bound on the smoothness of the empirical risk in W (logistic l'' <= 1/4, |l'| <= 1,
        |phi'| <= 1, |phi''| <= H); default 2, the classical bound for monotone descent.
    init_ratio_max: small init: ||W(0)||_F <= init_ratio_max * ||first GD step from W = 0||_F, where the
        step is lr |l'(0)| phi'(0) ||a|| ||sum_i y_i x_i|| / n, phi'(0) = (1 + gamma)/2 (W(1) is then close
        to the rank-1 update, srank(W(1)) about 1 + init_ratio^2); default 1.
    omega_max: optional absolute bound on the recorded `init_scale` (None: not checked).
    Finite-time readings of the predictions (fits on the checkpoints from the first with L < l(0)/n on):
    - the loss -> 0: Frei et al.'s GD analysis bounds L by O(t^-1/2) (the rate Kou et al. improve on), so
      the fitted slope of log L against log t must be <= -1/2; a loss that levels off has slope 0.
    - ||W(t)||_2 -> infinity: the Box-Cox exponent q of ||W||_2 (`growth_exponent`) must be >= -q_tol; a
      norm that levels off, a - b t^-r, has q = -r, logarithmic growth q = 0. q_tol: default 0.1, as for
      Kou et al.'s Theta(log t) (the log log t corrections move q by about 1/log^2 t).
    - srank(W(t)) <= C for every t >= 1, at every recorded checkpoint with k >= 1 (no asymptotics).
    srank_max: the absolute constant C (not in the seed text); default 10 (ours), against srank(W(0)) of
        about md / (sqrt m + sqrt d)^2, which is >= 30 for m >= 64 and d >= m (shown in the note).
    """

    data_constant: float = pydantic.Field(3.0, gt=0.0)
    lr_factor: float = pydantic.Field(2.0, gt=0.0)
    init_ratio_max: float = pydantic.Field(1.0, gt=0.0)
    omega_max: float | None = pydantic.Field(None, gt=0.0)
    q_tol: float = pydantic.Field(0.1, gt=0.0)
    srank_max: float = pydantic.Field(10.0, ge=1.0)

    @property
    def title(self) -> str:
        return "Frei et al. 2023, Theorem 4.2"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        kind = run.spec.method.kind
        out = [
            condition_verdict(T, run, C=self.data_constant),
            activation_verdict(
                T,
                run,
                ("smooth_leaky_relu",),
                "activation is gamma-leaky and H-smooth (smoothed leaky ReLU), gamma in (0, 1]",
            ),
            outer_layer_verdict(T, run),
            loss_verdict(T, run, ("logistic",)),
            flag(
                T,
                "assumption",
                "method is gradient descent (fixed step)",
                kind == "gd",
                f"method = {kind}",
            ),
            self._step_size(run),
            self._small_init(run),
        ]
        if self.omega_max is not None:
            scales = [spec.init_scale for spec in run.runs]
            out.append(
                over_runs(
                    T,
                    "assumption",
                    "small init: init_scale <= omega_max",
                    scales,
                    "<=",
                    self.omega_max,
                    where="",
                    labels=run_labels(run),
                )
            )
        return out

    def _step_size(self, run) -> Verdict:
        lrs, bounds = [], []
        for r in range(run.n_runs):
            a, g = outer_signs(run, r), leaky_slope(run, r)
            lr, ds = getattr(run.runs[r].method, "lr", None), run.data[r]
            if a is None or g is None or lr is None:
                lrs.append(math.nan if lr is None else lr)
                bounds.append(math.nan)
                continue
            lam = float(np.linalg.eigvalsh(ds.X @ ds.X.T)[-1])
            beta = lam / ds.n * (float(a @ a) / 4.0 + (1.0 - g) / 4.0 * float(np.max(np.abs(a))))
            lrs.append(lr)
            bounds.append(self.lr_factor / beta)
        return over_runs(
            self.title,
            "assumption",
            "small step: lr <= lr_factor / beta, beta = lambda_max(X X^T)/n (||a||^2/4 + H ||a||_inf)",
            lrs,
            "<=",
            bounds,
            where="",
            labels=run_labels(run),
            note=f"lr_factor = {self.lr_factor:g}, H = (1 - gamma)/4",
        )

    def _small_init(self, run) -> Verdict:
        res = run.results
        w0, step0 = initial(res, "W.frobenius"), initial(res, "step")
        ratios = []
        for r in range(run.n_runs):
            a, g = outer_signs(run, r), leaky_slope(run, r)
            lr, ds = getattr(run.runs[r].method, "lr", None), run.data[r]
            if w0 is None or a is None or g is None or lr is None or (step0 is not None and step0[r] != 0):
                ratios.append(math.nan)
                continue
            first_step = lr * 0.5 * (1.0 + g) / 2.0 * np.linalg.norm(a) * np.linalg.norm(ds.y @ ds.X) / ds.n
            ratios.append(w0[r] / first_step)
        return over_runs(
            self.title,
            "assumption",
            f"small init: ||W(0)||_F / ||first GD step from W = 0||_F <= {self.init_ratio_max:g}",
            ratios,
            "<=",
            self.init_ratio_max,
            where="",
            labels=run_labels(run),
        )

    def predictions(self, run) -> list[Verdict]:
        return [self._loss_rate(run), self._norm_growth(run), self._stable_rank(run)]

    def _window_fit(self, run, name: str, fit, need: int) -> tuple[list[float], list[str]]:
        """`fit(t, y)` per run on the checkpoints from the first with L < l(0)/n (`asymptotic_window`)."""
        y, time = curve(run.results, name), curve(run.results, "time")
        out, notes = [], []
        for r in range(run.n_runs):
            keep = asymptotic_window(run, r) if y is not None and time is not None else np.zeros(0, bool)
            if keep.sum() < need:
                out.append(math.nan)
                notes.append(f"{int(keep.sum())} checkpoints with L < l(0)/n ({need} needed)")
                continue
            out.append(float(fit(time[r][keep], y[r][keep])))
            notes.append(f"{int(keep.sum())} checkpoints from t = {time[r][keep][0]:.4g} (first with L < l(0)/n)")
        return out, notes

    def _loss_rate(self, run) -> Verdict:
        def slope(t, y):
            with np.errstate(divide="ignore"):
                return fitted_slope(np.log(t), np.log(y))[0]

        s, notes = self._window_fit(run, "loss", slope, 3)
        return over_runs(self.title, "prediction", "the training loss -> 0 at least like t^-1/2: fitted slope of "
                         "log L against log t", s, "<=", -0.5, where="", labels=run_labels(run), run_notes=notes,
                         note=why_missing(s, notes))

    def _norm_growth(self, run) -> Verdict:
        q, notes = self._window_fit(run, "W.spectral", lambda t, y: growth_exponent(t, y, 1.0), 4)
        return over_runs(self.title, "prediction", "||W(t)||_2 -> infinity: Box-Cox exponent q of ||W||_2 = "
                         "a + b (t^q - 1)/q (bounded a - b t^-r: q = -r; log t: q = 0)", q, ">=", -self.q_tol,
                         where="", labels=run_labels(run), run_notes=notes, note=why_missing(q, notes))

    def _stable_rank(self, run) -> Verdict:
        res = run.results
        srank, step = curve(res, "W.stable_rank"), curve(res, "step")
        statement = "srank(W(k)) <= C for every GD step k >= 1 (max over checkpoints with k >= 1)"
        if srank is None or step is None:
            return over_runs(self.title, "prediction", statement, None, "<=", self.srank_max)
        worst, notes = [], []
        for r in range(run.n_runs):
            later = step[r] >= 1
            worst.append(float(np.nanmax(srank[r][later])) if later.any() else math.nan)
            W = _stored_W(run, r)
            if step[r, 0] == 0 and W is not None:
                m, d = W.shape
                gauss = m * d / (math.sqrt(m) + math.sqrt(d)) ** 2
                notes.append(
                    f"srank at init {srank[r, 0]:.4g} vs md/(sqrt m + sqrt d)^2 = {gauss:.4g} "
                    f"(ratio {srank[r, 0] / gauss:.3g}); drop to {worst[-1]:.4g}"
                )
            else:
                notes.append("")
        return over_runs(
            self.title,
            "prediction",
            statement,
            worst,
            "<=",
            self.srank_max,
            where="",
            labels=run_labels(run),
            run_notes=notes,
        )


# -- the linear rule sign f(x; W) = sign <W^T a, x> (Theorem 3.2 (4), and the noisy 2-XOR experiment) ------------
def sampled_disagreement(model, gamma: float, Ws, a, centres, noise: float, n: int, seed: int,
                         chunk: int = 25_000) -> list[float]:
    """For each W of `Ws` (m x d), the fraction of n random inputs where sign f(x; W) != sign <W^T a, x>, all W
    on the same inputs x = c + noise xi, c uniform over the rows of `centres` (k x d), xi ~ N(0, I_d).

    f(x; W) = a^T phi(W x) and <W^T a, x> = a^T (W x) depend on x only through W x, so the inputs are drawn in
    the span of the neurons: with P = [W_1; W_2; ...] (stacked rows), P x = P c + noise P xi and
    P xi ~ N(0, P P^T), drawn as V sqrt(Lambda) g from the eigendecomposition P P^T = V Lambda V^T, g ~ N(0, I).
    This is exact, costs O(n (k m)^2) whatever d, and so allows n = 10^5 inputs at d = 40000."""
    Ws = [np.asarray(W, np.float64) for W in Ws]
    a = np.asarray(a, np.float64)
    P = np.concatenate(Ws, axis=0)
    lam, V = np.linalg.eigh(P @ P.T)
    root = V * np.sqrt(np.clip(lam, 0.0, None))[None, :]
    shift = np.asarray(centres, np.float64) @ P.T  # (k, total rows)
    rng = np.random.default_rng(seed)
    wrong = np.zeros(len(Ws))
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        proj = shift[rng.integers(0, shift.shape[0], size)] + noise * rng.standard_normal((size, P.shape[0])) @ root.T
        row = 0
        for k, W in enumerate(Ws):
            pre = proj[:, row : row + W.shape[0]]
            row += W.shape[0]
            f = np.asarray(activation(model.activation, pre, gamma)) @ a
            wrong[k] += np.sum(np.sign(f) != np.sign(pre @ a))
    return [float(w / n) for w in wrong]


def initial_W(run, r: int) -> np.ndarray | None:
    """W(0) of run r, rebuilt from its init seed and scale (the model's own init)."""
    import jax

    model, spec, ds = _two_layer(run, r), run.runs[r], run.data[r]
    if model is None:
        return None
    return np.asarray(model.init(jax.random.PRNGKey(spec.seed), ds.d, spec.init_scale)[0]["W"], np.float64)


def input_distribution(ds, distribution: str = "data") -> tuple[np.ndarray, float, str]:
    """(centres, noise, description) of the inputs x = c + noise xi for `sampled_disagreement`.
    "data": the generator's own distribution where its info gives it (noisy 2-XOR: c in {+-mu_1, +-mu_2},
    GMM: c in {+-mu}, noise 1), else as "isotropic"; "isotropic": N(0, s^2 I_d), s^2 = mean ||x_i||^2 / d."""
    info = ds.info or {}
    if distribution == "data" and "mu1" in info and "mu2" in info:
        mu1, mu2 = np.asarray(info["mu1"]), np.asarray(info["mu2"])
        return np.stack([mu1, -mu1, mu2, -mu2]), 1.0, "the 2-XOR distribution x = z + xi, z ~ Unif{+-mu_1, +-mu_2}"
    if distribution == "data" and "mu" in info:
        mu = np.asarray(info["mu"])
        return np.stack([mu, -mu]), 1.0, "the mixture x = +-mu + xi"
    s = math.sqrt(float(np.mean(np.sum(ds.X**2, axis=1))) / ds.d)
    return np.zeros((1, ds.d)), s, "N(0, s^2 I_d), s^2 = mean ||x_i||^2 / d"


def linear_rule_disagreement(run, r: int, n: int, seed: int, distribution: str = "data") -> tuple[float, float]:
    """(trained, untrained) fraction of n inputs of `input_distribution` where sign f(x; W) != sign <W^T a, x>,
    for the stored final W and W(0) of run r, on the same inputs; (nan, nan) without a stored W."""
    W, a, g, model = _stored_W(run, r), outer_signs(run, r), leaky_slope(run, r), _two_layer(run, r)
    W0 = initial_W(run, r)
    if W is None or a is None or model is None or g is None or W0 is None:
        return math.nan, math.nan
    centres, noise, _ = input_distribution(run.data[r], distribution)
    trained, untrained = sampled_disagreement(model, g, [W, W0], a, centres, noise, n, seed)
    return trained, untrained


def linear_rule_verdict(theorem: str, statement: str, trained, base, n_in, *, where: str, labels) -> Verdict:
    """sign f(x; W) = sign <W^T a, x> read at finite time: the fraction of inputs where the trained network
    disagrees with its linear part (`trained`, per run) against the untrained W(0)'s on the same inputs (`base`),
    out of `n_in` inputs. At gamma near 1 an untrained network is nearly linear already, so agreement alone says
    little. The limit has no disagreement; read at finite time the count k must be below the untrained count k0
    by more than k0's binomial (Poisson) noise, k <= k0 - 2 sqrt(k0). With k0 < 4 that bound is negative and
    no count can pass: too few inputs (or an untrained network too close to linear) to tell, not_evaluated
    with the reason. It can fail: a trained network no more linear than at init has k ~ k0 > k0 - 2 sqrt(k0)."""
    trained, base, n_in = (np.asarray(v, np.float64) for v in (trained, base, n_in))
    k0 = base * n_in
    bound = (k0 - 2.0 * np.sqrt(k0)) / n_in
    notes = [f"untrained W(0) disagrees on {b:.4g} ({int(round(k))} of {int(n)}): bound k0 - 2 sqrt(k0)"
             if np.isfinite(k) else "no stored W" for b, k, n in zip(base, k0, n_in)]
    v = over_runs(theorem, "prediction", statement, trained, "<=", bound, where=where, labels=labels,
                  run_notes=notes)
    few = np.isfinite(k0) & (k0 < 4.0)
    if np.any(few) and v.outcome in ("holds", "fails"):
        v = dataclasses.replace(v, outcome="not_evaluated", note=v.note + (
            "; too few inputs to tell: the untrained network disagrees on fewer than 4 of them, so the bound "
            "k0 - 2 sqrt(k0) is below 0 and no count could pass"))
    return v
