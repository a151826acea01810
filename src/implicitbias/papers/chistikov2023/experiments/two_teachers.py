"""Chistikov, Englert & Lazic 2023 (NeurIPS), appendix I (S11): two opposite teacher neurons, so that gradient
flow passes two saddles and the loss drops twice.
"""

from __future__ import annotations

import numpy as np

from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.papers.chistikov2023.data import TwoTeachers
from implicitbias.papers.chistikov2023.experiments.fig1 import GF, NET, SQUARE, STOP
from implicitbias.theorems.base import CellsTheorem, compare, prediction
from implicitbias.theorems.init_scale_cells import fmt_lambda


def _median_loss(cell) -> tuple[np.ndarray, np.ndarray]:
    ds = cell.results
    return np.median(ds["time"].values, axis=0), np.median(ds["loss"].values, axis=0)


def intermediate_plateau(time, loss, *, drop: float = 0.5, flat: float = 1.5, min_points: int = 3,
                         min_span: float = 1.3, later_drop: float = 10.0) -> dict | None:
    """An intermediate plateau of a loss curve (checkpoints log-spaced in time), or None.

    Rule: after the first drop below `drop` x L(0), the first run of at least `min_points` consecutive
    checkpoints (t > 0) whose losses stay within a factor `flat` of each other, spanning a time ratio of at
    least `min_span`, at a level at least `later_drop` x above the final loss (so the curve drops again).
    Returns {"level", "t_start", "t_end"} (level: the median loss on the plateau)."""
    t, L = np.asarray(time, float), np.asarray(loss, float)
    keep = (t > 0) & np.isfinite(L) & (L > 0)
    t, L = t[keep], L[keep]
    if L.size < min_points or not np.any(L < drop * L[0]):
        return None
    start = int(np.flatnonzero(L < drop * L[0])[0])
    for i in range(start, L.size - min_points + 1):
        j = i
        while j + 1 < L.size and L[i:j + 2].max() <= flat * L[i:j + 2].min():
            j += 1
        long_enough = j - i + 1 >= min_points and t[j] >= min_span * t[i]
        if long_enough and np.median(L[i:j + 1]) >= later_drop * L[-1]:
            return {"level": float(np.median(L[i:j + 1])), "t_start": float(t[i]), "t_end": float(t[j])}
    return None


def _weak_class_loss(data) -> float:
    """The loss with the stronger teacher's class fitted and the weaker one's not: (1/2n) sum_{weak} y_i^2."""
    weak = int(np.argmin(np.linalg.norm(data.info["teachers"], axis=1)))
    y = data.y[data.info["cluster"] == weak]
    return float(np.sum(y**2) / (2 * data.n))


class TwoTeacherClaims(CellsTheorem):
    """Appendix I: with two opposite teachers the flow passes two saddles, so the median loss curve has an
    intermediate plateau, at the loss of the weaker teacher's class alone, before it falls to 0.

    level_interval: the plateau level over the weaker class's loss must lie in it (ours: a factor 2 either
    way). The plateau detection rule is `intermediate_plateau`'s defaults."""

    level_interval: tuple[float, float] = (0.5, 2.0)

    @property
    def title(self) -> str:
        """The theorem named in this object's verdicts."""
        return "Chistikov et al. 2023, appendix I (two teachers)"

    @staticmethod
    def _curve(ctx) -> tuple[np.ndarray, np.ndarray, dict | None]:
        """(median time, median loss, the detected intermediate plateau or None) of the only cell."""
        def compute():
            t, L = _median_loss(ctx.results.cells[0])
            return t, L, intermediate_plateau(t, L)

        return ctx.once("two_teachers.curve", compute)

    @prediction("the median loss curve has an intermediate plateau (two saddles)",
                source="Chistikov et al. 2023, appendix I; the detection rule is ours (intermediate_plateau)")
    def has_intermediate_plateau(self, ctx):
        """1 when the detection rule finds a plateau, else 0."""
        found = self._curve(ctx)[2]
        rule = ("rule: the first run, after L < L(0)/2, of >= 3 consecutive checkpoints within a factor 1.5, "
                "over a time ratio >= 1.3, at least 10x above the final loss")
        return compare(self.title, "prediction", "the median loss curve has an intermediate plateau (two saddles)",
                       1.0 if found else 0.0, ">=", 1.0,
                       rule + (f"; found at t in [{found['t_start']:.3g}, {found['t_end']:.3g}]" if found
                               else ""))

    @prediction("the plateau sits at the loss of the weaker teacher's class alone", threshold="level_interval",
                source="Chistikov et al. 2023, appendix I (the stronger teacher is fitted first); the factor 2 is ours")
    def plateau_level(self, ctx) -> list:
        """The plateau level over (1/2n) sum_{weak class} y_i^2 (median over trials), both ends of the interval."""
        cell = ctx.results.cells[0]
        found = self._curve(ctx)[2]
        predicted = float(np.median([_weak_class_loss(d) for d in cell.data]))
        level = found["level"] / predicted if found else None
        lo, hi = self.level_interval
        statement = f"plateau level / loss of the weaker teacher's class alone (within [{lo:g}, {hi:g}])"
        return [compare(self.title, "prediction", statement, level, ">=", lo, f"predicted level {predicted:.4g}"),
                compare(self.title, "prediction", "plateau level / weaker class's loss (upper end)", level, "<=", hi)]

    @prediction("the median final loss -> 0", source="Chistikov et al. 2023, appendix I; below the cell's stopping rule")
    def final_loss(self, ctx):
        """The median final loss below the cell's stop.loss_tol (1e-9 without one)."""
        cell = ctx.results.cells[0]
        L = self._curve(ctx)[1]
        tol = cell.spec.stop.loss_tol or 1e-9
        return compare(self.title, "prediction", "median final loss -> 0", float(L[-1]), "<", tol)


