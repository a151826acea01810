"""Chistikov et al. 2023, Theorem 7 read on the census of active neurons (`implicitbias.metrics.census`).

Theorem 7 is about the limit lambda -> 0: the interpolator gradient flow converges to tends to a balanced
rank-1 network, every *nonzero* neuron a positive multiple of v*. Figure 1 reads it on the *active* neurons at
finite lambda: their max angle -> 0. The two differ by the active neurons that stay small and off the bundle;
the census counts them. `CensusTheorem7` checks, on a cell (one scheme and d; lambda x trials), over the
trials whose data meet (subset "within") or violate (subset "beyond") the proofs' angle bound pi/4 between v*
and every x_i (the paper's experiments redraw only angles > pi/2):

- the theorem's own statement: the share of sum_j |a_j| ||w_j|| carried by unaligned neurons -> 0 (worst
  trial at the smallest lambda <= share_tol);
- Figure 1's reading, the max angle between active neurons -> 0: every unaligned neuron at the smallest lambda
  is still aligning, its angle falling like lambda^p with p >= 1/2 from the next larger lambda of the same trial
  (same data and init directions; `angle_exponents`) - the fraction of trials with a *stuck* one <= fraction_tol;
  and the fraction of trials with an unaligned neuron does not grow as lambda decreases.

On the "beyond" subset the angle assumption fails by construction, so its predictions are reported as
outside scope with their measured values: the split shows whether the unaligned neurons come with the
violated assumption.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pydantic

from implicitbias.metrics.census import STUCK_EXPONENT, UNALIGNED, angle_exponents, stored_census
from implicitbias.theorems.base import Theorem, Verdict, compare
from implicitbias.theorems.chistikov import method_verdict, relu_net_verdict, run_lambdas
from implicitbias.theorems.fitting import flag


def _fmt_lambda(lam: float) -> str:
    k = math.log(lam) / math.log(4.0)
    return f"4^{k:.0f}" if abs(k - round(k)) < 1e-9 else f"{lam:.3g}"


class CensusTheorem7(Theorem):
    """Theorem 7 (and Figure 1's reading of it) on the census, over the trials of a cell whose data meet
    (`subset` = "within") or violate ("beyond") every angle between v* and an x_i < max_data_angle.

    share_tol: the worst trial's share of sum_j |a_j| ||w_j|| held by unaligned neurons at the smallest
        lambda must be at most this. Ours: 1e-5. A neuron whose direction orthogonal to v* kept its init size
        lambda |z_perp| has angle ~ lambda |z_perp| / ||w_j||, so one unaligned at angle > c lambda has
        ||w_j|| < |z_perp| / c and (balanced, sum ||w||^2 ~ 1) share < (|z_perp| / c)^2 <~ (0.3 / 100)^2 ~ 1e-5;
        a larger share means a neuron that grew off the bundle (a second direction).
    fraction_tol: the fraction of trials with a stuck unaligned neuron at the smallest lambda must be at most
        this for Figure 1's reading (max angle between active neurons -> 0) to hold."""

    subset: Literal["within", "beyond"] = "within"
    max_data_angle: float = pydantic.Field(math.pi / 4, gt=0.0, le=math.pi)
    share_tol: float = pydantic.Field(1e-5, gt=0.0)
    fraction_tol: float = pydantic.Field(0.1, ge=0.0, le=1.0)

    @property
    def title(self) -> str:
        return f"Chistikov et al. 2023, Theorem 7 on the census (data angles {self.subset} pi/4)"

    def _members(self, run) -> list[int]:
        angles = self._data_angles(run)
        inside = angles < self.max_data_angle
        return [r for r in range(run.n_runs) if inside[r] == (self.subset == "within")]

    @staticmethod
    def _data_angles(run) -> np.ndarray:
        if "census.data_max_angle" in run.results:
            return np.asarray(run.results["census.data_max_angle"].values, dtype=float)
        return np.array([float(stored_census(run.results, run.runs[r], run.data[r], r)["census.data_max_angle"])
                         for r in range(run.n_runs)])

    def assumptions(self, run) -> list[Verdict]:
        trials = {spec.trial for spec in run.runs}
        members = self._members(run)
        kept = sorted({run.runs[r].trial for r in members})
        meet = len(kept) if self.subset == "within" else len(trials) - len(kept)
        note = (f"{meet} of {len(trials)} trials have every angle between v* and an x_i < "
                f"{self.max_data_angle:.4g} rad; checked here: the {len(kept)} trials whose data "
                + ("meet it" if self.subset == "within" else "violate it"))
        ok = None if not kept else self.subset == "within"
        return [flag(self.title, "assumption", f"every angle between v* and an x_i < {self.max_data_angle:.4g} rad "
                     "(the proofs' bound)", ok, note, measured=float(len(kept))),
                relu_net_verdict(self.title, run, balanced=True), method_verdict(self.title, run)]

    def predictions(self, run) -> list[Verdict]:
        members = self._members(run)
        if not members:
            return [flag(self.title, "prediction", "the census of the trials in this subset", None,
                         "no trial of this cell falls in the subset")]
        census = [stored_census(run.results, spec, run.data[r], r) for r, spec in enumerate(run.runs)]
        exponents = angle_exponents(run.runs, census)
        lam = run_lambdas(run)[members]
        census, exponents = [census[r] for r in members], [exponents[r] for r in members]
        share = np.array([float(c["census.unaligned_share"]) for c in census])
        unaligned = [c["census.class"] == UNALIGNED for c in census]
        kinds = {k: np.array([int(c[f"census.{k}"]) > 0 for c in census])
                 for k in ("unaligned", "unaligned_negative", "unaligned_positive")}
        stuck = np.array([bool(np.any(p[u] < STUCK_EXPONENT)) for p, u in zip(exponents, unaligned)])
        grid = np.unique(lam)
        small, large = grid.min(), grid.max()
        frac = {g: {k: float(np.mean(v[lam == g])) for k, v in kinds.items()} for g in grid}
        per_lambda = "; ".join(
            f"{_fmt_lambda(g)}: {frac[g]['unaligned']:.2f} (negative sign {frac[g]['unaligned_negative']:.2f}, "
            f"positive {frac[g]['unaligned_positive']:.2f}) of {int(np.sum(lam == g))}" for g in grid[::-1])
        shares = "; ".join(f"{_fmt_lambda(g)}: {np.max(share[lam == g]):.3g}" for g in grid[::-1])
        at_small = lam == small
        stuck_note = (f"{int(np.sum(stuck[at_small]))} of {int(np.sum(at_small))} trials at lambda = "
                      f"{_fmt_lambda(small)} have an unaligned neuron whose angle falls slower than "
                      f"lambda^{STUCK_EXPONENT:g} from the next larger lambda; trials with unaligned neurons per "
                      f"lambda: {per_lambda}")
        return [
            compare(self.title, "prediction", "the unaligned neurons' share of sum_j |a_j| ||w_j|| -> 0: worst "
                    "trial at the smallest lambda", float(np.max(share[at_small])), "<=", self.share_tol,
                    f"worst share per lambda: {shares}"),
            compare(self.title, "prediction", "Figure 1's reading: every unaligned active neuron at the smallest "
                    "lambda still aligns (angle ~ lambda^p, p >= 1/2): fraction of trials with a stuck one",
                    float(np.mean(stuck[at_small])) if grid.size > 1 else None, "<=", self.fraction_tol,
                    stuck_note),
            compare(self.title, "prediction", "the fraction of trials with an unaligned active neuron does not grow "
                    "as lambda decreases (smallest vs largest lambda)", frac[small]["unaligned"], "<=",
                    frac[large]["unaligned"]),
        ]
