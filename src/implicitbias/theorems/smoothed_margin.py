"""Lyu & Li 2020 (with Ji & Telgarsky 2020): margin maximisation in homogeneous networks (SCIENCE.md S10).

For an L_h-homogeneous model trained on the logistic or exponential loss, once L(theta) < l(0)/n gradient
flow keeps the smoothed normalised margin

    gamma_tilde(theta) = l^{-1}(n L(theta)) / ||theta||^L_h,
    l^{-1}(s) = -log(e^s - 1) (logistic),  -log s (exponential),

non-decreasing (Lyu & Li 2020, Theorem 4.1), and gamma_tilde <= gamma_bar = min_i q_i / ||theta||^L_h with
gamma_bar / gamma_tilde -> 1: the normalised margin gamma_bar itself is non-decreasing only in the limit. So a
finite run is checked on what the theorem does say: gamma_tilde is non-decreasing, and gamma_bar never falls
below an earlier gamma_tilde (gamma_bar(t) >= gamma_tilde(s) for s <= t). The largest relative decrease of
gamma_bar itself is reported in the note. GD with a small step follows gradient flow (Lyu & Li prove the
same monotonicity for GD with a small enough step), at t = lr k. Other methods (normalised GD, whose step
grows like 1/L; SGD) are outside the theorem's scope: normalised GD with lr 0.5 on frei2023-kkt's full data
lowers gamma_tilde by 5.8e-5 (relative) between two checkpoints.
"""

from __future__ import annotations

import math

import numpy as np
import pydantic

from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.fitting import curve, flag, over_runs, run_labels
from implicitbias.theorems.two_layer_common import loss_verdict

_SOURCE = "Lyu & Li 2020, Theorem 4.1"
_STATEMENTS = (
    "smoothed normalised margin gamma_tilde is non-decreasing once L < l(0)/n (max relative decrease)",
    "normalised margin stays above every earlier smoothed margin once L < l(0)/n "
    "(max relative shortfall of gamma_bar(t) below gamma_tilde(s), s <= t)",
)


