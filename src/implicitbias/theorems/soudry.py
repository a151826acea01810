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

import dataclasses
import functools
import math
from typing import ClassVar

import numpy as np
import pydantic

from implicitbias.theorems.base import Theorem, Verdict
from implicitbias.theorems.fitting import (
    LineFit,
    curve,
    fitted_slope,
    flag,
    late_window,
    linear_fit,
    over_runs,
    rate_verdict,
    run_labels,
)
from implicitbias.theorems.frei import loss_verdict

#: sup_q l''(q) of the logistic loss (the smoothness constant beta_l of Soudry et al., Assumption 2)
LOGISTIC_BETA = 0.25


# -- the data: separability, the SVM, smoothness ------------------------------------------------------------
def classes_of(run, r: int) -> int:
    """The number of classes of run r's multiclass data (the model's `classes`, else the largest label + 1)."""
    k = getattr(run.runs[r].model, "classes", None)
    return int(k) if k else int(np.max(run.data[r].y)) + 1


def svm_of(run, r: int, cache: dict):
    """The max-margin reference of run r's training data, cached by the run's data key: the hard-margin SVM
    (`reference.max_margin_svm`) for labels +-1, the multiclass SVM (`reference.multiclass_svm`, S4) for class
    indices. None when the data are not separable (the reason is kept in `cache[("why", key)]`)."""
    from implicitbias.reference import NotSeparableError, ReferenceSolverError, max_margin_svm, multiclass_svm

    key = run.runs[r].data_key()
    if key not in cache:
        data = run.data[r]
        try:
            if data.task == "multiclass":
                cache[key] = multiclass_svm(data.X, data.y.astype(int), classes_of(run, r))
            else:
                cache[key] = max_margin_svm(data.X, data.y)
        except (NotSeparableError, ReferenceSolverError) as exc:
            cache[key], cache[("why", key)] = None, exc
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
            support = getattr(svm, "support", None)
            notes.append(f"SVM margin {svm.margin:.4g}" + (f", support vectors {support.tolist()}"
                                                           if support is not None else ""))
            continue
        X, y = run.data[r].X, run.data[r].y
        points = getattr(cache.get(("why", run.runs[r].data_key())), "points", None)
        if points is None and run.data[r].task != "multiclass":
            points = unseparable_points(y[:, None] * X, np.arange(X.shape[0]), X, y)
        margins.append(0.0)
        notes.append(f"not separable: points {[] if points is None else np.asarray(points).tolist()} cannot all be "
                     "classified correctly by one linear predictor through the origin")
    return over_runs(theorem, "assumption", "data linearly separable through the origin: SVM margin gamma_hat > 0",
                     margins, ">", 0.0, where="on the training data", labels=run_labels(run), run_notes=notes)


def angle_gaps(run, cache: dict) -> np.ndarray | None:
    """|| w/||w|| - w_hat/||w_hat|| || over (run, checkpoint): the recorded `unit_distance_to_reference`, else
    computed from the parameters of every checkpoint (`trajectory.theta.w` or `.W`, a multiclass W compared in
    Frobenius norm with the multiclass SVM); None when neither was recorded."""
    res = run.results
    recorded = curve(res, "unit_distance_to_reference")
    if recorded is not None:
        return recorded
    name = next((n for n in ("trajectory.theta.w", "trajectory.theta.W") if n in res.data_vars), None)
    if name is None:
        return None
    out = np.full((run.n_runs, res.sizes["checkpoint"]), np.nan)
    for r in range(run.n_runs):
        svm = svm_of(run, r, cache)
        if svm is None:
            continue
        P = np.asarray(res[name].values[r], dtype=np.float64).reshape(res.sizes["checkpoint"], -1)
        norms = np.linalg.norm(P, axis=1, keepdims=True)
        out[r] = np.linalg.norm(P / np.where(norms > 0, norms, 1.0) - svm.direction.ravel()[None, :], axis=1)
    return out


def constraint_system(run, r: int, svm) -> tuple[np.ndarray, np.ndarray]:
    """(A, lam): the margin constraints <a_j, w> >= 1 of run r's data as rows of A, and their SVM multipliers.
    Binary: a_i = y_i x_i, lam = alpha. Multiclass (W flattened row-major): a_ic = (e_(y_i) - e_c) x_i^T, c != y_i."""
    data = run.data[r]
    if data.task != "multiclass":
        return data.y[:, None] * data.X, np.asarray(svm.alphas)
    k, (n, d), y = svm.W.shape[0], data.X.shape, data.y.astype(int)
    rows, lam = [], []
    for i in range(n):
        for c in range(k):
            if c != y[i]:
                a = np.zeros((k, d))
                a[y[i]], a[c] = data.X[i], -data.X[i]
                rows.append(a.ravel())
                lam.append(svm.multipliers[i, c])
    return np.asarray(rows), np.asarray(lam)


