"""Frei, Vardi, Bartlett, Srebro, Hu 2023 (ICLR) (seed 000; SCIENCE.md S1, S2): Lemma 3.3 (Gaussian data meet
Theorem 3.2's condition w.h.p.) and Theorem 4.2 (gradient descent with a smoothed leaky ReLU reduces the stable
rank). Theorems 3.2 and 3.4 are in `theorems.flow`; the shared assumption checks in `theorems.two_layer_common`.
"""

from __future__ import annotations

import math

import numpy as np
import pydantic

from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.fitting import (
    asymptotic_window,
    curve,
    fitted_slope,
    flag,
    growth_exponent,
    initial,
    over_runs,
    run_labels,
    why_missing,
)
from implicitbias.theorems.two_layer_common import (
    CONDITION,
    activation_verdict,
    condition_verdict,
    leaky_slope,
    loss_verdict,
    outer_layer_verdict,
    outer_signs,
    stored_W,
)
from implicitbias.training.methods import DiscreteMethod


def change_to(before: float, after: float) -> str:
    """How the stable rank moved from its value at init `before` to `after` (the largest after init), in words
    that follow the sign: "drops to X" only when it fell, "rises to X" when it rose, "stays at X" when equal."""
    if after < before:
        return f"drops to {after:.4g} (max after init)"
    if after > before:
        return f"rises to {after:.4g} (max after init)"
    if after == before:
        return f"stays at {after:.4g} (max after init)"
    return f"max after init {after:.4g}"


def _lr(run, r: int) -> float | None:
    """The step size of run r (None for gradient flow, which has none)."""
    method = run.runs[r].method
    return float(method.lr) if isinstance(method, DiscreteMethod) else None


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
        """The theorem\'s name, as its verdicts give it."""
        return "Frei et al. 2023, Lemma 3.3"

    @assumption("inputs x_i ~ N(0, s^2 I_d) (isotropic Gaussian)", source="Frei et al. 2023, Lemma 3.3")
    def gaussian_inputs(self, run) -> Verdict:
        """The data generator is the isotropic Gaussian one (`nearly_orthogonal`)."""
        names = sorted({spec.data.name for spec in run.runs})
        return flag(self.title, "assumption", "inputs x_i ~ N(0, s^2 I_d) (isotropic Gaussian)",
                    names == ["nearly_orthogonal"], f"data = {', '.join(names)}")

    @assumption("n <= c gamma^3 sqrt(d / log n)", threshold="c",
                source="Frei et al. 2023, Lemma 3.3; c = 1/(6 sqrt 2): ours, from a union bound (class docstring)")
    def few_samples(self, run) -> Verdict:
        """n against c gamma^3 sqrt(d / log n) on every run's data (worst run)."""
        n, bound, notes = [], [], []
        for r in range(run.n_runs):
            ds, g = run.data[r], leaky_slope(run, r)
            n.append(ds.n)
            notes.append(f"gamma = {g}, d = {ds.d}")
            bound.append(math.nan if g is None else self.c * g**3 * math.sqrt(ds.d / math.log(max(ds.n, 2))))
        return over_runs(self.title, "assumption", f"n <= c gamma^3 sqrt(d / log n), c = {self.c:.4g}", n, "<=",
                         bound, where="on the training data", labels=run_labels(run), run_notes=notes)

    @prediction("the condition of Theorem 3.2 holds (w.h.p.) on the drawn data",
                source="Frei et al. 2023, Lemma 3.3 (the condition with C = 3, measured, no limit involved)")
    def condition_holds(self, run) -> Verdict:
        """Theorem 3.2's condition on the drawn data."""
        return condition_verdict(self.title, run, kind="prediction",
                                 statement="the condition of Theorem 3.2 holds (w.h.p.): " + CONDITION.format(C=3))


