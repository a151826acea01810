"""Chistikov, Englert & Lazic 2023 (NeurIPS), "Learning a neuron by a shallow ReLU network: dynamics and
implicit bias for correlated inputs" (seed 004; SCIENCE.md S11), Theorems 7 and 8, and Boursier,
Pillaud-Vivien & Flammarion 2022 on orthogonal inputs (S12).

The network is `TwoLayer(activation="relu", train_outer=True, init_scheme="balanced")`,
N(x) = sum_j a_j [<w_j, x>]_+, trained on the square loss from w_j = lambda z_j, a_j = s_j ||w_j||.
The theorems are asymptotic in the initialisation scale lambda, so they are checked on a cell whose batch
runs over lambda (`init_scale`) x trials: "as lambda decreases" becomes a trend over the grid, "lambda -> 0"
becomes the smallest lambda of the grid, with documented tolerances. Per-lambda values are medians over the
trials (as the paper's Figure 1); bounds on single runs report the worst run.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pydantic

from implicitbias.runs.spec import group_by
from implicitbias.theorems.base import Theorem, Verdict, compare
from implicitbias.theorems.fitting import curve, final, fitted_slope, flag, over_runs, run_labels


# -- per-lambda summaries of a cell (also used by the experiments' figures, tables and claims) -------------
def lambdas(results) -> np.ndarray:
    """The init scale lambda of every run of a stacked results Dataset (its `init_scale` coordinate)."""
    return np.asarray(results["init_scale"].values, dtype=np.float64).reshape(-1)


def run_lambdas(run) -> np.ndarray:
    """The init scale lambda of every run of a `RunContext`, read from the run specs."""
    return np.array([spec.init_scale for spec in run.runs], dtype=np.float64)


def by_lambda(results, values, reduce=np.median) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct lambdas, reduce(values of the runs with that lambda)) - the median over trials by
    default. NaN values are ignored; a lambda whose runs are all NaN gives NaN."""
    return group_by_lambda(lambdas(results), values, reduce)


def group_by_lambda(lam, values, reduce=np.median) -> tuple[np.ndarray, np.ndarray]:
    """`by_lambda` given the lambda of every run (e.g. `run_lambdas(run)`)."""
    lam = np.asarray(lam, dtype=np.float64).reshape(-1)
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    grid = np.unique(lam)
    out = []
    for g in grid:
        v = values[lam == g]
        v = v[np.isfinite(v)]
        out.append(float(reduce(v)) if v.size else math.nan)
    return grid, np.asarray(out)


def weighted_max_angles(results, datasets, rel: float = 1e-6) -> np.ndarray:
    """Per run, the max angle (rad) between the active neurons carrying weight at the final checkpoint:
    active on a training input and |a_j| ||w_j|| >= rel x sum_k |a_k| ||w_k||. `datasets[r]` is run r's
    training data; angles are 2 atan2(||u - v||, ||u + v||) of the unit vectors (accurate at 1e-8 rad)."""
    if "theta.W" not in results.data_vars or "theta.a" not in results.data_vars:
        return np.full(results.sizes["run"], np.nan)
    W_all = np.asarray(results["theta.W"].values, dtype=np.float64)
    a_all = np.asarray(results["theta.a"].values, dtype=np.float64)
    out = np.zeros(W_all.shape[0])
    for r, (W, a) in enumerate(zip(W_all, a_all)):
        norms = np.linalg.norm(W, axis=1)
        weight = np.abs(a) * norms
        keep = np.any(datasets[r].X @ W.T > 0, axis=0) & (weight >= rel * weight.sum())
        U = W[keep] / norms[keep, None]
        for i in range(U.shape[0] - 1):
            diff = np.linalg.norm(U[i + 1:] - U[i], axis=1)
            summ = np.linalg.norm(U[i + 1:] + U[i], axis=1)
            out[r] = max(out[r], float(np.max(2.0 * np.arctan2(diff, summ))))
    return out


def v_star_norm(run, r: int) -> float:
    """||v*|| of run r's data (info["v_star"]; 1 when the generator does not record a teacher)."""
    v = run.data[r].info.get("v_star")
    return 1.0 if v is None else float(np.linalg.norm(v))


def theta_sq(results) -> np.ndarray | None:
    """||theta||^2 at the final checkpoint of every run."""
    p = final(results, "param_norm")
    return None if p is None else p**2


def loss_tolerance(run, explicit: float | None) -> float:
    """`explicit`, else the cell's stop.loss_tol, else 1e-9 (the paper's stopping rule)."""
    if explicit is not None:
        return float(explicit)
    tol = run.spec.stop.loss_tol
    return float(tol) if tol > 0 else 1e-9