def soudry_w_tilde(run, r: int, svm) -> np.ndarray | None:
    """Soudry et al.'s w_tilde (Theorem 3): w(t) - w_hat log t -> w_tilde, where n alpha_j exp(-<a_j, w_tilde>) = 1
    on the support vectors j (our risk (1/n) sum_j l, time t = lr k; the exponential tail of the loss balances
    w_hat / t = -grad L). Returned (the solution in the span of the support vectors) when they span all the
    constraint rows, so that gradient descent from 0 stays in their span; None otherwise."""
    A, lam = constraint_system(run, r, svm)
    S = lam > 1e-8 * lam.max()
    if np.linalg.matrix_rank(A[S]) < np.linalg.matrix_rank(A):
        return None
    w_tilde, *_ = np.linalg.lstsq(A[S], -np.log(run.data[r].n * lam[S]), rcond=None)
    return w_tilde


def nonsupport_weight(run, r: int, svm, t: float) -> tuple[float, float]:
    """(theta_min, t^(1 - theta_min)): the smallest margin <a_j, w_hat> of a constraint off the support (in units of
    the SVM margin, > 1 for almost every data set) and the weight at time t of its loss term relative to the support
    vectors' (t^-theta against t^-1). The limits of Theorem 3 are reached once that weight is small; (inf, 0) when
    every constraint is a support vector."""
    A, lam = constraint_system(run, r, svm)
    w_hat = svm.W.ravel() if hasattr(svm, "W") else svm.w
    off = ~(lam > 1e-8 * lam.max())
    if not off.any():
        return math.inf, 0.0
    theta = float(np.min(A[off] @ w_hat))
    return theta, float(t ** (1.0 - theta)) if t > 0 else math.inf


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


def gap_fit(time, gap, norm, window) -> tuple[LineFit, str]:
    """The line log gap ~ -q log ||w|| + b over the fit window (t > 1, gap > 0): its slope is -q.

    Theorem 3 gives gap = Theta(1/log t) = Theta(1/||w||) (||w|| ~ ||w_hat|| log t): q = 1. Reading the rate against
    ||w|| rather than log t removes the offset of log t (the clock t = lr k, the intercept of ||w||), which biases
    exponents fitted against log log t at finite t. Returns the fit (slope = -q) and a note with the span of the data."""
    if gap is None:
        return linear_fit([], []), "not recorded"
    t, g, w = (np.asarray(a, dtype=np.float64) for a in (time, gap, norm))
    keep = window & (t > 1.0) & (g > 0) & (w > 0)
    fit = linear_fit(np.log(w[keep]), np.log(g[keep]))
    idx = np.flatnonzero(keep)
    span = f"gap {g[idx[0]]:.4g} -> {g[idx[-1]]:.4g} while ||w|| {w[idx[0]]:.4g} -> {w[idx[-1]]:.4g}" if idx.size else ""
    return fit, span


def negated(fit: LineFit) -> LineFit:
    """The same line with the sign of its slope flipped (an exponent q read off a slope -q)."""
    return dataclasses.replace(fit, slope=-fit.slope)


def rate_over_runs(theorem: str, statement: str, fits, predicted, competitors, labels, notes) -> Verdict:
    """`fitting.rate_verdict` on every run (an exponent per run, its predicted value and wrong competitors per
    run), reported on the worst run: the first that fails, else the first inconclusive (not_evaluated), else the
    run whose confidence interval comes nearest an end of its accepted interval."""
    verdicts = [rate_verdict(theorem, statement, f, p, c, note=f"{labels[r]}; {notes[r]}" if len(fits) > 1 else notes[r])
                for r, (f, p, c) in enumerate(zip(fits, predicted, competitors))]
    if not verdicts:
        return Verdict(theorem, "prediction", statement, None, "~", None, "not_evaluated", "no runs")
    for outcome in ("fails", "not_evaluated"):
        found = [v for v in verdicts if v.outcome == outcome]
        if found:
            return found[0]

    def slack(r):
        lo, hi = fits[r].interval()
        return min(lo - (predicted[r] + max([c for c in competitors[r] if c < predicted[r]], default=-math.inf)) / 2,
                   (predicted[r] + min([c for c in competitors[r] if c > predicted[r]], default=math.inf)) / 2 - hi)

    return verdicts[min(range(len(verdicts)), key=slack)]


