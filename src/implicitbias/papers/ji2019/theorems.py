"""Ji & Telgarsky 2019 (ICLR), "Gradient descent aligns the layers of deep linear networks" (SCIENCE.md S5).

f(x) = W_L ... W_1 x, all layers trained by gradient flow on the logistic (or exponential) loss, linearly
separable data. Once the risk is below l(0)/n (their initial condition; from that time on the flow is a flow
from a new initialisation), as t -> infinity:

  (i)   L -> 0 and ||W_i|| -> infinity;
  (ii)  W_i / ||W_i||_F -> u_i v_i^T (rank 1), i.e. srank(W_i) = ||W_i||_F^2 / ||W_i||_2^2 -> 1 for i < L;
  (iii) adjacent layers align: |<v_{i+1}, u_i>| -> 1 (v: top right, u: top left singular vector);
  (iv)  for the logistic loss, the end-to-end vector (W_L ... W_1)^T converges in direction to the SVM w_hat.

The mechanism, which gives (ii) and (iii) with explicit constants: gradient flow conserves the imbalances
D_i = W_{i+1}^T W_{i+1} - W_i W_i^T (Arora et al. 2018; Du et al. 2018). Writing W_i W_i^T = W_{i+1}^T W_{i+1} - D_i
and using Weyl's inequality lambda_1(A - D) >= lambda_1(A) - lambda_1(D), the non-rank-1 mass of each layer obeys

    ||W_i||_F^2 - ||W_i||_2^2  <=  B_i := sum_{j=i}^{L-1} (lambda_1(D_j) - tr D_j)      (W_L is a row: rank 1),

a constant fixed at initialisation, so srank(W_i) - 1 <= B_i / ||W_i||_2^2 -> 0 as ||W_i|| grows; and the
Davis-Kahan theorem (in the form of Yu, Wang & Samworth 2015, Theorem 1) applied to W_{i+1}^T W_{i+1} and
W_i W_i^T = W_{i+1}^T W_{i+1} - D_i bounds the misalignment:

    sin angle(v_{i+1}, u_i) <= 2 ||D_i||_2 / gap_i,   gap_i = the larger of the eigengaps sigma_1^2 - sigma_2^2 of
                                                      W_{i+1} and of W_i.

These bounds are checked with D_i taken at the first checkpoint (t = 0): they hold only as long as the flow
conserves D_i, which is what makes them predictions rather than identities. The parameters of every checkpoint
must be recorded (`keep_trajectory`).

The rate of (iv), derived here (the paper proves the limit, not its rate). Once the layers are aligned and
balanced (D_i fixed while sigma_1^2 -> infinity), the end-to-end w = (W_L ... W_1)^T follows
dw/dt = ||w||^(2 - 2/L) [(I - u u^T)(-grad L) + L u u^T (-grad L)], u = w/||w|| (Arora et al. 2018). With P the
projection orthogonal to w_hat and a = ||w||, this gives d(P w)/da = P(-grad L) / (L u.(-grad L)) + (1 - 1/L) P w / a.
The loss gradient pushes only along the constraints a_j = y_j x_j, and (up to terms of relative weight t^(1-theta)
from the constraints off the support) only along the support vectors; in the directions orthogonal to every
support vector nothing opposes the second term, so that part of w grows like ||w||^(1 - 1/L), while the part in
their span stays bounded (as w_tilde does for a linear predictor, L = 1). Hence the direction error is
Theta(||w||^(-1/L)) = Theta((log t)^(-1/L)) (||w|| ~ log t / gamma_hat) where w has a part orthogonal to the
support vectors (the generic case when they do not span R^d), and Theta(1/||w||) where they span R^d.
(On ji2019-deep-linear --quick, n = 40 in d = 20 with 14 support vectors, that part grows with exponent 0.529 at
L = 2 and 0.754 at L = 4 against ||w||, where 1 - 1/L = 0.5 and 0.75.)
"""

from __future__ import annotations

import math

import numpy as np
import pydantic

from implicitbias.metrics.extrapolation import extrapolate
from implicitbias.models import DeepLinear
from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.fitting import curve, fitted_slope, flag, late_window, linear_fit, over_runs, run_labels
from implicitbias.theorems.max_margin import constraint_system, separability_verdict, svm_of
from implicitbias.theorems.rates_common import negated, rate_over_runs
from implicitbias.theorems.two_layer_common import loss_verdict


