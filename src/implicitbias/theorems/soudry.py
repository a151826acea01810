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

Rates are read off the late, log-spaced checkpoints (the last `late_fraction` of them) at time t = lr k: an
exponent p of g(t) ~ (log t)^(-p) is minus the fitted slope of log g against log log t. Using the step count k
instead of t shifts log t by log lr, which moves a fitted exponent at finite t by a relative O(|log lr| / log t);
that, and the O(1/log t) corrections of Theorem 3 itself, is why the exponents are checked with a tolerance of 1/2:
half way to the neighbouring integer rates (p = 0: no convergence; p = 2: faster than the theorem allows).
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import numpy as np
import pydantic

from implicitbias.theorems.base import Theorem, Verdict
from implicitbias.theorems.fitting import curve, fitted_slope, flag, late_window, over_runs, run_labels
from implicitbias.theorems.frei import loss_verdict

#: sup_q l''(q) of the logistic loss (the smoothness constant beta_l of Soudry et al., Assumption 2)
LOGISTIC_BETA = 0.25


# -- the data: separability, the SVM, smoothness ------------------------------------------------------------
def svm_of(run, r: int, cache: dict):
    """The hard-margin SVM of run r's training data (`reference.max_margin_svm`), or None when the data are
    not separable; cached by the run's data key."""
    from implicitbias.reference import NotSeparableError, ReferenceSolverError, max_margin_svm

    key = run.runs[r].data_key()
    if key not in cache:
        try:
            cache[key] = max_margin_svm(run.data[r].X, run.data[r].y)
        except (NotSeparableError, ReferenceSolverError):
            cache[key] = None
    return cache[key]


def separability_verdict(theorem: str, run, cache: dict) -> Verdict:
    """"the data are linearly separable through the origin": the SVM margin gamma_hat > 0 on every run's data,
    or the points that cannot be separated (an irreducible set, `reference.unseparable_points`)."""
    from implicitbias.reference import unseparable_points

    margins, notes = [], []
    for r in range(run.n_runs):
        svm = svm_of(run, r, cache)
        if svm is not None:
            margins.append(svm.margin)
            notes.append(f"SVM margin {svm.margin:.4g}, support vectors {svm.support.tolist()}")
            continue
        X, y = run.data[r].X, run.data[r].y
        points = unseparable_points(y[:, None] * X, np.arange(X.shape[0]), X, y)
        margins.append(0.0)
        notes.append(f"not separable: points {[] if points is None else points.tolist()} cannot all be classified "
                     "correctly by one linear predictor through the origin")
    return over_runs(theorem, "assumption", "data linearly separable through the origin: SVM margin gamma_hat > 0",
                     margins, ">", 0.0, where="on the training data", labels=run_labels(run), run_notes=notes)


def gd_smoothness(X, loss_name: str, loss0: float) -> float:
    """beta of L(w) = (1/n) sum_i l(y_i <w, x_i>): its Hessian is (1/n) X^T diag(l''(q)) X.

    logistic: l'' <= 1/4 everywhere, so beta = sigma_max(X)^2 / (4 n) (Soudry et al.'s beta sigma_max^2, with our
    1/n). exponential: not globally smooth; on the sublevel set {L <= L(w_0)}, which GD with eta < 2/beta does not
    leave, l''(q_i) = e^{-q_i} and sum_i e^{-q_i} x_i x_i^T <= n L(w) max_i ||x_i||^2, so beta = L(w_0) max ||x_i||^2.
    """
    X = np.asarray(X, dtype=np.float64)
    if loss_name == "logistic":
        return LOGISTIC_BETA * float(np.linalg.norm(X, 2)) ** 2 / X.shape[0]
    return float(loss0) * float(np.max(np.sum(X * X, axis=1)))