def _two_teacher_figure(results):
    fig, (ax,) = panels(1, width=6.0)
    cell = results.cells[0]
    ds = cell.results
    for r in range(ds.sizes["run"]):
        keep = ds["time"].values[r] > 0
        ax.plot(ds["time"].values[r][keep], ds["loss"].values[r][keep], color="0.7", lw=0.6)
    t, L = _median_loss(cell)
    ax.plot(t[t > 0], L[t > 0], "k", lw=1.5, label="median over trials")
    found = intermediate_plateau(t, L)
    if found:
        ax.axvspan(found["t_start"], found["t_end"], color="C1", alpha=0.2, label="intermediate plateau")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time t")
    ax.set_ylabel("training loss")
    ax.grid(True, which="both", alpha=0.3)
    cfg = cell.spec
    finish(ax, f"two opposite teachers (norms 1, 3), d = {cfg.data.d}, m = {cfg.model.width},\n"
               f"lambda = {fmt_lambda(cfg.init_scale)}, {cell.trials} trials")
    return fig


TWO_TEACHER_TIMES = [0.0] + list(np.geomspace(0.01, 2e5, 90))

TWO_TEACHERS = Experiment(
    name="chistikov2023-two-teachers",
    paper="Chistikov, Englert, Lazic 2023 (NeurIPS), appendix I",
    systems=("S11",),
    summary="Two opposite teacher neurons (norms 1 and 3), d = 16 with d points per teacher, m = 25, lambda "
            "= 4^-7, 15 trials, gradient flow: the loss drops twice (the flow passes two saddles); the "
            "intermediate plateau sits at the loss of the weaker teacher's class.",
    config=ExperimentConfig(
        model=NET.replace(width=25),
        data=TwoTeachers(d=16, norms=(1.0, 3.0)),
        loss=SQUARE,
        method=GF,
        stop=STOP,
        init_scale=4.0**-7,
        trials=15,
        checkpoints=TWO_TEACHER_TIMES,
        kkt=False,
    ),
    quick={"trials": 3, "method.rtol": 1e-3},
    figures=(Figure("two_teachers_loss",
                    "Training loss of every trial (grey) and their median (black); shaded: the detected "
                    "intermediate plateau.", _two_teacher_figure),),
    claims=(TwoTeacherClaims(),),
    settings_source="From the paper (appendix I): norms 1 and 3, d = 16, d points per teacher, m = 25, "
                    "lambda = 4^-7, 15 trials, medians. Ours: the reading of 'opposite' (TwoTeachers), "
                    "gradient flow, 90 log-spaced checkpoints, the plateau detection rule. Quick: 3 trials, "
                    "rtol 1e-3 (the early phase, where neurons slide along a ReLU kink, costs ~ 1/rtol; the "
                    "plateau level is the same as with 1e-4).",
)

EXPERIMENTS = [TWO_TEACHERS]
