"""Razin & Cohen 2020 ("Implicit regularization in deep learning may not be explainable by norms", NeurIPS), S8:
the 2 x 2 completion counterexample. From a balanced init with det W(0) > 0 and depth >= 2, det W stays positive,
so driving the loss to 0 forces |W_11| -> infinity and every norm diverges, while the effective rank falls
towards 1.

Quantities along training come from the stored trajectory of the factors (`keep_trajectory`): the end-to-end
product at every checkpoint, its singular values, determinant and Schatten (quasi-)norms.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pydantic

from implicitbias.metrics.factorization import balance_gap, effective_rank, factors, product, schatten
from implicitbias.models import MatrixFactorization
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import curve, fitted_slope, flag, over_runs, run_labels
from implicitbias.theorems.matrix_common import depth_verdict, flow_verdict, observed_entries, reached

#: the norms of Razin & Cohen's Figure: name -> Schatten exponent p
NORMS = {"Frobenius": 2.0, "nuclear": 1.0, "spectral": math.inf, "Schatten-1/2": 0.5}
#: the observed entries of the counterexample, (row, column) -> value
COUNTEREXAMPLE = {(0, 1): 1.0, (1, 0): 1.0, (1, 1): 0.0}

_PAPER = "Razin & Cohen 2020 (NeurIPS), Sec. 3"
_BOUND = (f"{_PAPER}: det W > 0 forces |W_11| -> infinity; the bound (1 - rho)^2 / rho is derived from det W > 0 and "
          "the observed entries (class docstring), no free constant")
_GROWTH = (f"{_PAPER}: every norm diverges as the loss -> 0; slope_max: ours, -1/4, halfway between the bound's "
           "-1/2 and the 0 of a norm that stays bounded")


def razin_factors(results, model) -> list[np.ndarray] | None:
    """The factors [W_1, ..., W_N] along training of a matrix factorisation, (run, checkpoint, d, d) each; a
    symmetric model W = U U^T gives [U^T, U]. None when the trajectory was not stored (or for another model)."""
    if not isinstance(model, MatrixFactorization):
        return None
    if model.symmetric:
        fs = factors(results, 1)
        return None if fs is None else [np.swapaxes(fs[0], -1, -2), fs[0]]
    return factors(results, model.depth)


@dataclasses.dataclass(frozen=True)
class _Path:
    """What every prediction reads: the factors, the singular values of W, the loss, rho = sqrt(6 L) and the
    bound (1 - rho)^2 / rho (NaN where rho >= 1), over (run, checkpoint)."""

    fs: list
    s: np.ndarray
    loss: np.ndarray
    rho: np.ndarray
    bound: np.ndarray


class RazinCohen2020(Theorem):
    """Razin & Cohen 2020 (NeurIPS), Sec. 3: 2 x 2 completion with W_12 = W_21 = 1 and W_22 = 0 observed, W_11
    not. Gradient flow on a depth-N >= 2 factorisation from a balanced init (W_{j+1}^T W_{j+1} = W_j W_j^T) with
    det W(0) > 0 keeps det W(t) > 0; if it drives the loss to 0, then |W_11| -> infinity and every norm and
    quasi-norm diverges, while the effective rank falls towards 1 (the implicit bias is towards low rank, not
    small norm).

    Quantitative form used here (derived): with L = (1/6) [(W_12 - 1)^2 + (W_21 - 1)^2 + W_22^2] and
    rho = sqrt(6 L) < 1, every observed entry is within rho of its value, and det W > 0 gives
    |W_11| |W_22| > W_12 W_21 >= (1 - rho)^2, hence every Schatten (quasi-)norm, being >= sigma_1 >= |W_11|, is
    >= (1 - rho)^2 / rho ~ L^(-1/2). Predictions, on every run, at every checkpoint with rho < 1:
    det W(t) > 0, its sign read from the factors, det W = prod_j det W_j (each 2 x 2 determinant computed from its
    own entries, exact in sign where |det W_j| exceeds its rounding 2 u ||W_j||_F^2; the determinant of W itself
    cancels: W tends to rank 1 and det W falls far below u |W_11|); checkpoints where some factor's determinant is
    below its rounding are unresolved in float64 and counted in the note (at depth 2 from alpha I, det W ~ 1e-24
    already at L ~ 1e-3, and W = W_1^T W_1 >= 0 there by structure);
    ||W(t)|| >= (1 - rho)^2 / rho for each norm of `NORMS`; over the late window (L <= late_loss) the fitted slope
    of log ||W|| against log L is <= slope_max (ours, -1/4: halfway between the bound's -1/2 and the 0 of a norm
    that stays bounded); the effective rank falls towards 1 at the rate det W > 0 forces: sigma_2 / sigma_1 <=
    q(rho) ~ 12 L at every checkpoint with rho < 1/2 (`effective_rank_falls`; a finite completion, det W = -1,
    keeps sigma_2 / sigma_1 ~ 0.17 and fails it).
    For the symmetric depth-2 model W = U U^T, det W = det(U)^2 >= 0 by construction and the norm and rank bounds
    then follow from the loss alone: these are reported not_evaluated there, as not predictions at that depth
    (`_structural`); the growth slopes are still judged.
    loss_tol: the hypothesis "the loss -> 0" is read as final loss <= loss_tol (default: the cell's stop.loss_tol).
    balance_tol: balanced init means max_j ||W_{j+1}^T W_{j+1} - W_j W_j^T||_F / ||W_j||_F^2 <= balance_tol
        (rounding).
    A symmetric depth-2 model W = U U^T is read as the factors W_1 = U^T, W_2 = U (balanced by construction): the
    balanced depth-2 flow from alpha I, restricted to its invariant set W_2 = W_1^T (twice as fast in time).
    """

    loss_tol: float | None = pydantic.Field(None, gt=0.0)
    balance_tol: float = pydantic.Field(1e-10, gt=0.0)
    late_loss: float = pydantic.Field(1e-3, gt=0.0)
    slope_max: float = pydantic.Field(-0.25, le=0.0)

    @property
    def title(self) -> str:
        """The name its verdicts carry."""
        return "Razin & Cohen 2020, Sec. 3"

    # -- assumptions -------------------------------------------------------------------------------------------
    @assumption("the data are the 2 x 2 counterexample: W_12 = W_21 = 1, W_22 = 0 observed, W_11 not",
                source=f"{_PAPER} (the counterexample)")
    def counterexample(self, run) -> Verdict:
        """The observed entries of every run's data are the counterexample's."""
        seen = [observed_entries(ds) for ds in run.data]
        ok = all(s == COUNTEREXAMPLE for s in seen)
        return flag(self.title, "assumption", "the 2 x 2 counterexample: W_12 = W_21 = 1, W_22 = 0 observed, W_11 "
                    "not", ok, f"observed {seen[0]}")

    @assumption("a matrix factorisation of depth N >= 2", source=f"{_PAPER}: depth N >= 2")
    def depth(self, run) -> Verdict:
        """The model is a matrix factorisation of depth >= 2."""
        return depth_verdict(self.title, run, 2)

    @assumption("balanced init: W_(j+1)^T W_(j+1) = W_j W_j^T", threshold="balance_tol",
                source=f"{_PAPER} (balanced init); balance_tol: ours, rounding")
    def balanced(self, run) -> Verdict:
        """The factors at init are balanced (worst run), read from the stored trajectory."""
        fs = self.factor_path(run)
        gap = None if fs is None else balance_gap([f[:, 0] for f in fs])
        statement = "balanced init: max_j ||W_(j+1)^T W_(j+1) - W_j W_j^T||_F / ||W_j||_F^2"
        if gap is None:
            return flag(self.title, "assumption", statement, None, "no stored trajectory: set keep_trajectory")
        return over_runs(self.title, "assumption", statement, gap, "<=", self.balance_tol, labels=run_labels(run),
                         where="at init")

    @assumption("det W(0) > 0", source=f"{_PAPER}")
    def positive_det_at_init(self, run) -> Verdict:
        """det W(0) > 0 on every run."""
        W = self.path(run)
        statement = "det W(0) > 0"
        if W is None:
            return flag(self.title, "assumption", statement, None, "no stored trajectory")
        return over_runs(self.title, "assumption", statement, np.linalg.det(W[:, 0]), ">", 0.0,
                         labels=run_labels(run), where="at init")

    @assumption("gradient flow on the square loss", source=f"{_PAPER}: gradient flow")
    def gradient_flow(self, run) -> Verdict:
        """The method is gradient flow on the square loss."""
        return flow_verdict(self.title, run)

    @assumption("the loss -> 0, read as final loss <= loss_tol", threshold="loss_tol",
                source=f"{_PAPER}: the hypothesis that gradient flow drives the loss to 0; loss_tol: ours, the "
                       "cell's stopping loss by default")
    def loss_reached(self, run) -> Verdict:
        """The final loss of every run is at most loss_tol (or the cell's stopping loss)."""
        return reached(self.title, run, self.loss_tol or run.spec.stop.loss_tol or 1e-8,
                       "the hypothesis 'gradient flow drives the loss to 0', read at the run's stopping loss")

    # -- predictions -------------------------------------------------------------------------------------------
    @prediction("det W(t) > 0 along training, where float64 resolves it (det W = prod_j det W_j)",
                source=f"{_PAPER}: balanced gradient flow keeps the sign of det W; the resolution 2 u ||W_j||_F^2 "
                       "is float64's rounding of a 2 x 2 determinant")
    def det_stays_positive(self, run) -> Verdict:
        """min over resolved checkpoints of prod_j det W_j(t) > 0 (worst run; unresolved ones counted)."""
        p = self._path(run)
        if p is None:
            return compare(self.title, "prediction", "det W(t) > 0 along training", None, ">", 0.0,
                           "no stored trajectory: set keep_trajectory")
        labels = run_labels(run)
        dets = np.stack([np.linalg.det(f) for f in p.fs])  # (factor, run, checkpoint)
        rounding = np.stack([2.0 * np.finfo(float).eps * np.sum(f**2, axis=(-2, -1)) for f in p.fs])
        resolved = np.all(np.abs(dets) > rounding, axis=0)
        det = np.prod(dets, axis=0)
        worst = np.array([det[r][resolved[r]].min() if resolved[r].any() else math.nan for r in range(det.shape[0])])
        k = det.shape[1]
        unresolved = ", ".join(f"{labels[r]}: {k - resolved[r].sum()} of {k}" if labels else
                               f"{k - resolved[r].sum()} of {k}" for r in range(det.shape[0]))
        return self._structural(run, over_runs(
            self.title, "prediction", "det W(t) > 0 at every checkpoint where float64 resolves it: min_t prod_j "
            "det W_j(t), over checkpoints where every |det W_j| > 2 u ||W_j||_F^2", worst, ">", 0.0, labels=labels,
            where="along training", note=f"checkpoints unresolved (some factor's determinant at rounding level) "
                                         f"{unresolved}; smallest resolved det W {np.nanmin(worst):.3g}; u = float64 "
                                         "unit roundoff"))

    @prediction("Frobenius norm >= (1 - rho)^2 / rho along training", source=_BOUND)
    def frobenius_bound(self, run) -> list[Verdict]:
        """||W(t)||_F >= (1 - rho)^2 / rho at every checkpoint with rho < 1 (worst run)."""
        return self._norm_bound(run, "Frobenius")

    @prediction("Frobenius norm grows like L^(-1/2) as the loss falls", threshold="late_loss, slope_max",
                source=_GROWTH)
    def frobenius_growth(self, run) -> list[Verdict]:
        """The late-window slope of log ||W||_F against log L is <= slope_max (worst run)."""
        return self._norm_growth(run, "Frobenius")

    @prediction("nuclear norm >= (1 - rho)^2 / rho along training", source=_BOUND)
    def nuclear_bound(self, run) -> list[Verdict]:
        """||W(t)||_* >= (1 - rho)^2 / rho at every checkpoint with rho < 1 (worst run)."""
        return self._norm_bound(run, "nuclear")

    @prediction("nuclear norm grows like L^(-1/2) as the loss falls", threshold="late_loss, slope_max",
                source=_GROWTH)
    def nuclear_growth(self, run) -> list[Verdict]:
        """The late-window slope of log ||W||_* against log L is <= slope_max (worst run)."""
        return self._norm_growth(run, "nuclear")

    @prediction("spectral norm >= (1 - rho)^2 / rho along training", source=_BOUND)
    def spectral_bound(self, run) -> list[Verdict]:
        """||W(t)||_2 >= (1 - rho)^2 / rho at every checkpoint with rho < 1 (worst run)."""
        return self._norm_bound(run, "spectral")

    @prediction("spectral norm grows like L^(-1/2) as the loss falls", threshold="late_loss, slope_max",
                source=_GROWTH)
    def spectral_growth(self, run) -> list[Verdict]:
        """The late-window slope of log ||W||_2 against log L is <= slope_max (worst run)."""
        return self._norm_growth(run, "spectral")

    @prediction("Schatten-1/2 quasi-norm >= (1 - rho)^2 / rho along training", source=_BOUND)
    def schatten_half_bound(self, run) -> list[Verdict]:
        """The Schatten-1/2 quasi-norm >= (1 - rho)^2 / rho at every checkpoint with rho < 1."""
        return self._norm_bound(run, "Schatten-1/2")

    @prediction("Schatten-1/2 quasi-norm grows like L^(-1/2) as the loss falls", threshold="late_loss, slope_max",
                source=_GROWTH)
    def schatten_half_growth(self, run) -> list[Verdict]:
        """The late-window slope of the log Schatten-1/2 quasi-norm against log L is <= slope_max."""
        return self._norm_growth(run, "Schatten-1/2")

    @prediction("the effective rank falls towards 1: sigma_2 / sigma_1 <= q(rho) ~ 12 L where rho < 1/2",
                source=f"{_PAPER}: the bias is towards low rank; the rate q(rho) is derived from det W > 0 and the "
                       "observed entries (method docstring), no free constant")
    def effective_rank_falls(self, run) -> list[Verdict]:
        """sigma_2 / sigma_1 <= q(rho) at every checkpoint with rho < 1/2 (derived: det W > 0 gives |W_11| >= b =
        (1 - rho)^2 / rho; the rank-1 matrix R with the first row and column of W has W - R = (W_22 - W_12 W_21 /
        W_11) e_2 e_2^T, so sigma_2 <= rho + (1 + rho)^2 / b while sigma_1 >= b: q = (rho + (1 + rho)^2 / b) / b
        ~ 2 rho^2 = 12 L, and erank - 1 -> 0 with it)."""
        p = self._path(run)
        if p is None:
            return []
        s, rho, bound = p.s, p.rho, p.bound
        ok = rho < 0.5
        q = np.where(ok, (rho + (1.0 + rho) ** 2 / bound) / bound, np.nan)
        ratio = s[..., 1] / np.where(s[..., 0] > 0, s[..., 0], 1.0)
        worst = np.array([np.nanmax(np.where(ok[r], ratio[r] / q[r], np.nan)) if ok[r].any() else math.nan
                          for r in range(s.shape[0])])
        final_erank = ", ".join(f"{e:.6g}" for e in effective_rank(s)[:, -1])
        return [self._structural(run, over_runs(
            self.title, "prediction", "the effective rank falls towards 1: sigma_2 / sigma_1 <= (rho + (1 + rho)^2 / "
            "b) / b ~ 12 L, b = (1 - rho)^2 / rho, at every checkpoint with rho < 1/2: max_t ratio / bound", worst,
            "<=", 1.0, labels=run_labels(run), where="along training", note=f"final effective ranks {final_erank}"))]

    # -- helpers -----------------------------------------------------------------------------------------------
    @staticmethod
    def factor_path(run) -> list[np.ndarray] | None:
        """[W_1, ..., W_N] along training, (run, checkpoint, 2, 2) each; a symmetric model U as [U^T, U]."""
        return razin_factors(run.results, run.spec.model)

    def path(self, run) -> np.ndarray | None:
        """W(t) = W_N(t) ... W_1(t) of every run, (run, checkpoint, 2, 2); None without a stored trajectory."""
        fs = self.factor_path(run)
        return None if fs is None else product(fs)

    def _path(self, run) -> _Path | None:
        def compute():
            fs = self.factor_path(run)
            if fs is None:
                return None
            loss = curve(run.results, "loss")
            rho = np.sqrt(6.0 * np.maximum(loss, 0.0))
            bound = np.where(rho < 1.0, (1.0 - rho) ** 2 / np.where(rho > 0, rho, 1.0), np.nan)
            return _Path(fs, np.linalg.svd(product(fs), compute_uv=False), loss, rho, bound)

        return run.once("razin_cohen.path", compute)

    def _norm_bound(self, run, name: str) -> list[Verdict]:
        p = self._path(run)
        if p is None:
            return []
        norm = schatten(p.s, NORMS[name])
        valid = p.rho < 1.0
        worst = np.array([np.nanmin(np.where(valid[r], norm[r] / p.bound[r], np.nan)) if valid[r].any()
                          else math.nan for r in range(norm.shape[0])])
        return [self._structural(run, over_runs(
            self.title, "prediction", f"{name} norm >= (1 - rho)^2 / rho at every checkpoint (rho = sqrt(6 L) < 1): "
            "min_t norm / bound", worst, ">=", 1.0, labels=run_labels(run), where="along training"))]

    def _norm_growth(self, run, name: str) -> list[Verdict]:
        p = self._path(run)
        if p is None:
            return []
        slopes = self._late_slopes(p.loss, schatten(p.s, NORMS[name]), p.loss <= self.late_loss)
        return [over_runs(self.title, "prediction", f"{name} norm grows as the loss falls: slope of log norm against "
                          f"log L for L <= {self.late_loss:g} (bound: -1/2)", slopes, "<=", self.slope_max,
                          labels=run_labels(run), where="late window")]

    @staticmethod
    def _structural(run, verdict: Verdict) -> Verdict:
        """For W = U U^T (the symmetric depth-2 model), det W = det(U)^2 >= 0 by construction, and with it the norm
        and rank bounds follow from the loss alone (they use nothing but det W >= 0 and the observed entries): they
        are not predictions of the dynamics at that depth, and are reported not_evaluated with that reason. The
        growth slopes remain predictions (the bound fixes no rate over the late window)."""
        model = run.spec.model
        if not (isinstance(model, MatrixFactorization) and model.symmetric) or verdict.outcome not in ("holds", "fails"):
            return verdict
        why = ("not a prediction for W = U U^T (depth 2, symmetric): W is PSD by construction, so det W = det(U)^2 >= 0 "
               "and this bound follows from the loss alone, whatever the dynamics")
        return dataclasses.replace(verdict, outcome="not_evaluated", note=f"{why}; measured {verdict.outcome}: "
                                                                          f"{verdict.note}")

    @staticmethod
    def _late_slopes(loss, values, late) -> np.ndarray:
        out = []
        for r in range(loss.shape[0]):
            keep = late[r] & (loss[r] > 0) & np.isfinite(values[r]) & (values[r] > 0)
            _, first = np.unique(loss[r][keep], return_index=True)  # a stopped run repeats its last row
            x, y = np.log(loss[r][keep][first]), np.log(values[r][keep][first])
            out.append(fitted_slope(x, y)[0] if x.size >= 3 else math.nan)
        return np.asarray(out)


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [RazinCohen2020]