def sgd_smoothness(X, batch_size: int) -> float:
    """beta of every mini-batch risk (1/B) sum_{i in batch} l(y_i <w, x_i>) of the logistic loss: its Hessian is
    at most (1/4) ||X_B||_2^2 / B, and ||X_B||_2^2 / B <= min(max_i ||x_i||^2, ||X||_2^2 / B) for every batch B."""
    X = np.asarray(X, dtype=np.float64)
    per_batch = min(float(np.max(np.sum(X * X, axis=1))), float(np.linalg.norm(X, 2)) ** 2 / batch_size)
    return LOGISTIC_BETA * per_batch


# -- rates -------------------------------------------------------------------------------------------------------
def log_rate(time, values, window) -> tuple[float, float]:
    """(p, R^2) of values ~ (log t)^(-p) over the checkpoints of `window` with t > 1: minus the slope of
    log values against log log t."""
    t, g = np.asarray(time, dtype=np.float64), np.asarray(values, dtype=np.float64)
    keep = window & (t > 1.0) & (g > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope, r2 = fitted_slope(np.log(np.log(t[keep])), np.log(g[keep]))
    return -slope, r2


def power_rate(time, values, window) -> tuple[float, float]:
    """(slope, R^2) of log values against log t over the checkpoints of `window` (t > 0, values > 0)."""
    t, g = np.asarray(time, dtype=np.float64), np.asarray(values, dtype=np.float64)
    keep = window & (t > 0) & (g > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return fitted_slope(np.log(t[keep]), np.log(g[keep]))


def margin_gap(results, run, cache) -> np.ndarray:
    """(gamma_hat - gamma(w(t))) / gamma_hat over (run, checkpoint), from the recorded normalised margin."""
    gamma = curve(results, "normalized_margin")
    out = np.full((run.n_runs, results.sizes["checkpoint"]), np.nan)
    if gamma is None:
        return out
    for r in range(run.n_runs):
        svm = svm_of(run, r, cache)
        if svm is not None:
            out[r] = (svm.margin - gamma[r]) / svm.margin
    return out


class _SeparableLinear(Theorem):
    """Shared assumptions of the S4 theorems: separable data, a linear model, an exponentially tailed loss, the
    method and its step size, and the asymptotic regime (every point classified correctly in the fit window)."""

    late_fraction: float = pydantic.Field(0.5, gt=0.0, le=1.0)

    method_kind: ClassVar[str] = "gd"

    def _step_bound(self, run, r: int) -> tuple[float, str]:
        raise NotImplementedError

    def assumptions(self, run) -> list[Verdict]:
        T, cache = self.title, {}
        model, kind = run.spec.model.kind, run.spec.method.kind
        bounds, notes = [], []
        for r in range(run.n_runs):
            bound, note = self._step_bound(run, r)
            bounds.append(bound)
            notes.append(note)
        lrs = [getattr(spec.method, "lr", math.nan) for spec in run.runs]
        return [
            separability_verdict(T, run, cache),
            flag(T, "assumption", "linear predictor f(x) = <w, x>", model == "linear", f"model = {model}"),
            loss_verdict(T, run, self._losses()),
            flag(T, "assumption", f"method is {self.method_kind}", kind == self.method_kind, f"method = {kind}"),
            over_runs(T, "assumption", self._step_statement(), lrs, "<", bounds, where="", labels=run_labels(run),
                      run_notes=notes),
            self._regime(run),
        ]

    def _losses(self) -> tuple[str, ...]:
        return ("logistic", "exponential")

    def _step_statement(self) -> str:
        return "step size lr < 2/beta"

    def _regime(self, run) -> Verdict:
        """Every point is classified correctly from the first checkpoint of the fit window on."""
        q, t = curve(run.results, "min_margin"), curve(run.results, "time")
        if q is None or t is None:
            return over_runs(self.title, "assumption", "asymptotic regime", None, ">", 0.0)
        worst = [float(np.min(q[r][late_window(t[r], self.late_fraction)], initial=np.inf)) for r in range(run.n_runs)]
        return over_runs(self.title, "assumption", "asymptotic regime reached: min_i y_i <w, x_i> > 0 over the fit "
                         f"window (the last {self.late_fraction:g} of the checkpoints)", worst, ">", 0.0, where="",
                         labels=run_labels(run))


class _LogRates(_SeparableLinear):
    """The four predictions of Soudry et al.'s Theorem 3, fitted on the late checkpoints.

    norm_slope_rtol: |slope of ||w|| against log t / ||w_hat|| - 1| <= norm_slope_rtol (w = w_hat log t + rho(t),
        rho bounded; the finite window sees rho still moving, default 0.25).
    r2_min: the fit of ||w|| against log t is linear: R^2 >= r2_min (default 0.98).
    loss_slope_tol: |slope of log L against log t + 1| <= loss_slope_tol (default 0.25).
    rate_tol: angle gap ~ (log t)^-p with |p - 1| <= rate_tol; margin gap ~ (log t)^-p with p >= 1 - rate_tol
        (default 1/2, see the module docstring).
    """

    norm_slope_rtol: float = pydantic.Field(0.25, gt=0.0)
    r2_min: float = pydantic.Field(0.98, ge=0.0, le=1.0)
    loss_slope_tol: float = pydantic.Field(0.25, gt=0.0)
    rate_tol: float = pydantic.Field(0.5, gt=0.0, lt=1.0)

    def predictions(self, run) -> list[Verdict]:
        res, cache = run.results, {}
        over = functools.partial(over_runs, self.title, "prediction", labels=run_labels(run),
                                 where=f"over the last {self.late_fraction:g} of the checkpoints")
        time, norm, loss = curve(res, "time"), curve(res, "param_norm"), curve(res, "loss")
        gap, mgap = curve(res, "unit_distance_to_reference"), margin_gap(res, run, cache)
        if time is None or norm is None or loss is None:
            return [over(s, None, "<=", 0.0) for s in ("norm", "loss", "angle", "margin")]
        ratio, r2s, loss_slopes, p_angle, p_margin, notes = [], [], [], [], [], []
        for r in range(run.n_runs):
            window = late_window(time[r], self.late_fraction)
            svm = svm_of(run, r, cache)
            slope, r2 = fitted_slope(np.log(time[r][window]), norm[r][window])
            ratio.append(slope * svm.margin if svm is not None else math.nan)
            r2s.append(r2)
            loss_slopes.append(power_rate(time[r], loss[r], window)[0])
            pa = log_rate(time[r], gap[r], window)[0] if gap is not None else math.nan
            p_angle.append(pa)
            p_margin.append(log_rate(time[r], mgap[r], window)[0])
            end = np.flatnonzero(window)[-1] if window.any() else -1
            mid = np.flatnonzero(window)[0] if window.any() else -1
            product = (lambda k: gap[r][k] * math.log(time[r][k]) if gap is not None and time[r][k] > 1 else math.nan)
            notes.append(f"slope {slope:.4g}, ||w_hat|| = {1 / svm.margin if svm else math.nan:.4g}, R^2 {r2:.4g}; "
                         f"angle gap x log t: {product(mid):.4g} at the window's start, {product(end):.4g} at its end")
        return [
            over("||w(t)|| grows like ||w_hat|| log t: |fitted slope of ||w|| against log t / ||w_hat|| - 1|",
                 [abs(v - 1.0) for v in ratio], "<=", self.norm_slope_rtol, run_notes=notes),
            over("||w(t)|| is linear in log t: R^2 of the fit", r2s, ">=", self.r2_min, run_notes=notes),
            over("L(w(t)) = Theta(1/t): |slope of log L against log t - (-1)|",
                 [abs(s + 1.0) for s in loss_slopes], "<=", self.loss_slope_tol,
                 run_notes=[f"slope {s:.4g}" for s in loss_slopes]),
            over("angle gap ||w/||w|| - w_hat/||w_hat|| || = Theta(1/log t): |fitted p - 1| of (log t)^-p",
                 [abs(p - 1.0) for p in p_angle], "<=", self.rate_tol,
                 run_notes=[f"p = {p:.4g}; {n.split('; ')[-1]}" for p, n in zip(p_angle, notes)]),
            over("margin gap (gamma_hat - gamma(w))/gamma_hat = O(1/log t): fitted p of (log t)^-p", p_margin, ">=",
                 1.0 - self.rate_tol),
        ]


class SoudryTheorem3(_LogRates):
    """Soudry et al. 2018, Theorem 3: gradient descent with eta < 2/beta on separable data (see the module)."""

    @property
    def title(self) -> str:
        return "Soudry et al. 2018, Theorem 3"

    def _step_bound(self, run, r):
        loss0 = curve(run.results, "loss")
        beta = gd_smoothness(run.data[r].X, run.spec.loss.name, loss0[r][0] if loss0 is not None else math.nan)
        what = "sigma_max(X)^2 / (4n)" if run.spec.loss.name == "logistic" else "L(w_0) max ||x_i||^2"
        return 2.0 / beta, f"beta = {what} = {beta:.4g}"


class NacsonSGD(_LogRates):
    """Nacson, Srebro, Soudry 2019 (AISTATS): SGD with a fixed step eta < 2/beta_B (beta_B bounds the smoothness of
    every mini-batch risk, `sgd_smoothness`) converges in direction to the SVM with the rates of Theorem 3. The
    logistic loss only (the exponential loss is not globally smooth, and SGD may leave a sublevel set)."""

    method_kind: ClassVar[str] = "sgd"

    @property
    def title(self) -> str:
        return "Nacson, Srebro, Soudry 2019 (SGD)"

    def _losses(self):
        return ("logistic",)

    def _step_statement(self) -> str:
        return "step size lr < 2/beta_B (beta_B: smoothness of every mini-batch risk)"

    def _step_bound(self, run, r):
        B = run.runs[r].method.batch_size
        beta = sgd_smoothness(run.data[r].X, B)
        return 2.0 / beta, f"beta_B = min(max ||x_i||^2, ||X||^2 / B) / 4 = {beta:.4g}, B = {B}"


class NacsonNormalizedGD(_SeparableLinear):
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
        return "Nacson et al. 2019 (normalised GD)"

    def _step_statement(self) -> str:
        return "step size lr < 2 / max_i ||x_i||^2"

    def _step_bound(self, run, r):
        R2 = float(np.max(np.sum(run.data[r].X ** 2, axis=1)))
        return 2.0 / R2, f"max ||x_i||^2 = {R2:.4g}"

    def predictions(self, run) -> list[Verdict]:
        res, cache = run.results, {}
        over = functools.partial(over_runs, self.title, "prediction", labels=run_labels(run),
                                 where=f"over the last {self.late_fraction:g} of the checkpoints")
        time, norm, gap = curve(res, "time"), curve(res, "param_norm"), curve(res, "unit_distance_to_reference")
        if time is None or norm is None or gap is None:
            return [over(s, None, "<=", 0.0) for s in ("angle", "speed")]
        slopes, speed, notes = [], [], []
        for r in range(run.n_runs):
            window = late_window(time[r], self.late_fraction)
            slopes.append(power_rate(time[r], gap[r], window)[0])
            svm = svm_of(run, r, cache)
            s = fitted_slope(time[r][window], norm[r][window])[0]
            speed.append(abs(s / svm.margin - 1.0) if svm is not None else math.nan)
            notes.append(f"d||w||/dt = {s:.4g}, gamma_hat = {svm.margin if svm else math.nan:.4g}")
        return [
            over("angle gap decays polynomially in t: fitted slope of log(angle gap) against log t", slopes, "<=",
                 -self.poly_max),
            over("||w|| grows linearly at rate gamma_hat: |fitted d||w||/dt / gamma_hat - 1|", speed, "<=",
                 self.speed_rtol, run_notes=notes),
        ]
