"""Soudry, Hoffer, Nacson, Gunasekar, Srebro 2018 (JMLR), "The implicit bias of gradient descent on separable
data", with its SGD and normalised-GD companions (SCIENCE.md S4).

Linear predictor f(x) = <w, x>, risk L(w) = (1/n) sum_i l(y_i <w, x_i>) with the logistic (or exponential) loss,
linearly separable data, w_hat = argmin ||w|| s.t. y_i <w, x_i> >= 1 (the hard-margin SVM, margin gamma_hat =
1/||w_hat||). Theorem 3 (GD with eta < 2/beta, beta the smoothness of L): w(t) = w_hat log t + rho(t) with rho(t)
bounded, hence, as t -> infinity,

    ||w(t)|| = ||w_hat|| log t + O(1)          (the slope of ||w|| against log t tends to ||w_hat||),
    L(w(t)) = Theta(1/t)                        (the slope of log L against log t tends to -1),
    || w/||w|| - w_hat/||w_hat|| || = Theta(1/log t)     (eq. (8); O(log log t / log t) in degenerate cases),
    (gamma_hat - gamma(w(t))) / gamma_hat = O(1/log t),  gamma(w) = min_i y_i <w, x_i> / ||w||.

Nacson, Srebro, Soudry 2019 (AISTATS): SGD with a fixed step has the same limit and the same rates.
Nacson, Lee, Gunasekar, Savarese, Srebro, Soudry 2019 (AISTATS): with normalised steps eta / L(w) the direction
converges polynomially fast (O(log t / sqrt t) for the exponential loss) instead of like 1/log t.

Rates are read off the late, log-spaced checkpoints (the last `late_fraction` of them) at time t = lr k. Fitted
exponents of (log t)^-p are unreliable at finite t (shifting t by a factor lr, or the transient of rho(t), moves
them by O(1 / log t)), so the 1/log t rates are read against ||w(t)|| = ||w_hat|| log t + O(1): the exponent q of
gap ~ ||w||^-q (`gap_fit`) is judged against q = 1 and its nearest wrong rates (`fitting.rate_verdict`): q = 0 (no
decay: the direction converges elsewhere) and q = 2 (1/log^2 t: P w_tilde = 0); a polynomial rate t^-p shows as
q = p log t, far above 2. For almost every data set the residual rho(t) is bounded (Theorem 3), so the gaps are
Theta(1/log t) (q = 1) whether or not the support vectors span the data; only a measure-zero set of data sets
(a support vector with alpha_j = 0) has the O(log log t / log t) of eq. (8).

The limit: where Theorem 3 determines it (`soudry_w_tilde`), angle gap x ||w(t)|| = ||P rho(t)|| (1 + O(gap^2)) ->
||P w_tilde||. Linearising the exponential tail around w_tilde, rho(t) - w_tilde decays like t^-nu with
nu = min(lambda_min(M), theta_min - 1, 1) (`residual_rate`): M = sum_j alpha_j a_j a_j^T on the span of the support
constraints (d(rho - w_tilde)/dt = -M (rho - w_tilde) / t), theta_min - 1 the decay of the nearest constraint off the
support, 1 the logistic tail's and the step's O(1/t). The limit is extrapolated along y = y_inf + c t^-nu
(`extrapolate`), with its uncertainty.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import numpy as np
import pydantic

from implicitbias.metrics.extrapolation import extrapolate, power_rate
from implicitbias.papers.soudry2018.theorems.common import (
    SeparableLinear,
    gap_fit,
    gd_smoothness,
    nonsupport_weight,
    residual_rate,
    sgd_smoothness,
    soudry_w_tilde,
)
from implicitbias.theorems.base import Verdict, prediction
from implicitbias.theorems.fitting import curve, fitted_slope, late_window, over_runs, run_labels
from implicitbias.theorems.max_margin import angle_gaps, margin_gap, svm_of
from implicitbias.theorems.rates_common import negated, rate_over_runs
from implicitbias.theorems.smoothed_margin import max_relative_decrease
from implicitbias.training.methods import SGD

__all__ = ["NacsonNormalizedGD", "NacsonSGD", "SeparableLinear", "SoudryMulticlass", "SoudryTheorem3", "angle_gaps",
           "gap_fit", "gd_smoothness", "margin_gap", "nonsupport_weight", "residual_rate", "sgd_smoothness",
           "soudry_w_tilde", "svm_of"]

ANGLE_RATE = ("angle gap ||w/||w|| - w_hat/||w_hat|| || = Theta(1/log t) = Theta(1/||w||): fitted q of gap ~ "
              "||w||^-q against 1 (wrong rates: 0, no decay; 2, 1/log^2 t)")
MARGIN_RATE = ("margin gap (gamma_hat - gamma(w))/gamma_hat = Theta(1/log t) = Theta(1/||w||): fitted q of "
               "gap ~ ||w||^-q against 1 (wrong rates: 0, no decay; 2, 1/log^2 t)")
ANGLE_LIMIT = ("angle gap x ||w(t)|| -> ||P w_tilde|| (the gap is ||P w_tilde|| / (||w_hat|| log t)): "
               "extrapolated limit y_inf of y_inf + c t^-nu, |y_inf / ||P w_tilde|| - 1|")
#: the source of the rate checks' tolerance (`fitting.rate_verdict`)
RATE_SOURCE = ("Soudry et al. 2018, Theorem 3 and eq. (8); tolerance: the 95% interval of the fitted exponent q must "
               "lie nearer the claimed q = 1 than the nearest wrong ones, 0 and 2 (rate_verdict)")


class _LogRates(SeparableLinear):
    """The predictions of Soudry et al.'s Theorem 3, read on the late checkpoints.

    Rates (every exponentially tailed case): ||w|| against log t has slope -> ||w_hat|| (|ratio - 1| <=
    norm_slope_rtol, default 0.25: the finite window still sees rho(t) move) and is linear (R^2 >= r2_min, 0.98);
    log L against log t has slope -1 (+- loss_slope_tol, 0.25); the angle and margin gaps are Theta(1/log t) =
    Theta(1/||w||): the exponent q of gap ~ ||w||^-q (`gap_fit`) is judged by `fitting.rate_verdict` against
    q = 1 and its nearest wrong rates 0 (no decay) and 2 (1/log^2 t): holds when its 95% confidence interval lies
    inside (1/2, 3/2), fails when it lies outside, inconclusive otherwise. A direction error falling like t^-p
    has q = p log t (||w|| ~ ||w_hat|| log t), which fails once log t > 3 / (2p). Where Theorem 3 determines
    w_tilde and P w_tilde = 0 (w_tilde along w_hat), the gaps are Theta(1/log^2 t): predicted q = 2, competitors
    1 and 3.

    Limits (`_SharpLimits`, GD): w(t) - w_hat log t -> w_tilde, the solution on the support vectors of
    n alpha_j exp(-<a_j, w_tilde>) = 1 (a_j = y_j x_j, alpha the SVM multipliers; Theorem 3 in our 1/n, t = lr k
    convention). Hence t L(w(t)) -> sum_j alpha_j = ||w_hat||^2 (read at the last checkpoint once the constraints
    off the support weigh less than limit_rtol / 2), and angle gap x ||w(t)|| -> ||P w_tilde||, P the projection
    orthogonal to w_hat: its limit is extrapolated along y_inf + c t^-nu (`residual_rate`, `extrapolate`) and
    compared with ||P w_tilde||: holds when |y_inf / ||P w_tilde|| - 1| + 2 se / ||P w_tilde|| <= limit_rtol,
    fails when |y_inf / ||P w_tilde|| - 1| - 2 se / ||P w_tilde|| > limit_rtol (default 0.1: the modes faster
    than t^-nu that the one-term extrapolation leaves out), inconclusive in between. w_tilde is determined when
    the support vectors span the data (rank a_S = rank of all a_j) and w(0) = 0.
    """

    norm_slope_rtol: float = pydantic.Field(0.25, gt=0.0)
    r2_min: float = pydantic.Field(0.98, ge=0.0, le=1.0)
    loss_slope_tol: float = pydantic.Field(0.25, gt=0.0)
    limit_rtol: float = pydantic.Field(0.1, gt=0.0)

    def _over(self, run):
        return functools.partial(over_runs, self.title, "prediction", labels=run_labels(run), where=self._late())

    def _measured(self, run) -> dict | None:
        """The per-run quantities every prediction reads (once per run context), None when time, ||w|| or the loss
        was not recorded."""
        return run.once(f"{self!r}.rates", lambda: self._measure(run))

    def _measure(self, run) -> dict | None:
        res = run.results
        time, norm, loss = curve(res, "time"), curve(res, "param_norm"), curve(res, "loss")
        if time is None or norm is None or loss is None:
            return None
        gap, mgap = angle_gaps(run), margin_gap(res, run)
        rows = {k: [] for k in ("ratio", "r2", "loss", "tL")}
        notes = {k: [] for k in rows}
        fits = {"angle": [], "margin": []}
        fit_notes = {"angle": [], "margin": []}
        predicted, competitors, limits = [], [], []
        for r in range(run.n_runs):
            window = late_window(time[r], self.late_fraction)
            svm = svm_of(run, r)
            slope, r2 = fitted_slope(np.log(time[r][window]), norm[r][window])
            w_hat = 1.0 / svm.margin if svm is not None else math.nan
            rows["ratio"].append(abs(slope / w_hat - 1.0))
            rows["r2"].append(r2)
            notes["ratio"].append(f"slope {slope:.4g}, ||w_hat|| = {w_hat:.4g}, R^2 {r2:.4g}")
            rows["loss"].append(abs(power_rate(time[r], loss[r], window)[0] + 1.0))
            notes["loss"].append(f"slope {power_rate(time[r], loss[r], window)[0]:.4g}")
            tL = time[r][-1] * loss[r][-1]
            reached, why = self._limits_reached(run, r, svm, time[r][-1])
            rows["tL"].append(abs(tL / w_hat**2 - 1.0) if reached else math.nan)
            notes["tL"].append(f"t L = {tL:.5g} at t = {time[r][-1]:.4g}, ||w_hat||^2 = {w_hat ** 2:.5g}; {why}")
            p_w_tilde = self._p_w_tilde(run, r, svm)
            flat = p_w_tilde is not None and p_w_tilde[0] <= 1e-8 * max(p_w_tilde[1], 1.0)
            predicted.append(2.0 if flat else 1.0)
            competitors.append((1.0, 3.0) if flat else (0.0, 2.0))
            extra = "; P w_tilde = 0 (w_tilde along w_hat): the gaps are Theta(1/log^2 t)" if flat else ""
            for key, g in (("angle", gap), ("margin", mgap)):
                fit, note = gap_fit(time[r], g[r] if g is not None else None, norm[r], window)
                fits[key].append(negated(fit))
                fit_notes[key].append(note + extra)
            limits.append(self._limit(run, r, svm, gap, norm, time, window, p_w_tilde))
        return {"rows": rows, "notes": notes, "fits": fits, "fit_notes": fit_notes, "predicted": predicted,
                "competitors": competitors, "limits": limits}

    @prediction("||w(t)|| grows like ||w_hat|| log t", threshold="norm_slope_rtol",
                source="Soudry et al. 2018, Theorem 3 (w(t) = w_hat log t + rho(t), rho bounded); norm_slope_rtol: "
                       "ours, the finite window still sees rho(t) move")
    def norm_growth(self, run) -> Verdict:
        """Prediction: ||w(t)|| grows like ||w_hat|| log t."""
        m = self._measured(run)
        if m is None:
            return self._over(run)("norm", None, "<=", 0.0)
        return self._over(run)("||w(t)|| grows like ||w_hat|| log t: |fitted slope of ||w|| against log t / "
                               "||w_hat|| - 1|", m["rows"]["ratio"], "<=", self.norm_slope_rtol,
                               run_notes=m["notes"]["ratio"])

    @prediction("||w(t)|| is linear in log t", threshold="r2_min",
                source="Soudry et al. 2018, Theorem 3 (rho(t) bounded); r2_min: ours")
    def norm_linear(self, run) -> list[Verdict]:
        """Prediction: ||w(t)|| is linear in log t."""
        m = self._measured(run)
        if m is None:
            return []
        return [self._over(run)("||w(t)|| is linear in log t: R^2 of the fit", m["rows"]["r2"], ">=", self.r2_min,
                                run_notes=m["notes"]["ratio"])]

    @prediction("the risk falls like 1/t: L(w(t)) = Theta(1/t)", threshold="loss_slope_tol",
                source="Soudry et al. 2018, Theorem 3; loss_slope_tol: ours")
    def loss_rate(self, run) -> Verdict:
        """Prediction: the risk falls like 1/t: L(w(t)) = Theta(1/t)."""
        m = self._measured(run)
        if m is None:
            return self._over(run)("loss", None, "<=", 0.0)
        return self._over(run)("L(w(t)) = Theta(1/t): |slope of log L against log t - (-1)|", m["rows"]["loss"],
                               "<=", self.loss_slope_tol, run_notes=m["notes"]["loss"])

    @prediction("the angle gap to the SVM direction falls like 1/log t", source=RATE_SOURCE)
    def angle_rate(self, run) -> Verdict:
        """Prediction: the angle gap to the SVM direction falls like 1/log t."""
        return self._rate(run, "angle", ANGLE_RATE)

    @prediction("the margin gap to the SVM margin falls like 1/log t", source=RATE_SOURCE)
    def margin_rate(self, run) -> Verdict:
        """Prediction: the margin gap to the SVM margin falls like 1/log t."""
        return self._rate(run, "margin", MARGIN_RATE)

    def _rate(self, run, key: str, statement: str) -> Verdict:
        m = self._measured(run)
        if m is None:
            return Verdict(self.title, "prediction", statement, None, "~", 1.0, "not_evaluated",
                           "time, ||w|| or loss not recorded")
        return rate_over_runs(self.title, statement, m["fits"][key], m["predicted"], m["competitors"], run_labels(run),
                              [f"{self._late()}; {n}" for n in m["fit_notes"][key]])

    def _limits_reached(self, run, r, svm, t) -> tuple[bool, str]:
        """t L is read at the last checkpoint only once the constraints off the support weigh less than
        limit_rtol / 2 there (`nonsupport_weight`); otherwise it is not evaluated (the run is too short for it,
        which is no failure of the theorem)."""
        if svm is None:
            return False, "no SVM"
        theta, weight = nonsupport_weight(run, r, svm, t)
        ok = weight <= self.limit_rtol / 2
        what = "every constraint is a support vector" if math.isinf(theta) else (
            f"closest non-support margin {theta:.4g} x gamma_hat weighs t^(1-theta) = {weight:.3g}")
        return ok, what + ("" if ok else f" > limit_rtol / 2: the limits are not reached at t = {t:.3g}")

    def _p_w_tilde(self, run, r, svm) -> tuple[float, float] | None:
        """(||P w_tilde||, ||w_tilde||), or None where Theorem 3 does not determine w_tilde here."""
        if svm is None or run.runs[r].init_scale != 0:
            return None
        w_tilde = soudry_w_tilde(run, r, svm)
        if w_tilde is None:
            return None
        u = svm.direction.ravel()
        return float(np.linalg.norm(w_tilde - u * (u @ w_tilde))), float(np.linalg.norm(w_tilde))

    def _limit(self, run, r, svm, gap, norm, time, window, p_w_tilde) -> tuple[float, float, str]:
        """(y_inf / ||P w_tilde|| - 1, se / ||P w_tilde||, note) for run r; nan with the reason where undefined."""
        if svm is None or gap is None:
            return math.nan, math.nan, "no SVM or no angle gap"
        if run.runs[r].init_scale != 0:
            return math.nan, math.nan, ("w(0) != 0: the part of w(0) outside the span of the data stays, and is not "
                                        "known here")
        if p_w_tilde is None:
            return math.nan, math.nan, "w_tilde not determined: the support vectors do not span the data"
        target = p_w_tilde[0]
        if target <= 0:
            return math.nan, math.nan, "P w_tilde = 0: the limit of angle gap x ||w|| is 0, read by the rate checks"
        nu, why = residual_rate(run, r, svm)
        keep = window & (time[r] > 0)
        ext = extrapolate(time[r][keep] ** -nu, gap[r][keep] * norm[r][keep])
        return (ext.y_inf / target - 1.0, ext.se / target,
                f"{ext.describe()}; {why}; ||P w_tilde|| = {target:.5g}")

    def _limit_verdict(self, statement, limits, labels) -> Verdict:
        """holds when |y_inf / target - 1| + 2 se <= limit_rtol on every run, fails when |.| - 2 se > limit_rtol on
        some run, inconclusive (not_evaluated) otherwise; the worst run is shown."""
        tol = self.limit_rtol
        full = f"{statement} (+- 2 se) <= limit_rtol"
        done = [(r, dev, se, note) for r, (dev, se, note) in enumerate(limits) if math.isfinite(dev) and math.isfinite(se)]
        if len(done) < len(limits):
            missing = [f"{labels[r]}: {note}" for r, (dev, se, note) in enumerate(limits)
                       if not (math.isfinite(dev) and math.isfinite(se))]
            return Verdict(self.title, "prediction", full, None, "<=", tol, "not_evaluated",
                           "undefined: " + "; ".join(missing))
        if any(abs(d) - 2 * s > tol for _, d, s, _ in done):
            r, dev, se, note = max(done, key=lambda d: abs(d[1]) - 2 * d[2])
            outcome = "fails"
        elif all(abs(d) + 2 * s <= tol for _, d, s, _ in done):
            r, dev, se, note = max(done, key=lambda d: abs(d[1]) + 2 * d[2])
            outcome = "holds"
        else:
            r, dev, se, note = max(done, key=lambda d: abs(d[1]) + 2 * d[2])
            outcome = "not_evaluated"
            note = (f"inconclusive: |y_inf / ||P w_tilde|| - 1| +- 2 se = {abs(dev):.3g} +- {2 * se:.2g} straddles "
                    f"limit_rtol = {tol:g}; " + note)
        who = f"{labels[r]}; " if len(limits) > 1 else ""
        return Verdict(self.title, "prediction", full, abs(dev), "<=", tol, outcome,
                       f"{who}over the last {self.late_fraction:g} of the checkpoints; relative se {se:.2g}; {note}")


class _SharpLimits(_LogRates):
    """The limits of Theorem 3 (GD; `_LogRates`'s docstring): t L(w(t)) -> ||w_hat||^2 and angle gap x ||w(t)|| ->
    ||P w_tilde||."""

    @prediction("t L(w(t)) -> ||w_hat||^2 = sum_j alpha_j (GD)", threshold="limit_rtol",
                source="Soudry et al. 2018, Theorem 3 (w(t) - w_hat log t -> w_tilde), in our 1/n, t = lr k "
                       "convention; limit_rtol: ours, read once the constraints off the support weigh < limit_rtol / 2")
    def loss_limit(self, run) -> list[Verdict]:
        """Prediction: t L(w(t)) -> ||w_hat||^2 = sum_j alpha_j (GD)."""
        m = self._measured(run)
        if m is None:
            return []
        rows, notes = m["rows"]["tL"], m["notes"]["tL"]
        why = "" if np.isfinite(rows).any() else notes[0]  # the reason, when no run has a value
        return [self._over(run)("t L(w(t)) -> ||w_hat||^2 = sum_j alpha_j: |t L / ||w_hat||^2 - 1|", rows, "<=",
                                self.limit_rtol, where="at the last checkpoint", run_notes=notes, note=why)]

    @prediction("angle gap x ||w(t)|| -> ||P w_tilde|| (GD)", threshold="limit_rtol",
                source="Soudry et al. 2018, Theorem 3 (w_tilde); the limit extrapolated along y_inf + c t^-nu "
                       "(residual_rate); limit_rtol: ours, the modes faster than t^-nu that the extrapolation "
                       "leaves out")
    def direction_limit(self, run) -> list[Verdict]:
        """Prediction: angle gap x ||w(t)|| -> ||P w_tilde|| (GD)."""
        m = self._measured(run)
        if m is None:
            return []
        return [self._limit_verdict(ANGLE_LIMIT, m["limits"], run_labels(run))]


class SoudryTheorem3(_SharpLimits):
    """Soudry et al. 2018, Theorem 3: gradient descent with eta < 2/beta on separable data (see the module)."""

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Soudry et al. 2018, Theorem 3"

    descent_rtol: float = pydantic.Field(1e-10, ge=0.0)  #: float64 rounding of the mean loss (Lemma 1's descent)

    def _step_bound(self, run, r):
        loss0 = curve(run.results, "loss")
        beta = gd_smoothness(run.data[r].X, run.spec.loss.name, loss0[r][0] if loss0 is not None else math.nan)
        what = "sigma_max(X)^2 / (4n)" if run.spec.loss.name == "logistic" else "L(w_0) max ||x_i||^2"
        return 2.0 / beta, f"beta = {what} = {beta:.4g}"

    @prediction("GD decreases the loss at every step (eta < 2/beta)", threshold="descent_rtol", source="Soudry et al. "
                "2018, Lemma 1 (descent for an eta < 2/beta step); descent_rtol: ours, float64 rounding of the loss")
    def loss_decreases(self, run) -> Verdict:
        """The largest relative increase of the recorded loss over an earlier checkpoint is <= descent_rtol."""
        L = curve(run.results, "loss")
        rises = None if L is None else [max_relative_decrease(-L[r]) for r in range(run.n_runs)]  # relative rises
        return over_runs(self.title, "prediction", "L(w(t)) decreases at every step: max relative increase over an "
                         "earlier checkpoint", rises, "<=", self.descent_rtol, labels=run_labels(run),
                         where="", note="" if L is not None else "no loss recorded")


class NacsonSGD(_LogRates):
    """Nacson, Srebro, Soudry 2019 (AISTATS): SGD with a fixed step eta < 2/beta_B (beta_B bounds the smoothness of
    every mini-batch risk, `sgd_smoothness`) converges in direction to the SVM with the rates of Theorem 3. The
    logistic loss only (the exponential loss is not globally smooth, and SGD may leave a sublevel set)."""

    method_kind: ClassVar[str] = "sgd"

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Nacson, Srebro, Soudry 2019 (SGD)"

    def _losses(self):
        return ("logistic",)

    def _step_statement(self) -> str:
        return "step size lr < 2/beta_B (beta_B: smoothness of every mini-batch risk)"

    def _step_bound(self, run, r):
        method = run.runs[r].method
        if not isinstance(method, SGD):
            return math.nan, "not SGD: no batch size"
        B = method.batch_size
        beta = sgd_smoothness(run.data[r].X, B)
        return 2.0 / beta, f"beta_B = min(max ||x_i||^2, ||X||^2 / B) / 4 = {beta:.4g}, B = {B}"


class SoudryMulticlass(_SharpLimits):
    """Soudry et al. 2018, Sec. 4.3 (multiclass): GD on the cross-entropy of a linear model W x (W: k x d) with
    separable data converges in direction to the multiclass SVM, argmin ||W||_F s.t. <w_(y_i) - w_c, x_i> >= 1
    (`reference.multiclass_svm`), with the rates of Theorem 3 (||W|| ~ ||W_hat||_F log t, L ~ 1/t, angle and
    margin gaps ~ 1/log t; the margin is min_i (s_(y_i) - max_(c != y_i) s_c) / ||W||_F).

    Step size: the softmax Jacobian diag(p) - p p^T has norm <= 1/2, so the risk is beta-smooth with
    beta = sigma_max(X)^2 / (2n) (in W, Frobenius geometry): lr < 2/beta.
    """

    model_kind: ClassVar[str] = "multiclass_linear"

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Soudry et al. 2018, Sec. 4.3 (multiclass)"

    def _losses(self):
        return ("cross_entropy",)

    def _step_bound(self, run, r):
        X = np.asarray(run.data[r].X, dtype=np.float64)
        beta = float(np.linalg.norm(X, 2)) ** 2 / (2 * X.shape[0])
        return 2.0 / beta, f"beta = sigma_max(X)^2 / (2n) = {beta:.4g}"


class NacsonNormalizedGD(SeparableLinear):
    """Nacson, Lee, Gunasekar, Savarese, Srebro, Soudry 2019 (AISTATS), Sec. 4: normalised GD, w <- w - eta grad L /
    L, converges in direction to the SVM polynomially fast: O(log t / sqrt t) for the exponential loss, i.e. a local
    exponent -1/2 + 1/log t of the angle gap against t, where fixed-step GD has exponent 0 (a 1/log t rate).

    Step size: for both losses l'' <= l, so the Hessian of L is at most L(w) max ||x_i||^2 and eta < 2 / max ||x_i||^2
    makes every normalised step a descent step.
    poly_max: the fitted slope of log(angle gap) against log t over the late checkpoints is <= -poly_max (default
        1/4: half way between the proven -1/2 and the polylog rates of fixed-step GD).
    speed_rtol: ||w|| grows linearly, d||w||/dt -> gamma_hat (the normalised gradient tends to a convex combination
        of the support vectors' y_i x_i, whose component along w_hat is gamma_hat): |fitted slope / gamma_hat - 1|
        <= speed_rtol (default 0.25).
    """

    method_kind: ClassVar[str] = "normalized_gd"
    poly_max: float = pydantic.Field(0.25, gt=0.0)
    speed_rtol: float = pydantic.Field(0.25, gt=0.0)

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Nacson et al. 2019 (normalised GD)"

    def _step_statement(self) -> str:
        return "step size lr < 2 / max_i ||x_i||^2"

    def _step_bound(self, run, r):
        R2 = float(np.max(np.sum(run.data[r].X ** 2, axis=1)))
        return 2.0 / R2, f"max ||x_i||^2 = {R2:.4g}"

    def _measured(self, run) -> dict | None:
        """Per run: the slope of log(angle gap) against log t and |d||w||/dt / gamma_hat - 1| (once per run
        context); None when time, ||w|| or the angle gap was not recorded."""
        return run.once(f"{self!r}.rates", lambda: self._measure(run))

    def _measure(self, run) -> dict | None:
        res = run.results
        time, norm, gap = curve(res, "time"), curve(res, "param_norm"), angle_gaps(run)
        if time is None or norm is None or gap is None:
            return None
        slopes, speed, notes = [], [], []
        for r in range(run.n_runs):
            window = late_window(time[r], self.late_fraction)
            slopes.append(power_rate(time[r], gap[r], window)[0])
            svm = svm_of(run, r)
            s = fitted_slope(time[r][window], norm[r][window])[0]
            speed.append(abs(s / svm.margin - 1.0) if svm is not None else math.nan)
            notes.append(f"d||w||/dt = {s:.4g}, gamma_hat = {svm.margin if svm else math.nan:.4g}")
        return {"slopes": slopes, "speed": speed, "notes": notes}

    def _over(self, run):
        return functools.partial(over_runs, self.title, "prediction", labels=run_labels(run), where=self._late())

    @prediction("the angle gap to the SVM direction decays polynomially in t", threshold="poly_max",
                source="Nacson et al. 2019 (AISTATS), Sec. 4: O(log t / sqrt t); poly_max: half way between the "
                       "proven exponent -1/2 and the polylog rates of fixed-step GD")
    def angle_rate(self, run) -> Verdict:
        """Prediction: the angle gap to the SVM direction decays polynomially in t."""
        m = self._measured(run)
        if m is None:
            return self._over(run)("angle", None, "<=", 0.0)
        return self._over(run)("angle gap decays polynomially in t: fitted slope of log(angle gap) against log t",
                               m["slopes"], "<=", -self.poly_max)

    @prediction("||w|| grows linearly at rate gamma_hat", threshold="speed_rtol",
                source="Nacson et al. 2019 (AISTATS), Sec. 4 (the normalised gradient tends to a combination of the "
                       "support vectors, of component gamma_hat along w_hat); speed_rtol: ours")
    def norm_speed(self, run) -> Verdict:
        """Prediction: ||w|| grows linearly at rate gamma_hat."""
        m = self._measured(run)
        if m is None:
            return self._over(run)("speed", None, "<=", 0.0)
        return self._over(run)("||w|| grows linearly at rate gamma_hat: |fitted d||w||/dt / gamma_hat - 1|",
                               m["speed"], "<=", self.speed_rtol, run_notes=m["notes"])