# -- the layers along a run ------------------------------------------------------------------------------------
def trajectory_layers(results, r: int, depth: int) -> list[np.ndarray] | None:
    """[W_1, ..., W_L] of run r at every checkpoint, each (checkpoint, rows, cols), or None if not recorded."""
    names = [f"trajectory.theta.W{i}" for i in range(1, depth + 1)]
    if any(n not in results.data_vars for n in names):
        return None
    return [np.asarray(results[n].values[r], dtype=np.float64) for n in names]


def end_to_end(Ws: list[np.ndarray]) -> np.ndarray:
    """(W_L ... W_1)^T at every checkpoint, (checkpoint, d), for a network with one output."""
    P = Ws[0]
    for W in Ws[1:]:
        P = W @ P
    return P[:, 0, :]


def inspan_weight(A_support, alphas, svm, depth: int, t: float) -> tuple[float, str]:
    """(t^(-lambda / L), note): the weight at time t of the slowest relaxation of the end-to-end vector's part in the
    span of the support vectors, orthogonal to w_hat. Linearising the balance of the module docstring around its
    fixed point, that part relaxes like exp(-lambda ||w|| / (L gamma_hat)) = t^(-lambda / L) (||w|| gamma_hat ~
    log t), lambda the smallest eigenvalue of M = sum_j alpha_j a_j a_j^T on that subspace (for L = 1, Soudry et
    al.'s rho(t) -> w_tilde). 0 when the subspace is empty (one support vector)."""
    u = svm.direction.ravel()
    Q = np.linalg.qr(A_support.T)[0]
    Q = Q - np.outer(u, u @ Q)
    U, s, _ = np.linalg.svd(Q, full_matrices=False)
    basis = U[:, s > 1e-8]
    if basis.shape[1] == 0:
        return 0.0, "no in-span direction orthogonal to w_hat"
    M = (A_support.T * alphas) @ A_support
    lam = float(np.linalg.eigvalsh(basis.T @ M @ basis).min())
    weight = float(t ** (-lam / depth)) if t > 1 else 1.0
    return weight, f"slowest in-span mode lambda_min(M) = {lam:.3g} weighs t^(-lambda/L) = {weight:.3g} at t = {t:.3g}"


def imbalances(Ws: list[np.ndarray]) -> list[np.ndarray]:
    """D_i = W_{i+1}^T W_{i+1} - W_i W_i^T for i = 1..L-1 (conserved by gradient flow), each (..., d_i, d_i)."""
    T = lambda a: np.swapaxes(a, -1, -2)
    return [T(upper) @ upper - lower @ T(lower) for lower, upper in zip(Ws[:-1], Ws[1:])]


def non_rank_one_bound(Ds: list[np.ndarray]) -> np.ndarray:
    """B_i = sum_{j >= i} (lambda_1(D_j) - tr D_j), i = 1..L-1: the bound on ||W_i||_F^2 - ||W_i||_2^2."""
    terms = [np.linalg.eigvalsh(D)[..., -1] - np.trace(D, axis1=-2, axis2=-1) for D in Ds]
    return np.cumsum(np.asarray(terms)[::-1], axis=0)[::-1]


def _top_pairs(W) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(sigma_1^2, sigma_1^2 - sigma_2^2, u_1, v_1) of W (..., rows, cols); sigma_2 = 0 for a single row/column."""
    U, s, Vt = np.linalg.svd(W, full_matrices=False)
    s2 = s[..., 1] if s.shape[-1] > 1 else np.zeros_like(s[..., 0])
    return s[..., 0] ** 2, s[..., 0] ** 2 - s2**2, U[..., :, 0], Vt[..., 0, :]


def layer_quantities(Ws: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per layer i < L and checkpoint: sigma_1^2(W_i), the non-rank-1 mass ||W_i||_F^2 - ||W_i||_2^2, and per
    adjacent pair sin angle(v_{i+1}, u_i) and gap_i; arrays of shape (L-1, checkpoint)."""
    tops = [_top_pairs(W) for W in Ws]
    fro2 = [np.sum(W * W, axis=(-2, -1)) for W in Ws]
    cos = [np.abs(np.sum(tops[i + 1][3] * tops[i][2], axis=-1)) for i in range(len(Ws) - 1)]
    return {
        "sigma1_sq_all": np.asarray([t[0] for t in tops]),
        "sigma1_sq": np.asarray([t[0] for t in tops[:-1]]),
        "tail": np.asarray([f - t[0] for f, t in zip(fro2[:-1], tops[:-1])]),
        "sin": np.sqrt(np.clip(1.0 - np.asarray(cos) ** 2, 0.0, 1.0)),
        "gap": np.asarray([np.maximum(tops[i + 1][1], tops[i][1]) for i in range(len(Ws) - 1)]),
    }