# -- Theorem 4.2 -----------------------------------------------------------------------------------
_SOURCE = "Frei et al. 2023, Theorem 4.2"


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
        """The theorem\'s name, as its verdicts give it."""
        return "Frei et al. 2023, Theorem 4.2"

    @assumption("near-orthogonal data: R_min^2 >= C gamma^-3 R^2 n max_(i!=j) |<x_i,x_j>|", threshold="data_constant",
                source=f"{_SOURCE}, 'as in Theorem 3.2 up to constants'; data_constant: ours (3, Theorem 3.2's)")
    def data_condition(self, run) -> Verdict:
        """The near-orthogonality condition with C = data_constant (worst run)."""
        return condition_verdict(self.title, run, C=self.data_constant)

    @assumption("activation is gamma-leaky and H-smooth (smoothed leaky ReLU), gamma in (0, 1]",
                source=f"{_SOURCE}, the network")
    def smooth_leaky_activation(self, run) -> Verdict:
        """The activation is the smoothed leaky ReLU."""
        return activation_verdict(self.title, run, ("smooth_leaky_relu",),
                                  "activation is gamma-leaky and H-smooth (smoothed leaky ReLU), gamma in (0, 1]")

    @assumption("outer layer fixed, a_j = +-c with both signs present, no bias", source=f"{_SOURCE}, the network")
    def fixed_outer_layer(self, run) -> Verdict:
        """The outer layer is fixed at +-c, both signs present, and there is no bias."""
        return outer_layer_verdict(self.title, run)

    @assumption("loss is logistic", source=f"{_SOURCE}, the loss")
    def logistic_loss(self, run) -> Verdict:
        """The loss is the logistic loss."""
        return loss_verdict(self.title, run, ("logistic",))

    @assumption("method is gradient descent (fixed step)", source=f"{_SOURCE}, the method")
    def gradient_descent(self, run) -> Verdict:
        """The method is plain GD."""
        kind = run.spec.method.kind
        return flag(self.title, "assumption", "method is gradient descent (fixed step)", kind == "gd",
                    f"method = {kind}")

    @assumption("small step: lr <= lr_factor / beta, beta the smoothness of the empirical risk", threshold="lr_factor",
                source=f"{_SOURCE}, 'small step size'; lr_factor: ours (2, the classical bound for monotone descent)")
    def small_step(self, run) -> Verdict:
        """lr <= lr_factor / beta, beta = lambda_max(X X^T)/n (||a||^2/4 + H ||a||_inf), H = (1 - gamma)/4."""
        lrs, bounds = [], []
        for r in range(run.n_runs):
            a, g = outer_signs(run, r), leaky_slope(run, r)
            lr, ds = _lr(run, r), run.data[r]
            if a is None or g is None or lr is None:
                lrs.append(math.nan if lr is None else lr)
                bounds.append(math.nan)
                continue
            lam = float(np.linalg.eigvalsh(ds.X @ ds.X.T)[-1])
            beta = lam / ds.n * (float(a @ a) / 4.0 + (1.0 - g) / 4.0 * float(np.max(np.abs(a))))
            lrs.append(lr)
            bounds.append(self.lr_factor / beta)
        return over_runs(self.title, "assumption",
                         "small step: lr <= lr_factor / beta, beta = lambda_max(X X^T)/n (||a||^2/4 + H ||a||_inf)",
                         lrs, "<=", bounds, where="", labels=run_labels(run),
                         note=f"lr_factor = {self.lr_factor:g}, H = (1 - gamma)/4")

    @assumption("small init: ||W(0)||_F / ||first GD step from W = 0||_F <= init_ratio_max", threshold="init_ratio_max",
                source=f"{_SOURCE}, 'small initialisation'; init_ratio_max: ours (1)")
    def small_init(self, run) -> Verdict:
        """||W(0)||_F against the norm of the first GD step from W = 0, lr |l'(0)| phi'(0) ||a|| ||X^T y|| / n."""
        res = run.results
        w0, step0 = initial(res, "W.frobenius"), initial(res, "step")
        ratios = []
        for r in range(run.n_runs):
            a, g = outer_signs(run, r), leaky_slope(run, r)
            lr, ds = _lr(run, r), run.data[r]
            if w0 is None or a is None or g is None or lr is None or (step0 is not None and step0[r] != 0):
                ratios.append(math.nan)
                continue
            first_step = lr * 0.5 * (1.0 + g) / 2.0 * np.linalg.norm(a) * np.linalg.norm(ds.y @ ds.X) / ds.n
            ratios.append(w0[r] / first_step)
        return over_runs(self.title, "assumption",
                         f"small init: ||W(0)||_F / ||first GD step from W = 0||_F <= {self.init_ratio_max:g}",
                         ratios, "<=", self.init_ratio_max, where="", labels=run_labels(run))

    @assumption("small init: init_scale <= omega_max (only when omega_max is set)", threshold="omega_max",
                source=f"{_SOURCE}, 'small initialisation'; omega_max: optional, ours")
    def init_scale_bound(self, run) -> list[Verdict]:
        """The recorded init_scale against omega_max; no verdict when omega_max is None."""
        if self.omega_max is None:
            return []
        return [over_runs(self.title, "assumption", "small init: init_scale <= omega_max",
                          [spec.init_scale for spec in run.runs], "<=", self.omega_max, where="",
                          labels=run_labels(run))]

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

    @prediction("the training loss -> 0 at least like t^-1/2", source=f"{_SOURCE}: L = O(t^-1/2) (the rate Kou et al. "
                "improve on); bound -1/2 on the fitted log-log slope (a loss that levels off has slope 0)")
    def loss_rate(self, run) -> Verdict:
        """The fitted slope of log L against log t on the asymptotic window is <= -1/2."""
        def slope(t, y):
            with np.errstate(divide="ignore"):
                return fitted_slope(np.log(t), np.log(y))[0]

        s, notes = self._window_fit(run, "loss", slope, 3)
        return over_runs(self.title, "prediction", "the training loss -> 0 at least like t^-1/2: fitted slope of "
                         "log L against log t", s, "<=", -0.5, where="", labels=run_labels(run), run_notes=notes,
                         note=why_missing(s, notes))

    @prediction("||W(t)||_2 -> infinity", threshold="q_tol",
                source=f"{_SOURCE}; q_tol: ours, as for Kou et al.'s Theta(log t) (log log t corrections move q by "
                       "about 1/log^2 t)")
    def norm_growth(self, run) -> Verdict:
        """The Box-Cox exponent q of ||W||_2 (`growth_exponent`) is >= -q_tol."""
        q, notes = self._window_fit(run, "W.spectral", lambda t, y: growth_exponent(t, y, 1.0), 4)
        return over_runs(self.title, "prediction", "||W(t)||_2 -> infinity: Box-Cox exponent q of ||W||_2 = "
                         "a + b (t^q - 1)/q (bounded a - b t^-r: q = -r; log t: q = 0)", q, ">=", -self.q_tol,
                         where="", labels=run_labels(run), run_notes=notes, note=why_missing(q, notes))

    @prediction("srank(W(k)) <= C for every GD step k >= 1", threshold="srank_max",
                source=f"{_SOURCE}, an absolute constant C not in the seed text; srank_max: ours (10, against "
                       "srank(W(0)) >= 30 for m >= 64, d >= m)")
    def bounded_stable_rank(self, run) -> Verdict:
        """The largest recorded srank(W) over the checkpoints with k >= 1 is <= srank_max."""
        res = run.results
        srank, step = curve(res, "W.stable_rank"), curve(res, "step")
        statement = "srank(W(k)) <= C for every GD step k >= 1 (max over checkpoints with k >= 1)"
        if srank is None or step is None:
            return over_runs(self.title, "prediction", statement, None, "<=", self.srank_max)
        worst, notes = [], []
        for r in range(run.n_runs):
            later = step[r] >= 1
            worst.append(float(np.nanmax(srank[r][later])) if later.any() else math.nan)
            W = stored_W(run, r)
            if step[r, 0] == 0 and W is not None:
                m, d = W.shape
                gauss = m * d / (math.sqrt(m) + math.sqrt(d)) ** 2
                notes.append(f"srank at init {srank[r, 0]:.4g} vs md/(sqrt m + sqrt d)^2 = {gauss:.4g} "
                             f"(ratio {srank[r, 0] / gauss:.3g}); {change_to(srank[r, 0], worst[-1])}")
            else:
                notes.append("")
        return over_runs(self.title, "prediction", statement, worst, "<=", self.srank_max, where="",
                         labels=run_labels(run), run_notes=notes)