def ds_angle(ds, v_star) -> float:
    """The largest angle (rad) between v* and a training input of the data set."""
    cos = ds.X @ v_star / (np.linalg.norm(ds.X, axis=1) * np.linalg.norm(v_star))
    return float(np.max(np.arccos(np.clip(cos, -1.0, 1.0))))


def _trials(run) -> list[int]:
    """One representative run per trial (data set) of the cell: the first run of each `trial`."""
    return [members[0] for members in group_by(run.runs, "trial").values()]


def relu_net_verdict(theorem: str, run, balanced: bool) -> Verdict:
    """Model: ReLU, both layers trained, no bias (and the balanced init of S11 when `balanced`); the
    stored initial balancedness max_j |a_j^2 - ||w_j||^2| is shown."""
    model = run.spec.model
    what = "balanced init w_j = lambda z_j, a_j = s_j ||w_j||" if balanced else "small init"
    statement = f"ReLU network, both layers trained, no bias, {what}"
    if not hasattr(model, "train_outer"):
        return flag(theorem, "assumption", statement, None, "no two-layer model in this cell")
    ok = model.activation == "relu" and model.train_outer and not model.bias
    if balanced:
        ok = ok and model.init_scheme == "balanced"
    b0 = curve(run.results, "balancedness_max")
    init_bal = float(np.max(b0[:, 0])) if b0 is not None else math.nan
    note = (f"activation = {model.activation}, train_outer = {model.train_outer}, bias = {model.bias}, "
            f"init_scheme = {model.init_scheme}, outer_signs = {model.outer_signs}; "
            f"max |a_j^2 - ||w_j||^2| at init = {init_bal:.3g}")
    return flag(theorem, "assumption", statement, bool(ok), note, measured=init_bal)


def method_verdict(theorem: str, run) -> Verdict:
    kind = run.spec.method.kind
    statement = "trained by gradient flow"
    if kind == "gf":
        return flag(theorem, "assumption", statement, True, "method = gf (adaptive, error-controlled)")
    return flag(theorem, "assumption", statement, None,
                f"method = {kind}: GD with a small step approximates the flow; checked as for GF")