class JiTelgarskyAlignment(Theorem):
    """Ji & Telgarsky 2019, Theorem 2.2 with the imbalance bounds of the module docstring.

    invariant_rtol: gradient flow conserves D_i = W_{i+1}^T W_{i+1} - W_i W_i^T: max over checkpoints and layers of
        ||D_i(t) - D_i(0)||_2 / max(sigma_1(W_i(t))^2, sigma_1(W_{i+1}(t))^2) <= invariant_rtol (default 1e-4: the
        error of an ODE solver at rtol 1e-6 over a long run; GD with a fixed step drifts by O(lr^2) per step).
    bound_rtol: slack on the two derived bounds (default 0.05), for the solver's error in D_i.
    growth_tol: sigma_1(W_i)^2 = sigma_1(W_L)^2 + O(1) for every layer (the imbalances are constant), so
        sigma_1(W_i) ~ ||w||^(1/L) with ||w|| ~ ||w_hat|| q_min, and q_min = log t + (2 - 2/L) log log t + O(1) (Lyu &
        Li 2020): sigma_1 ~ (log t)^(1/L). |L x fitted exponent against log t - 1| <= growth_tol (default 0.3: the
        log log t correction, relative size ~ (2 - 2/L) log log t / log t, still lowers the fitted exponent).
    late_fraction: the trends ||W_i|| -> infinity, L -> 0 and the approach to the SVM are fitted on the last
        `late_fraction` of the checkpoints.

    The end-to-end direction (iv), with the rate derived in the module docstring. Where w has a part orthogonal to
    the support vectors, its share ||P_K w|| / ||w|| ~ ||w||^(-q) is fitted and judged by `fitting.rate_verdict`
    against q = 1/L and the nearest wrong rates 0 (no convergence) and 1 (a linear predictor's 1/log t); else the
    whole unit distance against q = 1 (wrong: 0 and 2), read only once the slowest in-span mode weighs at most
    relax_max (default 0.05, as Soudry et al.'s limits are read once the constraints off the support weigh less
    than limit_rtol / 2) at the last checkpoint (`inspan_weight`). The limit -> 0: the same quantity extrapolated
    along y_inf + c ||w||^(-q) (`soudry.extrapolate`, uncertainty from the fit and the drift between the halves
    of the window): holds when |y_inf| <= 2 se < the last value, fails when y_inf - 2 se > 0 (the direction
    converges elsewhere), inconclusive otherwise (below 0 by more than 2 se: outside the quantity's range, the run
    still approaches faster than the asymptotic rate; or an uncertainty as large as the last value).
    """

    invariant_rtol: float = pydantic.Field(1e-4, gt=0.0)
    bound_rtol: float = pydantic.Field(0.05, ge=0.0)
    growth_tol: float = pydantic.Field(0.3, gt=0.0)
    late_fraction: float = pydantic.Field(0.5, gt=0.0, le=1.0)
    relax_max: float = pydantic.Field(0.05, gt=0.0, le=1.0)

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Ji & Telgarsky 2019, Theorem 2.2"

    @assumption("the data are linearly separable through the origin", source="Ji & Telgarsky 2019, Assumption 2.1")
    def separable(self, run) -> Verdict:
        """Assumption: the data are linearly separable through the origin."""
        return separability_verdict(self.title, run)

    @assumption("the model is a deep linear network of depth L >= 2", source="Ji & Telgarsky 2019, Sec. 2")
    def deep_linear(self, run) -> Verdict:
        """Assumption: the model is a deep linear network of depth L >= 2."""
        model = run.spec.model
        deep = isinstance(model, DeepLinear)
        return flag(self.title, "assumption", "deep linear network f(x) = W_L ... W_1 x, depth L >= 2",
                    deep and model.depth >= 2, f"model = {model.kind}" + (f", depth {model.depth}" if deep else ""))

    @assumption("the loss is exponentially tailed (logistic or exponential)", source="Ji & Telgarsky 2019, Sec. 2")
    def tailed_loss(self, run) -> Verdict:
        """Assumption: the loss is exponentially tailed (logistic or exponential)."""
        return loss_verdict(self.title, run)

    @assumption("the method is gradient flow (or GD, its small-step limit)", source="Ji & Telgarsky 2019, Theorem 2.2")
    def flow(self, run) -> Verdict:
        """Assumption: the method is gradient flow (or GD, its small-step limit)."""
        kind = run.spec.method.kind
        return flag(self.title, "assumption", "method is gradient flow (or GD, its small-step limit)",
                    kind in ("gf", "gd"), f"method = {kind}")

    @assumption("the risk falls below l(0)/n (the theorem's initial condition)",
                source="Ji & Telgarsky 2019, Theorem 2.2 (initial condition L(W(0)) < l(0)/n)")
    def initial_condition(self, run) -> Verdict:
        """Assumption: the risk falls below l(0)/n (the theorem's initial condition)."""
        loss = curve(run.results, "loss")
        ratio = [float(np.min(loss[r]) * run.data[r].n / run.spec.loss.value_at_zero) if loss is not None else math.nan
                 for r in range(run.n_runs)]
        return over_runs(self.title, "assumption", "the risk falls below l(0)/n (the initial condition, from that "
                         "time on): min_t n L(t) / l(0)", ratio, "<", 1.0, where="", labels=run_labels(run))

    @staticmethod
    def _depth(run) -> int:
        model = run.spec.model
        return model.depth if isinstance(model, DeepLinear) else 1

    def _measured(self, run) -> dict:
        """Every run's quantities, once per run context (the predictions read them)."""
        return run.once(f"{self!r}.measured", lambda: self._measure(run))

    def _measure(self, run) -> dict:
        res, depth = run.results, self._depth(run)
        time, loss, gap = curve(res, "time"), curve(res, "loss"), curve(res, "unit_distance_to_reference")
        rows = {k: [] for k in ("loss", "grow", "drift", "tail", "sin")}
        notes = {k: [] for k in rows}
        fits, predicted, competitors, fit_notes, limits = [], [], [], [], []
        for r in range(run.n_runs):
            window = late_window(time[r], self.late_fraction) if time is not None else None
            self._loss_trend(r, window, time, loss, rows, notes)
            Ws = trajectory_layers(res, r, depth) if depth >= 2 else None
            fit, q, comp, note, limit = self._direction(run, r, Ws, depth, time, gap, window)
            fits.append(fit)
            predicted.append(q)
            competitors.append(comp)
            fit_notes.append(note)
            limits.append(limit)
            if Ws is None:
                for k in ("grow", "drift", "tail", "sin"):
                    rows[k].append(math.nan)
                    notes[k].append("parameters not recorded at every checkpoint (keep_trajectory)")
                continue
            self._layers(Ws, time[r], window, rows, notes)
        return {"rows": rows, "notes": notes, "fits": fits, "predicted": predicted, "competitors": competitors,
                "fit_notes": fit_notes, "limits": limits}

    def _late(self) -> str:
        return f"over the last {self.late_fraction:g} of the checkpoints"

    def _row(self, run, key: str, statement: str, relation: str, bound: float, where: str) -> Verdict:
        m = self._measured(run)
        return over_runs(self.title, "prediction", f"depth {self._depth(run)}: {statement}", m["rows"][key], relation,
                         bound, where=where, labels=run_labels(run), run_notes=m["notes"][key])

    @prediction("the risk tends to 0", source="Ji & Telgarsky 2019, Theorem 2.2 (i)")
    def risk_to_zero(self, run) -> Verdict:
        """Prediction: the risk tends to 0."""
        return self._row(run, "loss", "risk -> 0: fitted slope of log L against log t", "<", 0.0, self._late())

    @prediction("||W_i|| -> infinity like (log t)^(1/L)", threshold="growth_tol",
                source="Ji & Telgarsky 2019, Theorem 2.2 (i); the rate from Lyu & Li 2020 (q_min = log t + "
                       "(2 - 2/L) log log t + O(1)); growth_tol: ours, the log log t correction")
    def layer_growth(self, run) -> Verdict:
        """Prediction: ||W_i|| -> infinity like (log t)^(1/L)."""
        return self._row(run, "grow", "||W_i|| -> infinity like (log t)^(1/L): |L x fitted exponent of sigma_1(W_i) "
                         "against log t - 1| (worst layer i < L)", "<=", self.growth_tol, self._late())

    @prediction("gradient flow conserves the imbalances D_i = W_(i+1)^T W_(i+1) - W_i W_i^T",
                threshold="invariant_rtol",
                source="Arora et al. 2018; Du et al. 2018; invariant_rtol: ours, an ODE solver's error at rtol 1e-6")
    def imbalance_conserved(self, run) -> Verdict:
        """Prediction: gradient flow conserves the imbalances D_i = W_(i+1)^T W_(i+1) - W_i W_i^T."""
        return self._row(run, "drift", "the imbalance D_i = W_(i+1)^T W_(i+1) - W_i W_i^T is conserved: "
                         "max_(i,t) ||D_i(t) - D_i(0)||_2 / sigma_1^2", "<=", self.invariant_rtol, "")

    @prediction("srank(W_i) -> 1 within the bound B_i(0) / ||W_i||_2^2", threshold="bound_rtol",
                source="Ji & Telgarsky 2019, Theorem 2.2 (ii); the bound derived here (Weyl's inequality on the "
                       "conserved imbalances, module docstring); bound_rtol: ours, the solver's error in D_i")
    def rank_one(self, run) -> Verdict:
        """Prediction: srank(W_i) -> 1 within the bound B_i(0) / ||W_i||_2^2."""
        return self._row(run, "tail", "srank(W_i) -> 1: (||W_i||_F^2 - ||W_i||_2^2) / B_i(0) <= 1, i.e. srank(W_i) - "
                         "1 <= B_i(0) / ||W_i||_2^2 (worst layer i < L)", "<=", 1.0 + self.bound_rtol,
                         "at the final checkpoint")

    @prediction("adjacent layers align within the Davis-Kahan bound 2 ||D_i(0)||_2 / gap_i", threshold="bound_rtol",
                source="Ji & Telgarsky 2019, Theorem 2.2 (iii); the bound derived here (Davis-Kahan, Yu, Wang & "
                       "Samworth 2015, Theorem 1); bound_rtol: ours, the solver's error in D_i")
    def layers_align(self, run) -> Verdict:
        """Prediction: adjacent layers align within the Davis-Kahan bound 2 ||D_i(0)||_2 / gap_i."""
        return self._row(run, "sin", "adjacent layers align: sin angle(v_(i+1), u_i) <= 2 ||D_i(0)||_2 / gap_i "
                         "(worst pair; measured / bound)", "<=", 1.0 + self.bound_rtol, "at the final checkpoint")

    @prediction("the end-to-end vector turns to the SVM direction at the derived rate", threshold="relax_max",
                source="Ji & Telgarsky 2019, Theorem 2.2 (iv) (the limit); the rate ||w||^(-1/L) derived here "
                       "(module docstring); tolerance: the fitted exponent's 95% interval nearer the derived one than "
                       "the nearest wrong ones (rate_verdict)")
    def direction_rate(self, run) -> Verdict:
        """Prediction: the end-to-end vector turns to the SVM direction at the derived rate."""
        m, depth = self._measured(run), self._depth(run)
        return rate_over_runs(self.title, f"depth {depth}: end-to-end (W_L...W_1)^T -> SVM direction at the derived "
                              "rate: fitted q of the direction error ~ ||w||^-q against 1/L (its part orthogonal to the "
                              "support vectors) or 1 (none: read once the in-span part has relaxed); wrong rates 0 (no "
                              "convergence) and 1 (resp. 2)", m["fits"], m["predicted"], m["competitors"],
                              run_labels(run), [f"{self._late()}; {n}" for n in m["fit_notes"]])

    @prediction("the end-to-end unit distance to the SVM direction tends to 0",
                source="Ji & Telgarsky 2019, Theorem 2.2 (iv); the limit extrapolated along the derived rate, "
                       "judged against twice its uncertainty")
    def direction_limit(self, run) -> Verdict:
        """Prediction: the end-to-end unit distance to the SVM direction tends to 0."""
        m = self._measured(run)
        return self._limit_verdict(f"depth {self._depth(run)}: end-to-end unit distance to the SVM direction -> 0: "
                                   "extrapolated limit y_inf of y_inf + c ||w||^-q (q the derived rate; the part "
                                   "orthogonal to the support vectors where there is one), |y_inf| <= 2 se < last "
                                   "value", m["limits"], run_labels(run))

    def _loss_trend(self, r, window, time, loss, rows, notes) -> None:
        if time is None or loss is None:
            rows["loss"].append(math.nan)
            notes["loss"].append("")
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            s = fitted_slope(np.log(time[r][window]), np.log(loss[r][window]))[0]
        rows["loss"].append(s)
        notes["loss"].append(f"final L = {loss[r][-1]:.3g}")

    def _direction(self, run, r, Ws, depth, time, gap, window):
        """(fit of q, predicted q, competitors, note, extrapolation or the reason there is none) of run r's
        end-to-end direction error against ||w|| (module docstring). Where w has a part orthogonal to every support
        vector (relative size > 1e-8 at the last checkpoint), that part's share ||P_K w|| / ||w|| is read: q = 1/L,
        competitors 0 and 1, extrapolated along ||w||^(-1/L). Otherwise the whole unit distance: q = 1, competitors
        0 and 2, extrapolated along 1/||w||, and only once the slowest in-span mode (`inspan_weight`) weighs at most
        relax_max at the last checkpoint."""
        empty = linear_fit([], [])
        if gap is None or time is None:
            return empty, 1.0, (0.0, 2.0), "no reference recorded (reference = svm)", "no reference recorded"
        if Ws is None:
            why = "parameters not recorded at every checkpoint (keep_trajectory)"
            return empty, 1.0, (0.0, 2.0), why, why
        svm = svm_of(run, r)
        if svm is None:
            return empty, 1.0, (0.0, 2.0), "no SVM: data not separable", "no SVM"
        w = end_to_end(Ws)
        norm = np.linalg.norm(w, axis=1)
        A, lam = constraint_system(run, r, svm)
        support = lam > 1e-8 * lam.max()
        Q = np.linalg.qr(A[support].T)[0]
        kernel = np.linalg.norm(w - (w @ Q) @ Q.T, axis=1)
        share = kernel / np.maximum(norm, 1e-300)
        n_sv = int(support.sum())
        if share[-1] > 1e-8:
            q, comp, y = 1.0 / depth, (0.0, 1.0), share
            what = (f"part of w orthogonal to the {n_sv} support vectors, ||P_K w|| / ||w||, read (the direction "
                    f"error's slowest part)")
        else:
            weight, why = inspan_weight(A[support], lam[support], svm, depth, float(time[r][-1]))
            if weight > self.relax_max:
                note = (f"w lies in the span of the {n_sv} support vectors; {why} > relax_max = {self.relax_max:g}: the "
                        "in-span part has not relaxed, the asymptotic rate is not reached")
                return empty, 1.0, (0.0, 2.0), note, note
            q, comp, y = 1.0, (0.0, 2.0), gap[r]
            what = f"w lies in the span of the {n_sv} support vectors, unit distance read; {why}"
        keep = window & (time[r] > 1.0) & (y > 0) & (norm > 0)
        fit = negated(linear_fit(np.log(norm[keep]), np.log(y[keep])))
        idx = np.flatnonzero(keep)
        note = what
        if idx.size:
            note += f"; {y[idx[0]]:.3g} -> {y[idx[-1]]:.3g} while ||w|| {norm[idx[0]]:.4g} -> {norm[idx[-1]]:.4g}"
        return fit, q, comp, note, extrapolate(norm[keep] ** -q, y[keep])

    def _limit_verdict(self, statement, limits, labels) -> Verdict:
        """holds when every run's extrapolated limit is 0 within 2 se and 2 se is below its last value (the limit is
        told apart from where the run is); fails when some run's limit exceeds 0 by more than 2 se (the direction
        converges elsewhere); otherwise not_evaluated: an extrapolation below 0 by more than 2 se lies outside the
        quantity's range (the run still approaches faster than the asymptotic rate: not converged), and an
        uncertainty as large as the last value cannot tell the limit from the present."""
        bad = [f"{labels[r]}: {e}" for r, e in enumerate(limits) if isinstance(e, str) or not math.isfinite(e.se)]
        if bad:
            return Verdict(self.title, "prediction", statement, None, "<=", None, "not_evaluated",
                           "undefined: " + "; ".join(x if ":" in x else x + ": fewer than 5 late checkpoints" for x in bad))
        many = len(limits) > 1
        above = [r for r, e in enumerate(limits) if e.y_inf - 2 * e.se > 0]
        if above:
            r = max(above, key=lambda k: limits[k].y_inf - 2 * limits[k].se)
            e = limits[r]
            return Verdict(self.title, "prediction", statement, e.y_inf, "<=", 2 * e.se, "fails",
                           (f"{labels[r]}; " if many else "") + f"the limit exceeds 0 by more than 2 se; {e.describe()}")
        below = [r for r, e in enumerate(limits) if e.y_inf + 2 * e.se < 0]
        wide = [r for r, e in enumerate(limits) if 2 * e.se >= e.last]
        if below or wide:
            r = (below or wide)[0]
            e = limits[r]
            why = ("inconclusive: the extrapolation lies below 0 by more than 2 se, outside the quantity's range (the "
                   "run still approaches faster than the asymptotic rate: not converged to it)" if below else
                   "inconclusive: 2 se is as large as the last value, so the limit cannot be told from the present")
            return Verdict(self.title, "prediction", statement, e.y_inf, "<=", 2 * e.se, "not_evaluated",
                           (f"{labels[r]}; " if many else "") + f"{why}; {e.describe()}")
        r = max(range(len(limits)), key=lambda k: abs(limits[k].y_inf) - 2 * limits[k].se)
        e = limits[r]
        return Verdict(self.title, "prediction", statement, abs(e.y_inf), "<=", 2 * e.se, "holds",
                       (f"{labels[r]}; " if many else "") + e.describe())

    def _layers(self, Ws, time, window, rows, notes) -> None:
        q = layer_quantities(Ws)
        D = imbalances(Ws)
        D0 = [d[0] for d in D]
        B0 = non_rank_one_bound([d[None] for d in D0])[:, 0]
        s1 = q["sigma1_sq_all"]
        drifts = [float(np.max(np.linalg.norm(d - d[0], ord=2, axis=(-2, -1)) / np.maximum(s1[i], s1[i + 1])))
                  for i, d in enumerate(D)]
        rows["drift"].append(max(drifts))
        notes["drift"].append("per pair: " + ", ".join(f"{v:.2g}" for v in drifts))
        with np.errstate(divide="ignore", invalid="ignore"):
            keep = window & (time > math.e)
            grow = [fitted_slope(np.log(np.log(time[keep])), 0.5 * np.log(s[keep]))[0] for s in q["sigma1_sq"]]
            tail = np.where(B0 > 0, q["tail"][:, -1] / B0, np.where(q["tail"][:, -1] > 0, np.inf, 0.0))
            sin_bound = 2.0 * np.asarray([np.linalg.norm(d, 2) for d in D0]) / q["gap"][:, -1]
            sin = np.where(sin_bound > 0, q["sin"][:, -1] / sin_bound, np.where(q["sin"][:, -1] > 0, np.inf, 0.0))
        srank = 1.0 + q["tail"][:, -1] / q["sigma1_sq"][:, -1]
        depth = len(Ws)
        rows["grow"].append(float(np.max(np.abs(depth * np.asarray(grow) - 1.0))))
        ends = ", ".join(f"{math.sqrt(s):.3g}" for s in q["sigma1_sq"][:, -1])
        notes["grow"].append("exponents " + ", ".join(f"{g:.3g}" for g in grow) + f" (1/L = {1 / depth:.3g}); "
                             f"sigma_1 at the end: {ends}")
        rows["tail"].append(float(np.max(tail)))
        notes["tail"].append("final srank(W_i) = " + ", ".join(f"{s:.6g}" for s in srank) + "; B_i(0) = "
                             + ", ".join(f"{b:.3g}" for b in B0))
        rows["sin"].append(float(np.max(sin)))
        notes["sin"].append("final |<v_(i+1), u_i>| = " + ", ".join(f"{math.sqrt(1 - s**2):.8g}" for s in
                                                                     q["sin"][:, -1]))


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [JiTelgarskyAlignment]