def smoothed_margin(loss, param_norm, n: int, degree: int, loss_name: str) -> np.ndarray:
    """Lyu & Li's gamma_tilde = l^{-1}(n L) / ||theta||^L_h from the recorded loss and parameter norm
    (nan where n L >= l(0), i.e. before the loss is below l(0)/n)."""
    s = n * np.asarray(loss, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = -np.log(np.expm1(s)) if loss_name == "logistic" else -np.log(s)
        out = inv / np.asarray(param_norm, dtype=np.float64) ** degree
    return np.where(inv > 0, out, np.nan)


def max_relative_decrease(values) -> float:
    """max_{k <= l} (v_k - v_l) / |v_k| over the finite entries (0 for a non-decreasing sequence)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan
    best = np.maximum.accumulate(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        drop = np.where(best != 0, (best - v) / np.abs(best), 0.0)
    return float(max(drop.max(), 0.0))


class LyuLiMonotoneMargin(Theorem):
    """Lyu & Li 2020, Theorem 4.1 (S10): after the first checkpoint with L < l(0)/n, the smoothed normalised
    margin is non-decreasing, and the normalised margin stays above every earlier smoothed margin.

    Finite-time reading: none is needed. Both statements hold at every time after the first checkpoint with
    L < l(0)/n, so they are checked at every recorded checkpoint from there on, and a single recorded decrease
    larger than rtol fails them (see tests/test_negative_controls_frei.py). The limit gamma_bar / gamma_tilde
    -> 1 is not checked here (Frei et al.'s Theorem 3.2 (1) reads the margin spread).

    rtol: relative tolerance of both checks, for rounding and for the finite step of GD (default 1e-6, ours:
        well above float64 rounding of l^{-1}(n L) / ||theta||).
    """

    rtol: float = pydantic.Field(1e-6, ge=0.0)

    @property
    def title(self) -> str:
        """The theorem\'s name, as its verdicts give it."""
        return "Lyu & Li 2020, Theorem 4.1"

    @assumption("the model is L_h-homogeneous, f(x; c theta) = c^L_h f(x; theta)", source=f"{_SOURCE}, the model")
    def homogeneous_model(self, run) -> Verdict:
        """The cell's model has a homogeneity degree (no bias, a homogeneous activation)."""
        model = run.spec.model
        degree = model.homogeneity
        return flag(self.title, "assumption", "the model is L_h-homogeneous, f(x; c theta) = c^L_h f(x; theta)",
                    degree is not None, f"L_h = {degree}" if degree is not None else
                    f"model {model.kind} is not homogeneous (bias, or a non-homogeneous activation)")

    @assumption("loss is logistic or exponential", source=f"{_SOURCE}, the loss")
    def exponential_tail_loss(self, run) -> Verdict:
        """The loss is the logistic or the exponential loss."""
        return loss_verdict(self.title, run)

    @assumption("method is gradient flow (Theorem 4.1) or GD (their discrete version, for a small enough step)",
                source=f"{_SOURCE}, and its discrete version for GD")
    def gradient_flow(self, run) -> Verdict:
        """The method is gradient flow or GD."""
        kind = run.spec.method.kind
        return flag(self.title, "assumption", "method is gradient flow (Theorem 4.1) or GD (their discrete version, "
                    "for a small enough step)", kind in ("gf", "gd"), f"method = {kind}")

    def _drops(self, run) -> dict:
        """Per run from its first checkpoint with L < l(0)/n: the largest relative decrease of gamma_tilde and the
        largest relative shortfall of gamma_bar below an earlier gamma_tilde, computed once for both predictions.
        {"why": reason} when they cannot be computed."""
        res, model, loss = run.results, run.spec.model, run.spec.loss
        L, rho, gbar = curve(res, "loss"), curve(res, "param_norm"), curve(res, "normalized_margin")
        if model.homogeneity is None or loss.name not in ("logistic", "exponential"):
            return {"why": "needs a homogeneous model and the logistic or exponential loss"}
        if L is None or rho is None or gbar is None:
            return {"why": ""}
        labels, tilde_drop, short, notes, vacuous, keep = run_labels(run), [], [], [], [], []
        for r in range(run.n_runs):
            n = run.data[r].n
            below = np.flatnonzero(L[r] < loss.value_at_zero / n)
            if below.size == 0:
                vacuous.append(labels[r])
                continue
            keep.append(r)
            k0 = below[0]
            gt = smoothed_margin(L[r, k0:], rho[r, k0:], n, model.homogeneity, loss.name)
            gb = gbar[r, k0:]
            tilde_drop.append(max_relative_decrease(gt))
            with np.errstate(invalid="ignore"):
                best = np.fmax.accumulate(gt)
                gap = np.where(np.isfinite(best) & np.isfinite(gb), (best - gb) / np.abs(gb), np.nan)
            short.append(float(max(np.nanmax(gap), 0.0)) if np.isfinite(gap).any() else math.nan)
            notes.append(f"from checkpoint {k0} on; gamma_bar itself decreases by up to "
                         f"{max_relative_decrease(gb):.3g} (relative)")
        return {"keep": keep, "labels": labels, "values": (tilde_drop, short), "notes": notes, "vacuous": vacuous}

    def _verdict(self, run, which: int) -> Verdict:
        statement = _STATEMENTS[which]
        drops = run.once("lyu_li.drops", lambda: self._drops(run))
        labels = run_labels(run)
        if "why" in drops:
            return over_runs(self.title, "prediction", statement, None, "<=", self.rtol, labels=labels,
                             note=drops["why"])
        keep = drops["keep"]
        if not keep:
            return over_runs(self.title, "prediction", statement, [math.nan] * run.n_runs, "<=", self.rtol,
                             labels=labels, where="", note="the loss never fell below l(0)/n: nothing to check")
        vacuous = drops["vacuous"]
        note = f"vacuous on {', '.join(vacuous)} (the loss never fell below l(0)/n)" if vacuous else ""
        return over_runs(self.title, "prediction", statement, drops["values"][which], "<=", self.rtol,
                         labels=[labels[r] for r in keep], where="", run_notes=drops["notes"], note=note)

    @prediction("the smoothed normalised margin gamma_tilde is non-decreasing once L < l(0)/n", threshold="rtol",
                source=f"{_SOURCE}; rtol: ours, rounding and the finite step of GD")
    def monotone_smoothed_margin(self, run) -> Verdict:
        """The largest relative decrease of gamma_tilde over the checkpoints with L < l(0)/n is <= rtol."""
        return self._verdict(run, 0)

    @prediction("the normalised margin stays above every earlier smoothed margin once L < l(0)/n", threshold="rtol",
                source=f"{_SOURCE} (gamma_tilde <= gamma_bar); rtol: ours, rounding and the finite step of GD")
    def margin_above_smoothed(self, run) -> Verdict:
        """The largest relative shortfall of gamma_bar(t) below gamma_tilde(s), s <= t, is <= rtol."""
        return self._verdict(run, 1)

    @prediction("the training loss is non-increasing", threshold="rtol",
                source=f"{_SOURCE}: gradient flow descends, dL/dt = -||grad L||^2 <= 0 (and GD with their small step "
                       "does too); rtol: ours, rounding and the finite step of GD")
    def monotone_loss(self, run) -> Verdict:
        """The largest relative increase of the loss over an earlier checkpoint, L(t) / min_(s <= t) L(s) - 1, is
        <= rtol on every run."""
        L = curve(run.results, "loss")
        labels = run_labels(run)
        statement = "training loss is non-increasing (max relative increase over an earlier checkpoint)"
        if L is None:
            return over_runs(self.title, "prediction", statement, None, "<=", self.rtol, labels=labels, note="")
        return over_runs(self.title, "prediction", statement, [max_relative_decrease(-L[r]) for r in range(run.n_runs)],
                         "<=", self.rtol, labels=labels, where="")

