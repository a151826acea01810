"""Gunasekar et al. 2017 ("Implicit regularization in matrix factorization", NeurIPS), S8: gradient flow on
W = U U^T from U(0) = alpha I, alpha -> 0, ends at the minimum nuclear norm among PSD interpolators; proved for
commuting measurements (Theorem 1, `GunasekarCommuting`), conjectured for general ones (Conjecture 1,
`GunasekarConjecture`). Both are read over a grid of alphas: the ratio of the limit's nuclear norm to that minimum
at the smallest alpha, and the excess ratio - 1 vanishing as a power of alpha (`_small_init.approach_verdict`).
"""

from __future__ import annotations

import numpy as np
import pydantic

from implicitbias.metrics.factorization import commutator_gap
from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.fitting import flag, over_runs, run_labels
from implicitbias.theorems.matrix_common import (
    alpha_grid_verdict,
    depth_verdict,
    excess_trend,
    flow_verdict,
    identity_init_verdict,
    min_nuclear_norm_psd,
    nuclear_ratios,
    reached,
    run_alphas,
    smallest,
)

_THEOREM_1 = "Gunasekar et al. 2017 (NeurIPS), Theorem 1"
_CONJECTURE = "Gunasekar et al. 2017 (NeurIPS), Conjecture 1"
_RATIO = ("ratio_tol: the acceptance threshold of the issue, 1 + 1e-3 (the statement is the limit 1), read at the "
          "grid's smallest alpha")
_TREND = ("the rate: the flow is exponentiated gradient, whose entropy-regularised limit errs by a power of alpha "
          "(Cominetti & San Martin 1994); floor: cvxpy's relative tolerance, the comparison's accuracy")


class _SensingLimit(Theorem):
    """What Theorem 1 and Conjecture 1 share: the fields of their predictions, ||W(inf)||_* / min over PSD
    interpolators <= 1 + ratio_tol at the smallest alpha of the grid, on every trial (`_ratio_verdict`), and the
    excess ratio - 1 vanishing as a power of alpha (`_trend_verdict`). Each subclass declares both, after its
    assumptions."""

    ratio_tol: float = pydantic.Field(1e-3, gt=0.0)
    floor: float = pydantic.Field(1e-7, gt=0.0)

    def _ratio_verdict(self, run) -> Verdict:
        ratio = self._ratios(run)
        at = smallest(run)
        alpha = run_alphas(run).min()
        labels = [f"trial {run.runs[r].trial}" for r in at]
        return over_runs(self.title, "prediction", f"||W(inf)||_* / min over PSD interpolators <= 1 + "
                         f"{self.ratio_tol:g} at the smallest alpha ({alpha:.3g})", ratio[at], "<=",
                         1.0 + self.ratio_tol, labels=labels, run_notes=self._ratio_notes(run, at),
                         where=f"at alpha = {alpha:.3g}")

    def _trend_verdict(self, run) -> Verdict:
        return excess_trend(self.title, run, self._ratios(run), self.floor)

    @staticmethod
    def _ratios(run) -> np.ndarray:
        return run.once("nuclear_ratios.psd", lambda: nuclear_ratios(run, psd=True))

    def _ratio_notes(self, run, at) -> list[str]:
        return []


