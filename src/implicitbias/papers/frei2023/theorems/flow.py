"""Frei, Vardi, Bartlett, Srebro, Hu 2023 (ICLR), "Implicit bias in leaky ReLU networks trained on
high-dimensional data" (seed 000; SCIENCE.md S1, S2): Theorem 3.2 and Theorem 3.4 here; Lemma 3.3 and
Theorem 4.2 in `theorems.gd` (re-exported here).

The network is `TwoLayer` with a fixed outer layer a_j = +-c (m1 positive and m2 negative neurons) and
no bias, f(x; W) = sum_j a_j phi(<w_j, x>). Every prediction is evaluated on every run of the cell and
the verdict reports the worst run (see `fitting.over_runs`). The assumption checks shared with Kou et al. are in
`theorems.two_layer_common`, the linear rule of Theorem 3.2 (4) in `theorems.linear_rule`.

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
import math

import numpy as np
import pydantic

from implicitbias.papers.frei2023.theorems.gd import FreiLemma33, FreiTheorem42
from implicitbias.papers.frei2023.theorems.linear_rule import linear_rule_disagreement, linear_rule_verdict
from implicitbias.reference import NotSeparableError, ReferenceSolverError, max_margin_svm
from implicitbias.reference.memo import array_key, memoized
from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.fitting import (
    asymptotic_window,
    curve,
    final,
    fitted_loss_level,
    initial,
    limit_verdict,
    over_runs,
    run_labels,
)
from implicitbias.theorems.two_layer_common import (
    activation_verdict,
    condition_verdict,
    first_below,
    leaky_slope,
    loss_verdict,
    outer_layer_verdict,
    outer_signs,
    stored_W,
    two_layer,
    two_layer_outputs,
)

__all__ = ["FreiLemma33", "FreiTheorem32", "FreiTheorem34", "FreiTheorem42", "loss_verdict"]

_SOURCE = "Frei et al. 2023, Theorem 3.2"
_SETTING = "Frei et al. 2023, Theorems 3.2 and 3.4"


class FreiGradientFlowSetting(Theorem):
    """The setting of Frei et al.'s Theorems 3.2 and 3.4 (S1): nearly orthogonal data (the condition with C = 3),
    a leaky ReLU (or the identity) with gamma in (0, 1], a fixed outer layer a_j = +-c with both signs present
    and no bias, the logistic or exponential loss. Both theorems declare these four assumptions."""

    @assumption("near-orthogonal data: R_min^2 >= 3 gamma^-3 R^2 n max_(i!=j) |<x_i,x_j>|",
                source=f"{_SETTING}, the condition (C = 3 in the paper)")
    def data_condition(self, run) -> Verdict:
        """The near-orthogonality condition on every run's data (worst run)."""
        return condition_verdict(self.title, run)

    @assumption("activation is leaky ReLU with gamma in (0, 1]", source=f"{_SETTING}, the network")
    def leaky_activation(self, run) -> Verdict:
        """The activation is the leaky ReLU (or the identity, gamma = 1)."""
        return activation_verdict(self.title, run, ("leaky_relu", "identity"),
                                  "activation is leaky ReLU with gamma in (0, 1]")

    @assumption("outer layer fixed, a_j = +-c with both signs present, no bias", source=f"{_SETTING}, the network")
    def fixed_outer_layer(self, run) -> Verdict:
        """The outer layer is fixed at +-c, both signs present, and there is no bias."""
        return outer_layer_verdict(self.title, run)

    @assumption("loss is logistic or exponential", source=f"{_SETTING}, the loss")
    def exponential_tail_loss(self, run) -> Verdict:
        """The loss is the logistic or the exponential loss."""
        return loss_verdict(self.title, run)