@dataclasses.dataclass(frozen=True)
class Extrapolation:
    """y = y_inf + c x fitted by least squares over a window where x -> 0 as t -> infinity (x = t^-nu, ||w||^-q):
    y_inf with the standard error of the intercept (`se_fit`, residuals over n - 2 degrees of freedom) and the
    difference `drift` of the intercepts fitted on the first and the second half of the window.

    The drift measures the part of the approach the one-term model leaves out. If y = y_inf + c x + e x^2 over the
    window [x_last, x_first] (x_mid where the halves meet), a line through it extrapolates to y_inf - e x_first
    x_last, and the halves' intercepts differ by e x_mid (x_first - x_last): the bias of the extrapolation is
    `bias` = drift x_first x_last / (x_mid (x_first - x_last)). It exceeds the drift when the window lies far from
    x = 0 (a long reach, as along ||w||^(-1/L)) and is below it when the window nearly reaches 0 (t^-nu at large t).
    The uncertainty is se = sqrt(se_fit^2 + bias^2)."""

    y_inf: float
    se_fit: float
    drift: float
    reach: float
    last: float
    n: int

    @property
    def bias(self) -> float:
        return self.drift * self.reach

    @property
    def se(self) -> float:
        return math.hypot(self.se_fit, self.bias)

    def describe(self) -> str:
        return (f"extrapolated limit {self.y_inf:.5g} +- {self.se:.2g} (fit SE {self.se_fit:.2g}; first-half vs "
                f"second-half drift {self.drift:.2g} x reach {self.reach:.3g} = curvature bias {self.bias:.2g}; "
                f"n = {self.n}); last value {self.last:.5g}")


def _intercept(x, y) -> tuple[float, float]:
    """(intercept, its standard error) of the least-squares line y ~ b + c x; nan where x does not vary."""
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if not sxx > 1e-30 * max(float(x @ x), 1e-300):
        return math.nan, math.nan
    c = float(xc @ (y - y.mean())) / sxx
    b = float(y.mean() - c * x.mean())
    dof = y.size - 2
    if dof < 1:
        return b, math.nan
    s2 = float(np.sum((y - b - c * x) ** 2)) / dof
    return b, math.sqrt(s2 * (1.0 / y.size + x.mean() ** 2 / sxx))


def extrapolate(x, y) -> Extrapolation:
    """`Extrapolation` of y = y_inf + c x over the finite pairs (x, y) in time order; nan with fewer than 5 pairs
    (each half needs 3 points for its own intercept and the whole fit a residual)."""
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    last = float(y[-1]) if y.size else math.nan
    nan = Extrapolation(math.nan, math.nan, math.nan, math.nan, last, int(y.size))
    if y.size < 5:
        return nan
    y_inf, se = _intercept(x, y)
    if not math.isfinite(y_inf):
        return nan
    h = y.size // 2
    first, second = _intercept(x[: h + 1], y[: h + 1])[0], _intercept(x[h:], y[h:])[0]
    reach = abs(x[0] * x[-1]) / (abs(x[h]) * abs(x[0] - x[-1])) if x[h] != 0 else math.inf
    return Extrapolation(y_inf, se, abs(first - second), reach, last, int(y.size))


