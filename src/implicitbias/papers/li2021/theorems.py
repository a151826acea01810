"""Li, Luo & Lyu 2021 ("Towards resolving the implicit bias of gradient descent for matrix factorization: greedy
low-rank learning", ICLR), S8: from a tiny init the singular values of a depth-2 factorisation are learned one at a
time, along the path of greedy low-rank learning (GLRL, `implicitbias.reference.greedy_low_rank`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pydantic

from implicitbias.metrics.factorization import closest_approach, crossing_times, end_to_end, spacing_at
from implicitbias.models import MatrixFactorization
from implicitbias.theorems._small_init import approach_verdict
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import curve, final, flag, linear_fit, over_runs, rate_verdict, run_labels
from implicitbias.theorems.matrix_common import (
    alpha_grid_verdict,
    flow_verdict,
    greedy_path,
    run_alphas,
    smallest,
    target_rank,
)

_PAPER = "Li, Luo & Lyu 2021 (ICLR)"


def glrl(run, r: int):
    """GLRL on run r's data, up to the rank of W* (`greedy_path`, memoized under the run's data key)."""
    return greedy_path(run.data[r], target_rank(run), run.runs[r].data_key())


def saddle_distances(run, rank: int) -> np.ndarray:
    """Per run and GLRL iterate k = 1..rank, the closest approach min_t ||W(t) - W_k|| / ||W_k|| (run, rank), with
    W(t) linear between consecutive checkpoints (`closest_approach`: the minimum over checkpoints alone would floor
    the distance at ~ (speed x spacing) / 2 where the path sweeps past a saddle)."""
    W = end_to_end(run.results, run.spec.model.depth)
    out = np.full((W.shape[0], rank), np.nan)
    for r in range(W.shape[0]):
        path = greedy_path(run.data[r], rank, run.runs[r].data_key())
        for k, Wk in enumerate(path.iterates[:rank]):
            out[r, k] = closest_approach(W[r], Wk) / np.linalg.norm(Wk)
    return out


class LiIncremental(Theorem):
    """Li, Luo & Lyu 2021 (ICLR), Theorems 5.3 and 6.x: gradient flow on a depth-2 factorisation from a tiny init
    alpha follows, as alpha -> 0, the path of greedy low-rank learning (GLRL): it passes the saddles W_1, W_2, ...
    (the best fits of rank 1, 2, ...) in turn, so the singular values of W(t) are learned one at a time, and the time
    spent near each saddle grows like ln(1/alpha) (escaping a saddle along a direction of size ~alpha^2 that grows
    exponentially).

    t_k is the first time sigma_k(W(t)) reaches half its final value (`crossing_times`). Predictions:
    (1) at the smallest alpha, t_1 < t_2 < ... < t_r (the r singular values of W* are learned in order, one at a
    time): min_k (t_(k+1) / t_k - 1) > 0;
    (2) the first escape, derived: W(0) = alpha^2 I, and its component along the top singular pair of
    M_0 = -grad L(0) grows like alpha^2 exp(2 sigma_1(M_0) t), so t_1 = ln(1/alpha) / sigma_1(M_0) + O(1): the slope
    of sigma_1(M_0) t_1 against ln(1/alpha) (one intercept per trial) is 1, judged by `rate_verdict` against the
    nearest wrong rates 0 (no plateau), 1/2 (an escape from a component of size alpha, not alpha^2) and 2 (growth at
    sigma_1, not 2 sigma_1);
    (3) every later plateau lasts ~ln(1/alpha) too (the component that escapes the next saddle is a power of alpha
    when it gets there): the slope of t_k - t_(k-1) against ln(1/alpha), k >= 2, per trial, has a 95% CI above 0 (the
    wrong reading: a plateau whose length does not depend on alpha);
    (4) the path converges to GLRL's: the closest approach d_k(alpha) = min_t ||W(t) - W_k|| / ||W_k|| to every
    saddle k < r (W_r = W* is where the run ends, its distance set by the stopping loss) vanishes as a power of
    alpha: `approach_verdict` (exponent CI above 0, the nearest wrong rate, and the profile interval of the
    extrapolated limit of d = d_inf + c alpha^q reaching 0), per trial and saddle, the worst reported; W(t) is taken
    linear between checkpoints (`closest_approach`).
    settle: the r-th singular value has settled when the final loss <= settle x L(W_(r-1)), the loss at GLRL's
        last saddle before W*: missing a fraction e of the r-th component costs ~e^2 L(W_(r-1)), so 1e-4 reads
        sigma_r to ~1%, which moves t_r by ~2 e / (2 sigma_r) (a few 0.01 time units) - far below the plateaus'
        spacing.
    gap_max: W*'s singular values are distinct when sigma_(k+1) / sigma_k <= gap_max for k < r.
    floor: a closest approach below this is left out of the rate fit (the comparison's accuracy).
    """

    settle: float = pydantic.Field(1e-4, gt=0.0, lt=1.0)
    gap_max: float = pydantic.Field(0.9, gt=0.0, lt=1.0)
    floor: float = pydantic.Field(1e-9, gt=0.0)

    @property
    def title(self) -> str:
        """The name its verdicts carry."""
        return "Li, Luo & Lyu 2021, incremental learning"

    # -- assumptions -------------------------------------------------------------------------------------------
    @assumption("a factorisation of depth 2 (GLRL's U V^T)", source=f"{_PAPER}, Sec. 5 (depth 2)")
    def depth_two(self, run) -> Verdict:
        """The model is a matrix factorisation of depth 2."""
        m = run.spec.model
        factorisation = isinstance(m, MatrixFactorization)
        return flag(self.title, "assumption", "a factorisation of depth 2 (GLRL's U V^T)",
                    factorisation and m.depth == 2, f"depth = {m.depth if factorisation else '?'}")

    @assumption("init W_j(0) = alpha I (a tiny, balanced init)", source=f"{_PAPER} (init alpha I, alpha -> 0)")
    def identity_init(self, run) -> Verdict:
        """The factors start at alpha I (no noise, not symmetric)."""
        m = run.spec.model
        factorisation = isinstance(m, MatrixFactorization)
        ok = factorisation and m.init_scheme == "identity" and m.init_noise == 0.0 and not m.symmetric
        return flag(self.title, "assumption", "init W_j(0) = alpha I (a tiny, balanced init)", ok,
                    f"init_scheme = {m.init_scheme if factorisation else '?'}")

    @assumption("gradient flow on the square loss", source=f"{_PAPER}")
    def gradient_flow(self, run) -> Verdict:
        """The method is gradient flow on the square loss."""
        return flow_verdict(self.title, run)

    @assumption("alpha -> 0 read over a grid of at least 4 init scales", source=f"{_PAPER} (the limit alpha -> 0); "
                "4: ours, the fewest alphas the limit fit leaves a degree of freedom with")
    def alpha_grid(self, run) -> Verdict:
        """The cell holds at least 4 init scales alpha > 0."""
        return alpha_grid_verdict(self.title, run, 4)

    @assumption("W* of rank r >= 2 with distinct singular values", threshold="gap_max",
                source=f"{_PAPER} (distinct singular values); gap_max: ours")
    def distinct_singular_values(self, run) -> Verdict:
        """max_k sigma_(k+1) / sigma_k of W* <= gap_max (worst run's data)."""
        ratios = []
        for ds in run.data:
            s = np.linalg.svd(ds.info["W_star"], compute_uv=False)[: target_rank(run)] if "W_star" in ds.info \
                else np.array([math.nan])
            ratios.append(float(np.max(s[1:] / s[:-1])) if s.size > 1 else math.nan)
        return over_runs(self.title, "assumption", "W* of rank r >= 2 with distinct singular values: max_k "
                         "sigma_(k+1) / sigma_k", ratios, "<=", self.gap_max, labels=run_labels(run),
                         where="over the runs' data")

    @assumption("the r-th singular value settled: final loss <= settle x the loss at GLRL's last saddle",
                threshold="settle", source="ours: t_k is read against the final singular values; settle = 1e-4 reads "
                                           "sigma_r to ~1% (class docstring)")
    def settled(self, run) -> Verdict:
        """Final loss over the loss at GLRL's last saddle before W* <= settle (worst run)."""
        r = target_rank(run)
        last = np.array([glrl(run, i).losses[r - 2] if r >= 2 else math.nan for i in range(run.n_runs)])
        loss = final(run.results, "loss")
        return over_runs(self.title, "assumption", f"the r-th singular value settled: final loss / loss at GLRL's "
                         f"last saddle W_(r-1) <= {self.settle:g}", None if loss is None else loss / last, "<=",
                         self.settle, labels=run_labels(run), note="t_k is read against the final, settled singular "
                         "values")

    # -- predictions -------------------------------------------------------------------------------------------
    @prediction("the singular values are learned one at a time: t_1 < t_2 < ... < t_r at the smallest alpha",
                source=f"{_PAPER}, Theorems 5.3 and 6.x (incremental learning)")
    def one_at_a_time(self, run) -> Verdict:
        """min_k (t_(k+1) / t_k - 1) > 0 at the smallest alpha (worst trial)."""
        if not self._has_path(run):
            return compare(self.title, "prediction", "singular values learned one at a time", None, ">", 0.0,
                           "no stored trajectory: set keep_trajectory")
        t, alpha, at = self.times(run), run_alphas(run), smallest(run)
        gaps = np.nanmin(t[at, 1:] / t[at, :-1] - 1.0, axis=1)
        notes = [", ".join(f"t_{k + 1} = {x:.4g}" for k, x in enumerate(t[r])) for r in at]
        return over_runs(self.title, "prediction", f"one at a time at the smallest alpha ({alpha.min():.3g}): "
                         "min_k (t_(k+1) / t_k - 1)", gaps, ">", 0.0, labels=[f"trial {run.runs[r].trial}" for r in at],
                         run_notes=notes)

    @prediction("the first escape takes ln(1/alpha) / sigma_1(M_0): slope 1 of sigma_1(M_0) t_1 against ln(1/alpha)",
                source=f"{_PAPER}; the rate is derived (class docstring, (2)) and judged against the nearest wrong "
                       "rates 0, 1/2 and 2")
    def first_escape(self, run) -> list[Verdict]:
        """The slope of sigma_1(M_0) t_1 against ln(1/alpha) is 1 (`rate_verdict`)."""
        if not self._has_path(run):
            return []
        t, alpha = self.times(run), run_alphas(run)
        top = np.array([glrl(run, r).top_gradient_singular_value[0] for r in range(run.n_runs)])
        trials = [spec.trial for spec in run.runs]
        fit = linear_fit(np.log(1.0 / alpha), top * t[:, 0], groups=trials)
        return [rate_verdict(self.title, "the first escape takes ln(1/alpha) / sigma_1(M_0): slope of sigma_1(M_0) "
                             "t_1 against ln(1/alpha), M_0 = -grad L(0)", fit, 1.0, (0.0, 0.5, 2.0),
                             note="sigma_1(M_0) per trial: " + ", ".join(f"{x:.4g}" for x in np.unique(top)))]

    @prediction("each later plateau lasts ~ln(1/alpha): the slope of t_k - t_(k-1) against ln(1/alpha) is above 0",
                source=f"{_PAPER} (saddle to saddle); the wrong reading is a plateau whose length does not depend on "
                       "alpha (95% CI, checkpoint spacing included)")
    def plateaus_lengthen(self, run) -> list[Verdict]:
        """Per trial and k >= 2, the slope of t_k - t_(k-1) against ln(1/alpha) with its 95% CI; each t_k is read to
        the checkpoint spacing around it (linear interpolation between checkpoints), so the slope's standard error
        adds (spacing / 2) / sqrt(sum (x - mean x)^2) to that of the residuals."""
        if not self._has_path(run):
            return []
        t, alpha = self.times(run), run_alphas(run)
        time = curve(run.results, "time")
        lows, labels, notes = [], [], []
        for trial in sorted({spec.trial for spec in run.runs}):
            idx = [r for r, spec in enumerate(run.runs) if spec.trial == trial]
            x = np.log(1.0 / alpha[idx])
            sxx = float(np.sum((x - x.mean()) ** 2))
            for k in range(1, t.shape[1]):
                fit = linear_fit(x, t[idx, k] - t[idx, k - 1])
                spacing = max(spacing_at(time[r], t[r, j]) for r in idx for j in (k - 1, k))
                se = math.sqrt(fit.se**2 + (spacing / 2.0) ** 2 / sxx) if sxx > 0 else math.nan
                lo, hi = dataclasses.replace(fit, se=se).interval(0.95)
                lows.append(lo)
                labels.append(f"trial {trial}, k = {k + 1}")
                notes.append(f"slope {fit.slope:.4g} +- {se:.2g} (SE, checkpoint spacing {spacing:.3g} included), "
                             f"95% CI [{lo:.4g}, {hi:.4g}]")
        return [over_runs(self.title, "prediction", "each later plateau lasts ~ln(1/alpha): lower end of the 95% CI "
                          "of the slope of t_k - t_(k-1) against ln(1/alpha), k >= 2", lows, ">", 0.0, labels=labels,
                          run_notes=notes, where="over alpha")]

    @prediction("the path converges to GLRL's: the closest approach to every saddle k < r vanishes as a power of "
                "alpha", threshold="floor", source=f"{_PAPER}, Theorem 5.3 (GLRL's path as alpha -> 0); floor: ours, "
                                                   "the comparison's accuracy")
    def follows_glrl(self, run) -> list[Verdict]:
        """The closest approach to each saddle k < r vanishes as a power of alpha (worst trial and saddle)."""
        if not self._has_path(run):
            return []
        alpha = run_alphas(run)
        r = target_rank(run)
        dist = saddle_distances(run, r)
        trials = np.array([spec.trial for spec in run.runs])
        verdicts = [approach_verdict(self.title, "", alpha, dist[:, k], 0.0, trials, floor=self.floor,
                                     note=f"saddle {k + 1}") for k in range(r - 1)]
        order = {"fails": 0, "not_evaluated": 1, "holds": 2}
        worst = min(verdicts, key=lambda v: order[v.outcome])
        at = smallest(run)
        closest = "; ".join(", ".join(f"{x:.3g}" for x in dist[i, : r - 1]) for i in at)
        return [dataclasses.replace(worst, statement="the path converges to GLRL's: the closest approach min_t "
                                    "||W(t) - W_k|| / ||W_k|| to every saddle k < r vanishes as a power of alpha "
                                    "(exponent CI above 0, extrapolated limit's profile interval reaching 0)",
                                    note=worst.note + f"; distances at the smallest alpha: {closest}")]

    # -- helpers -----------------------------------------------------------------------------------------------
    def times(self, run) -> np.ndarray:
        """t_k per run (run, r): the first time sigma_k(W(t)) reaches half its final value (`crossing_times`)."""
        def compute():
            W = end_to_end(run.results, run.spec.model.depth)
            s = np.linalg.svd(W, compute_uv=False)[..., : target_rank(run)]
            return crossing_times(curve(run.results, "time"), s)

        return run.once("li.times", compute)

    @staticmethod
    def _has_path(run) -> bool:
        return end_to_end(run.results, run.spec.model.depth) is not None


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [LiIncremental]
