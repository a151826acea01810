"""Gunasekar, Lee, Soudry, Srebro 2018 (NeurIPS), "Implicit bias of gradient descent on linear convolutional
networks", Theorem 2 and its diagonal corollary (SCIENCE.md S6, classification), as a theorem object: on separable
data with an exponentially tailed loss, the diagonal network w = u^D - v^D converges in direction to a stationary
point of min ||w||_{2/D} s.t. y_i <w, x_i> >= 1: the l2 SVM for D = 1, the l1 max-margin predictor (an LP, exact)
for D = 2, and for D >= 3 a first-order stationary point, which is a KKT point of the parameter-space margin
problem of S10 (Lyu & Li 2020) and is checked through its residual. The approach is logarithmically slow:
finite-time predictions are rates (D = 1, 2) and fitted trends.
"""

from __future__ import annotations

import math

import numpy as np
import pydantic

from implicitbias.metrics.extrapolation import unit_distance
from implicitbias.reference import (
    NonSeparableDataError,
    NotSeparableError,
    ReferenceSolverError,
    check_separable,
    l1_max_margin,
)
from implicitbias.reference.memo import array_key, memoized
from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.diagonal_common import difference_net, max_margin_references, positive_alpha, stored_predictor
from implicitbias.theorems.fitting import LineFit, curve, final, flag, linear_fit, over_runs, rate_verdict, run_labels
from implicitbias.theorems.rates_common import MIN_FIT_POINTS, sign_verdict, worst_rate
from implicitbias.theorems.two_layer_common import loss_verdict

#: the source of the assumptions (the theorem's setting)
GUNASEKAR = "Gunasekar et al. 2018 (NeurIPS), Theorem 2 and its diagonal corollary"


def _lp_slack(X, y) -> tuple[float, str]:
    res = l1_max_margin(X, y)
    w, lam = np.asarray(res.w), np.asarray(res.alphas)
    Z = y[:, None] * X
    scale = float(np.max(np.abs(Z.T @ lam)))
    g = Z.T @ lam / scale  # ||Z^T lam||_inf = 1 at the LP's dual optimum
    support = np.abs(w) > 1e-9 * np.max(np.abs(w))
    active = lam > 1e-9 * np.max(lam)
    off = 1.0 - np.abs(g[~support])
    delta = float(np.min(off)) if off.size else math.inf
    what = (f"LP: {int(support.sum())} nonzero coordinates, {int(active.sum())} points with a positive dual weight, "
            f"smallest complementarity slack delta* = 1 - |(Z^T lambda)_j| off the support = {delta:.4g}")
    if support.sum() != active.sum() or not delta > 1e-6:
        return math.nan, what + "; a degenerate LP (the optimum is not a nondegenerate vertex): no derived rate"
    return delta, what




def l1_margin_rate(X, y) -> tuple[float, str]:
    """(r, what) with r = min(delta*, 1) the slowest rate, in s = log(||w||_inf / alpha^2), at which the depth-2
    diagonal network's direction approaches the l1 max-margin LP's (`GunasekarDiagonal`), and a note on the LP:
    delta* = min_j (1 - |(Z^T lambda)_j|) over the coordinates off the LP's support, lambda the dual optimum
    (||Z^T lambda||_inf = 1), Z = diag(y) X. r is nan where the LP is degenerate (support size != number of points
    with a positive dual weight, or delta* = 0): its optimum is then not a nondegenerate vertex, and no rate follows.
    Solved once per data set (`reference.memo`)."""
    X, y = np.ascontiguousarray(X, np.float64), np.ascontiguousarray(y, np.float64)
    delta, what = memoized("l1_lp_slack", array_key(X, y), {}, lambda: _lp_slack(X, y))
    return min(delta, 1.0), what