# -- Theorem 3.2 -----------------------------------------------------------------------------------
class FreiTheorem32(FreiGradientFlowSetting):
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
        """The theorem\'s name, as its verdicts give it."""
        return "Frei et al. 2023, Theorem 3.2"

    def _limit(self, run, statement: str, name: str, target: float, tol: float, **kw) -> Verdict:
        return limit_verdict(self.title, run, statement, name, target, tol, window=asymptotic_window, **kw)

    @prediction("(1) every margin is tight: max_i q_i / min_i q_i -> 1", threshold="spread_tol",
                source=f"{_SOURCE} (1); spread_tol: ours, the resolution of an extrapolated limit")
    def equal_margins(self, run) -> Verdict:
        """The extrapolated limit of the margin spread is within 1 + spread_tol."""
        return self._limit(run, "(1) every margin is tight: max_i q_i / min_i q_i -> 1", "margin_spread", 1.0,
                           self.spread_tol)

    @prediction("(2) converges to a KKT point of Problem (1): KKT stationarity residual -> 0", threshold="kkt_tol",
                source=f"{_SOURCE} (2), with Lyu & Li 2020; kkt_tol: ours, the resolution of an extrapolated limit")
    def kkt_point(self, run) -> Verdict:
        """The extrapolated limit of the KKT stationarity residual (S10) is within kkt_tol; the note gives the
        final complementarity residual."""
        comp = final(run.results, "kkt_complementarity")
        v = self._limit(run, "(2) converges to a KKT point of Problem (1): KKT stationarity residual -> 0",
                        "kkt_stationarity", 0.0, self.kkt_tol)
        if comp is None or not np.isfinite(comp).any():
            return v
        return dataclasses.replace(v, note=v.note + f"; complementarity residual up to {np.nanmax(comp):.3g} "
                                   "(all runs, final)")

    @prediction("(2) global optimum of Problem (1): the rank-2 average W_bar of W has no larger normalised margin",
                threshold="optimum_tol, kkt_tol",
                source=f"{_SOURCE} (2), a necessary condition on the stored final W; optimum_tol: ours (rounding "
                       "of the margin ratio)")
    def global_optimum(self, run) -> Verdict:
        """gamma_bar(W_bar) / gamma_bar(W) <= 1 + optimum_tol on the runs near a KKT point (`_near_kkt`)."""
        ratios = []
        for r in range(run.n_runs):
            W, a, g, model = stored_W(run, r), outer_signs(run, r), leaky_slope(run, r), two_layer(run, r)
            if W is None or a is None or model is None or g is None:
                ratios.append(math.nan)
                continue
            ds = run.data[r]
            Wb = W.copy()
            for group in (a > 0, a < 0):
                if group.any():
                    Wb[group] = W[group].mean(axis=0)
            gbar = [np.min(ds.y * two_layer_outputs(model, g, M, a, ds.X)) / np.linalg.norm(M) for M in (W, Wb)]
            ratios.append(gbar[1] / gbar[0] if gbar[0] > 0 else math.nan)
        labels = run_labels(run)
        return self._near_kkt(run, lambda keep: over_runs(
            self.title, "prediction",
            "(2) global optimum of Problem (1): the rank-2 average W_bar of W has no larger "
            "normalised margin (gamma_bar(W_bar) / gamma_bar(W))",
            [ratios[k] for k in keep], "<=", 1.0 + self.optimum_tol, labels=[labels[k] for k in keep],
            note="necessary condition, from the stored W; W_bar: each neuron replaced by the mean of its sign group",
        ))

    @prediction("(3) rank(W) <= 2: sigma_3 / sigma_1 -> 0", threshold="rank_tol",
                source=f"{_SOURCE} (3); rank_tol: ours, the resolution of an extrapolated limit")
    def rank_two(self, run) -> Verdict:
        """The extrapolated limit of sigma_3 / sigma_1 is within rank_tol."""
        return self._limit(run, "(3) rank(W) <= 2: sigma_3 / sigma_1 -> 0", "W.sigma3_ratio", 0.0, self.rank_tol)

    @prediction("(3) rank(W) <= 2: stable rank ||W||_F^2 / ||W||_2^2 <= 2", threshold="srank_tol",
                source=f"{_SOURCE} (3); srank_tol: ours, the resolution of an extrapolated limit")
    def stable_rank_two(self, run) -> Verdict:
        """srank <= 2 says something only where a matrix of the shape can exceed 2: min(m, d) > 2 + srank_tol."""
        W = run.results["theta.W"].values if "theta.W" in run.results else None
        s0 = initial(run.results, "W.stable_rank")
        room = min(W.shape[-2:]) if W is not None else math.inf
        v = self._limit(run, "(3) rank(W) <= 2: stable rank ||W||_F^2 / ||W||_2^2 <= 2", "W.stable_rank", 2.0,
                        self.srank_tol, hi=room)
        if W is None:
            return v
        note = f"any {W.shape[-2]} x {W.shape[-1]} matrix has srank <= {room}" + (
            "" if s0 is None else f"; srank at init up to {np.nanmax(s0):.4g}")
        if room <= 2.0 + self.srank_tol:
            return dataclasses.replace(v, outcome="not_evaluated", note=v.note + "; vacuous: " + note)
        return dataclasses.replace(v, note=v.note + "; " + note)

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

    @prediction("(3) all positive neurons are equal and all negative neurons are equal", threshold="rank_tol, kkt_tol",
                source=f"{_SOURCE} (3), on the stored final W; rank_tol: ours")
    def equal_neurons(self, run) -> Verdict:
        """max_j ||w_j - group mean|| / ||group mean|| <= rank_tol on the runs near a KKT point."""
        spread = []
        for r in range(run.n_runs):
            W, a = stored_W(run, r), outer_signs(run, r)
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
            self.title, "prediction",
            "(3) all positive neurons are equal and all negative neurons "
            "are equal: max_j ||w_j - group mean|| / ||group mean||",
            [spread[k] for k in keep], "<=", self.rank_tol, labels=[labels[k] for k in keep],
            note="from the stored W",
        ))

    @prediction("(4) linear decision boundary: sign f(x; W) = sign <z, x>, z = W^T a", threshold="n_fresh, kkt_tol",
                source=f"{_SOURCE} (4); bound k0 - 2 sqrt(k0): the binomial noise of the untrained network's "
                       "disagreement count k0 (ours)")
    def linear_boundary(self, run) -> Verdict:
        """Disagreement sign f(x; W) != sign <z, x> of the trained network against the untrained one (W(0), the
        same inputs): see `linear_rule.linear_rule_verdict`. Inputs: the test set when the data have one (the
        recorded `linear_agreement` at the first and last checkpoint), else n_fresh inputs of N(0, s^2 I_d)
        (`linear_rule.sampled_disagreement`)."""
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

    @prediction("(5) z = W^T a is approximately max-margin: margin(z) / margin(SVM) >= (kappa + gamma)/2",
                threshold="kkt_tol",
                source=f"{_SOURCE} (5), the factor 2/(kappa + gamma); kappa = min(m1, m2)/max(m1, m2): ours, see the "
                       "module docstring")
    def max_margin_z(self, run) -> Verdict:
        """margin(z) / margin(SVM) against (kappa + gamma)/2 on the final W of the runs near a KKT point; the SVM of
        each data set from the memo of reference solutions (`reference.memo`)."""
        zm, issues, margins = final(run.results, "z_margin"), [], {}
        ratio, bound, notes = [], [], []
        for r in range(run.n_runs):
            ds = run.data[r]
            # keyed by the arrays, not the run's data key: a check may be handed data that its spec does not generate
            key = array_key(ds.X, ds.y)
            if key not in margins:  # one SVM (and one note on a failed one) per data set of the cell
                try:
                    margins[key] = memoized("svm_margin", key, {}, lambda ds=ds: max_margin_svm(ds.X, ds.y).margin)
                except (NotSeparableError, ReferenceSolverError) as exc:
                    margins[key] = math.nan
                    issues.append(f"SVM of trial {run.runs[r].trial}: {exc}")
            svm = margins[key]
            W, a, g = stored_W(run, r), outer_signs(run, r), leaky_slope(run, r)
            if zm is not None:
                z_margin = zm[r]
            elif W is not None and a is not None:
                z = W.T @ a
                z_margin = np.min(ds.y * (ds.X @ z)) / np.linalg.norm(z)
            else:
                z_margin = math.nan
            ratio.append(z_margin / svm)
            if a is None or g is None:
                bound.append(math.nan)
                notes.append("")
                continue
            m1, m2 = int(np.sum(a > 0)), int(np.sum(a < 0))
            kappa = min(m1, m2) / max(m1, m2) if max(m1, m2) > 0 else math.nan
            bound.append((kappa + g) / 2.0)
            notes.append(
                f"margin(z) = {z_margin:.4g}, SVM margin = {svm:.4g}; kappa = min(m1,m2)/max(m1,m2) "
                f"= {m1 if m1 <= m2 else m2}/{max(m1, m2)} = {kappa:.4g}, gamma = {g:g}: bound "
                f"(kappa + gamma)/2, i.e. within a factor 2/(kappa + gamma) = {2 / (kappa + g):.4g}"
            )
        labels = run_labels(run)
        return self._near_kkt(run, lambda keep: over_runs(
            self.title, "prediction",
            "(5) z = W^T a is approximately max-margin: margin(z) / margin(SVM) >= (kappa + gamma)/2",
            [ratio[k] for k in keep], ">=", [bound[k] for k in keep], labels=[labels[k] for k in keep],
            run_notes=[notes[k] for k in keep], note="; ".join(issues),
        ))