class GunasekarCommuting(_SensingLimit):
    """Gunasekar et al. 2017, Theorem 1: if the measurement matrices A_i commute (and are symmetric), gradient flow
    on W = U U^T from U(0) = alpha I converges, as alpha -> 0, to the minimum of ||W||_* (= trace W) over PSD
    interpolators, when the limits interpolate. The model is `MatrixFactorization(symmetric=True)`. (A depth-2
    W_2 W_1 from W_1 = W_2 = alpha I stays on W_2 = W_1^T in exact arithmetic, but that set is unstable where the
    gradient pushes an eigenvalue below 0: from alpha <= 1e-6 rounding alone moves the flow off it.)

    The reference is that minimum (`implicitbias.reference.min_nuclear_norm_psd_sensing`, cvxpy). Predictions: at
    the smallest alpha of the grid, ||W(inf)||_* / min_PSD ||W||_* <= 1 + ratio_tol on every trial (1.001: the
    acceptance threshold of the issue; the theorem's statement is the limit 1), and the excess ratio - 1 vanishes
    as a power of alpha (in the eigenbasis of the A_i the flow is exponentiated gradient, w = alpha^2 exp(-4 A^T
    int r / n), whose limit is a linear program regularised by an entropy of weight 1 / ln(1/alpha^2); that error
    falls like exp(-c ln(1/alpha^2)) = alpha^(2c), Cominetti & San Martin 1994): `approach_verdict`, per trial, the
    exponent's 95% CI above 0 (the wrong rate: a ratio that levels off) and the profile interval of the
    extrapolated limit of ratio = r_inf + c alpha^q reaching 1.
    commute_tol: commuting and symmetric means the relative commutator and asymmetry are <= commute_tol.
    loss_tol: the limits interpolate when the final loss <= loss_tol.
    floor: an excess ratio - 1 below this (the comparison's accuracy: cvxpy's relative tolerance) is left out of the
        rate fit.
    """

    commute_tol: float = pydantic.Field(1e-10, gt=0.0)
    loss_tol: float = pydantic.Field(1e-12, gt=0.0)

    @property
    def title(self) -> str:
        """The name its verdicts carry."""
        return "Gunasekar et al. 2017, Theorem 1 (commuting measurements)"

    @assumption("the A_i commute and are symmetric", threshold="commute_tol",
                source=f"{_THEOREM_1}; commute_tol: ours, rounding")
    def commuting(self, run) -> Verdict:
        """The relative commutator and asymmetry of the A_i, worst run's data."""
        gaps = [commutator_gap(ds) for ds in run.data]
        return over_runs(self.title, "assumption", "the A_i commute and are symmetric: relative commutator / asymmetry",
                         gaps, "<=", self.commute_tol, labels=run_labels(run), where="over the runs' data")

    @assumption("labels realisable by a PSD matrix (W* PSD)", source=f"{_THEOREM_1} (PSD interpolators exist)")
    def realisable(self, run) -> Verdict:
        """W* is PSD on every run's data."""
        star = [ds.info.get("W_star") for ds in run.data]
        ok = None if any(w is None for w in star) else all(
            np.linalg.eigvalsh(0.5 * (w + w.T))[0] >= -1e-12 * np.linalg.norm(w, 2) for w in star)
        return flag(self.title, "assumption", "labels realisable by a PSD matrix (W* PSD)", ok,
                    "" if ok is not None else "the data set records no W_star")

    @assumption("a matrix factorisation of depth N >= 2", source=f"{_THEOREM_1}: W = U U^T")
    def depth(self, run) -> Verdict:
        """The model is a matrix factorisation of depth >= 2."""
        return depth_verdict(self.title, run, 2)

    @assumption("W = U U^T from U(0) = alpha I", source=f"{_THEOREM_1}")
    def identity_init(self, run) -> Verdict:
        """The model is W = U U^T from U(0) = alpha I."""
        return identity_init_verdict(self.title, run)

    @assumption("gradient flow on the square loss", source=f"{_THEOREM_1}")
    def gradient_flow(self, run) -> Verdict:
        """The method is gradient flow on the square loss."""
        return flow_verdict(self.title, run)

    @assumption("alpha -> 0 read over a grid of at least 4 init scales", source=f"{_THEOREM_1} (the limit alpha -> 0); "
                "4: ours, the fewest alphas the limit fit leaves a degree of freedom with")
    def alpha_grid(self, run) -> Verdict:
        """The cell holds at least 4 init scales alpha > 0."""
        return alpha_grid_verdict(self.title, run, 4)

    @assumption("the limits interpolate: final loss <= loss_tol", threshold="loss_tol",
                source=f"{_THEOREM_1} (limits that interpolate); loss_tol: ours")
    def loss_reached(self, run) -> Verdict:
        """The final loss of every run is at most loss_tol."""
        return reached(self.title, run, self.loss_tol, "Theorem 1 is about limits that interpolate")

    @prediction("||W(inf)||_* / min over PSD interpolators <= 1 + ratio_tol at the smallest alpha",
                threshold="ratio_tol", source=f"{_THEOREM_1}; {_RATIO}")
    def ratio_at_smallest_alpha(self, run) -> Verdict:
        """The nuclear-norm ratio at the grid's smallest alpha, worst trial."""
        return self._ratio_verdict(run)

    @prediction("the excess ratio - 1 vanishes as a power of alpha (exponent CI above 0, extrapolated limit 1)",
                threshold="floor", source=f"{_THEOREM_1} (the limit alpha -> 0); {_TREND}")
    def excess_vanishes(self, run) -> Verdict:
        """ratio - 1 -> 0 as a power of alpha, worst trial (`excess_trend`)."""
        return self._trend_verdict(run)

    def _ratio_notes(self, run, at) -> list[str]:
        unconstrained = nuclear_ratios(run)[at]
        return [f"over the minimum among all interpolators (PSD or not): {u:.6g}" for u in unconstrained]