# -- Theorem 7 ----------------------------------------------------------------------------------------------
class ChistikovTheorem7(Theorem):
    """Chistikov et al. 2023, Theorem 7 (with Theorem 6): from a balanced initialisation of scale lambda,
    gradient flow on teacher-neuron data (angles between v* and the x_i acute) drives the loss to 0, and as
    lambda -> 0 the interpolator it converges to tends to a balanced rank-1 network: all active neurons
    positive multiples of v*, so the max angle between active neurons -> 0 (Figure 1: about proportionally
    to lambda), ||W||_* -> ||v*|| = 1 and ||theta||^2 -> 2 ||v*|| = 2. Along GF the balancedness
    a_j^2 - ||w_j||^2 is conserved (it stays 0).

    Checked on one cell whose batch runs over lambda (init_scale) x trials. Fields:
    loss_tol: final loss bound for "loss -> 0" (default: the cell's stop.loss_tol, else 1e-9).
    small_lambda_max: the prediction regime lambda <= small_lambda_max, where the trend is checked. The
        paper's sufficient bound on lambda (Theorem 6: ((m n^n)^(9 Delta^2/delta^3))^(-3/eps)) lies far below
        any float64; the regime is ours (default 4^-1, where Figure 1's curves have left their
        large-lambda plateau).
    spearman_min: Spearman rank correlation of (lambda, median max angle) over the regime must be at least
        this (a decreasing trend with small noise); noise: the relative rise between consecutive lambdas
        counted as a violation of monotonicity (reported).
    slope_window: the log-log slope of the median max angle against lambda is fitted on the smallest
        slope_window lambdas; slope_interval: it must lie in this interval (Figure 1: close to 1).
    weight_rel: the trend and the slope are checked twice: on the recorded max angle between active neurons
        (Figure 1's quantity) and on the max angle between the active neurons that carry weight,
        |a_j| ||w_j|| >= weight_rel x sum_k |a_k| ||w_k|| (computed from the stored final parameters). The
        theorem is about the limit network, "every nonzero neuron a positive multiple of v*": at finite lambda
        a neuron can stay active at size ~ lambda without ever aligning (a negative-sign neuron whose
        deactivation loses the race against the escape of the others, which stops all motion; a positive one
        that started nearly opposite to gamma_[n]); it vanishes as lambda -> 0 but sets the recorded angle.
    nuclear_tol, theta_tol: at the smallest lambda, | ||W||_* - ||v*|| | / ||v*|| and
        | ||theta||^2 - 2||v*|| | / (2||v*||) of every trial must be at most these.
    balancedness_gf_factor: along gradient flow a_j^2 - ||w_j||^2 is conserved exactly; the solver keeps each
        component's local error within about rtol of its size, so the bound on max_{j, t} |a_j^2 - ||w_j||^2|
        is balancedness_gf_factor x rtol x max_t ||theta(t)||^2 (ours: an allowance for the solver). For GD,
        a step changes a_j^2 - ||w_j||^2 by
        eta^2 (g_a^2 - ||g_w||^2), at most eta^2 ||grad L||^2 in total per step, and the descent lemma sums
        eta ||grad L||^2 to about L(0) - L(end): the bound is balancedness_gd_factor x eta x L(0).
    max_data_angle: the largest angle between v* and an x_i assumed. Default pi/4: the paper's proofs assume
        it (Sec. 9: extending them towards pi/2 is open). The paper's experiments (Figure 1, presented as "in
        line with Theorem 7") draw data with angles up to pi/2 (the redraw rule); experiments that check that
        extended reading set max_data_angle = pi/2 and say so.
    """

    loss_tol: float | None = pydantic.Field(None, gt=0.0)
    small_lambda_max: float = pydantic.Field(0.25, gt=0.0)
    spearman_min: float = pydantic.Field(0.9, ge=-1.0, le=1.0)
    noise: float = pydantic.Field(0.1, ge=0.0)
    slope_window: int = pydantic.Field(4, ge=2)
    weight_rel: float = pydantic.Field(1e-6, gt=0.0, lt=1.0)
    slope_interval: tuple[float, float] = (0.7, 1.3)
    nuclear_tol: float = pydantic.Field(0.02, gt=0.0)
    theta_tol: float = pydantic.Field(0.02, gt=0.0)
    balancedness_gf_factor: float = pydantic.Field(2.0, gt=0.0)
    balancedness_gd_factor: float = pydantic.Field(2.0, gt=0.0)
    max_data_angle: float = pydantic.Field(math.pi / 4, gt=0.0, le=math.pi)

    @property
    def title(self) -> str:
        return "Chistikov et al. 2023, Theorem 7"

    # -- assumptions ----------------------------------------------------------------------------------------
    def assumptions(self, run) -> list[Verdict]:
        return [self._spanning(run), self._teacher(run), self._angles(run),
                relu_net_verdict(self.title, run, balanced=True), method_verdict(self.title, run),
                self._regime(run)]

    def _spanning(self, run) -> Verdict:
        reps = _trials(run)
        eig = []
        for r in reps:
            X = run.data[r].X
            eig.append(float(np.linalg.eigvalsh(X.T @ X / X.shape[0])[0]))
        ds = run.data[reps[0]]
        note = (f"n = {ds.n}, d = {ds.d} (n = d: the x_0 of the uncentred scheme defines v* only, see "
                "TeacherNeuron); the paper: (1/n) X X^T positive definite")
        return over_runs(self.title, "assumption", "n >= d points spanning R^d: lambda_min(X^T X / n) > 0",
                         eig, ">", 0.0, where="over the trials' data", note=note,
                         labels=[f"trial {run.runs[r].trial}" for r in reps])

    def _teacher(self, run) -> Verdict:
        worst, norm = 0.0, []
        for r in _trials(run):
            ds = run.data[r]
            v = ds.info.get("v_star")
            if v is None:
                return flag(self.title, "assumption", "labels y_i = [<v*, x_i>]_+, ||v*|| = 1", None,
                            "the data set records no teacher v_star")
            worst = max(worst, float(np.max(np.abs(ds.y - np.maximum(ds.X @ v, 0.0)))))
            norm.append(float(np.linalg.norm(v)))
        ok = worst <= 1e-12 * max(1.0, float(np.max(np.abs(run.data[0].y)))) and all(
            abs(n - 1.0) <= 1e-12 for n in norm)
        return flag(self.title, "assumption", "labels y_i = [<v*, x_i>]_+ with ||v*|| = 1", ok,
                    f"max |y_i - [<v*, x_i>]_+| = {worst:.2g}, ||v*|| = {max(norm):.15g}")

    def _angles(self, run) -> Verdict:
        reps = _trials(run)
        worst = []
        for r in reps:
            ds = run.data[r]
            v = ds.info.get("v_star")
            if v is None:
                worst.append(math.nan)
                continue
            worst.append(ds_angle(ds, v))
        quarter = "holds" if np.nanmax(worst) < math.pi / 4 else "does not hold"
        extended = self.max_data_angle > math.pi / 4 + 1e-12
        reading = "; extended reading (the paper's experiments)" if extended else ""
        return over_runs(self.title, "assumption", "every angle between v* and an x_i < bound (rad)", worst,
                         "<", self.max_data_angle, where="over the trials' data",
                         labels=[f"trial {run.runs[r].trial}" for r in reps],
                         note=f"the proofs' pi/4 bound {quarter} (largest angle {np.nanmax(worst):.4g} rad)"
                         + reading)

    def _regime(self, run) -> Verdict:
        grid = np.unique(run_lambdas(run))
        small = grid[grid <= self.small_lambda_max]
        need = 2
        note = (f"lambda in [{grid.min():.3g}, {grid.max():.3g}] ({grid.size} values); the regime lambda <= "
                f"{self.small_lambda_max:.3g} has {small.size}: "
                + (", ".join(f"{g:.3g}" for g in small) if small.size else "none")
                + "; the paper's sufficient bound on lambda is far below float64")
        return flag(self.title, "assumption", f"small initialisation: at least {need} lambdas <= "
                    f"{self.small_lambda_max:.3g} (the prediction regime)", bool(small.size >= need), note,
                    measured=float(small.size))

    # -- predictions ----------------------------------------------------------------------------------------
    def predictions(self, run) -> list[Verdict]:
        return [self._loss(run), *self._angle_trend(run), self._rank_one(run, "W.nuclear"),
                self._rank_one(run, "theta_sq"), self._balancedness(run)]

    def _regime_runs(self, run) -> np.ndarray:
        return run_lambdas(run) <= self.small_lambda_max

    def _loss(self, run) -> Verdict:
        tol = loss_tolerance(run, self.loss_tol)
        loss = final(run.results, "loss")
        keep = self._regime_runs(run)
        if loss is None or not keep.any():
            return compare(self.title, "prediction", "loss -> 0", None, "<", tol, "no run in the regime")
        labels = [f"{lab}, lambda {lam:.3g}" for lab, lam in zip(run_labels(run), run_lambdas(run))]
        status = np.asarray(run.results["status_name"].values).astype(str)
        converged = int(np.sum(status == "converged"))
        note = f"{converged} of {status.size} runs of the cell reached loss < stop.loss_tol"
        statement = f"loss -> 0: final loss < {tol:.3g} (lambda in the regime)"
        return over_runs(self.title, "prediction", statement, loss[keep], "<", tol,
                         labels=[labels[i] for i in np.flatnonzero(keep)], note=note)

    def _angle_trend(self, run) -> list[Verdict]:
        recorded = final(run.results, "max_angle")
        weighted = weighted_max_angles(run.results, run.data, self.weight_rel)
        what = f"with |a_j| ||w_j|| >= {self.weight_rel:g} sum_k |a_k| ||w_k||"
        return (self._trend(run, recorded, "max angle between active neurons")
                + self._trend(run, weighted, f"max angle between active neurons {what}"))

    def _trend(self, run, angle, what: str) -> list[Verdict]:
        grid, med = group_by_lambda(run_lambdas(run), angle)
        keep = grid <= self.small_lambda_max
        g, a = grid[keep], med[keep]
        table = ", ".join(f"{x:.3g}: {y:.3g}" for x, y in zip(g, a))
        trend = f"as lambda decreases, the median {what} decreases"
        out = []
        if g.size >= 3 and np.all(np.isfinite(a)):
            import scipy.stats

            rho = float(scipy.stats.spearmanr(g, a).statistic)
            rises = int(np.sum(a[:-1] > a[1:] * (1.0 + self.noise)))  # a smaller lambda with a larger angle
            note = (f"{rises} of {g.size - 1} consecutive pairs rise by more than {self.noise:.0%} as lambda "
                    f"decreases; median (rad) by lambda: {table}")
            statement = trend + " (Spearman correlation of lambda and angle)"
            out.append(compare(self.title, "prediction", statement, rho, ">=", self.spearman_min, note))
        else:
            out.append(compare(self.title, "prediction", trend, None, ">=", self.spearman_min,
                               f"fewer than 3 lambdas in the regime: {table}"))
        k = min(self.slope_window, g.size)
        gw, aw = g[:k], a[:k]
        ok = (aw > 0) & np.isfinite(aw)
        slope, r2 = fitted_slope(np.log(gw[ok]), np.log(aw[ok])) if ok.sum() >= 2 else (math.nan, math.nan)
        lo, hi = self.slope_interval
        statement = (f"log-log slope against lambda of the median {what}, smallest {k} lambdas, in "
                     f"[{lo:g}, {hi:g}]")
        note = f"R^2 = {r2:.3f}; lambdas {', '.join(f'{x:.3g}' for x in gw)}"
        out.append(compare(self.title, "prediction", statement + " (>= lower end)", slope, ">=", lo, note))
        out.append(compare(self.title, "prediction", statement + " (<= upper end)", slope, "<=", hi, note))
        return out

    def _rank_one(self, run, what: str) -> Verdict:
        res = run.results
        lam = run_lambdas(run)
        at = np.flatnonzero(lam == lam.min())
        vn = np.array([v_star_norm(run, r) for r in at])
        if what == "W.nuclear":
            value, target, tol = final(res, "W.nuclear"), vn, self.nuclear_tol
            statement = "||W||_* -> ||v*|| (= 1) at the smallest lambda: | ||W||_* - ||v*|| | / ||v*||"
        else:
            value, target, tol = theta_sq(res), 2.0 * vn, self.theta_tol
            statement = ("||theta||^2 -> 2 ||v*|| (= 2) at the smallest lambda: | ||theta||^2 - 2||v*|| | / "
                         "(2||v*||)")
        if value is None:
            return compare(self.title, "prediction", statement, None, "<=", tol, "not recorded")
        gap = np.abs(value[at] - target) / target
        labels = [f"run {r}, trial {run.runs[r].trial}" for r in at]
        notes = [f"value {value[r]:.8g}" for r in at]
        return over_runs(self.title, "prediction", statement, gap, "<=", tol, labels=labels, run_notes=notes,
                         where=f"at lambda = {lam.min():.3g}")

    def _balancedness(self, run) -> Verdict:
        bal = curve(run.results, "balancedness_max")
        statement = "balancedness conserved: max over neurons and checkpoints of |a_j^2 - ||w_j||^2|"
        if bal is None:
            return compare(self.title, "prediction", statement, None, "<=", None, "not recorded")
        worst = np.nanmax(bal, axis=1)
        method = run.spec.method
        if method.kind == "gf":
            rtol = method.rtol
            size = np.nanmax(curve(run.results, "param_norm") ** 2, axis=1)
            bound = self.balancedness_gf_factor * rtol * size
            note = (f"gradient flow: conserved exactly; bound {self.balancedness_gf_factor:g} x rtol "
                    f"({rtol:g}) x max_t ||theta||^2 (the solver's allowance)")
        else:
            l0 = curve(run.results, "loss")[:, 0]
            lr = np.array([getattr(spec.method, "lr", None) or math.nan for spec in run.runs])
            bound = self.balancedness_gd_factor * lr * l0
            note = f"{method.kind}: drift <= {self.balancedness_gd_factor:g} x lr x L(0) (descent lemma)"
        return over_runs(self.title, "prediction", statement, worst, "<=", bound, labels=run_labels(run),
                         where="along training", note=note)


