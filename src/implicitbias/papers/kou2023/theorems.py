"""Kou, Chen, Gu 2023 (NeurIPS), "Implicit bias of gradient descent for two-layer ReLU and leaky ReLU
networks on nearly-orthogonal data" (seed 001; SCIENCE.md S3).

The network is Frei et al.'s with 2m neurons, outer weights +-1/m in two halves (`TwoLayer` with
`outer_scale="inv_half_width"`, `outer_signs="balanced"`), trained by GD on the logistic loss.

How the asymptotic claims are read at finite time (every fit uses the checkpoints from the first one with
L < l(0)/n on, the regime in which every point is fitted and the margin dynamics of Lyu & Li and Kou et al.
apply; with fewer than 4 such checkpoints the rates are `not_evaluated`):

- ||W||_F = Theta(log t): the Box-Cox exponent q of ||W||_F = a + b (t^q - 1)/q (`fitting.growth_exponent`) must
  satisfy |q| <= q_tol. Logarithmic growth has q = 0 at every t; a power law c t^p has q = p.
- L = Theta(1/t): the fitted slope s of log L against log t must satisfy |s + 1| <= loss_slope_tol.
- srank(W) -> its limit and max_i q_i / min_i q_i -> 1: the limit lies between the last value and the
  extrapolation of the fit y = y_inf + c / log t, within the quantity's range (`fitting.limit_verdict`); the
  claim holds when that interval is within the bound, fails when it is above it, and is not_evaluated (not
  converged) when it straddles the bound: Kou et al. give no time by which the limits are reached.
"""

from __future__ import annotations

import math

import numpy as np
import pydantic

from implicitbias.metrics.spectral import spectral_summary
from implicitbias.models import TwoLayer
from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.fitting import (
    asymptotic_window,
    curve,
    fitted_slope,
    flag,
    growth_exponent,
    limit_verdict,
    over_runs,
    run_labels,
    why_missing,
)
from implicitbias.theorems.two_layer_common import (
    activation_verdict,
    loss_verdict,
    orthogonality_stats,
    outer_layer_verdict,
    outer_signs,
)

_SOURCE = "Kou, Chen, Gu 2023"


def _srank(M) -> float:
    """The recorded stable rank (`metrics.spectral`) of a limit structure; nan where it is 0 (no target)."""
    values = spectral_summary(np.linalg.svd(M, compute_uv=False))
    return float(values["stable_rank"]) if values["spectral"] > 0 else math.nan


def limit_structure(W, a, X, y, gamma: float) -> np.ndarray:
    """The limit W_inf that the activation pattern of W predicts (Kou et al.'s analysis; the KKT structure
    of Frei et al.'s Problem (1)): GD adds to neuron r (sign s_r) the vector s_r y_i sigma'_ri c_i x_i for
    every training point, with sigma'_ri = 1 where <w_r, x_i> > 0 and gamma otherwise (0 for ReLU) and a
    weight c_i common to all neurons (the loss derivative of point i). On orthogonal data the margin of
    point i is then c_i ||x_i||^2 sum_r sigma'_ri^2 / m, so equal margins (the spread -> 1) give
    c_i proportional to 1 / (||x_i||^2 sum_r sigma'_ri^2). Returns W_inf = S diag(c) X, S_ri = s_r y_i sigma'_ri
    (up to scale).

    Leaky ReLU, every positive neuron active on the positive points and inactive on the negative ones (and
    the reverse), orthogonal data of equal norms: the rows are P - gamma N and N - gamma P, P, N the sums of
    the positive and negative points, so srank(W_inf) = 2 (1 + gamma^2) / (1 + gamma)^2 -- 1 only at
    gamma = 1 (1.111 at gamma = 0.5). ReLU (gamma = 0) with every neuron active on all points of its sign:
    srank(W_inf) = 2, Kou et al.'s "about 2 for exactly orthogonal data"; a neuron dead on some points of
    its sign adds a row of its own, and srank(W_inf) can exceed 2 (it stays <= rank <= n, a constant in
    m, d and t)."""
    slope = np.where(W @ X.T > 0, 1.0, gamma)
    S = np.sign(a)[:, None] * y[None, :] * slope
    weight = np.sum(slope**2, axis=0) * np.sum(X**2, axis=1)
    c = np.where(weight > 0, 1.0 / np.where(weight > 0, weight, 1.0), 0.0)
    return (S * c[None, :]) @ X


