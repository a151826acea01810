"""Chistikov, Englert & Lazic 2023 (NeurIPS), "Learning a neuron by a shallow ReLU network: dynamics and
implicit bias for correlated inputs" (seed 004; SCIENCE.md S11), Theorem 7 (Theorem 8: `theorems.theorem8`).

The network is `TwoLayer(activation="relu", train_outer=True, init_scheme="balanced")`,
N(x) = sum_j a_j [<w_j, x>]_+, trained on the square loss from w_j = lambda z_j, a_j = s_j ||w_j||.
The theorems are asymptotic in the initialisation scale lambda, so they are checked on a cell whose batch
runs over lambda (`init_scale`) x trials: "as lambda decreases" becomes a trend over the grid, "lambda -> 0"
becomes the smallest lambda of the grid, with documented tolerances. Per-lambda values are medians over the
trials (as the paper's Figure 1); bounds on single runs report the worst run. The summaries they share with
Boursier et al. 2022 (`papers.boursier2022.theorems`) and the census (`theorems.census`) are in `theorems.common`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pydantic

from implicitbias.papers.chistikov2023.theorems.common import (
    RANK_ONE_SOURCE,
    angle_setting_shares,
    ds_angle,
    rank_one_bound,
    v_star_norm,
    weighted_max_angles,
)
from implicitbias.papers.chistikov2023.theorems.theorem8 import ChistikovTheorem8, chistikov_reference
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import curve, final, flag, linear_fit, over_runs, rate_verdict, run_labels
from implicitbias.theorems.init_scale_cells import method_verdict, relu_net_verdict, run_lambdas, theta_sq, trials
from implicitbias.theorems.two_layer_bounds import loss_rate_verdict
from implicitbias.training.methods import DiscreteMethod

#: Theorem 8 is in `theorem8`, and stays importable from here
__all__ = ["ChistikovTheorem7", "ChistikovTheorem8", "chistikov_reference"]

_T7 = "Chistikov et al. 2023, Theorem 7"
_ANGLE = (f"{_T7} and Figure 1 (about proportional to lambda); tolerance: the 95% CI of the exponent within "
          "(3/4, 3/2), the midpoints between p = 1 and its competitors 1/2 and 2 (fitting.rate_verdict)")


# -- Theorem 7 ----------------------------------------------------------------------------------------------
class ChistikovTheorem7(Theorem):
    """Chistikov et al. 2023, Theorem 7 (with Theorem 6): from a balanced initialisation of scale lambda,
    gradient flow on teacher-neuron data (angles between v* and the x_i acute) drives the loss to 0, and as
    lambda -> 0 the interpolator it converges to tends to a balanced rank-1 network: all active neurons
    positive multiples of v*, so the max angle between active neurons -> 0 (Figure 1: about proportionally
    to lambda), ||W||_* -> sqrt(||v*||) = 1 and ||theta||^2 -> 2 ||v*|| = 2. Along GF the balancedness
    a_j^2 - ||w_j||^2 is conserved (it stays 0).

    Checked on one cell whose batch runs over lambda (init_scale) x trials. How each asymptotic claim is read
    at finite time (every threshold below is derived, none is tuned; the same for quick and full variants):
    - "loss -> 0" (S11: after the saddle, exponentially): the decay rate of log L over the last stretch of
      each run against the rate 2 lambda_min(K)/n of the flow linearised at the final parameters; it must be
      nearer that rate than the rate 0 of a loss that does not converge exponentially: ratio >= 1/2
      (`two_layer_bounds.loss_rate_verdict`). A stopping rule alone cannot pass it: a run that stalls above
      the rule's loss, or decays like a power law, has a late rate near 0.
    - "max angle -> 0 as lambda -> 0, about proportionally" (Figure 1): the power law angle ~ lambda^p fitted
      by least squares to log angle against log lambda over every run of the regime, one intercept per trial
      (the prefactor depends on the data set and init, the exponent is common), so the standard error
      includes each trial's scatter about its line; predicted p = 1, competitors 0 (an angle flat
      in lambda: no limit 0), 1/2 and 2; holds when the 95% confidence interval of p lies within (3/4, 3/2),
      the midpoints, fails when it lies outside, inconclusive (not_evaluated) otherwise
      (`fitting.rate_verdict`). p > 0 is what makes the extrapolated limit 0.
    - "||theta||^2 -> 2||v*||, ||W||_* -> sqrt(||v*||)": at the smallest lambda, every trial, against the
      finite-time bound of `two_layer_bounds.rank_one_bounds`: what the rank-1 limit allows at the run's
      final loss, bundle angle and imbalance; the weight of inactive neurons that carry weight is not forgiven
      (`rank_one_bound`).
    - "a_j^2 - ||w_j||^2 conserved": exactly along GF; the bounds on the drift are derived per method (see
      `balancedness`).

    Fields:
    small_lambda_max: the prediction regime lambda <= small_lambda_max, where the rate is fitted. The
        paper's sufficient bound on lambda (Theorem 6: ((m n^n)^(9 Delta^2/delta^3))^(-3/eps)) lies far below
        any float64; the regime is ours: default 4^-1, where ||theta(0)||^2 ~ 2 lambda^2 is below 1/16 of the
        limit's 2||v*|| and Figure 1's curves have left their large-lambda plateau. A bend left in the regime
        widens the confidence interval (inconclusive), it cannot make the check pass.
    slope_window: if set, the rate is fitted on the smallest slope_window lambdas of the regime only (default
        None: the whole regime).
    weight_rel: the rate is checked twice: on the recorded max angle between active neurons (Figure 1's
        quantity) and on the max angle between the active neurons that carry weight,
        |a_j| ||w_j|| >= weight_rel x sum_k |a_k| ||w_k|| (computed from the stored final parameters). The
        theorem is about the limit network, "every nonzero neuron a positive multiple of v*": at finite lambda
        a neuron can stay active at size ~ lambda without ever aligning (a negative-sign neuron whose
        deactivation loses the race against the escape of the others, which stops all motion; a positive one
        that started nearly opposite to gamma_[n]); it vanishes as lambda -> 0 but sets the recorded angle.
    max_data_angle: the largest angle between v* and an x_i assumed. Default pi/4: the paper's proofs assume
        it (Sec. 9: extending them towards pi/2 is open). The paper's experiments (Figure 1, presented as "in
        line with Theorem 7") draw data with angles up to pi/2 (the redraw rule); experiments that check that
        extended reading set max_data_angle = pi/2 and say so.
    """

    small_lambda_max: float = pydantic.Field(0.25, gt=0.0)
    slope_window: int | None = pydantic.Field(None, ge=2)
    weight_rel: float = pydantic.Field(1e-6, gt=0.0, lt=1.0)
    max_data_angle: float = pydantic.Field(math.pi / 4, gt=0.0, le=math.pi)

    #: Figure 1's exponent and its wrong competitors (flat, square root, quadratic)
    ANGLE_RATE: ClassVar[float] = 1.0
    ANGLE_COMPETITORS: ClassVar[tuple[float, ...]] = (0.0, 0.5, 2.0)

    @property
    def title(self) -> str:
        """The theorem named in this object's verdicts."""
        return _T7

    # -- assumptions ----------------------------------------------------------------------------------------
    @assumption("n >= d points spanning R^d", source="Chistikov et al. 2023, Sec. 2: (1/n) X X^T positive definite")
    def spanning(self, run) -> Verdict:
        """lambda_min(X^T X / n) > 0 on every trial's data."""
        reps = trials(run)
        eig = []
        for r in reps:
            X = run.data[r].X
            eig.append(float(np.linalg.eigvalsh(X.T @ X / X.shape[0])[0]))
        ds = run.data[reps[0]]
        note = (f"n = {ds.n}, d = {ds.d} (n = d: the x_0 of the uncentred scheme defines v* only, see "
                "TeacherNeuron); the paper: (1/n) X X^T positive definite")
        return over_runs(self.title, "assumption", "n >= d points spanning R^d: lambda_min(X^T X / n) > 0",
                         eig, ">", 0.0, where="over the trials' data", note=note,
                         labels=[f"trial {run.runs[r].trial}" for r in reps])

    @assumption("labels y_i = [<v*, x_i>]_+ with ||v*|| = 1",
                source="Chistikov et al. 2023, Sec. 2 (a teacher neuron); equality to 1e-12 relative (float64)")
    def teacher(self, run) -> Verdict:
        """The labels are the teacher's, on every trial's data."""
        worst, norm = 0.0, []
        for r in trials(run):
            ds = run.data[r]
            v = ds.info.get("v_star")
            if v is None:
                return flag(self.title, "assumption", "labels y_i = [<v*, x_i>]_+, ||v*|| = 1", None,
                            "the data set records no teacher v_star")
            worst = max(worst, float(np.max(np.abs(ds.y - np.maximum(ds.X @ v, 0.0)))))
            norm.append(float(np.linalg.norm(v)))
        ok = worst <= 1e-12 * max(1.0, float(np.max(np.abs(run.data[0].y)))) and all(
            abs(n - 1.0) <= 1e-12 for n in norm)
        return flag(self.title, "assumption", "labels y_i = [<v*, x_i>]_+ with ||v*|| = 1", ok,
                    f"max |y_i - [<v*, x_i>]_+| = {worst:.2g}, ||v*|| = {max(norm):.15g}")

    @assumption("every angle between v* and an x_i below max_data_angle", threshold="max_data_angle",
                source="Chistikov et al. 2023: the proofs assume pi/4 (Sec. 9); pi/2 is the redraw rule of the "
                       "paper's experiments (Figures 1, 2)")
    def data_angles(self, run) -> Verdict:
        """The largest angle between v* and a training input, worst trial."""
        reps = trials(run)
        worst = []
        for r in reps:
            ds = run.data[r]
            v = ds.info.get("v_star")
            if v is None:
                worst.append(math.nan)
                continue
            worst.append(ds_angle(ds, v))
        quarter = "holds" if np.nanmax(worst) < math.pi / 4 else "does not hold"
        extended = self.max_data_angle > math.pi / 4 + 1e-12
        reading = "; extended reading (the paper's experiments)" if extended else ""
        return over_runs(self.title, "assumption", "every angle between v* and an x_i < bound (rad)", worst,
                         "<", self.max_data_angle, where="over the trials' data",
                         labels=[f"trial {run.runs[r].trial}" for r in reps],
                         note=f"the proofs' pi/4 bound {quarter} (largest angle {np.nanmax(worst):.4g} rad)"
                         + reading)

    @assumption("ReLU network, both layers trained, no bias, balanced init",
                source="Chistikov et al. 2023, Sec. 2 (the network and its balanced initialisation)")
    def relu_network(self, run) -> Verdict:
        """The model is the paper's network from its balanced init."""
        return relu_net_verdict(self.title, run, balanced=True)

    @assumption("trained by gradient flow", source="Chistikov et al. 2023, Theorems 6 and 7 (gradient flow)")
    def gradient_flow(self, run) -> Verdict:
        """The method is gradient flow (GD: not evaluated)."""
        return method_verdict(self.title, run)

    @assumption("small initialisation: at least 2 lambdas in the prediction regime", threshold="small_lambda_max",
                source="Theorem 7 is a limit lambda -> 0 (its sufficient bound is far below float64); the regime "
                       "lambda <= small_lambda_max is ours (see the field)")
    def small_init(self, run) -> Verdict:
        """The lambda grid has at least two values in the regime where the rate is fitted."""
        grid = np.unique(run_lambdas(run))
        small = grid[grid <= self.small_lambda_max]
        need = 2
        note = (f"lambda in [{grid.min():.3g}, {grid.max():.3g}] ({grid.size} values); the regime lambda <= "
                f"{self.small_lambda_max:.3g} has {small.size}: "
                + (", ".join(f"{g:.3g}" for g in small) if small.size else "none")
                + "; the paper's sufficient bound on lambda is far below float64")
        return flag(self.title, "assumption", f"small initialisation: at least {need} lambdas <= "
                    f"{self.small_lambda_max:.3g} (the prediction regime)", bool(small.size >= need), note,
                    measured=float(small.size))

    # -- predictions ----------------------------------------------------------------------------------------
    def _regime_runs(self, run) -> np.ndarray:
        return run_lambdas(run) <= self.small_lambda_max

    @prediction("loss -> 0 exponentially, at the linearised flow's rate", threshold="small_lambda_max",
                source="S11 (after the saddle the loss decays exponentially); tolerance: the late rate nearer "
                       "2 lambda_min(K)/n than 0, ratio >= 1/2 (two_layer_bounds.loss_rate_verdict)")
    def loss_exponential(self, run) -> Verdict:
        """The late decay rate of log L against the linearised rate, worst run of the regime."""
        keep = self._regime_runs(run)
        labels = [f"{lab}, lambda {lam:.3g}" for lab, lam in zip(run_labels(run), run_lambdas(run))]
        return loss_rate_verdict(self.title, run, keep, labels)

    @prediction("max angle between active neurons -> 0 about proportionally to lambda",
                threshold="small_lambda_max, slope_window", source=_ANGLE)
    def angle_rate(self, run) -> Verdict:
        """The exponent of the recorded max angle (Figure 1's quantity) against lambda."""
        shares = angle_setting_shares(run.results, run.data)
        lam = run_lambdas(run)
        smallest = np.isfinite(shares) & (lam == lam.min())
        setter = ""
        if smallest.any():
            setter = (f"; at the smallest lambda the angle is set by a neuron carrying a share "
                      f"{np.median(shares[smallest]):.2g} (median over trials; max {np.max(shares[smallest]):.2g}) "
                      "of sum_k |a_k| ||w_k||")
        return self._rate(run, final(run.results, "max_angle"), "max angle between active neurons", extra=setter)

    @prediction("max angle between the active neurons carrying weight -> 0 about proportionally to lambda",
                threshold="weight_rel, small_lambda_max, slope_window", source=_ANGLE)
    def weighted_angle_rate(self, run) -> Verdict:
        """The exponent of the max angle between the neurons with |a_j| ||w_j|| >= weight_rel x the total."""
        weighted = weighted_max_angles(run.results, run.data, self.weight_rel)
        what = f"with |a_j| ||w_j|| >= {self.weight_rel:g} sum_k |a_k| ||w_k||"
        return self._rate(run, weighted, f"max angle between active neurons {what}")

    def _rate(self, run, angle, what: str, extra: str = "") -> Verdict:
        lam = run_lambdas(run)
        statement = (f"{what} -> 0 as lambda -> 0, about proportionally (Figure 1): exponent p of angle ~ "
                     f"lambda^p over the regime")
        if angle is None:
            return compare(self.title, "prediction", statement, None, "~", self.ANGLE_RATE, "not recorded")
        angle = np.asarray(angle, dtype=np.float64)
        keep = self._regime_runs(run) & np.isfinite(angle)
        grid = np.unique(lam[keep])
        if self.slope_window is not None:
            keep &= lam <= grid[: self.slope_window].max(initial=-np.inf)
        zero = keep & (angle <= 0)
        keep &= angle > 0
        trial = np.array([spec.trial for spec in run.runs])
        fit = linear_fit(np.log(lam[keep]), np.log(angle[keep]), groups=trial[keep])
        g, med = _group(lam[keep], angle[keep])
        note = ("median (rad) by lambda: " + ", ".join(f"{x:.3g}: {y:.3g}" for x, y in zip(g, med))
                + (f"; {int(zero.sum())} run(s) with angle 0 (fewer than two such neurons) left out" if zero.any()
                   else "") + extra)
        return rate_verdict(self.title, statement, fit, self.ANGLE_RATE, self.ANGLE_COMPETITORS, note=note)

    @prediction("||W||_* -> sqrt(||v*||) at the smallest lambda", source=RANK_ONE_SOURCE)
    def nuclear_norm(self, run) -> Verdict:
        """| ||W||_* / sqrt(||v*||) - 1 | against the rank-1 limit's finite-time bound, worst trial."""
        return self._rank_one(run, "W.nuclear")

    @prediction("||theta||^2 -> 2 ||v*|| at the smallest lambda", source=RANK_ONE_SOURCE)
    def theta_norm(self, run) -> Verdict:
        """| ||theta||^2 / (2||v*||) - 1 | against the rank-1 limit's finite-time bound, worst trial."""
        return self._rank_one(run, "theta_sq")

    def _rank_one(self, run, what: str) -> Verdict:
        res = run.results
        lam = run_lambdas(run)
        at = np.flatnonzero(lam == lam.min())
        if what == "W.nuclear":
            value = final(res, "W.nuclear")
            target = np.array([math.sqrt(v_star_norm(run, r)) for r in at])
            statement = "||W||_* -> sqrt(||v*||) (= 1) at the smallest lambda: | ||W||_* / sqrt(||v*||) - 1 |"
        else:
            value = theta_sq(res)
            target = np.array([2.0 * v_star_norm(run, r) for r in at])
            statement = "||theta||^2 -> 2 ||v*|| (= 2) at the smallest lambda: | ||theta||^2 / (2||v*||) - 1 |"
        statement += " <= the rank-1 limit's finite-time bound"
        if value is None:
            return compare(self.title, "prediction", statement, None, "<=", None, "not recorded")
        bounds, notes = [], []
        for r in at:
            b = rank_one_bound(run, r)
            bounds.append(math.nan if b is None else b["nuclear" if what == "W.nuclear" else "theta"])
            notes.append(f"value {value[r]:.8g}; " + ("no final parameters" if b is None else b["note"]))
        gap = np.abs(value[at] / target - 1.0)
        labels = [f"run {r}, trial {run.runs[r].trial}" for r in at]
        return over_runs(self.title, "prediction", statement, gap, "<=", np.asarray(bounds), labels=labels,
                         run_notes=notes, where=f"at lambda = {lam.min():.3g}")

    @prediction("balancedness a_j^2 - ||w_j||^2 conserved along training",
                source="exact along gradient flow (S11); bound derived per method: 2 rtol max_t ||theta||^2 for "
                       "the error-controlled flow, 2 lr L(0) for GD (the descent lemma)")
    def balancedness(self, run) -> Verdict:
        """Gradient flow conserves a_j^2 - ||w_j||^2 exactly; the error-controlled solver changes a component
        by at most about rtol x its size per step, and d(a^2 - ||w||^2) = 2 a da - 2 w . dw, so one step's
        error moves it by at most 2 rtol (a_j^2 + ||w_j||^2) <= 2 rtol max_t ||theta(t)||^2 (the factor 2 is
        that derivative; a drift beyond it means errors accumulated over steps). A GD step of size eta changes
        it by eta^2 (g_a^2 - ||g_w||^2), in total at most eta^2 sum_k ||grad L_k||^2, and the descent lemma
        (with eta below 1/smoothness, which stable GD needs) bounds eta sum_k ||grad L_k||^2 by
        2 (L(0) - L(end)) <= 2 L(0): the drift is at most 2 eta L(0)."""
        bal = curve(run.results, "balancedness_max")
        statement = "balancedness conserved: max over neurons and checkpoints of |a_j^2 - ||w_j||^2|"
        if bal is None:
            return compare(self.title, "prediction", statement, None, "<=", None, "not recorded")
        worst = np.nanmax(bal, axis=1)
        method = run.spec.method
        if method.kind == "gf":
            size = np.nanmax(curve(run.results, "param_norm") ** 2, axis=1)
            bound = 2.0 * method.max_rtol * size
            note = (f"gradient flow: conserved exactly; bound 2 rtol ({method.max_rtol:g}) max_t ||theta||^2 (one "
                    "step's error)")
        else:
            l0 = curve(run.results, "loss")[:, 0]
            lr = np.array([spec.method.lr if isinstance(spec.method, DiscreteMethod) else math.nan
                           for spec in run.runs])
            bound = 2.0 * lr * l0
            note = f"{method.kind}: drift <= 2 lr L(0) (the descent lemma)"
        return over_runs(self.title, "prediction", statement, worst, "<=", bound, labels=run_labels(run),
                         where="along training", note=note)


def _group(lam, values):
    """(sorted distinct lambdas, median of the values at each)."""
    grid = np.unique(lam)
    return grid, np.asarray([float(np.median(values[lam == g])) for g in grid])