class GunasekarConjecture(_SensingLimit):
    """Gunasekar et al. 2017, Conjecture 1: for general measurements (here Gaussian A_i), gradient flow on
    W = U U^T from U(0) = alpha I, alpha -> 0, ends at the minimum nuclear norm among PSD interpolators (they
    observed the ratio -> 1; Arora et al. 2019 and Razin & Cohen 2020 question it). Checked like Theorem 1: the
    ratio at the smallest alpha <= 1 + ratio_tol, and the excess ratio - 1 vanishes as a power of alpha
    (`approach_verdict`). It can be told apart from "recovers W*" only where the minimum-nuclear-norm interpolator is
    not W* (measurements below the recovery threshold; the note gives ||W*||_* over the minimum).
    A conjecture: where it fails, that is the finding.
    loss_tol: the limits interpolate when the final loss <= loss_tol (1e-9: above the recovery threshold the last
        residual directions converge slowly; the residual sqrt(2 n L) ~ 1e-4 is then well below ratio_tol).
    floor: as in `GunasekarCommuting`.
    """

    loss_tol: float = pydantic.Field(1e-9, gt=0.0)

    @property
    def title(self) -> str:
        """The name its verdicts carry."""
        return "Gunasekar et al. 2017, Conjecture 1 (general measurements)"

    @assumption("a matrix factorisation of depth N >= 2", source=f"{_CONJECTURE}: W = U U^T")
    def depth(self, run) -> Verdict:
        """The model is a matrix factorisation of depth >= 2."""
        return depth_verdict(self.title, run, 2)

    @assumption("W = U U^T from U(0) = alpha I", source=f"{_CONJECTURE}")
    def identity_init(self, run) -> Verdict:
        """The model is W = U U^T from U(0) = alpha I."""
        return identity_init_verdict(self.title, run)

    @assumption("gradient flow on the square loss", source=f"{_CONJECTURE}")
    def gradient_flow(self, run) -> Verdict:
        """The method is gradient flow on the square loss."""
        return flow_verdict(self.title, run)

    @assumption("alpha -> 0 read over a grid of at least 4 init scales", source=f"{_CONJECTURE} (the limit alpha -> "
                "0); 4: ours, the fewest alphas the limit fit leaves a degree of freedom with")
    def alpha_grid(self, run) -> Verdict:
        """The cell holds at least 4 init scales alpha > 0."""
        return alpha_grid_verdict(self.title, run, 4)

    @assumption("the limits interpolate: final loss <= loss_tol", threshold="loss_tol",
                source=f"{_CONJECTURE} (limits that interpolate); loss_tol: ours, 1e-9 leaves a residual well below "
                       "ratio_tol")
    def loss_reached(self, run) -> Verdict:
        """The final loss of every run is at most loss_tol."""
        return reached(self.title, run, self.loss_tol, "the conjecture is about limits that interpolate")

    @prediction("||W(inf)||_* / min over PSD interpolators <= 1 + ratio_tol at the smallest alpha",
                threshold="ratio_tol", source=f"{_CONJECTURE}; {_RATIO}")
    def ratio_at_smallest_alpha(self, run) -> Verdict:
        """The nuclear-norm ratio at the grid's smallest alpha, worst trial."""
        return self._ratio_verdict(run)

    @prediction("the excess ratio - 1 vanishes as a power of alpha (exponent CI above 0, extrapolated limit 1)",
                threshold="floor", source=f"{_CONJECTURE} (the limit alpha -> 0); {_TREND}")
    def excess_vanishes(self, run) -> Verdict:
        """ratio - 1 -> 0 as a power of alpha, worst trial (`excess_trend`)."""
        return self._trend_verdict(run)

    def _ratio_notes(self, run, at) -> list[str]:
        return [star_note(run.data[r], run.runs[r].data_key()) for r in at]


def star_note(data, data_key: str | None = None) -> str:
    """||W*||_* over the minimum over PSD interpolators: 1 where that minimum recovers W* (then converging to it
    cannot be told from recovering W*), above 1 below the recovery threshold."""
    star = data.info.get("W_star")
    if star is None:
        return ""
    ratio = np.linalg.svd(star, compute_uv=False).sum() / min_nuclear_norm_psd(data, data_key).nuclear_norm
    return f"||W*||_* / min over PSD interpolators = {ratio:.6g}" + (" (W* is that minimum)" if ratio < 1 + 1e-6
                                                                     else "")


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [GunasekarCommuting, GunasekarConjecture]
