"""Deep matrix factorisation W = W_N ... W_1 trained by gradient flow on the square loss of matrix sensing or
completion (survey, seed 002; SCIENCE.md S8):

- `RazinCohen2020`: the 2 x 2 completion counterexample (Razin & Cohen 2020, "Implicit regularization in deep
  learning may not be explainable by norms", NeurIPS): from a balanced init with det W(0) > 0 and depth >= 2,
  det W stays positive, so driving the loss to 0 forces |W_11| -> infinity and every norm diverges;
- `GunasekarCommuting`: Gunasekar et al. 2017 ("Implicit regularization in matrix factorization", NeurIPS),
  Theorem 1: with commuting measurements, gradient flow from alpha I, alpha -> 0, ends at the minimum nuclear
  norm among PSD interpolators;
- `GunasekarConjecture`: their conjecture for general (Gaussian) measurements, as a trend in alpha;
- `LiIncremental`: Li, Luo & Lyu 2021 ("Towards resolving the implicit bias of gradient descent for matrix
  factorization: greedy low-rank learning", ICLR): from a tiny init the singular values are learned one at a
  time, along the path of greedy low-rank learning.

Quantities along training come from the stored trajectory of the factors (`keep_trajectory`): the end-to-end
product at every checkpoint (`end_to_end`), its singular values, determinant and Schatten (quasi-)norms.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pydantic

from implicitbias.theorems._small_init import approach_verdict
from implicitbias.theorems.base import Theorem, Verdict, compare
from implicitbias.theorems.fitting import (
    curve,
    final,
    fitted_slope,
    flag,
    linear_fit,
    over_runs,
    rate_verdict,
    run_labels,
)


# -- the end-to-end matrix along training ------------------------------------------------------------------
def factors(results, depth: int, trajectory: bool = True) -> list[np.ndarray] | None:
    """[W_1, ..., W_N] of every run: (run, checkpoint, d, d) from the trajectory, or (run, d, d) final values.
    None when the trajectory was not stored."""
    prefix = "trajectory.theta." if trajectory else "theta."
    names = [f"{prefix}W{i}" for i in range(1, depth + 1)]
    if any(n not in results.data_vars for n in names):
        return None
    return [np.asarray(results[n].values, dtype=np.float64) for n in names]


def end_to_end(results, depth: int, trajectory: bool = True) -> np.ndarray | None:
    """W = W_N ... W_1 of every run at every checkpoint, (run, checkpoint, d, d) (or the final (run, d, d))."""
    fs = factors(results, depth, trajectory)
    if fs is None:
        return None
    P = fs[0]
    for F in fs[1:]:
        P = F @ P
    return P


def schatten(s: np.ndarray, p: float) -> np.ndarray:
    """(sum_k s_k^p)^(1/p) over the last axis of singular values s (p = inf: s_1), computed from the largest."""
    top = s[..., 0]
    if math.isinf(p):
        return top
    safe = np.where(top > 0, top, 1.0)
    return np.where(top > 0, top * np.sum((s / safe[..., None]) ** p, axis=-1) ** (1.0 / p), 0.0)


def effective_rank(s: np.ndarray) -> np.ndarray:
    """exp(H(p)), p_k = s_k / sum s (Roy & Vetterli 2007), over the last axis; 0 for the zero matrix."""
    total = np.sum(s, axis=-1, keepdims=True)
    p = np.where(total > 0, s / np.where(total > 0, total, 1.0), 0.0)
    h = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)
    return np.where(total[..., 0] > 0, np.exp(h), 0.0)


#: the norms of Razin & Cohen's Figure: name -> Schatten exponent p
NORMS = {"Frobenius": 2.0, "nuclear": 1.0, "spectral": math.inf, "Schatten-1/2": 0.5}


def balancedness(results, depth: int) -> np.ndarray | None:
    """max_j ||W_{j+1}^T W_{j+1} - W_j W_j^T||_F / max(||W_j||_F^2, tiny) at init, per run."""
    fs = factors(results, depth)
    return None if fs is None else _balance_gap([f[:, 0] for f in fs])


def _depth_verdict(theorem: str, run, minimum: int) -> Verdict:
    model = run.spec.model
    ok = model.kind == "matrix_factorization" and model.depth >= minimum
    return flag(theorem, "assumption", f"a matrix factorisation of depth N >= {minimum}", ok,
                f"model = {model.kind}" + (f", depth = {model.depth}" if ok or hasattr(model, "depth") else ""))


def _flow_verdict(theorem: str, run) -> Verdict:
    kind, loss = run.spec.method.kind, run.spec.loss.name
    ok = None if kind != "gf" else loss == "square"
    return flag(theorem, "assumption", "gradient flow on the square loss", ok,
                f"method = {kind}, loss = {loss}" + ("" if kind == "gf" else ": GD approximates the flow"))


def _reached(theorem: str, run, tol: float, why: str) -> Verdict:
    loss = final(run.results, "loss")
    return over_runs(theorem, "assumption", f"the loss reached {tol:.3g} (final loss <= {tol:.3g})", loss, "<=",
                     tol, labels=run_labels(run), note=why)


# -- Razin & Cohen 2020 ------------------------------------------------------------------------------------
COUNTEREXAMPLE = {(0, 1): 1.0, (1, 0): 1.0, (1, 1): 0.0}


def observed_entries(data) -> dict[tuple[int, int], float] | None:
    """{(p, q): value} of a completion data set whose rows are vec(e_p e_q^T) or (p, q) pairs (encoding
    "entries"), or None if a row is neither."""
    if data.d == 2 and np.all(data.X == np.round(data.X)) and data.X.min() >= 0:
        return {(int(p), int(q)): float(y) for (p, q), y in zip(data.X, data.y)}
    d = int(round(math.sqrt(data.d)))
    out = {}
    for x, y in zip(data.X, data.y):
        nz = np.flatnonzero(x)
        if d * d != data.d or nz.size != 1 or x[nz[0]] != 1.0:
            return None
        out[tuple(int(v) for v in divmod(int(nz[0]), d))] = float(y)
    return out


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
    q(rho) ~ 12 L at every checkpoint with rho < 1/2 (`_rank_verdict`; a finite completion, det W = -1, keeps
    sigma_2 / sigma_1 ~ 0.17 and fails it).
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
        return "Razin & Cohen 2020, Sec. 3"

    def assumptions(self, run) -> list[Verdict]:
        return [self._data(run), _depth_verdict(self.title, run, 2), self._balanced(run), self._det0(run),
                _flow_verdict(self.title, run),
                _reached(self.title, run, self.loss_tol or run.spec.stop.loss_tol or 1e-8,
                         "the hypothesis 'gradient flow drives the loss to 0', read at the run's stopping loss")]

    def _data(self, run) -> Verdict:
        seen = [observed_entries(ds) for ds in run.data]
        ok = all(s == COUNTEREXAMPLE for s in seen)
        return flag(self.title, "assumption", "the 2 x 2 counterexample: W_12 = W_21 = 1, W_22 = 0 observed, W_11 "
                    "not", ok, f"observed {seen[0]}")

    def _balanced(self, run) -> Verdict:
        fs = self.factor_path(run)
        gap = None if fs is None else _balance_gap([f[:, 0] for f in fs])
        statement = "balanced init: max_j ||W_(j+1)^T W_(j+1) - W_j W_j^T||_F / ||W_j||_F^2"
        if gap is None:
            return flag(self.title, "assumption", statement, None, "no stored trajectory: set keep_trajectory")
        return over_runs(self.title, "assumption", statement, gap, "<=", self.balance_tol, labels=run_labels(run),
                         where="at init")

    def _det0(self, run) -> Verdict:
        W = self.path(run)
        statement = "det W(0) > 0"
        if W is None:
            return flag(self.title, "assumption", statement, None, "no stored trajectory")
        return over_runs(self.title, "assumption", statement, np.linalg.det(W[:, 0]), ">", 0.0,
                         labels=run_labels(run), where="at init")

    @staticmethod
    def factor_path(run) -> list[np.ndarray] | None:
        """[W_1, ..., W_N] along training, (run, checkpoint, 2, 2) each; a symmetric model U as [U^T, U]."""
        return razin_factors(run.results, run.spec.model)

    def path(self, run) -> np.ndarray | None:
        fs = self.factor_path(run)
        return None if fs is None else _product(fs)

    def _det_verdict(self, run, fs) -> Verdict:
        labels = run_labels(run)
        dets = np.stack([np.linalg.det(f) for f in fs])  # (factor, run, checkpoint)
        rounding = np.stack([2.0 * np.finfo(float).eps * np.sum(f**2, axis=(-2, -1)) for f in fs])
        resolved = np.all(np.abs(dets) > rounding, axis=0)
        det = np.prod(dets, axis=0)
        worst = np.array([det[r][resolved[r]].min() if resolved[r].any() else math.nan for r in range(det.shape[0])])
        k = det.shape[1]
        unresolved = ", ".join(f"{labels[r]}: {k - resolved[r].sum()} of {k}" if labels else
                               f"{k - resolved[r].sum()} of {k}" for r in range(det.shape[0]))
        return over_runs(self.title, "prediction", "det W(t) > 0 at every checkpoint where float64 resolves it: "
                         "min_t prod_j det W_j(t), over checkpoints where every |det W_j| > 2 u ||W_j||_F^2",
                         worst, ">", 0.0, labels=labels, where="along training",
                         note=f"checkpoints unresolved (some factor's determinant at rounding level) {unresolved}; "
                              f"smallest resolved det W {np.nanmin(worst):.3g}; u = float64 unit roundoff")

    def predictions(self, run) -> list[Verdict]:
        fs = self.factor_path(run)
        if fs is None:
            return [compare(self.title, "prediction", "det W(t) > 0 along training", None, ">", 0.0,
                            "no stored trajectory: set keep_trajectory")]
        W = _product(fs)
        loss = curve(run.results, "loss")
        labels = run_labels(run)
        out = [self._det_verdict(run, fs)]
        s = np.linalg.svd(W, compute_uv=False)
        rho = np.sqrt(6.0 * np.maximum(loss, 0.0))
        valid = rho < 1.0
        bound = np.where(valid, (1.0 - rho) ** 2 / np.where(rho > 0, rho, 1.0), np.nan)
        late = loss <= self.late_loss
        for name, p in NORMS.items():
            norm = schatten(s, p)
            worst = np.array([np.nanmin(np.where(valid[r], norm[r] / bound[r], np.nan)) if valid[r].any()
                              else math.nan for r in range(W.shape[0])])
            out.append(over_runs(self.title, "prediction", f"{name} norm >= (1 - rho)^2 / rho at every checkpoint "
                                 "(rho = sqrt(6 L) < 1): min_t norm / bound", worst, ">=", 1.0, labels=labels,
                                 where="along training"))
            slopes = self._late_slopes(loss, norm, late)
            out.append(over_runs(self.title, "prediction", f"{name} norm grows as the loss falls: slope of log "
                                 f"norm against log L for L <= {self.late_loss:g} (bound: -1/2)", slopes, "<=",
                                 self.slope_max, labels=labels, where="late window"))
        out.append(self._rank_verdict(run, s, rho, bound))
        return self._structural(run, out)

    def _rank_verdict(self, run, s, rho, bound) -> Verdict:
        """sigma_2 / sigma_1 <= q(rho) at every checkpoint with rho < 1/2 (derived: det W > 0 gives |W_11| >= b =
        (1 - rho)^2 / rho; the rank-1 matrix R with the first row and column of W has W - R = (W_22 - W_12 W_21 /
        W_11) e_2 e_2^T, so sigma_2 <= rho + (1 + rho)^2 / b while sigma_1 >= b: q = (rho + (1 + rho)^2 / b) / b
        ~ 2 rho^2 = 12 L, and erank - 1 -> 0 with it)."""
        ok = rho < 0.5
        q = np.where(ok, (rho + (1.0 + rho) ** 2 / bound) / bound, np.nan)
        ratio = s[..., 1] / np.where(s[..., 0] > 0, s[..., 0], 1.0)
        worst = np.array([np.nanmax(np.where(ok[r], ratio[r] / q[r], np.nan)) if ok[r].any() else math.nan
                          for r in range(s.shape[0])])
        final_erank = ", ".join(f"{e:.6g}" for e in effective_rank(s)[:, -1])
        return over_runs(self.title, "prediction", "the effective rank falls towards 1: sigma_2 / sigma_1 <= "
                         "(rho + (1 + rho)^2 / b) / b ~ 12 L, b = (1 - rho)^2 / rho, at every checkpoint with rho < 1/2: "
                         "max_t ratio / bound", worst, "<=", 1.0, labels=run_labels(run), where="along training",
                         note=f"final effective ranks {final_erank}")

    def _structural(self, run, out: list[Verdict]) -> list[Verdict]:
        """For W = U U^T (the symmetric depth-2 model), det W = det(U)^2 >= 0 by construction, and with it the norm
        and rank bounds follow from the loss alone (they use nothing but det W >= 0 and the observed entries): they
        are not predictions of the dynamics at that depth, and are reported not_evaluated with that reason. The
        growth slopes remain predictions (the bound fixes no rate over the late window)."""
        if not getattr(run.spec.model, "symmetric", False):
            return out
        why = ("not a prediction for W = U U^T (depth 2, symmetric): W is PSD by construction, so det W = det(U)^2 >= 0 "
               "and this bound follows from the loss alone, whatever the dynamics")
        return [dataclasses.replace(v, outcome="not_evaluated", note=f"{why}; measured {v.outcome}: {v.note}")
                if v.outcome in ("holds", "fails") and ("det W(t) > 0" in v.statement or "(1 - rho)^2 / rho at" in
                                                        v.statement or "effective rank" in v.statement) else v
                for v in out]

    @staticmethod
    def _late_slopes(loss, values, late) -> np.ndarray:
        out = []
        for r in range(loss.shape[0]):
            keep = late[r] & (loss[r] > 0) & np.isfinite(values[r]) & (values[r] > 0)
            _, first = np.unique(loss[r][keep], return_index=True)  # a stopped run repeats its last row
            x, y = np.log(loss[r][keep][first]), np.log(values[r][keep][first])
            out.append(fitted_slope(x, y)[0] if x.size >= 3 else math.nan)
        return np.asarray(out)


def razin_factors(results, model) -> list[np.ndarray] | None:
    """The factors [W_1, ..., W_N] along training of a matrix factorisation, (run, checkpoint, d, d) each; a
    symmetric model W = U U^T gives [U^T, U]. None when the trajectory was not stored (or for another model)."""
    if model.kind != "matrix_factorization":
        return None
    if getattr(model, "symmetric", False):
        fs = factors(results, 1)
        return None if fs is None else [np.swapaxes(fs[0], -1, -2), fs[0]]
    return factors(results, model.depth)


def _product(fs: list[np.ndarray]) -> np.ndarray:
    P = fs[0]
    for F in fs[1:]:
        P = F @ P
    return P


def _balance_gap(fs: list[np.ndarray]) -> np.ndarray:
    """max_j ||W_{j+1}^T W_{j+1} - W_j W_j^T||_F / max(||W_j||_F^2, tiny) of factors (run, d, d)."""
    worst = np.zeros(fs[0].shape[0])
    for lo, hi in zip(fs[:-1], fs[1:]):
        gap = np.linalg.norm(np.swapaxes(hi, -1, -2) @ hi - lo @ np.swapaxes(lo, -1, -2), axis=(-2, -1))
        worst = np.maximum(worst, gap / np.maximum(np.linalg.norm(lo, axis=(-2, -1)) ** 2, 1e-300))
    return worst


# -- Gunasekar et al. 2017 -----------------------------------------------------------------------------------
_NUCLEAR: dict[int, tuple[object, object]] = {}


def min_nuclear_norm(data):
    """The minimum-nuclear-norm interpolator of a sensing or completion data set (`NuclearNormResult`, cvxpy),
    cached per Dataset object."""
    from implicitbias.reference import min_nuclear_norm_completion, min_nuclear_norm_sensing

    hit = _NUCLEAR.get(id(data))
    if hit is None or hit[0] is not data:
        W_star = data.info.get("W_star")
        d = W_star.shape[0] if W_star is not None else int(round(math.sqrt(data.d)))
        entries = observed_entries(data)
        ref = (min_nuclear_norm_completion(np.array(list(entries)), np.array(list(entries.values())), (d, d))
               if entries is not None else min_nuclear_norm_sensing(data.X, data.y, shape=(d, d)))
        hit = (data, ref)
        _NUCLEAR[id(data)] = hit
    return hit[1]


_PSD: dict[int, tuple[object, object]] = {}


def min_nuclear_norm_psd(data):
    """The minimum nuclear norm (= trace) over PSD interpolators of a sensing data set (cvxpy), cached per Dataset."""
    from implicitbias.reference import min_nuclear_norm_psd_sensing

    hit = _PSD.get(id(data))
    if hit is None or hit[0] is not data:
        d = int(round(math.sqrt(data.d)))
        hit = (data, min_nuclear_norm_psd_sensing(data.X, data.y, shape=(d, d)))
        _PSD[id(data)] = hit
    return hit[1]


def min_frobenius_nuclear_norm(data) -> float:
    """||W||_* of the minimum-Frobenius interpolator X^+ y (the alpha -> infinity, kernel-like end)."""
    from implicitbias.reference import min_l2_interpolator

    d = int(round(math.sqrt(data.d)))
    return float(np.linalg.svd(min_l2_interpolator(data.X, data.y).reshape(d, d), compute_uv=False).sum())


def nuclear_ratios(run, psd: bool = False) -> np.ndarray:
    """||W(inf)||_* / min ||W||_* of every run of a `RunContext` (the final recorded W.nuclear); the minimum over
    all interpolators, or over PSD ones (`psd`)."""
    nuc = final(run.results, "W.nuclear")
    ref = min_nuclear_norm_psd if psd else min_nuclear_norm
    return np.array([nuc[r] / ref(run.data[r]).nuclear_norm for r in range(run.n_runs)])


def run_alphas(run) -> np.ndarray:
    return np.array([spec.init_scale for spec in run.runs], dtype=np.float64)


def _measurements(data) -> np.ndarray:
    d = int(round(math.sqrt(data.d)))
    return data.X.reshape(data.n, d, d)


def commutator_gap(data) -> float:
    """max_{i, j} ||A_i A_j - A_j A_i||_F / (||A_i||_F ||A_j||_F) and max_i ||A_i - A_i^T||_F / ||A_i||_F."""
    A = _measurements(data)
    norms = np.maximum(np.linalg.norm(A, axis=(1, 2)), 1e-300)
    comm = np.einsum("iab,jbc->ijac", A, A)
    gap = np.linalg.norm(comm - np.swapaxes(comm, 0, 1), axis=(2, 3)) / np.outer(norms, norms)
    asym = np.linalg.norm(A - np.swapaxes(A, 1, 2), axis=(1, 2)) / norms
    return float(max(gap.max(), asym.max()))


def _identity_init(theorem: str, run) -> Verdict:
    m = run.spec.model
    ok = (m.kind == "matrix_factorization" and m.init_scheme == "identity" and m.init_noise == 0.0
          and m.symmetric and m.depth == 2)
    note = (f"symmetric = {getattr(m, 'symmetric', '?')}, depth = {getattr(m, 'depth', '?')}, init_scheme = "
            f"{getattr(m, 'init_scheme', '?')}, init_noise = {getattr(m, 'init_noise', '?')}")
    return flag(theorem, "assumption", "W = U U^T from U(0) = alpha I (Gunasekar et al.'s model)", ok, note)


def _alpha_grid(theorem: str, run, need: int) -> Verdict:
    grid = np.unique(run_alphas(run))
    return flag(theorem, "assumption", f"alpha -> 0 read over a grid of at least {need} init scales alpha > 0",
                bool(grid.size >= need and grid.min() > 0), ", ".join(f"{a:.3g}" for a in grid),
                measured=float(grid.size))


def _smallest(run) -> np.ndarray:
    alpha = run_alphas(run)
    return np.flatnonzero(alpha == alpha.min())


def _excess_trend(theorem: str, run, ratio: np.ndarray, floor: float) -> Verdict:
    """ratio -> 1 as alpha -> 0 at a power of alpha, per trial (`approach_verdict`: exponent of ratio - 1 against
    alpha with a 95% CI above 0, profile interval of the extrapolated limit of ratio = r_inf + c alpha^q reaching 1)."""
    trials = np.array([spec.trial for spec in run.runs])
    return approach_verdict(theorem, "the excess ratio - 1 vanishes as a power of alpha: exponent of ratio - 1 "
                            "against alpha (95% CI above 0) and extrapolated limit of ratio = r_inf + c alpha^q "
                            "(profile interval reaching 1)", run_alphas(run), ratio, 1.0, trials, floor=floor)


class GunasekarCommuting(Theorem):
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

    ratio_tol: float = pydantic.Field(1e-3, gt=0.0)
    commute_tol: float = pydantic.Field(1e-10, gt=0.0)
    loss_tol: float = pydantic.Field(1e-12, gt=0.0)
    floor: float = pydantic.Field(1e-7, gt=0.0)

    @property
    def title(self) -> str:
        return "Gunasekar et al. 2017, Theorem 1 (commuting measurements)"

    def assumptions(self, run) -> list[Verdict]:
        gaps = [commutator_gap(ds) for ds in run.data]
        star = [ds.info.get("W_star") for ds in run.data]
        realisable = None if any(w is None for w in star) else all(
            np.linalg.eigvalsh(0.5 * (w + w.T))[0] >= -1e-12 * np.linalg.norm(w, 2) for w in star)
        labels = run_labels(run)
        return [
            over_runs(self.title, "assumption", "the A_i commute and are symmetric: relative commutator / asymmetry",
                      gaps, "<=", self.commute_tol, labels=labels, where="over the runs' data"),
            flag(self.title, "assumption", "labels realisable by a PSD matrix (W* PSD)", realisable,
                 "" if realisable is not None else "the data set records no W_star"),
            _depth_verdict(self.title, run, 2), _identity_init(self.title, run), _flow_verdict(self.title, run),
            _alpha_grid(self.title, run, 4),
            _reached(self.title, run, self.loss_tol, "Theorem 1 is about limits that interpolate"),
        ]

    def predictions(self, run) -> list[Verdict]:
        ratio = nuclear_ratios(run, psd=True)
        at = _smallest(run)
        labels = [f"trial {run.runs[r].trial}" for r in at]
        alpha = run_alphas(run).min()
        unconstrained = nuclear_ratios(run)[at]
        notes = [f"over the minimum among all interpolators (PSD or not): {u:.6g}" for u in unconstrained]
        return [over_runs(self.title, "prediction", f"||W(inf)||_* / min over PSD interpolators <= 1 + "
                          f"{self.ratio_tol:g} at the smallest alpha ({alpha:.3g})", ratio[at], "<=",
                          1.0 + self.ratio_tol, labels=labels, run_notes=notes, where=f"at alpha = {alpha:.3g}"),
                _excess_trend(self.title, run, ratio, self.floor)]


class GunasekarConjecture(Theorem):
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

    ratio_tol: float = pydantic.Field(1e-3, gt=0.0)
    loss_tol: float = pydantic.Field(1e-9, gt=0.0)
    floor: float = pydantic.Field(1e-7, gt=0.0)

    @property
    def title(self) -> str:
        return "Gunasekar et al. 2017, Conjecture 1 (general measurements)"

    def assumptions(self, run) -> list[Verdict]:
        return [_depth_verdict(self.title, run, 2), _identity_init(self.title, run), _flow_verdict(self.title, run),
                _alpha_grid(self.title, run, 4),
                _reached(self.title, run, self.loss_tol, "the conjecture is about limits that interpolate")]

    def predictions(self, run) -> list[Verdict]:
        ratio = nuclear_ratios(run, psd=True)
        at = _smallest(run)
        alpha = run_alphas(run).min()
        labels = [f"trial {run.runs[r].trial}" for r in at]
        notes = [_star_note(run.data[r]) for r in at]
        return [over_runs(self.title, "prediction", f"||W(inf)||_* / min over PSD interpolators <= 1 + "
                          f"{self.ratio_tol:g} at the smallest alpha ({alpha:.3g})", ratio[at], "<=",
                          1.0 + self.ratio_tol, labels=labels, run_notes=notes, where=f"at alpha = {alpha:.3g}"),
                _excess_trend(self.title, run, ratio, self.floor)]


def _star_note(data) -> str:
    """||W*||_* over the minimum over PSD interpolators: 1 where that minimum recovers W* (then converging to it
    cannot be told from recovering W*), above 1 below the recovery threshold."""
    star = data.info.get("W_star")
    if star is None:
        return ""
    ratio = np.linalg.svd(star, compute_uv=False).sum() / min_nuclear_norm_psd(data).nuclear_norm
    return f"||W*||_* / min over PSD interpolators = {ratio:.6g}" + (" (W* is that minimum)" if ratio < 1 + 1e-6
                                                                     else "")


# -- Li, Luo & Lyu 2021 --------------------------------------------------------------------------------------
def crossing_times(time: np.ndarray, s: np.ndarray, fraction: float = 0.5) -> np.ndarray:
    """Per run and singular value k, the first time sigma_k(t) >= fraction x sigma_k(final) (linear interpolation
    between checkpoints; NaN if never). time: (run, checkpoint); s: (run, checkpoint, k)."""
    runs, _, K = s.shape
    out = np.full((runs, K), np.nan)
    for r in range(runs):
        for k in range(K):
            level = fraction * s[r, -1, k]
            above = np.flatnonzero(s[r, :, k] >= level)
            if level <= 0 or above.size == 0:
                continue
            i = int(above[0])
            if i == 0:
                out[r, k] = time[r, 0]
                continue
            t0, t1, a, b = time[r, i - 1], time[r, i], s[r, i - 1, k], s[r, i, k]
            out[r, k] = t0 + (level - a) / (b - a) * (t1 - t0) if b > a else t1
    return out


_GLRL: dict[int, tuple[object, object]] = {}


def greedy_path(data, rank: int):
    """Greedy low-rank learning on a sensing data set (`implicitbias.reference.greedy_low_rank`, depth 2, U V^T),
    up to `rank` phases, cached per Dataset object."""
    from implicitbias.reference import greedy_low_rank

    hit = _GLRL.get(id(data))
    if hit is None or hit[0] is not data or len(hit[1].iterates) < rank:
        d = int(round(math.sqrt(data.d)))
        hit = (data, greedy_low_rank(data.X, data.y, max_rank=rank, shape=(d, d)))
        _GLRL[id(data)] = hit
    return hit[1]


def saddle_distances(run, rank: int) -> np.ndarray:
    """Per run and GLRL iterate k = 1..rank, the closest approach min_t ||W(t) - W_k|| / ||W_k|| (run, rank), with
    W(t) linear between consecutive checkpoints (`closest_approach`: the minimum over checkpoints alone would floor
    the distance at ~ (speed x spacing) / 2 where the path sweeps past a saddle)."""
    W = end_to_end(run.results, run.spec.model.depth)
    out = np.full((W.shape[0], rank), np.nan)
    for r in range(W.shape[0]):
        path = greedy_path(run.data[r], rank)
        for k, Wk in enumerate(path.iterates[:rank]):
            out[r, k] = closest_approach(W[r], Wk) / np.linalg.norm(Wk)
    return out


def closest_approach(path: np.ndarray, point: np.ndarray) -> float:
    """min over the polygon through path[0], path[1], ... (checkpoint, d, d) of the Frobenius distance to `point`."""
    P = path.reshape(path.shape[0], -1)
    x = point.reshape(-1)
    a, step = P[:-1], np.diff(P, axis=0)
    length2 = np.sum(step**2, axis=1)
    s = np.clip(np.sum((x - a) * step, axis=1) / np.where(length2 > 0, length2, 1.0), 0.0, 1.0)
    seg = np.linalg.norm(a + s[:, None] * step - x, axis=1)
    return float(min(seg.min(initial=np.inf), np.linalg.norm(P[-1] - x)))


def _spacing_at(time: np.ndarray, t: float) -> float:
    """The spacing of the checkpoints around time t (the interval that holds it; nan for t outside them)."""
    if not math.isfinite(t):
        return math.nan
    i = int(np.clip(np.searchsorted(time, t), 1, time.size - 1))
    return float(time[i] - time[i - 1])


def target_rank(run) -> int:
    return int(getattr(run.spec.data, "rank", 1))


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
    """

    settle: float = pydantic.Field(1e-4, gt=0.0, lt=1.0)
    gap_max: float = pydantic.Field(0.9, gt=0.0, lt=1.0)
    floor: float = pydantic.Field(1e-9, gt=0.0)

    @property
    def title(self) -> str:
        return "Li, Luo & Lyu 2021, incremental learning"

    def assumptions(self, run) -> list[Verdict]:
        m = run.spec.model
        init = flag(self.title, "assumption", "init W_j(0) = alpha I (a tiny, balanced init)",
                    m.kind == "matrix_factorization" and m.init_scheme == "identity" and m.init_noise == 0.0
                    and not m.symmetric, f"init_scheme = {getattr(m, 'init_scheme', '?')}")
        ratios = []
        for ds in run.data:
            s = np.linalg.svd(ds.info["W_star"], compute_uv=False)[: target_rank(run)] if "W_star" in ds.info \
                else np.array([math.nan])
            ratios.append(float(np.max(s[1:] / s[:-1])) if s.size > 1 else math.nan)
        return [flag(self.title, "assumption", "a factorisation of depth 2 (GLRL's U V^T)",
                     m.kind == "matrix_factorization" and m.depth == 2, f"depth = {getattr(m, 'depth', '?')}"),
                init, _flow_verdict(self.title, run), _alpha_grid(self.title, run, 4),
                over_runs(self.title, "assumption", "W* of rank r >= 2 with distinct singular values: max_k "
                          "sigma_(k+1) / sigma_k", ratios, "<=", self.gap_max, labels=run_labels(run),
                          where="over the runs' data"),
                self._settled(run)]

    def _settled(self, run) -> Verdict:
        r = target_rank(run)
        last = np.array([greedy_path(ds, r).losses[r - 2] if r >= 2 else math.nan for ds in run.data])
        loss = final(run.results, "loss")
        return over_runs(self.title, "assumption", f"the r-th singular value settled: final loss / loss at GLRL's "
                         f"last saddle W_(r-1) <= {self.settle:g}", None if loss is None else loss / last, "<=",
                         self.settle, labels=run_labels(run), note="t_k is read against the final, settled singular "
                         "values")

    def times(self, run) -> np.ndarray:
        W = end_to_end(run.results, run.spec.model.depth)
        s = np.linalg.svd(W, compute_uv=False)[..., : target_rank(run)]
        return crossing_times(curve(run.results, "time"), s)

    def predictions(self, run) -> list[Verdict]:
        if end_to_end(run.results, run.spec.model.depth) is None:
            return [compare(self.title, "prediction", "singular values learned one at a time", None, ">", 0.0,
                            "no stored trajectory: set keep_trajectory")]
        t = self.times(run)
        alpha = run_alphas(run)
        at = _smallest(run)
        gaps = np.nanmin(t[at, 1:] / t[at, :-1] - 1.0, axis=1)
        notes = [", ".join(f"t_{k + 1} = {x:.4g}" for k, x in enumerate(t[r])) for r in at]
        return [over_runs(self.title, "prediction", f"one at a time at the smallest alpha ({alpha.min():.3g}): "
                          "min_k (t_(k+1) / t_k - 1)", gaps, ">", 0.0, labels=[f"trial {run.runs[r].trial}" for r in at],
                          run_notes=notes),
                self._first_escape(run, t, alpha), self._plateaus(run, t, alpha), self._path(run, alpha)]

    def _first_escape(self, run, t, alpha) -> Verdict:
        top = np.array([greedy_path(ds, 1).top_gradient_singular_value[0] for ds in run.data])
        trials = [spec.trial for spec in run.runs]
        fit = linear_fit(np.log(1.0 / alpha), top * t[:, 0], groups=trials)
        return rate_verdict(self.title, "the first escape takes ln(1/alpha) / sigma_1(M_0): slope of sigma_1(M_0) "
                            "t_1 against ln(1/alpha), M_0 = -grad L(0)", fit, 1.0, (0.0, 0.5, 2.0),
                            note="sigma_1(M_0) per trial: " + ", ".join(f"{x:.4g}" for x in np.unique(top)))

    def _plateaus(self, run, t, alpha) -> Verdict:
        """Per trial and k >= 2, the slope of t_k - t_(k-1) against ln(1/alpha) with its 95% CI; each t_k is read to
        the checkpoint spacing around it (linear interpolation between checkpoints), so the slope's standard error
        adds (spacing / 2) / sqrt(sum (x - mean x)^2) to that of the residuals."""
        time = curve(run.results, "time")
        lows, labels, notes = [], [], []
        for trial in sorted({spec.trial for spec in run.runs}):
            idx = [r for r, spec in enumerate(run.runs) if spec.trial == trial]
            x = np.log(1.0 / alpha[idx])
            sxx = float(np.sum((x - x.mean()) ** 2))
            for k in range(1, t.shape[1]):
                fit = linear_fit(x, t[idx, k] - t[idx, k - 1])
                spacing = max(_spacing_at(time[r], t[r, j]) for r in idx for j in (k - 1, k))
                se = math.sqrt(fit.se**2 + (spacing / 2.0) ** 2 / sxx) if sxx > 0 else math.nan
                lo, hi = dataclasses.replace(fit, se=se).interval(0.95)
                lows.append(lo)
                labels.append(f"trial {trial}, k = {k + 1}")
                notes.append(f"slope {fit.slope:.4g} +- {se:.2g} (SE, checkpoint spacing {spacing:.3g} included), "
                             f"95% CI [{lo:.4g}, {hi:.4g}]")
        return over_runs(self.title, "prediction", "each later plateau lasts ~ln(1/alpha): lower end of the 95% CI of "
                         "the slope of t_k - t_(k-1) against ln(1/alpha), k >= 2", lows, ">", 0.0, labels=labels,
                         run_notes=notes, where="over alpha")

    def _path(self, run, alpha) -> Verdict:
        r = target_rank(run)
        dist = saddle_distances(run, r)
        trials = np.array([spec.trial for spec in run.runs])
        verdicts = [approach_verdict(self.title, "", alpha, dist[:, k], 0.0, trials, floor=self.floor,
                                     note=f"saddle {k + 1}") for k in range(r - 1)]
        order = {"fails": 0, "not_evaluated": 1, "holds": 2}
        worst = min(verdicts, key=lambda v: order[v.outcome])
        at = _smallest(run)
        smallest = "; ".join(", ".join(f"{x:.3g}" for x in dist[i, : r - 1]) for i in at)
        return dataclasses.replace(worst, statement="the path converges to GLRL's: the closest approach min_t ||W(t) "
                                   "- W_k|| / ||W_k|| to every saddle k < r vanishes as a power of alpha (exponent CI "
                                   "above 0, extrapolated limit's profile interval reaching 0)",
                                   note=worst.note + f"; distances at the smallest alpha: {smallest}")