# -- Theorem 8 ----------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _m_cached(xbytes: bytes, vbytes: bytes, d: int, seed: int) -> float:
    from implicitbias.reference import chistikov_M

    X = np.frombuffer(xbytes).reshape(d, d)
    v = np.frombuffer(vbytes)
    return chistikov_M(X, v, seed=seed).M


@functools.lru_cache(maxsize=256)
def _min_norm_cached(xbytes: bytes, ybytes: bytes, n: int) -> float:
    from implicitbias.reference import min_norm_relu_interpolator

    X = np.frombuffer(xbytes).reshape(n, -1)
    y = np.frombuffer(ybytes)
    return min_norm_relu_interpolator(X, y).theta_sq_norm


def chistikov_reference(X, v_star, y, *, m_exact_max_d: int = 6, min_norm_max_n: int = 6,
                        seed: int = 0) -> dict:
    """The Sec. 7 measurements of one data set: the Z-matrix condition (max_{k != l} <chi_k, chi_l>), M
    (exactly, for d <= m_exact_max_d, else NaN), the convex minimum ||theta||^2 over interpolators (for
    n <= min_norm_max_n, else NaN) and the rank-1 value 2 ||v*||. Cached per data set."""
    from implicitbias.reference import rank_one_norm, z_matrix_condition

    X = np.ascontiguousarray(X, dtype=np.float64)
    v = np.ascontiguousarray(v_star, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n, d = X.shape
    z = z_matrix_condition(X)
    M = _m_cached(X.tobytes(), v.tobytes(), d, seed) if d <= m_exact_max_d else math.nan
    mn = _min_norm_cached(X.tobytes(), y.tobytes(), n) if n <= min_norm_max_n else math.nan
    return {"z_holds": z.holds, "z_max_offdiag": z.max_offdiag, "M": M, "min_norm": mn,
            "rank_one": rank_one_norm(v)}


class ChistikovTheorem8(Theorem):
    """Chistikov et al. 2023, Theorem 8 (Sec. 7): for n = d, X invertible, teacher labels with every
    <v*, x_i> > 0 and width m > 1: if M < 0 the balanced rank-1 interpolators (||theta||^2 = 2 ||v*||) are
    exactly the minimum-norm interpolators; if M > 0 none of them is (the minimum is < 2 ||v*||). The
    inverse Gram matrix being a Z-matrix (<chi_k, chi_l> <= 0, k != l) is sufficient for M < 0. Combined
    with Theorem 7 (GF from lambda -> 0 reaches the rank-1 limit): the learned ||theta||^2 tends to 2 ||v*||,
    which is the minimum norm if M < 0 and above it if M > 0.

    Evaluated for every data set (trial) of the cell; the learned ||theta||^2 is taken at the cell's smallest
    lambda. Fields:
    m_exact_max_d: M is computed exactly (all 2^d - 2 subsets K) for d <= this, else not evaluated (the sign
        is then known only when the Z-matrix condition holds).
    min_norm_max_n: the convex min-norm program (all activation patterns) is solved for n <= this.
    norm_tol: relative tolerance of the convex comparisons (solver accuracy): M < 0 needs
        |min - 2||v*||| <= norm_tol 2||v*||; M > 0 needs (2||v*|| - min) / 2||v*|| >= norm_tol and
        (learned ||theta||^2 - min) / min >= norm_tol.
    learned_tol: |learned ||theta||^2 - 2||v*||| / (2||v*||) at the smallest lambda.
    m_zero_tol: |M| <= this counts as the excluded threshold case M = 0.
    seed: of the multi-start search for M.
    rank_one_max_angle: the predictions about the learned network come from Theorem 7, whose proof assumes
        every angle between v* and an x_i below pi/4; on a data set beyond this they are outside_scope.
    """

    m_exact_max_d: int = pydantic.Field(6, ge=2)
    min_norm_max_n: int = pydantic.Field(6, ge=1)
    norm_tol: float = pydantic.Field(1e-5, gt=0.0)
    learned_tol: float = pydantic.Field(1e-2, gt=0.0)
    m_zero_tol: float = pydantic.Field(1e-9, ge=0.0)
    seed: int = pydantic.Field(0, ge=0)
    rank_one_max_angle: float = pydantic.Field(math.pi / 4, gt=0.0, le=math.pi)

    @property
    def title(self) -> str:
        return "Chistikov et al. 2023, Theorem 8"

    def _ref(self, run, r) -> dict:
        ds = run.data[r]
        return chistikov_reference(ds.X, ds.info["v_star"], ds.y, m_exact_max_d=self.m_exact_max_d,
                                   min_norm_max_n=self.min_norm_max_n, seed=self.seed)

    def _label(self, run, r, text: str) -> str:
        return text + (f" (trial {run.runs[r].trial})" if len(_trials(run)) > 1 else "")

    def assumptions(self, run) -> list[Verdict]:
        out = []
        ok, notes = [], []
        for r in _trials(run):
            ds = run.data[r]
            square = ds.n == ds.d
            cond = float(np.linalg.cond(ds.X)) if square else math.inf
            ok.append(square and cond < 1e12)
            notes.append(f"trial {run.runs[r].trial}: n = {ds.n}, d = {ds.d}, cond(X) = {cond:.3g}")
        out.append(flag(self.title, "assumption", "n = d and X invertible", all(ok), "; ".join(notes)))
        worst, resid = [], 0.0
        for r in _trials(run):
            ds = run.data[r]
            v = ds.info.get("v_star")
            if v is None:
                out.append(flag(self.title, "assumption", "teacher labels", None, "no v_star recorded"))
                return out
            worst.append(float(np.min(ds.X @ v / np.linalg.norm(ds.X, axis=1) / np.linalg.norm(v))))
            resid = max(resid, float(np.max(np.abs(ds.y - np.maximum(ds.X @ v, 0.0)))))
        out.append(compare(self.title, "assumption", "labels y_i = [<v*, x_i>]_+ with every <v*, x_i> > 0: "
                           "min_i cos angle(v*, x_i)", min(worst), ">", 0.0,
                           f"max |y_i - [<v*, x_i>]_+| = {resid:.2g}"))
        width = getattr(run.spec.model, "width", None)
        out.append(compare(self.title, "assumption", "width m > 1", width, ">", 1))
        out.append(relu_net_verdict(self.title, run, balanced=True))
        for r in _trials(run):
            if not all(ok):
                break
            M = self._ref(run, r)["M"]
            statement = self._label(run, r, "M != 0 (the excluded threshold): |M|")
            out.append(compare(self.title, "assumption", statement, abs(M) if np.isfinite(M) else None, ">",
                               self.m_zero_tol,
                               "" if np.isfinite(M) else f"M not computed for d > {self.m_exact_max_d}"))
        return out

    def predictions(self, run) -> list[Verdict]:
        out = []
        for r in _trials(run):
            ds = run.data[r]
            if ds.n == ds.d:
                out.extend(self._dataset_predictions(run, r))
        return out

    def _dataset_predictions(self, run, r) -> list[Verdict]:
        ref = self._ref(run, r)
        M, mn, r1 = ref["M"], ref["min_norm"], ref["rank_one"]
        out = []

        def add(statement, measured, relation, bound, note=""):
            out.append(compare(self.title, "prediction", self._label(run, r, statement), measured, relation,
                               bound, note))

        znote = f"max_(k!=l) <chi_k, chi_l> = {ref['z_max_offdiag']:.4g}"
        if ref["z_holds"]:
            add("Z-matrix condition holds => M < 0", M, "<", 0.0,
                znote + ("" if np.isfinite(M) else "; M not computed"))
        else:
            add("Z-matrix condition (sufficient for M < 0)", None, "<", 0.0,
                znote + f" > 0: the condition does not hold, no prediction; M = {M:.4g}")
        known = np.isfinite(M)
        sign = -1 if (known and M < 0) or (not known and ref["z_holds"]) else (1 if known and M > 0 else 0)
        note = f"M = {M:.4g}, convex min ||theta||^2 = {mn:.8g}, rank-1 2||v*|| = {r1:.8g}"
        if sign < 0:
            add("M < 0 => min-norm interpolators are rank-1: |min ||theta||^2 - 2||v*||| / 2||v*||",
                abs(mn - r1) / r1, "<=", self.norm_tol, note)
        elif sign > 0:
            add("M > 0 => rank-1 is not min-norm: (2||v*|| - min ||theta||^2) / 2||v*||", 1.0 - mn / r1, ">=",
                self.norm_tol, note)
        else:
            add("sign of M decides min-norm", None, "<=", self.norm_tol, note + "; sign of M unknown")
        learned = theta_sq(run.results)
        lam = run_lambdas(run)
        same = np.array([spec.trial == run.runs[r].trial for spec in run.runs])
        runs = np.flatnonzero((lam == lam.min()) & same)
        if learned is None or runs.size == 0:
            return out
        value = float(learned[runs[0]])
        first = len(out)
        add("learned ||theta||^2 at the smallest lambda -> 2||v*|| (rank-1, Theorem 7): relative gap",
            abs(value - r1) / r1, "<=", self.learned_tol, f"learned {value:.8g} at lambda {lam.min():.3g}")
        if sign > 0 and np.isfinite(mn):
            add("M > 0 => GF does not find a min-norm interpolator: (learned - min ||theta||^2) / min",
                value / mn - 1.0, ">=", self.norm_tol, f"learned {value:.8g}, min {mn:.8g}")
        ds = run.data[r]
        v = ds_angle(ds, ds.info["v_star"])
        if v >= self.rank_one_max_angle:
            why = (f"largest angle between v* and an x_i {v:.4g} rad >= {self.rank_one_max_angle:.4g} "
                   "(Theorem 7's assumption)")
            out[first:] = [dataclasses.replace(x, outcome="outside_scope", note=f"{x.note}; measured "
                           f"{x.outcome}, but {why}") if x.outcome in ("holds", "fails") else x
                           for x in out[first:]]
        return out


# -- Boursier et al. 2022: orthogonal inputs -----------------------------------------------------------------
class BoursierOrthogonal(Theorem):
    """Boursier, Pillaud-Vivien & Flammarion 2022 (S12): on pairwise orthogonal inputs, gradient flow on a
    two-layer ReLU network (both layers trained, square loss) from a small init converges to a minimum-norm
    interpolator, whose ||theta||^2 has the closed form 2 (||v_+|| + ||v_-||),
    v_+- = sum_{+-y_i > 0} |y_i| x_i / ||x_i||^2.

    Coverage at init (our reading of the mechanism; SCIENCE.md does not restate the paper's assumptions): on
    orthogonal data a neuron's gradient has no component along an input outside its active half-space, so a
    neuron never gains new points; the group of neurons whose initial active set covers a whole sign class
    grows fastest (rate ||(1/n) sum y_i x_i|| over the class) and fits it first, and the other neurons stop
    at a size ~ lambda^(1 - r) (r < 1 their relative growth rate). So the minimum norm is approached only if
    some positive (negative) neuron is active at init on every input with y_i > 0 (< 0), and only
    polynomially in lambda: the excess ||theta||^2 decays like lambda^(2 (1 - r)) (for k unit labels of one
    sign and unit inputs r = sqrt((k - 1)/k)). The coverage is checked on the init recomputed from each run's
    seed and lambda.

    Checked on a cell whose batch runs over lambda (init_scale) x trials. Fields:
    orth_tol: max_{i != j} |cos angle(x_i, x_j)| allowed for "orthogonal".
    loss_tol: final loss bound (default: the cell's stop.loss_tol, else 1e-9).
    norm_tol: (learned ||theta||^2 - min) / min at the smallest lambda, every trial, at most this.
    """

    orth_tol: float = pydantic.Field(1e-10, gt=0.0)
    loss_tol: float | None = pydantic.Field(None, gt=0.0)
    norm_tol: float = pydantic.Field(0.02, gt=0.0)

    @property
    def title(self) -> str:
        return "Boursier et al. 2022 (orthogonal inputs)"

    def assumptions(self, run) -> list[Verdict]:
        worst = []
        for r in _trials(run):
            X = run.data[r].X
            nx = np.linalg.norm(X, axis=1)
            C = np.abs(X @ X.T) / np.outer(nx, nx)
            worst.append(float(np.max(C - np.diag(np.diag(C)), initial=0.0)))
        return [
            over_runs(self.title, "assumption", "inputs pairwise orthogonal: max_(i!=j) |cos(x_i, x_j)|",
                      worst, "<=", self.orth_tol, where="over the trials' data"),
            relu_net_verdict(self.title, run, balanced=False),
            method_verdict(self.title, run),
            self._coverage(run),
        ]

    def _coverage(self, run) -> Verdict:
        import jax

        statement = ("coverage at init: some neuron with a_j > 0 (a_j < 0) is active on every input with "
                     "y_i > 0 (y_i < 0)")
        missing, seen = [], set()
        for r, spec in enumerate(run.runs):
            ds, model, seed = run.data[r], spec.model, spec.seed
            if (seed, spec.trial) in seen:  # the pattern does not depend on lambda
                continue
            seen.add((seed, spec.trial))
            theta, const = model.init(jax.random.PRNGKey(seed), ds.d, 1.0)
            W, a = np.asarray(theta["W"]), np.asarray(model.outer(theta, const))
            active = ds.X @ W.T > 0
            for sign in (1, -1):
                rows = sign * ds.y > 0
                if rows.any() and not np.any((sign * a > 0) & active[rows].all(axis=0)):
                    missing.append(f"seed {seed} (sign {sign:+d})")
        return flag(self.title, "assumption", statement, not missing,
                    "holds on every run" if not missing else "not covered: " + ", ".join(missing[:6]))

    def min_norms(self, run) -> np.ndarray:
        """The closed-form minimum ||theta||^2 of every run's data."""
        from implicitbias.reference import orthogonal_min_norm

        cache: dict[str, float] = {}
        out = []
        for r in range(run.n_runs):
            t = run.runs[r].data_key()
            if t not in cache:
                ds = run.data[r]
                cache[t] = orthogonal_min_norm(ds.X, ds.y, tol=max(self.orth_tol, 1e-10)).theta_sq_norm
            out.append(cache[t])
        return np.asarray(out)

    def predictions(self, run) -> list[Verdict]:
        res = run.results
        tol = loss_tolerance(run, self.loss_tol)
        out = [over_runs(self.title, "prediction", f"loss -> 0: final loss < {tol:.3g}", final(res, "loss"),
                         "<", tol, labels=run_labels(run))]
        try:
            mins = self.min_norms(run)
        except ValueError as exc:
            return out + [compare(self.title, "prediction", "learned ||theta||^2 -> 2 (||v_+|| + ||v_-||)",
                                  None, "<=", self.norm_tol, str(exc))]
        gap = (theta_sq(res) - mins) / mins
        lam = run_lambdas(run)
        at = np.flatnonzero(lam == lam.min())
        statement = ("learned ||theta||^2 -> closed-form min 2 (||v_+|| + ||v_-||): relative gap at the "
                     "smallest lambda")
        out.append(over_runs(
            self.title, "prediction", statement, gap[at], "<=", self.norm_tol,
            where=f"at lambda = {lam.min():.3g}",
            labels=[f"run {r}, trial {run.runs[r].trial}" for r in at],
            run_notes=[f"learned {theta_sq(res)[r]:.6g}, min {mins[r]:.6g}" for r in at]))
        grid, med = group_by_lambda(lam, gap)
        if grid.size >= 2:
            statement = "the gap shrinks as lambda decreases: median gap, smallest lambda < largest lambda"
            out.append(compare(self.title, "prediction", statement, med[0], "<", med[-1],
                               "median relative gap by lambda: "
                               + ", ".join(f"{g:.3g}: {m:.3g}" for g, m in zip(grid, med))))
        return out
