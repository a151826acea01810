"""Chistikov et al. 2023, Theorem 7 read on the census of active neurons (`implicitbias.metrics.census`).

Theorem 7 is about the limit lambda -> 0: the interpolator gradient flow converges to tends to a balanced
rank-1 network, every *nonzero* neuron a positive multiple of v*. Figure 1 reads it on the *active* neurons at
finite lambda: their max angle -> 0. The two differ by the active neurons that stay small and off the bundle;
the census counts them. `CensusTheorem7` checks, on a cell (one scheme and d; lambda x trials), over the
trials whose data meet (subset "within") or violate (subset "beyond") the proofs' angle bound pi/4 between v*
and every x_i (the paper's experiments redraw only angles > pi/2):

- the theorem's own statement, in two parts: the positive neurons carrying weight form one bundle (the limit is
  rank 1; at most `bundle_tol` of the trials at the smallest lambda with two bundles or more), and the share of
  sum_j |a_j| ||w_j|| carried by neurons off every bundle -> 0 (worst trial at the smallest lambda <= share_tol).
  Until census version 2 there was a single bundle direction, so a trial whose positive neurons form two bundles
  had an unaligned share of 1 and failed the share; it now fails the bundle count, and its share counts only the
  neurons off both bundles;
- Figure 1's reading, the max angle between active neurons -> 0: every unaligned neuron at the smallest lambda
  is still aligning, its angle falling like lambda^p with p >= 1/2 from the next larger lambda of the same trial
  (same data and init directions; `angle_exponents`) - the fraction of trials with one that does not (*not
  shrinking*) <= fraction_tol; and the fraction of trials with an unaligned neuron does not grow as lambda
  decreases.

On the "beyond" subset the angle assumption fails by construction, so its predictions are reported as
outside scope with their measured values: the split shows whether the unaligned neurons come with the
violated assumption.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pydantic

from implicitbias.metrics.census import SHRINK_EXPONENT, UNALIGNED, angle_exponents, stored_census
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import flag
from implicitbias.theorems.init_scale_cells import fmt_lambda, method_verdict, relu_net_verdict, run_lambdas


class CensusTheorem7(Theorem):
    """Theorem 7 (and Figure 1's reading of it) on the census, over the trials of a cell whose data meet
    (`subset` = "within") or violate ("beyond") every angle between v* and an x_i < max_data_angle.

    share_tol: the worst trial's share of sum_j |a_j| ||w_j|| held by unaligned neurons at the smallest
        lambda must be at most this. Ours: 1e-5. A neuron whose direction orthogonal to v* kept its init size
        lambda |z_perp| has angle ~ lambda |z_perp| / ||w_j||, so one unaligned at angle > c lambda has
        ||w_j|| < |z_perp| / c and (balanced, sum ||w||^2 ~ 1) share < (|z_perp| / c)^2 <~ (0.3 / 100)^2 ~ 1e-5;
        a larger share means a neuron that grew off the bundle: a negative-sign one (a positive one that grew
        is a bundle of its own, `metrics.census.BUNDLE_SHARE`, the same bound), or grown neurons of a bundle
        spread wider than c lambda about its direction.
    bundle_tol: the fraction of trials at the smallest lambda whose positive neurons form two bundles or more
        must be at most this (ours: 0, the theorem's limit has one direction; a nonzero value reads it as "in
        most trials").
    fraction_tol: the fraction of trials with an unaligned neuron that does not shrink like lambda at the
        smallest lambda must be at most this for Figure 1's reading (max angle between active neurons -> 0)."""

    subset: Literal["within", "beyond"] = "within"
    max_data_angle: float = pydantic.Field(math.pi / 4, gt=0.0, le=math.pi)
    share_tol: float = pydantic.Field(1e-5, gt=0.0)
    fraction_tol: float = pydantic.Field(0.1, ge=0.0, le=1.0)
    bundle_tol: float = pydantic.Field(0.0, ge=0.0, le=1.0)

    @property
    def title(self) -> str:
        """The theorem named in this object's verdicts."""
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

    # -- assumptions ----------------------------------------------------------------------------------------
    @assumption("every angle between v* and an x_i below max_data_angle (the proofs' bound)",
                threshold="max_data_angle",
                source="Chistikov et al. 2023: the proofs assume pi/4 (Sec. 9); here it selects the trials of the "
                       "subset, so it holds on 'within' and fails on 'beyond' by construction")
    def data_angles(self, run) -> Verdict:
        """How many trials meet the angle bound; the subset's trials are those that meet (or violate) it."""
        all_trials = {spec.trial for spec in run.runs}
        kept = sorted({run.runs[r].trial for r in self._members(run)})
        meet = len(kept) if self.subset == "within" else len(all_trials) - len(kept)
        note = (f"{meet} of {len(all_trials)} trials have every angle between v* and an x_i < "
                f"{self.max_data_angle:.4g} rad; checked here: the {len(kept)} trials whose data "
                + ("meet it" if self.subset == "within" else "violate it"))
        ok = None if not kept else self.subset == "within"
        return flag(self.title, "assumption", f"every angle between v* and an x_i < {self.max_data_angle:.4g} rad "
                    "(the proofs' bound)", ok, note, measured=float(len(kept)))

    @assumption("ReLU network, both layers trained, no bias, balanced init",
                source="Chistikov et al. 2023, Sec. 2 (the network and its balanced initialisation)")
    def relu_network(self, run) -> Verdict:
        """The model is the paper's network from its balanced init."""
        return relu_net_verdict(self.title, run, balanced=True)

    @assumption("trained by gradient flow", source="Chistikov et al. 2023, Theorems 6 and 7 (gradient flow)")
    def gradient_flow(self, run) -> Verdict:
        """The method is gradient flow (GD: not evaluated)."""
        return method_verdict(self.title, run)

    # -- predictions ----------------------------------------------------------------------------------------
    def _summary(self, run) -> dict | None:
        """The census of the subset's runs, computed once per context and subset (None: no run in the subset)."""
        return run.once(f"census.summary/{self.subset}/{self.max_data_angle!r}", lambda: self._summarise(run))

    def _summarise(self, run) -> dict | None:
        members = self._members(run)
        if not members:
            return None
        census = [stored_census(run.results, spec, run.data[r], r) for r, spec in enumerate(run.runs)]
        exponents = angle_exponents(run.runs, census)
        lam = run_lambdas(run)[members]
        census, exponents = [census[r] for r in members], [exponents[r] for r in members]
        unaligned = [c["census.class"] == UNALIGNED for c in census]
        kinds = {k: np.array([int(c[f"census.{k}"]) > 0 for c in census])
                 for k in ("unaligned", "unaligned_negative", "unaligned_positive")}
        grid = np.unique(lam)
        return {"lam": lam, "grid": grid, "at_small": lam == grid.min(),
                "share": np.array([float(c["census.unaligned_share"]) for c in census]),
                "bundles": np.array([int(c["census.bundles"]) for c in census]),
                "stuck": np.array([bool(np.any(p[u] < SHRINK_EXPONENT)) for p, u in zip(exponents, unaligned)]),
                "frac": {g: {k: float(np.mean(v[lam == g])) for k, v in kinds.items()} for g in grid}}

    @prediction("the unaligned neurons' share of sum_j |a_j| ||w_j|| -> 0", threshold="share_tol",
                source="Chistikov et al. 2023, Theorem 7 (every nonzero neuron of the limit a positive multiple of "
                       "v*); share_tol: ours, the share of a neuron left at its init size (class docstring)")
    def unaligned_share(self, run) -> Verdict:
        """The worst trial's unaligned share at the smallest lambda (or not evaluated: no trial in the subset)."""
        s = self._summary(run)
        if s is None:
            return flag(self.title, "prediction", "the census of the trials in this subset", None,
                        "no trial of this cell falls in the subset")
        lam, share = s["lam"], s["share"]
        shares = "; ".join(f"{fmt_lambda(g)}: {np.max(share[lam == g]):.3g}" for g in s["grid"][::-1])
        return compare(self.title, "prediction", "the unaligned neurons' share of sum_j |a_j| ||w_j|| -> 0: worst "
                       "trial at the smallest lambda", float(np.max(share[s["at_small"]])), "<=", self.share_tol,
                       f"worst share per lambda: {shares}")

    @prediction("the positive neurons carrying weight form one bundle", threshold="bundle_tol",
                source="Chistikov et al. 2023, Theorem 7 (the limit is a rank-1 network); bundles: "
                       "metrics.census.bundles (ours)")
    def one_bundle(self, run) -> list[Verdict]:
        """The fraction of trials at the smallest lambda with two bundles or more."""
        s = self._summary(run)
        if s is None:
            return []
        lam, bundles = s["lam"], s["bundles"]
        per = "; ".join(f"{fmt_lambda(g)}: {int(np.sum(bundles[lam == g] >= 2))} of {int(np.sum(lam == g))} "
                        f"(most bundles {int(np.max(bundles[lam == g]))})" for g in s["grid"][::-1])
        return [compare(self.title, "prediction", "the positive neurons carrying weight form one bundle: fraction "
                        "of trials at the smallest lambda with two or more", float(np.mean(bundles[s["at_small"]] >= 2)),
                        "<=", self.bundle_tol, f"trials with two bundles or more per lambda: {per}")]

    @prediction("Figure 1's reading: every unaligned active neuron at the smallest lambda still aligns",
                threshold="fraction_tol",
                source="Chistikov et al. 2023, Figure 1 (max angle between active neurons -> 0); a neuron does not "
                       "shrink when its angle falls slower than lambda^(1/2) (metrics.census.SHRINK_EXPONENT, ours)")
    def still_aligning(self, run) -> list[Verdict]:
        """The fraction of trials with an unaligned neuron that does not shrink like lambda at the smallest
        lambda."""
        s = self._summary(run)
        if s is None:
            return []
        lam, grid, frac, at_small, stuck = s["lam"], s["grid"], s["frac"], s["at_small"], s["stuck"]
        per_lambda = "; ".join(
            f"{fmt_lambda(g)}: {frac[g]['unaligned']:.2f} (negative sign {frac[g]['unaligned_negative']:.2f}, "
            f"positive {frac[g]['unaligned_positive']:.2f}) of {int(np.sum(lam == g))}" for g in grid[::-1])
        stuck_note = (f"{int(np.sum(stuck[at_small]))} of {int(np.sum(at_small))} trials at lambda = "
                      f"{fmt_lambda(grid.min())} have an unaligned neuron whose angle falls slower than "
                      f"lambda^{SHRINK_EXPONENT:g} from the next larger lambda; trials with unaligned neurons per "
                      f"lambda: {per_lambda}")
        return [compare(self.title, "prediction", "Figure 1's reading: every unaligned active neuron at the smallest "
                        "lambda still aligns (angle ~ lambda^p, p >= 1/2): fraction of trials with one that does not",
                        float(np.mean(stuck[at_small])) if grid.size > 1 else None, "<=", self.fraction_tol,
                        stuck_note)]

    @prediction("the fraction of trials with an unaligned active neuron does not grow as lambda decreases",
                source="Chistikov et al. 2023, Figure 1's reading of Theorem 7 (smallest against largest lambda)")
    def fraction_not_growing(self, run) -> list[Verdict]:
        """The fraction of trials with an unaligned neuron at the smallest lambda against the largest."""
        s = self._summary(run)
        if s is None:
            return []
        frac, grid = s["frac"], s["grid"]
        return [compare(self.title, "prediction", "the fraction of trials with an unaligned active neuron does not "
                        "grow as lambda decreases (smallest vs largest lambda)", frac[grid.min()]["unaligned"], "<=",
                        frac[grid.max()]["unaligned"])]