class KouTheorem(Theorem):
    """Kou, Chen, Gu 2023 (S3): on data with ||x_i||^2 >= C n max_(k!=i) |<x_i,x_k>|, GD on the two-layer
    (leaky) ReLU network gives: leaky ReLU, srank(W(t)) -> 1; ReLU, srank(W(t)) bounded by a constant (about
    2 on exactly orthogonal data); ||W(t)||_F = Theta(log t); L(W(t)) = Theta(1/t); max_i q_i / min_i q_i -> 1.

    C: the paper's "sufficiently large" absolute constant of the data condition; default 3 (ours; the
        Frei et al. Theorem 3.2 constant at gamma = 1, so that the two conditions compare).
    srank_tol: srank(W) -> the srank of the limit structure W_inf (`limit_structure`, computed from the
        activation pattern of the stored W and the data): limit <= srank(W_inf) + srank_tol.
        For leaky ReLU Kou et al. state the limit 1; the structure gives 2 (1 + gamma^2)/(1 + gamma)^2 on
        orthogonal data, which is 1 only at gamma = 1, and the note shows both. For ReLU srank(W_inf) is 2
        when every neuron is active on all points of its sign (the paper's "about 2") and at most n; it
        replaces the former fixed bound 3. Default 0.05 (ours: the resolution of an extrapolated limit).
    q_tol: ||W||_F = Theta(log t): |q| <= q_tol for the Box-Cox exponent q. Default 0.1, half the exponent
        of t^0.2, the slowest power law the check must reject (midpoint rule). The log log t corrections
        that Theta(log t) allows move q by about 1/log^2 t, <= 0.02 once t >= 10^3.
    loss_slope_tol: L = Theta(1/t): |s + 1| <= loss_slope_tol. Default 0.125, half the distance from -1 to
        the nearest wrong rate t^-0.75 (midpoint rule). The finite-t corrections Theta(1/t) allows,
        L ~ 1 / (gamma_bar(t)^2 t) with gamma_bar(t) approaching its limit like 1/log t, move s by about
        2 / log^2 t, <= 0.05 once t >= 10^3.
    spread_tol: limit of max_i q_i / min_i q_i <= 1 + spread_tol (default 0.05, ours).
    Time is t = lr k for GD (the x axis of the fits); the exponents do not depend on lr.
    """

    C: float = pydantic.Field(3.0, gt=0.0)
    srank_tol: float = pydantic.Field(0.05, gt=0.0)
    q_tol: float = pydantic.Field(0.1, gt=0.0)
    loss_slope_tol: float = pydantic.Field(0.125, gt=0.0)
    spread_tol: float = pydantic.Field(0.05, gt=0.0)

    @property
    def title(self) -> str:
        """The theorem\'s name, as its verdicts give it."""
        return "Kou et al. 2023"

    @assumption("||x_i||^2 >= C n max_(k!=i) |<x_i,x_k>|", threshold="C",
                source=f"{_SOURCE}, the data condition ('C sufficiently large'); C: ours (3, Frei et al.'s at gamma = 1)")
    def data_condition(self, run) -> Verdict:
        """Kou et al.'s near-orthogonality condition on every run's data (worst run)."""
        lhs, rhs, notes = [], [], []
        for r in range(run.n_runs):
            s = orthogonality_stats(run, r, C_kou=self.C)
            lhs.append(s.kou_lhs)
            rhs.append(s.kou_rhs)
            notes.append(f"binding point i = {s.kou_index}; holds for C <= {s.kou_C_max:.4g}")
        return over_runs(self.title, "assumption", f"||x_i||^2 >= C n max_(k!=i) |<x_i,x_k>|, C = {self.C:g}", lhs,
                         ">=", rhs, where="on the training data", labels=run_labels(run), run_notes=notes)

    @assumption("activation is ReLU or leaky ReLU", source=f"{_SOURCE}, the network")
    def relu_activation(self, run) -> Verdict:
        """The activation is the ReLU or the leaky ReLU."""
        return activation_verdict(self.title, run, ("relu", "leaky_relu"), "activation is ReLU or leaky ReLU")

    @assumption("outer layer fixed, a_j = +-1/m in two equal halves, no bias", source=f"{_SOURCE}, the network")
    def fixed_outer_layer(self, run) -> Verdict:
        """The outer layer is fixed at +-c in two equal halves, and there is no bias."""
        return outer_layer_verdict(self.title, run, equal_halves=True)

    @assumption("loss is logistic", source=f"{_SOURCE}, the loss")
    def logistic_loss(self, run) -> Verdict:
        """The loss is the logistic loss."""
        return loss_verdict(self.title, run, ("logistic",))

    @assumption("method is gradient descent (GF: its small-step limit)", source=f"{_SOURCE}, the method")
    def gradient_descent(self, run) -> Verdict:
        """The method is GD or gradient flow."""
        kind = run.spec.method.kind
        return flag(self.title, "assumption", "method is gradient descent (GF: its small-step limit)",
                    kind in ("gd", "gf"), f"method = {kind}")

    @prediction("leaky ReLU: srank(W) -> 1 (the limit structure's); ReLU: srank(W) bounded by a constant",
                threshold="srank_tol",
                source=f"{_SOURCE}; the target srank(W_inf) of `limit_structure` (ours); srank_tol: ours, the "
                       "resolution of an extrapolated limit")
    def stable_rank(self, run) -> Verdict:
        """The extrapolated limit of srank(W) is within srank(W_inf) + srank_tol, W_inf the limit structure that the
        activation pattern of the stored W predicts."""
        model = run.spec.model
        relu = isinstance(model, TwoLayer) and model.activation == "relu"
        targets, notes = [], []
        for r in range(run.n_runs):
            W, a = run.results["theta.W"].values[r] if "theta.W" in run.results else None, outer_signs(run, r)
            model_r = run.runs[r].model
            gamma = 0.0 if relu else (float(model_r.gamma) if isinstance(model_r, TwoLayer) else math.nan)
            if W is None or a is None:
                targets.append(math.nan)
                notes.append("theta.W or const.a not stored")
                continue
            ds = run.data[r]
            targets.append(_srank(limit_structure(np.asarray(W, np.float64), a, ds.X, ds.y, gamma)))
            notes.append(f"srank(W_inf) = {targets[-1]:.4g}" + (
                "" if relu else f"; Kou et al.: -> 1; orthogonal data: 2(1 + g^2)/(1 + g)^2 = "
                f"{2 * (1 + gamma**2) / (1 + gamma) ** 2:.4g} at gamma = {gamma:g}"))
        what = ("ReLU: srank(W) bounded by a constant, the srank of the limit structure W_inf (2 when every "
                "neuron is active on all points of its sign)" if relu else
                "leaky ReLU: srank(W) -> the srank of the limit structure W_inf (Kou et al.: 1)")
        W = run.results["theta.W"] if "theta.W" in run.results else None
        room = min(W.shape[-2:]) if W is not None else math.inf  # srank <= rank W <= min(m, d)
        return limit_verdict(self.title, run, what, "W.stable_rank", targets, self.srank_tol,
                             window=asymptotic_window, extra=notes, hi=room)

    @prediction("||W||_F = Theta(log t)", threshold="q_tol",
                source=f"{_SOURCE}; q_tol: midpoint between log t (q = 0) and t^0.2, the slowest power law to reject")
    def norm_rate(self, run) -> Verdict:
        """|q| <= q_tol for the Box-Cox exponent q of ||W||_F (`growth_exponent`)."""
        qs, notes = self._fit(run, "W.frobenius", lambda t, y: growth_exponent(t, y, 1.0))
        return over_runs(self.title, "prediction",
                         "||W||_F = Theta(log t): |Box-Cox exponent q of ||W||_F = a + b (t^q - 1)/q| "
                         "(log t: q = 0; t^p: q = p)", np.abs(qs), "<=", self.q_tol, where="",
                         labels=run_labels(run), run_notes=notes, note=why_missing(qs, notes))

    @prediction("L = Theta(1/t)", threshold="loss_slope_tol",
                source=f"{_SOURCE}; loss_slope_tol: midpoint between the slope -1 and the nearest wrong rate t^-0.75")
    def loss_rate(self, run) -> Verdict:
        """|s + 1| <= loss_slope_tol for the fitted slope s of log L against log t."""
        def slope(t, y):
            with np.errstate(divide="ignore"):
                return fitted_slope(np.log(t), np.log(y))[0]

        s, notes = self._fit(run, "loss", slope)
        return over_runs(self.title, "prediction",
                         "L = Theta(1/t): |fitted slope s of log L against log t - (-1)|",
                         np.abs(np.asarray(s) + 1.0), "<=", self.loss_slope_tol, where="",
                         labels=run_labels(run), run_notes=notes, note=why_missing(s, notes))

    @prediction("every point reaches the same normalised margin: max_i q_i / min_i q_i -> 1", threshold="spread_tol",
                source=f"{_SOURCE}; spread_tol: ours, the resolution of an extrapolated limit")
    def equal_margins(self, run) -> Verdict:
        """The extrapolated limit of the margin spread is within 1 + spread_tol."""
        return limit_verdict(self.title, run, "every point reaches the same normalised margin: max_i q_i / min_i q_i "
                             "-> 1", "margin_spread", 1.0, self.spread_tol, window=asymptotic_window)

    def _fit(self, run, name: str, fit) -> tuple[list[float], list[str]]:
        """`fit(t, y)` on each run's asymptotic window (>= 4 checkpoints, else nan), with a note per run."""
        y, time = curve(run.results, name), curve(run.results, "time")
        if y is None or time is None:
            return [math.nan] * run.n_runs, [""] * run.n_runs
        out, notes = [], []
        for r in range(run.n_runs):
            keep = asymptotic_window(run, r)
            if keep.sum() < 4:
                out.append(math.nan)
                notes.append(f"only {int(keep.sum())} checkpoints with L < l(0)/n (4 needed)")
                continue
            out.append(float(fit(time[r][keep], y[r][keep])))
            t = time[r][keep]
            notes.append(f"fitted {out[-1]:.4g} on {int(keep.sum())} checkpoints, t = {t[0]:.4g}..{t[-1]:.4g} "
                         "(from the first with L < l(0)/n)")
        return out, notes


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [KouTheorem]
