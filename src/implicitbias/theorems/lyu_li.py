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

import functools
import math

import numpy as np
import pydantic

from implicitbias.theorems.base import Theorem, Verdict
from implicitbias.theorems.fitting import curve, flag, over_runs, run_labels
from implicitbias.theorems.frei import loss_verdict


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
        return "Lyu & Li 2020, Theorem 4.1"

    def assumptions(self, run) -> list[Verdict]:
        model = run.spec.model
        degree = model.homogeneity
        homog = flag(
            self.title,
            "assumption",
            "the model is L_h-homogeneous, f(x; c theta) = c^L_h f(x; theta)",
            degree is not None,
            f"L_h = {degree}"
            if degree is not None
            else f"model {getattr(model, 'kind', None)} is not "
            "homogeneous (bias, or a non-homogeneous activation)",
        )
        kind = run.spec.method.kind
        method = flag(self.title, "assumption",
                      "method is gradient flow (Theorem 4.1) or GD (their discrete version, for a small enough "
                      "step)", kind in ("gf", "gd"), f"method = {kind}")
        return [homog, loss_verdict(self.title, run), method]

    def predictions(self, run) -> list[Verdict]:
        res, model, loss = run.results, run.spec.model, run.spec.loss
        L, rho, gbar = curve(res, "loss"), curve(res, "param_norm"), curve(res, "normalized_margin")
        statements = (
            "smoothed normalised margin gamma_tilde is non-decreasing once L < l(0)/n "
            "(max relative decrease)",
            "normalised margin stays above every earlier smoothed margin once L < l(0)/n "
            "(max relative shortfall of gamma_bar(t) below gamma_tilde(s), s <= t)",
        )
        over = functools.partial(over_runs, self.title, "prediction", labels=run_labels(run))
        if model.homogeneity is None or loss.name not in ("logistic", "exponential"):
            why = "needs a homogeneous model and the logistic or exponential loss"
            return [over(s, None, "<=", self.rtol, note=why) for s in statements]
        if L is None or rho is None or gbar is None:
            return [over(s, None, "<=", self.rtol) for s in statements]
        labels, tilde_drop, short, notes, vacuous = run_labels(run), [], [], [], []
        keep = []
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
            notes.append(
                f"from checkpoint {k0} on; gamma_bar itself decreases by up to "
                f"{max_relative_decrease(gb):.3g} (relative)"
            )
        if not keep:
            return [
                over(
                    s,
                    [math.nan] * run.n_runs,
                    "<=",
                    self.rtol,
                    where="",
                    note="the loss never fell below l(0)/n: nothing to check",
                )
                for s in statements
            ]
        note = f"vacuous on {', '.join(vacuous)} (the loss never fell below l(0)/n)" if vacuous else ""
        over = functools.partial(
            over_runs,
            self.title,
            "prediction",
            labels=[labels[r] for r in keep],
            where="",
            run_notes=notes,
            note=note,
        )
        return [over(statements[0], tilde_drop, "<=", self.rtol), over(statements[1], short, "<=", self.rtol)]
