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
from typing import ClassVar

import numpy as np
import pydantic

from implicitbias.runs.spec import group_by
from implicitbias.theorems.base import Theorem, Verdict, compare
from implicitbias.theorems.fitting import curve, final, flag, linear_fit, over_runs, rate_verdict, run_labels
from implicitbias.theorems.two_layer_bounds import final_parameters, loss_rate_verdict, rank_one_bounds


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


def _per_run(results, datasets, fn) -> np.ndarray:
    """fn(W, a, X) on each run's final parameters and training inputs; NaN where none are stored."""
    out = np.full(results.sizes["run"], np.nan)
    for r in range(out.size):
        params = final_parameters(results, r)
        if params is not None:
            out[r] = fn(*params, datasets[r].X)
    return out


def weighted_max_angles(results, datasets, rel: float = 1e-6) -> np.ndarray:
    """Per run, `metrics.neurons.weighted_max_angle` of the final parameters: the max angle (rad) between the
    active neurons with |a_j| ||w_j|| >= rel x sum_k |a_k| ||w_k||. `datasets[r]` is run r's training data."""
    from implicitbias.metrics.neurons import weighted_max_angle

    return _per_run(results, datasets, lambda W, a, X: weighted_max_angle(W, a, X, rel))


def angle_setting_shares(results, datasets) -> np.ndarray:
    """Per run, the weight share of the lighter neuron of the pair that makes the max angle between active
    neurons (`metrics.neurons.max_angle_pair`), from the final parameters; NaN where there is none."""
    from implicitbias.metrics.neurons import max_angle_pair

    return _per_run(results, datasets, lambda W, a, X: max_angle_pair(W, a, X)[1])


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
    to lambda), ||W||_* -> sqrt(||v*||) = 1 and ||theta||^2 -> 2 ||v*|| = 2. Along GF the balancedness
    a_j^2 - ||w_j||^2 is conserved (it stays 0).

    Checked on one cell whose batch runs over lambda (init_scale) x trials. How each asymptotic claim is read
    at finite time (every threshold below is derived, none is tuned; the same for quick and full variants):
    - "loss -> 0" (S11: after the saddle, exponentially): the decay rate of log L over the last stretch of
      each run against the rate 2 lambda_min(K)/n of the flow linearised at the final parameters; it must be
      nearer that rate than the rate 0 of a loss that does not converge exponentially: ratio >= 1/2
      (`two_layer_bounds.loss_rate_verdict`). A stopping rule alone cannot pass it: a run that stalls above
      the rule's loss, or decays like a power law, has a late rate near 0.
    - "max angle -> 0 as lambda -> 0, about proportionally" (Figure 1): the power law angle ~ lambda^p fitted
      by least squares to log angle against log lambda over every run of the regime, one intercept per trial
      (the prefactor depends on the data set and init, the exponent is common), so the standard error
      includes each trial's scatter about its line; predicted p = 1, competitors 0 (an angle flat
      in lambda: no limit 0), 1/2 and 2; holds when the 95% confidence interval of p lies within (3/4, 3/2),
      the midpoints, fails when it lies outside, inconclusive (not_evaluated) otherwise
      (`fitting.rate_verdict`). p > 0 is what makes the extrapolated limit 0.
    - "||theta||^2 -> 2||v*||, ||W||_* -> sqrt(||v*||)": at the smallest lambda, every trial, against the
      finite-time bound of `two_layer_bounds.rank_one_bounds`: what the rank-1 limit allows at the run's
      final loss, bundle angle and imbalance; the weight of inactive neurons that carry weight is not forgiven
      (`rank_one_bound`).
    - "a_j^2 - ||w_j||^2 conserved": exactly along GF; the bounds on the drift are derived per method (see
      `_balancedness`).

    Fields:
    small_lambda_max: the prediction regime lambda <= small_lambda_max, where the rate is fitted. The
        paper's sufficient bound on lambda (Theorem 6: ((m n^n)^(9 Delta^2/delta^3))^(-3/eps)) lies far below
        any float64; the regime is ours: default 4^-1, where ||theta(0)||^2 ~ 2 lambda^2 is below 1/16 of the
        limit's 2||v*|| and Figure 1's curves have left their large-lambda plateau. A bend left in the regime
        widens the confidence interval (inconclusive), it cannot make the check pass.
    slope_window: if set, the rate is fitted on the smallest slope_window lambdas of the regime only (default
        None: the whole regime).
    weight_rel: the rate is checked twice: on the recorded max angle between active neurons (Figure 1's
        quantity) and on the max angle between the active neurons that carry weight,
        |a_j| ||w_j|| >= weight_rel x sum_k |a_k| ||w_k|| (computed from the stored final parameters). The
        theorem is about the limit network, "every nonzero neuron a positive multiple of v*": at finite lambda
        a neuron can stay active at size ~ lambda without ever aligning (a negative-sign neuron whose
        deactivation loses the race against the escape of the others, which stops all motion; a positive one
        that started nearly opposite to gamma_[n]); it vanishes as lambda -> 0 but sets the recorded angle.
    max_data_angle: the largest angle between v* and an x_i assumed. Default pi/4: the paper's proofs assume
        it (Sec. 9: extending them towards pi/2 is open). The paper's experiments (Figure 1, presented as "in
        line with Theorem 7") draw data with angles up to pi/2 (the redraw rule); experiments that check that
        extended reading set max_data_angle = pi/2 and say so.
    """

    small_lambda_max: float = pydantic.Field(0.25, gt=0.0)
    slope_window: int | None = pydantic.Field(None, ge=2)
    weight_rel: float = pydantic.Field(1e-6, gt=0.0, lt=1.0)
    max_data_angle: float = pydantic.Field(math.pi / 4, gt=0.0, le=math.pi)

    #: Figure 1's exponent and its wrong competitors (flat, square root, quadratic)
    ANGLE_RATE: ClassVar[float] = 1.0
    ANGLE_COMPETITORS: ClassVar[tuple[float, ...]] = (0.0, 0.5, 2.0)

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
        keep = self._regime_runs(run)
        labels = [f"{lab}, lambda {lam:.3g}" for lab, lam in zip(run_labels(run), run_lambdas(run))]
        return loss_rate_verdict(self.title, run, keep, labels)

    def _angle_trend(self, run) -> list[Verdict]:
        recorded = final(run.results, "max_angle")
        weighted = weighted_max_angles(run.results, run.data, self.weight_rel)
        what = f"with |a_j| ||w_j|| >= {self.weight_rel:g} sum_k |a_k| ||w_k||"
        shares = angle_setting_shares(run.results, run.data)
        lam = run_lambdas(run)
        smallest = np.isfinite(shares) & (lam == lam.min())
        setter = ""
        if smallest.any():
            setter = (f"; at the smallest lambda the angle is set by a neuron carrying a share "
                      f"{np.median(shares[smallest]):.2g} (median over trials; max {np.max(shares[smallest]):.2g}) "
                      "of sum_k |a_k| ||w_k||")
        return [self._rate(run, recorded, "max angle between active neurons", extra=setter),
                self._rate(run, weighted, f"max angle between active neurons {what}")]

    def _rate(self, run, angle, what: str, extra: str = "") -> Verdict:
        lam = run_lambdas(run)
        statement = (f"{what} -> 0 as lambda -> 0, about proportionally (Figure 1): exponent p of angle ~ "
                     f"lambda^p over the regime")
        if angle is None:
            return compare(self.title, "prediction", statement, None, "~", self.ANGLE_RATE, "not recorded")
        angle = np.asarray(angle, dtype=np.float64)
        keep = self._regime_runs(run) & np.isfinite(angle)
        grid = np.unique(lam[keep])
        if self.slope_window is not None:
            keep &= lam <= grid[: self.slope_window].max(initial=-np.inf)
        zero = keep & (angle <= 0)
        keep &= angle > 0
        trials = np.array([spec.trial for spec in run.runs])
        fit = linear_fit(np.log(lam[keep]), np.log(angle[keep]), groups=trials[keep])
        g, med = group_by_lambda(lam[keep], angle[keep])
        note = ("median (rad) by lambda: " + ", ".join(f"{x:.3g}: {y:.3g}" for x, y in zip(g, med))
                + (f"; {int(zero.sum())} run(s) with angle 0 (fewer than two such neurons) left out" if zero.any()
                   else "") + extra)
        return rate_verdict(self.title, statement, fit, self.ANGLE_RATE, self.ANGLE_COMPETITORS, note=note)

    def _rank_one(self, run, what: str) -> Verdict:
        res = run.results
        lam = run_lambdas(run)
        at = np.flatnonzero(lam == lam.min())
        if what == "W.nuclear":
            value = final(res, "W.nuclear")
            target = np.array([math.sqrt(v_star_norm(run, r)) for r in at])
            statement = "||W||_* -> sqrt(||v*||) (= 1) at the smallest lambda: | ||W||_* / sqrt(||v*||) - 1 |"
        else:
            value = theta_sq(res)
            target = np.array([2.0 * v_star_norm(run, r) for r in at])
            statement = "||theta||^2 -> 2 ||v*|| (= 2) at the smallest lambda: | ||theta||^2 / (2||v*||) - 1 |"
        statement += " <= the rank-1 limit's finite-time bound"
        if value is None:
            return compare(self.title, "prediction", statement, None, "<=", None, "not recorded")
        bounds, notes = [], []
        for r in at:
            b = rank_one_bound(run, r)
            bounds.append(math.nan if b is None else b["nuclear" if what == "W.nuclear" else "theta"])
            notes.append(f"value {value[r]:.8g}; " + ("no final parameters" if b is None else b["note"]))
        gap = np.abs(value[at] / target - 1.0)
        labels = [f"run {r}, trial {run.runs[r].trial}" for r in at]
        return over_runs(self.title, "prediction", statement, gap, "<=", np.asarray(bounds), labels=labels,
                         run_notes=notes, where=f"at lambda = {lam.min():.3g}")

    def _balancedness(self, run) -> Verdict:
        """Gradient flow conserves a_j^2 - ||w_j||^2 exactly; the error-controlled solver changes a component
        by at most about rtol x its size per step, and d(a^2 - ||w||^2) = 2 a da - 2 w . dw, so one step's
        error moves it by at most 2 rtol (a_j^2 + ||w_j||^2) <= 2 rtol max_t ||theta(t)||^2 (the factor 2 is
        that derivative; a drift beyond it means errors accumulated over steps). A GD step of size eta changes
        it by eta^2 (g_a^2 - ||g_w||^2), in total at most eta^2 sum_k ||grad L_k||^2, and the descent lemma
        (with eta below 1/smoothness, which stable GD needs) bounds eta sum_k ||grad L_k||^2 by
        2 (L(0) - L(end)) <= 2 L(0): the drift is at most 2 eta L(0)."""
        bal = curve(run.results, "balancedness_max")
        statement = "balancedness conserved: max over neurons and checkpoints of |a_j^2 - ||w_j||^2|"
        if bal is None:
            return compare(self.title, "prediction", statement, None, "<=", None, "not recorded")
        worst = np.nanmax(bal, axis=1)
        method = run.spec.method
        if method.kind == "gf":
            size = np.nanmax(curve(run.results, "param_norm") ** 2, axis=1)
            bound = 2.0 * method.rtol * size
            note = f"gradient flow: conserved exactly; bound 2 rtol ({method.rtol:g}) max_t ||theta||^2 (one step's error)"
        else:
            l0 = curve(run.results, "loss")[:, 0]
            lr = np.array([getattr(spec.method, "lr", None) or math.nan for spec in run.runs])
            bound = 2.0 * lr * l0
            note = f"{method.kind}: drift <= 2 lr L(0) (the descent lemma)"
        return over_runs(self.title, "prediction", statement, worst, "<=", bound, labels=run_labels(run),
                         where="along training", note=note)


def rank_one_bound(run, r: int) -> dict | None:
    """`two_layer_bounds.rank_one_bounds` of run r at its final checkpoint (None without parameters), computed
    on the network without its dead weight: the neurons inactive on every input that carry weight,
    |a_j| ||w_j|| >= WEIGHT_REL x sum_k |a_k| ||w_k||.

    Those neurons do not change the output, so the bound stays valid for the rest of the network; the measured
    ||theta||^2 and ||W||_* still include them. rank_one_bounds forgives every neuron outside the bundle (its
    c_R / s, sum_R ||w_j|| / sqrt(s), and kappa c_R / s through e); Theorem 7's limit has no such weight (every
    nonzero neuron a positive multiple of v*), so forgiving a neuron that grew and then left every input's
    half-space would pass the network that "||theta||^2 -> 2||v*||" excludes (issue 24: weight 1/4 along -v*
    gave a gap 0.25 under a bound 0.51). Neurons below the share stay forgiven: those left near their init
    size lambda ||z_j||, whose share vanishes like lambda^2, as the active light ones the bundle leaves out."""
    from implicitbias.metrics.neurons import WEIGHT_REL

    params = final_parameters(run.results, r)
    v = run.data[r].info.get("v_star")
    loss = final(run.results, "loss")
    if params is None or v is None or loss is None:
        return None
    ds = run.data[r]
    W, a = params
    weight = np.abs(a) * np.linalg.norm(W, axis=1)
    dead = ~np.any(ds.X @ W.T > 0, axis=0) & (weight >= WEIGHT_REL * weight.sum()) & (weight > 0)
    out = rank_one_bounds(W[~dead], a[~dead], ds.X, ds.y, v, float(loss[r]))
    if dead.any():
        out["note"] += (f"; {int(dead.sum())} inactive neuron(s) carrying weight {float(weight[dead].sum()):.3g} "
                        "(dead weight, not forgiven: the limit has none)")
    return out


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
    lambda, where it stands for GF's limit as lambda -> 0 within the finite-time bound b of
    `two_layer_bounds.rank_one_bounds` (what the rank-1 limit allows at that run's final loss, bundle angle
    and imbalance): "learned -> 2||v*||" holds when |learned / 2||v*|| - 1| <= b, and "GF does not find a
    min-norm interpolator" (M > 0) when learned - min ||theta||^2 exceeds 2||v*|| b, the room the finite run
    leaves its limit. Fields:
    m_exact_max_d: M is computed exactly (all 2^d - 2 subsets K) for d <= this, else not evaluated (the sign
        is then known only when the Z-matrix condition holds).
    min_norm_max_n: the convex min-norm program (all activation patterns) is solved for n <= this.
    norm_tol: relative accuracy of the convex minimum (the interior-point solver stops at a relative duality
        gap of 1e-8; the pattern enumeration and the recovered network lose more): M < 0 needs
        |min - 2||v*||| <= norm_tol 2||v*||; M > 0 needs (2||v*|| - min) / 2||v*|| >= norm_tol.
    learned_tol: if set, a fixed tolerance on |learned / 2||v*|| - 1| in place of the derived bound (default
        None: the derived bound).
    m_zero_tol: |M| <= this counts as the excluded threshold case M = 0.
    seed: of the multi-start search for M.
    rank_one_max_angle: the predictions about the learned network come from Theorem 7, whose proof assumes
        every angle between v* and an x_i below pi/4; on a data set beyond this they are outside_scope.
    """

    m_exact_max_d: int = pydantic.Field(6, ge=2)
    min_norm_max_n: int = pydantic.Field(6, ge=1)
    norm_tol: float = pydantic.Field(1e-5, gt=0.0)
    learned_tol: float | None = pydantic.Field(None, gt=0.0)
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
        scale = max(1.0, max(float(np.max(np.abs(run.data[r].y))) for r in _trials(run)))
        out.append(flag(self.title, "assumption", "labels y_i = [<v*, x_i>]_+ (teacher labels)", resid <= 1e-12 * scale,
                        f"max |y_i - [<v*, x_i>]_+| = {resid:.2g}"))
        out.append(compare(self.title, "assumption", "every <v*, x_i> > 0: min_i cos angle(v*, x_i)", min(worst), ">", 0.0))
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
            else:
                # M, the min-norm program and the rank-1 norm 2||v*|| are defined for square invertible X only
                why = f"the theorem is stated for n = d (square, invertible X); here n = {ds.n}, d = {ds.d}"
                for statement in ("sign of M decides min-norm", "learned ||theta||^2 -> 2||v*||"):
                    out.append(compare(self.title, "prediction", self._label(run, r, statement), None, "<=",
                                       None, why))
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
        b = rank_one_bound(run, int(runs[0]))
        bound = (b["theta"] if b is not None else math.nan) if self.learned_tol is None else self.learned_tol
        why = "fixed learned_tol" if self.learned_tol is not None else (
            "no final parameters" if b is None else "the rank-1 limit's finite-time bound: " + b["note"])
        add("learned ||theta||^2 at the smallest lambda -> 2||v*|| (rank-1, Theorem 7): relative gap", abs(value - r1) / r1,
            "<=", bound, f"learned {value:.8g} at lambda {lam.min():.3g}; {why}")
        if sign > 0 and np.isfinite(mn):
            add("M > 0 => GF does not find a min-norm interpolator: (learned - min ||theta||^2) / min, above the "
                "room 2||v*|| b / min the finite run leaves its limit", value / mn - 1.0, ">=", r1 * bound / mn,
                f"learned {value:.8g}, min {mn:.8g}")
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

    How the asymptotic claims are read at finite time (derived thresholds, the same for every variant):
    - "loss -> 0": exponentially at the linearised flow's rate, as for Chistikov's Theorem 7
      (`two_layer_bounds.loss_rate_verdict`: late decay rate / (2 lambda_min(K)/n) >= 1/2).
    - "||theta||^2 -> the minimum as lambda -> 0": a trend over the lambda grid, not two end points: the
      power law gap ~ lambda^p of the relative gap (learned - min) / min, fitted over the runs of the regime
      lambda <= small_lambda_max with one intercept per trial; predicted p = 2 (1 - r) with r the largest
      relative growth rate of a neuron that misses one input of its sign class (above; for a class S,
      r^2 = 1 - min_(i in S) y_i^2 ||x_i||^2 / sum_(i in S) y_i^2 ||x_i||^2, the largest over the two
      classes), competitors 0 (a gap that does not shrink: no limit at the minimum) and 2 (the excess of
      neurons that stay at their init size); `fitting.rate_verdict` decides with the 95% confidence interval.
      p > 0 is what makes the extrapolated gap 0.

    Checked on a cell whose batch runs over lambda (init_scale) x trials. Fields:
    orth_tol: max_{i != j} |cos angle(x_i, x_j)| allowed for "orthogonal".
    small_lambda_max: the small-init regime where the power law is fitted (default 4^-1, as for Theorem 7).
    """

    orth_tol: float = pydantic.Field(1e-10, gt=0.0)
    small_lambda_max: float = pydantic.Field(0.25, gt=0.0)

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
        labels = [f"{lab}, lambda {lam:.3g}" for lab, lam in zip(run_labels(run), run_lambdas(run))]
        out = [loss_rate_verdict(self.title, run, np.ones(run.n_runs, dtype=bool), labels)]
        statement = ("learned ||theta||^2 -> closed-form min 2 (||v_+|| + ||v_-||) as lambda -> 0: exponent p of "
                     "the relative gap ~ lambda^p over the regime")
        try:
            mins = self.min_norms(run)
        except ValueError as exc:
            return out + [compare(self.title, "prediction", statement, None, "~", None, str(exc))]
        learned = theta_sq(res)
        if learned is None:
            return out + [compare(self.title, "prediction", statement, None, "~", None, "param_norm not recorded")]
        gap = (learned - mins) / mins
        lam = run_lambdas(run)
        keep = (lam <= self.small_lambda_max) & np.isfinite(gap)
        below = keep & (gap <= 0)
        keep &= gap > 0
        trials = np.array([spec.trial for spec in run.runs])
        fit = linear_fit(np.log(lam[keep]), np.log(gap[keep]), groups=trials[keep])
        p_star = predicted_gap_exponent(run.data[_trials(run)[0]])
        grid, med = group_by_lambda(lam, gap)
        note = ("median relative gap by lambda: " + ", ".join(f"{g:.3g}: {m:.3g}" for g, m in zip(grid, med))
                + (f"; {int(below.sum())} run(s) at or below the minimum (solver accuracy) left out" if below.any()
                   else ""))
        out.append(rate_verdict(self.title, statement, fit, p_star, (0.0, 2.0), note=note))
        return out


def predicted_gap_exponent(ds) -> float:
    """2 (1 - r) (see `BoursierOrthogonal`): r^2 = 1 - min_S y_i^2 ||x_i||^2 / sum_S y_i^2 ||x_i||^2 for the
    sign class S that makes r largest (a class of one input: r = 0)."""
    size = ds.y**2 * np.sum(ds.X**2, axis=1)
    r = 0.0
    for cls in (ds.y > 0, ds.y < 0):
        if cls.sum() >= 2:
            r = max(r, math.sqrt(1.0 - float(size[cls].min() / size[cls].sum())))
    return 2.0 * (1.0 - r)