def residual_rate(run, r: int, svm) -> tuple[float, str]:
    """nu = min(lambda_min(M), theta_min - 1, 1): the slowest rate t^-nu at which rho(t) -> w_tilde (module
    docstring). M = sum_j alpha_j a_j a_j^T over the support constraints, its smallest eigenvalue on their span."""
    A, lam = constraint_system(run, r, svm)
    S = lam > 1e-8 * lam.max()
    M = (A[S].T * lam[S]) @ A[S]
    ev = np.linalg.eigvalsh(M)
    ev = ev[ev > 1e-9 * ev.max()]
    theta, _ = nonsupport_weight(run, r, svm, 1.0)
    nu = min(float(ev.min()), theta - 1.0, 1.0)
    return nu, f"nu = min(lambda_min(M) = {ev.min():.3g}, theta_min - 1 = {theta - 1:.3g}, 1) = {nu:.3g}"


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
    model_kind: ClassVar[str] = "linear"

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
            flag(T, "assumption", f"linear predictor ({self.model_kind})", model == self.model_kind, f"model = {model}"),
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

    Limits (`sharp`, GD): w(t) - w_hat log t -> w_tilde, the solution on the support vectors of
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

    sharp: ClassVar[bool] = True

    def predictions(self, run) -> list[Verdict]:
        res, cache, labels = run.results, {}, run_labels(run)
        late = f"over the last {self.late_fraction:g} of the checkpoints"
        over = functools.partial(over_runs, self.title, "prediction", labels=labels, where=late)
        time, norm, loss = curve(res, "time"), curve(res, "param_norm"), curve(res, "loss")
        gap, mgap = angle_gaps(run, cache), margin_gap(res, run, cache)
        angle_statement = ("angle gap ||w/||w|| - w_hat/||w_hat|| || = Theta(1/log t) = Theta(1/||w||): fitted q of gap ~ "
                           "||w||^-q against 1 (wrong rates: 0, no decay; 2, 1/log^2 t)")
        margin_statement = ("margin gap (gamma_hat - gamma(w))/gamma_hat = Theta(1/log t) = Theta(1/||w||): fitted q of "
                            "gap ~ ||w||^-q against 1 (wrong rates: 0, no decay; 2, 1/log^2 t)")
        limit_statement = ("angle gap x ||w(t)|| -> ||P w_tilde|| (the gap is ||P w_tilde|| / (||w_hat|| log t)): "
                           "extrapolated limit y_inf of y_inf + c t^-nu, |y_inf / ||P w_tilde|| - 1|")
        if time is None or norm is None or loss is None:
            out = [over(s, None, "<=", 0.0) for s in ("norm", "loss")]
            out += [Verdict(self.title, "prediction", s, None, "~", 1.0, "not_evaluated", "time, ||w|| or loss not recorded")
                    for s in (angle_statement, margin_statement)]
            return out
        rows = {k: [] for k in ("ratio", "r2", "loss", "tL")}
        notes = {k: [] for k in rows}
        fits = {"angle": [], "margin": []}
        fit_notes = {"angle": [], "margin": []}
        predicted, competitors, limits = [], [], []
        for r in range(run.n_runs):
            window = late_window(time[r], self.late_fraction)
            svm = svm_of(run, r, cache)
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
        out = [
            over("||w(t)|| grows like ||w_hat|| log t: |fitted slope of ||w|| against log t / ||w_hat|| - 1|",
                 rows["ratio"], "<=", self.norm_slope_rtol, run_notes=notes["ratio"]),
            over("||w(t)|| is linear in log t: R^2 of the fit", rows["r2"], ">=", self.r2_min, run_notes=notes["ratio"]),
            over("L(w(t)) = Theta(1/t): |slope of log L against log t - (-1)|", rows["loss"], "<=",
                 self.loss_slope_tol, run_notes=notes["loss"]),
            rate_over_runs(self.title, angle_statement, fits["angle"], predicted, competitors, labels,
                           [f"{late}; {n}" for n in fit_notes["angle"]]),
            rate_over_runs(self.title, margin_statement, fits["margin"], predicted, competitors, labels,
                           [f"{late}; {n}" for n in fit_notes["margin"]]),
        ]
        if self.sharp:
            why = "" if np.isfinite(rows["tL"]).any() else notes["tL"][0]  # the reason, when no run has a value
            out += [
                over("t L(w(t)) -> ||w_hat||^2 = sum_j alpha_j: |t L / ||w_hat||^2 - 1|", rows["tL"], "<=",
                     self.limit_rtol, where="at the last checkpoint", run_notes=notes["tL"], note=why),
                self._limit_verdict(limit_statement, limits, labels),
            ]
        return out

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

    sharp: ClassVar[bool] = False

    method_kind: ClassVar[str] = "sgd"

    @property
    def title(self) -> str:
        return "Nacson, Srebro, Soudry 2019 (SGD)"

    def _losses(self):
        return ("logistic",)

    def _step_statement(self) -> str:
        return "step size lr < 2/beta_B (beta_B: smoothness of every mini-batch risk)"

    def _step_bound(self, run, r):
        B = getattr(run.runs[r].method, "batch_size", None)
        if B is None:
            return math.nan, "not SGD: no batch size"
        beta = sgd_smoothness(run.data[r].X, B)
        return 2.0 / beta, f"beta_B = min(max ||x_i||^2, ||X||^2 / B) / 4 = {beta:.4g}, B = {B}"


class SoudryMulticlass(_LogRates):
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
        return "Soudry et al. 2018, Sec. 4.3 (multiclass)"

    def _losses(self):
        return ("cross_entropy",)

    def _step_bound(self, run, r):
        X = np.asarray(run.data[r].X, dtype=np.float64)
        beta = float(np.linalg.norm(X, 2)) ** 2 / (2 * X.shape[0])
        return 2.0 / beta, f"beta = sigma_max(X)^2 / (2n) = {beta:.4g}"


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
        time, norm, gap = curve(res, "time"), curve(res, "param_norm"), angle_gaps(run, cache)
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