# -- Theorem 3.4 -----------------------------------------------------------------------------------
class FreiTheorem34(FreiGradientFlowSetting):
    """Frei et al. 2023, Theorem 3.4 (S1): under the Theorem 3.2 condition, gradient flow from any
    initialisation reaches L(W(t)) < l(0)/n (log(2)/n for the logistic loss, 1/n for the exponential),
    after which Lyu & Li's theorem applies (S10). Checked on the final checkpoint of every run; the note
    gives the first recorded time it happened. GD runs stand for gradient flow at t = lr k."""

    @property
    def title(self) -> str:
        """The theorem\'s name, as its verdicts give it."""
        return "Frei et al. 2023, Theorem 3.4"

    @prediction("GF reaches L < l(0)/n (log(2)/n for logistic)",
                source="Frei et al. 2023, Theorem 3.4; the level l(0)/n: every point then has a positive margin")
    def reaches_fitted_level(self, run) -> Verdict:
        """The final loss of every run is below l(0)/n; the note gives the first recorded time it was."""
        loss = final(run.results, "loss")
        thresholds = [fitted_loss_level(run, r) for r in range(run.n_runs)]
        firsts = [first_below(run, r, thresholds[r]) for r in range(run.n_runs)]
        notes = [f"first below at t = {f:.4g}" if math.isfinite(f) else "never below at a checkpoint" for f in firsts]
        kind = run.spec.method.kind
        return over_runs(self.title, "prediction", "GF reaches L < l(0)/n (log(2)/n for logistic)", loss, "<",
                         thresholds, labels=run_labels(run), run_notes=notes,
                         note="" if kind == "gf" else f"method {kind}: t = lr k stands for GF time")