class GunasekarDiagonal(Theorem):
    """Gunasekar et al. 2018 (S6, classification): for the diagonal network w = u^D - v^D trained by gradient
    flow (or GD) on separable data with the logistic or exponential loss, w(t) / ||w(t)|| converges to the
    direction of a stationary point of min ||w||_{2/D} s.t. y_i <w, x_i> >= 1. The approach is logarithmically
    slow, so each prediction at a finite time is a rate or a fitted trend, fitted on the last half of the
    checkpoints with L < l(0)/n (the margin-maximising regime), at distinct times, with at least MIN_FIT_POINTS = 4
    of them (two residual degrees of freedom: the slope's standard error is estimated):

    D = 1: the l2 hard-margin SVM; the direction error decays like log log t / log t (Soudry et al. 2018,
        Theorem 3): || w/||w|| - w_svm/||w_svm|| || <= rate_constant x log log t / log t.
    D = 2: the l1 max-margin predictor w* (a linear program). Along the flow theta = arcsinh(w / (2 alpha^2)) =
        Z^T nu(t) with nu >= 0 growing like kappa(t) lambda + O(1), lambda the LP's dual optimum (||Z^T lambda||_inf
        = 1), Z = diag(y) X. On the LP's support |theta_j| = kappa + O(1) = s + O(1), s = log(||w||_inf / alpha^2);
        off it |theta_j| = kappa (1 - delta_j) + O(1), so |w_j| / ||w||_inf ~ exp(-delta_j s) with delta_j = 1 -
        |(Z^T lambda)_j| > 0 at a nondegenerate vertex. The active points' margins differ by O(1) while they grow
        like ||w||_inf, an error exp(-s) relative. Hence both the direction error and the l1-normalised margin gap
        1 - gamma_1(w) / gamma_1* (first order in the off-support mass) decay like a sum of exp(-delta_j s), at the
        slowest at the rate r = min(delta*, 1), delta* = min_j delta_j (`l1_margin_rate`, from the LP's dual). The
        predictions are rates: the slope of log(gap) and of log(unit-vector distance to w*) against s, with its 95%
        confidence interval, must lie nearer -r (or below: the faster terms) than the nearest wrong rate, 0 (a limit
        off the LP's optimum: the gap levels off), i.e. below -r/2 (`rate_verdict`). A degenerate LP gives no rate:
        not evaluated, with the reason.
    D >= 3: min ||w||_{2/D} is not convex and has no exact reference; its stationary points are the KKT points
        of min ||theta||^2 s.t. y_i f(x_i; theta) >= 1 in parameter space (S10, Lyu & Li 2020, who give no rate),
        so the KKT stationarity residual decreases: the slope of its log against log log(1/L), with its 95%
        confidence interval, lies below 0 (holds), above it (fails: the residual rises at the end of the run), or
        straddles it (inconclusive).

    rate_constant: the constant of the D = 1 rate bound (default 1, ours).
    """

    rate_constant: float = pydantic.Field(1.0, gt=0.0)

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Gunasekar et al. 2018, diagonal networks"

    @assumption("the model is w = u^D - v^D from u = v = alpha 1", source=GUNASEKAR)
    def diagonal_net(self, run) -> Verdict:
        """Assumption: the model is w = u^D - v^D from u = v = alpha 1."""
        return difference_net(self.title, run, 1)

    @assumption("the init scale alpha is positive", source=GUNASEKAR)
    def positive_scale(self, run) -> Verdict:
        """Assumption: the init scale alpha is positive."""
        return positive_alpha(self.title, run)

    @assumption("the loss is exponentially tailed (logistic or exponential)", source=GUNASEKAR)
    def tailed_loss(self, run) -> Verdict:
        """Assumption: the loss is exponentially tailed (logistic or exponential)."""
        return loss_verdict(self.title, run)

    @assumption("the method is gradient flow or GD", source=GUNASEKAR)
    def method(self, run) -> Verdict:
        """Assumption: the method is gradient flow or GD."""
        kind = run.spec.method.kind
        return flag(self.title, "assumption", "method is gradient flow or GD", kind in ("gf", "gd"),
                    f"method = {kind}")

    @assumption("the data are linearly separable", source=GUNASEKAR)
    def separable(self, run) -> Verdict:
        """Assumption: the data are linearly separable."""
        try:
            for data in run.data:
                check_separable(data.X, data.y)
        except NonSeparableDataError as exc:
            return flag(self.title, "assumption", "the data are linearly separable", False, str(exc))
        return flag(self.title, "assumption", "the data are linearly separable", True, "LP feasibility")

    @assumption("the loss fell below l(0)/n: the margin-maximising regime",
                source="Lyu & Li 2020 (the margin grows once L < l(0)/n); the predictions are read there")
    def margin_regime(self, run) -> Verdict:
        """Assumption: the loss fell below l(0)/n: the margin-maximising regime."""
        n = run.data[0].n
        return over_runs(self.title, "assumption", "the loss fell below l(0)/n (the margin-maximising regime)",
                         final(run.results, "loss"), "<", math.log(2.0) / n if run.spec.loss.name == "logistic"
                         else 1.0 / n, labels=run_labels(run))

    def _late(self, run, r: int) -> np.ndarray:
        L = np.asarray(run.results["loss"].values[r], dtype=float)
        t = np.asarray(run.results["time"].values[r], dtype=float)
        fresh = np.concatenate([[True], np.diff(t) > 0])
        level = math.log(2.0) if run.spec.loss.name == "logistic" else 1.0
        return fresh & (L < level / run.data[r].n) & (L > 0)

    def fit_window(self, run, r: int, values) -> np.ndarray:
        """The checkpoints a trend of run r is fitted on: the last half (rounded up) of the late checkpoints (L <
        l(0)/n, distinct times) where `values` is finite and > 0."""
        keep = self._late(run, r) & np.isfinite(values) & (np.asarray(values) > 0)
        idx = np.flatnonzero(keep)
        out = np.zeros_like(keep)
        out[idx[idx.size // 2:]] = True
        return out

    def _trend(self, run, r: int, x, values) -> LineFit:
        """The least-squares line of log(values) against x over `fit_window` (the slope undefined, nan, with fewer
        than MIN_FIT_POINTS points there)."""
        values = np.asarray(values, dtype=float)
        keep = self.fit_window(run, r, values)
        if keep.sum() < MIN_FIT_POINTS:
            return LineFit(math.nan, math.nan, math.nan, math.nan, int(keep.sum()))
        return linear_fit(np.asarray(x, dtype=float)[keep], np.log(values[keep]))

    @staticmethod
    @staticmethod
    def _references(run, r: int) -> dict[str, np.ndarray] | None:
        """`max_margin_references`, None where the data are not separable (the prediction is then undefined)."""
        try:
            return max_margin_references(run, r)
        except (NotSeparableError, ReferenceSolverError):
            return None

    @staticmethod
    def _depth(run) -> int:
        return int(run.spec.model.depth)

    @prediction("D = 1: w/||w|| tends to the l2 hard-margin SVM direction like log log t / log t",
                threshold="rate_constant",
                source="Soudry et al. 2018, Theorem 3 (the rate); rate_constant: ours, the bound's constant")
    def l2_direction(self, run) -> list[Verdict]:
        """Prediction: D = 1: w/||w|| tends to the l2 hard-margin SVM direction like log log t / log t."""
        if self._depth(run) != 1:
            return []
        labels = run_labels(run)
        refs = [self._references(run, r) for r in range(run.n_runs)]
        finals = [None if ref is None else stored_predictor(run, r) for r, ref in enumerate(refs)]
        unseparable = [labels[r] for r, ref in enumerate(refs) if ref is None]
        note = "no max-margin reference, data not separable: " + ", ".join(unseparable) if unseparable else ""
        t = final(run.results, "time")
        with np.errstate(divide="ignore", invalid="ignore"):
            lt = np.log(t)
            bound = np.where(lt > 1.0, self.rate_constant * np.log(lt) / lt, np.nan)
        gaps = [math.nan if w is None else unit_distance(w, ref["l2"]) for w, ref in zip(finals, refs)]
        return [over_runs(self.title, "prediction", "D = 1: w/||w|| -> the l2 hard-margin SVM direction: unit-vector "
                          "distance", gaps, "<=", bound, labels=labels,
                          note=note or "bound: rate_constant x log log t / log t at the final t (Soudry et al. 2018)")]

    @prediction("D = 2: the l1-normalised margin approaches the l1 max-margin LP's at the rate derived from its dual",
                source="Gunasekar et al. 2018, Theorem 2 (the limit); the rate min(delta*, 1) derived here (class "
                       "docstring); tolerance: the slope's 95% interval nearer -r than the wrong rate 0 (rate_verdict)")
    def l1_margin(self, run) -> list[Verdict]:
        """Prediction: D = 2: the l1-normalised margin approaches the l1 max-margin LP's at the rate derived from its
        dual."""
        return self._l1_rates(run)[:1] if self._depth(run) == 2 else []

    @prediction("D = 2: w/||w|| approaches the l1 max-margin direction at the rate derived from the LP's dual",
                source="Gunasekar et al. 2018, Theorem 2 (the limit); the rate min(delta*, 1) derived here (class "
                       "docstring); tolerance: the slope's 95% interval nearer -r than the wrong rate 0 (rate_verdict)")
    def l1_direction(self, run) -> list[Verdict]:
        """Prediction: D = 2: w/||w|| approaches the l1 max-margin direction at the rate derived from the LP's dual."""
        return self._l1_rates(run)[1:] if self._depth(run) == 2 else []

    @prediction("D >= 3: a KKT point of the parameter-space margin problem is approached: the KKT residual falls",
                source="Gunasekar et al. 2018, Theorem 2; Lyu & Li 2020 (S10; no rate): the slope's 95% interval "
                       "below 0 (sign_verdict)")
    def kkt_point(self, run) -> list[Verdict]:
        """Prediction: D >= 3: a KKT point of the parameter-space margin problem is approached: the KKT residual falls."""
        depth = self._depth(run)
        return [self._kkt_trend(run, depth)] if depth >= 3 else []

    def _l1_rates(self, run) -> list[Verdict]:
        """The two D = 2 rate predictions (class docstring), each on the worst run (once per run context)."""
        return run.once(f"{self!r}.l1_rates", lambda: self._measure_l1_rates(run))

    def _measure_l1_rates(self, run) -> list[Verdict]:
        refs = [self._references(run, r) for r in range(run.n_runs)]
        T, labels = self.title, run_labels(run)
        statements = ("D = 2: the l1-normalised margin min_i y_i <w, x_i> / ||w||_1 approaches the l1 max-margin LP's: "
                      "rate of log(1 - gamma_1(w) / gamma_1*) in s = log(||w||_inf / alpha^2)",
                      "D = 2: w/||w|| approaches the l1 max-margin direction: rate of log(unit-vector distance) in "
                      "s = log(||w||_inf / alpha^2)")
        found: list[list[Verdict]] = [[], []]
        for r, ref in enumerate(refs):
            W = stored_predictor(run, r, trajectory=True)
            why = ("data not separable: no l1 max-margin LP" if ref is None else
                   "no stored trajectory (keep_trajectory): the rate needs w at the checkpoints" if W is None else "")
            if why:
                for k in range(2):
                    found[k].append(Verdict(T, "prediction", statements[k], None, "~", None, "not_evaluated",
                                            f"{labels[r]}: {why}"))
                continue
            data, alpha = run.data[r], float(run.runs[r].init_scale)
            rate, lp = l1_margin_rate(data.X, data.y)
            Z = data.y[:, None] * data.X
            w1 = ref["l1"]
            best = float((Z @ w1).min() / np.abs(w1).sum())
            norm1 = np.abs(W).sum(axis=1)
            top = np.abs(W).max(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                gap = 1.0 - (Z @ W.T).min(axis=0) / norm1 / best
                s = np.log(top / alpha**2)
            dist = np.array([unit_distance(v, w1) for v in W])
            for k, values in enumerate((gap, dist)):
                fit = self._trend(run, r, s, values)
                note = f"{labels[r]}; {lp}; fitted on the last half of the checkpoints with L < l(0)/n ({fit.n})"
                if not math.isfinite(rate):
                    found[k].append(Verdict(T, "prediction", statements[k], fit.slope, "~", None, "not_evaluated", note))
                    continue
                if fit.n < MIN_FIT_POINTS:
                    note += f": fewer than {MIN_FIT_POINTS}, the slope's uncertainty cannot be estimated"
                found[k].append(rate_verdict(T, statements[k], fit, -rate, [0.0], note=note + (
                    f"; last value {values[np.isfinite(values)][-1]:.3g}" if np.isfinite(values).any() else "")))
        return [worst_rate(v) for v in found]

    def _kkt_trend(self, run, depth: int) -> Verdict:
        """D >= 3: the slope of log(KKT stationarity residual) against log log(1/L) (class docstring)."""
        T, labels = self.title, run_labels(run)
        statement = (f"D = {depth}: a KKT point of the parameter-space margin problem (a stationary point of "
                     f"||w||_(2/{depth})) is approached: slope of log(KKT stationarity residual) against log log(1/L)")
        kkt = curve(run.results, "kkt_stationarity")
        if kkt is None:
            return Verdict(T, "prediction", statement, None, "<", 0.0, "not_evaluated",
                           "the KKT residual was not recorded (kkt = True)")
        found = []
        for r in range(run.n_runs):
            L = np.asarray(run.results["loss"].values[r], dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.log(np.log(1.0 / L))
            fit = self._trend(run, r, x, kkt[r])
            found.append(sign_verdict(T, statement, fit, f"{labels[r]}; fitted on the last half of the checkpoints "
                                       f"with L < l(0)/n ({fit.n}); last residual {kkt[r][np.isfinite(kkt[r])][-1]:.3g}"
                                       if np.isfinite(kkt[r]).any() else labels[r]))
        return worst_rate(found)


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [GunasekarDiagonal]
