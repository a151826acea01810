"""Kou, Chen, Gu 2023 (NeurIPS), "Implicit bias of gradient descent for two-layer ReLU and leaky ReLU
networks on nearly-orthogonal data" (seed 001; SCIENCE.md S3).

The network is Frei et al.'s with 2m neurons, outer weights +-1/m in two halves (`TwoLayer` with
`outer_scale="inv_half_width"`, `outer_signs="balanced"`), trained by GD on the logistic loss.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pydantic

from implicitbias.data.stats import near_orthogonality
from implicitbias.theorems.base import Theorem, Verdict
from implicitbias.theorems.fitting import curve, final, fitted_slope, flag, late_window, over_runs, run_labels
from implicitbias.theorems.frei import activation_verdict, loss_verdict, outer_layer_verdict


class KouTheorem(Theorem):
    """Kou, Chen, Gu 2023 (S3): on data with ||x_i||^2 >= C n max_(k!=i) |<x_i,x_k>|, GD on the two-layer
    (leaky) ReLU network gives: leaky ReLU, srank(W(t)) -> 1; ReLU, srank(W(t)) bounded by a constant;
    ||W(t)||_F = Theta(log t); L(W(t)) = Theta(1/t); max_i q_i / min_i q_i -> 1.

    C: the paper's "sufficiently large" absolute constant of the data condition; default 3 (ours; the
        Frei et al. Theorem 3.2 constant at gamma = 1, so that the two conditions compare).
    srank_tol: leaky ReLU: final srank(W) <= 1 + srank_tol.
    relu_bound: ReLU: final srank(W) <= relu_bound (the paper: about 2 on exactly orthogonal data;
        default 3).
    late_fraction: the rates are fitted on the last `late_fraction` of the (log-spaced) checkpoints,
        those with t > 0.
    r2_min: ||W||_F = Theta(log t) is read as a fitted slope of ||W||_F against log t that is > 0, with a
        linear fit of R^2 >= r2_min.
    loss_slope_tol: L = Theta(1/t) is read as a fitted slope of log L against log t within
        -1 +- loss_slope_tol.
    spread_tol: final max_i q_i / min_i q_i <= 1 + spread_tol.
    Time is t = lr k for GD (the x axis of the fits); the slopes do not depend on lr.
    """

    C: float = pydantic.Field(3.0, gt=0.0)
    srank_tol: float = pydantic.Field(0.1, gt=0.0)
    relu_bound: float = pydantic.Field(3.0, ge=1.0)
    late_fraction: float = pydantic.Field(0.5, gt=0.0, le=1.0)
    r2_min: float = pydantic.Field(0.9, ge=0.0, le=1.0)
    loss_slope_tol: float = pydantic.Field(0.3, gt=0.0)
    spread_tol: float = pydantic.Field(0.05, gt=0.0)

    @property
    def title(self) -> str:
        return "Kou et al. 2023"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        kind = run.spec.method.kind
        return [
            self._condition(run),
            activation_verdict(T, run, ("relu", "leaky_relu"), "activation is ReLU or leaky ReLU"),
            outer_layer_verdict(T, run, equal_halves=True),
            loss_verdict(T, run, ("logistic",)),
            flag(
                T,
                "assumption",
                "method is gradient descent (GF: its small-step limit)",
                kind in ("gd", "gf"),
                f"method = {kind}",
            ),
        ]

    def _condition(self, run) -> Verdict:
        cache, lhs, rhs, notes = {}, [], [], []
        for r in range(run.n_runs):
            key = run.runs[r].data_key()
            if key not in cache:
                cache[key] = near_orthogonality(run.data[r].X, C_kou=self.C)
            s = cache[key]
            lhs.append(s.kou_lhs)
            rhs.append(s.kou_rhs)
            notes.append(f"binding point i = {s.kou_index}; holds for C <= {s.kou_C_max:.4g}")
        return over_runs(
            self.title,
            "assumption",
            f"||x_i||^2 >= C n max_(k!=i) |<x_i,x_k>|, C = {self.C:g}",
            lhs,
            ">=",
            rhs,
            where="on the training data",
            labels=run_labels(run),
            run_notes=notes,
        )

    def predictions(self, run) -> list[Verdict]:
        T, res, labels = self.title, run.results, run_labels(run)
        over = functools.partial(over_runs, T, "prediction", labels=labels)
        srank = final(res, "W.stable_rank")
        if getattr(run.spec.model, "activation", None) == "relu":
            rank = over(
                f"ReLU: srank(W) bounded by a constant (<= {self.relu_bound:g})", srank, "<=", self.relu_bound
            )
        else:
            rank = over("leaky ReLU: srank(W) -> 1", srank, "<=", 1.0 + self.srank_tol)
        late = f"over the late checkpoints (last {self.late_fraction:g} of them, t > 0)"
        fro = self._fits(run, "W.frobenius", log_y=False)
        loss = self._fits(run, "loss", log_y=True)
        fro_notes = [f"slope {s:.4g}, R^2 {q:.4g}" for s, q in fro]
        loss_notes = [f"slope {s:.4g}, R^2 {q:.4g}" for s, q in loss]
        return [
            rank,
            over(
                "||W||_F = Theta(log t): fitted slope of ||W||_F against log t > 0",
                [s for s, _ in fro],
                ">",
                0.0,
                where=late,
                run_notes=fro_notes,
            ),
            over(
                "||W||_F = Theta(log t): R^2 of the linear fit of ||W||_F against log t",
                [q for _, q in fro],
                ">=",
                self.r2_min,
                where=late,
                run_notes=fro_notes,
            ),
            over(
                "L = Theta(1/t): |slope of log L against log t - (-1)|",
                [abs(s + 1.0) for s, _ in loss],
                "<=",
                self.loss_slope_tol,
                where=late,
                run_notes=loss_notes,
            ),
            over(
                "every point reaches the same normalised margin: max_i q_i / min_i q_i -> 1",
                final(res, "margin_spread"),
                "<=",
                1.0 + self.spread_tol,
            ),
        ]

    def _fits(self, run, name: str, log_y: bool) -> list[tuple[float, float]]:
        y, time = curve(run.results, name), curve(run.results, "time")
        if y is None or time is None:
            return [(math.nan, math.nan)] * run.n_runs
        out = []
        for r in range(run.n_runs):
            keep = late_window(time[r], self.late_fraction)
            with np.errstate(divide="ignore", invalid="ignore"):
                yy = np.log(y[r][keep]) if log_y else y[r][keep]
                out.append(fitted_slope(np.log(time[r][keep]), yy))
        return out
