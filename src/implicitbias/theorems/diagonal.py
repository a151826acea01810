"""Diagonal linear networks (SCIENCE.md S6) as theorem objects.

- `WoodworthLimit`: Woodworth et al. 2020 ("Kernel and rich regimes in overparametrized models"), Theorem 1
  (depth 2) and Sec. 5 (depth D): gradient flow on the square loss for w = u^D - v^D from u = v = alpha 1, if it
  reaches zero loss, converges to w_alpha = argmin Q_alpha^D(w) s.t. Xw = y (`reference.q_alpha_interpolator`).
- `MirrorFlowPath`: the same flow seen in w is mirror flow d/dt grad psi(w) = -c grad L(w) with psi the
  hyperbolic entropy psi_beta, beta = 2 alpha^2, and c = 4 (depth 2), or psi_D with c = D (D - 2) alpha^(D-2)
  (`reference.diagonal_net_potential`, `diagonal_net_time_scale`; derivation in `reference.woodworth`): the
  stored trajectory w(t_k) equals the mirror flow integrated independently on the host.
- `GunasekarDiagonal`: Gunasekar et al. 2018 ("Implicit bias of gradient descent on linear convolutional
  networks", Theorem 2 and its diagonal corollary): on separable data with an exponentially tailed loss, w(t)
  converges in direction to a stationary point of min ||w||_{2/D} s.t. y_i <w, x_i> >= 1: the l2 SVM for D = 1,
  the l1 max-margin predictor (an LP, exact) for D = 2, and for D >= 3 a first-order stationary point, which is a
  KKT point of the parameter-space margin problem of S10 (Lyu & Li 2020) and is checked through its residual. The
  approach is logarithmically slow: finite-time predictions are rates (D = 1, 2) and fitted trends.

Every helper reads the run's spec (`run.runs[r]`) and its data (`run.data[r]`); references are cached per data
draw and init scale, so figures and checks share one solve.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pydantic
import scipy.integrate
import threadpoolctl

from implicitbias.models import DiagonalLinear
from implicitbias.theorems.base import Theorem, Verdict
from implicitbias.theorems.fitting import LineFit, curve, final, flag, initial, linear_fit, over_runs, rate_verdict, run_labels
from implicitbias.theorems.frei import loss_verdict


# -- the predictor of a stored run ------------------------------------------------------------------------
def stored_predictor(run, r: int, *, trajectory: bool = False) -> np.ndarray | None:
    """w = model.effective(theta) of run r from its final parameters (d,), or from its stored trajectory
    (checkpoint, d); None when the parameters are not stored or the model is not a diagonal network."""
    model = run.runs[r].model
    if not isinstance(model, DiagonalLinear):
        return None
    prefix = "trajectory.theta." if trajectory else "theta."
    names = [k for k in run.results.data_vars if k.startswith(prefix)]
    if not names:
        return None
    theta = {k[len(prefix):]: np.asarray(run.results[k].values[r], dtype=np.float64) for k in names}
    const = {k[len("const."):]: np.asarray(run.results[k].values[r], dtype=np.float64)
             for k in run.results.data_vars if k.startswith("const.")}
    return np.asarray(model.effective(theta, const), dtype=np.float64)


def relative_distance(w, ref) -> float:
    """||w - ref|| / ||ref|| (inf for ref = 0 and w != 0)."""
    den = float(np.linalg.norm(ref))
    num = float(np.linalg.norm(np.asarray(w) - np.asarray(ref)))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def unit_cosine(w, ref) -> float:
    """cos angle(w, ref); nan when either is zero."""
    a, b = float(np.linalg.norm(w)), float(np.linalg.norm(ref))
    return float(np.dot(w, ref) / (a * b)) if a > 0 and b > 0 else math.nan


def unit_distance(w, ref) -> float:
    """|| w/||w|| - ref/||ref|| || = 2 sin(angle/2), stable for tiny angles."""
    a, b = float(np.linalg.norm(w)), float(np.linalg.norm(ref))
    if a == 0 or b == 0:
        return math.nan
    return float(np.linalg.norm(np.asarray(w) / a - np.asarray(ref) / b))


# -- references, cached per data draw ---------------------------------------------------------------------
_CACHE: dict = {}


def _cached(key, make):
    if key not in _CACHE:
        if len(_CACHE) > 512:
            _CACHE.clear()
        _CACHE[key] = make()
    return _CACHE[key]


def q_alpha_reference(run, r: int):
    """The BregmanProjection argmin Q_alpha^D s.t. Xw = y of run r (alpha = its init scale, D its depth), or the
    ReferenceSolverError raised where float64 cannot reach it (depth >= 3 at small alpha), or the ConfigError
    raised where Q_alpha^D is undefined (alpha <= 0, D < 2)."""
    from implicitbias._spec import ConfigError
    from implicitbias.reference import ReferenceSolverError, q_alpha_interpolator

    spec, data = run.runs[r], run.data[r]

    def make():
        try:
            return q_alpha_interpolator(data.X, data.y, float(spec.init_scale), depth=int(spec.model.depth))
        except (ReferenceSolverError, ConfigError) as exc:
            return exc

    return _cached(("q", spec.data_key(), float(spec.init_scale), int(spec.model.depth)), make)


def interpolator_references(run, r: int) -> dict[str, np.ndarray]:
    """{"l1": argmin ||w||_1, "l2": argmin ||w||_2} over the interpolators Xw = y of run r's data."""
    from implicitbias.reference import min_l1_interpolator, min_l2_interpolator

    data = run.data[r]
    return _cached(("interp", run.runs[r].data_key()),
                   lambda: {"l1": min_l1_interpolator(data.X, data.y), "l2": min_l2_interpolator(data.X, data.y)})


def max_margin_references(run, r: int) -> dict[str, np.ndarray]:
    """{"l2": the hard-margin SVM w, "l1": the l1 max-margin LP w} of run r's (separable) data."""
    from implicitbias.reference import l1_max_margin, max_margin_svm

    data = run.data[r]
    return _cached(("margin", run.runs[r].data_key()),
                   lambda: {"l2": max_margin_svm(data.X, data.y).w, "l1": l1_max_margin(data.X, data.y).w})


# -- mirror flow on the host ------------------------------------------------------------------------------
def mirror_flow_path(X, y, potential, c: float, times, *, rtol: float = 1e-10, nu_scale: float = 1.0) -> np.ndarray:
    """w(t_k) of the mirror flow d/dt grad psi(w) = -c grad L(w), L = ||Xw - y||^2 / (2n), from grad psi(w(0)) = 0,
    at the increasing times t_k >= 0: (len(times), d).

    grad psi(w(t)) - grad psi(w(0)) = -c int grad L stays in the row space of X, so the flow is integrated on
    nu in R^n with grad psi(w) = X^T nu: d nu/dt = -c (X grad psi*(X^T nu) - y) / n, by the implicit Radau method
    with its exact Jacobian -c X diag(hess psi*(X^T nu)) X^T / n (the flow is stiff at small alpha).
    nu_scale: the size of nu at the end (e.g. that of the limit's dual variable); the absolute tolerance is
    rtol x nu_scale."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = X.shape[0]
    times = np.asarray(times, dtype=np.float64)

    def field(t, nu):
        return -c * (X @ potential.inverse_mirror_map(X.T @ nu) - y) / n

    def jac(t, nu):
        return -c * (X * potential.conjugate_curvature(X.T @ nu)) @ X.T / n

    # one BLAS thread: the n x n factorisations are small, and threads contending with JAX's pool on a busy
    # machine made each one ~100x slower
    with threadpoolctl.threadpool_limits(1):
        sol = scipy.integrate.solve_ivp(field, (0.0, float(times[-1])), np.zeros(n), method="Radau", t_eval=times,
                                        jac=jac, rtol=rtol, atol=rtol * max(nu_scale, 1e-300))
    if sol.status != 0:
        raise RuntimeError(f"mirror flow integration failed: {sol.message}")
    return np.stack([potential.inverse_mirror_map(X.T @ nu) for nu in sol.y.T])


# -- shared assumptions -------------------------------------------------------------------------------------
def _difference_net(T: str, run, min_depth: int) -> Verdict:
    m = run.spec.model
    ok = isinstance(m, DiagonalLinear) and m.form == "difference" and m.depth >= min_depth
    what = f"kind = {m.kind}" + (f", form = {m.form}, depth = {m.depth}" if isinstance(m, DiagonalLinear) else "")
    return flag(T, "assumption", f"model is w = u^D - v^D from u = v = alpha 1, D >= {min_depth}", ok, what)


def _positive_alpha(T: str, run) -> Verdict:
    alphas = np.asarray([s.init_scale for s in run.runs], dtype=float)
    return over_runs(T, "assumption", "init scale alpha > 0", alphas, ">", 0.0, where="", labels=run_labels(run))


def _method_is_flow(T: str, run) -> Verdict:
    kind = run.spec.method.kind
    return flag(T, "assumption", "method is gradient flow", kind == "gf", f"method = {kind}")


def _underdetermined(T: str, run) -> Verdict:
    """n < d and rank X = n (an affine space of interpolators exists and the dual is strictly convex)."""
    seen, ok, notes = set(), True, []
    for spec, data in zip(run.runs, run.data):
        if spec.data_key() in seen:
            continue
        seen.add(spec.data_key())
        rank = _cached(("rank", spec.data_key()), lambda data=data: int(np.linalg.matrix_rank(data.X)))
        ok = ok and data.n < data.d and rank == data.n
        notes.append(f"n = {data.n}, d = {data.d}, rank X = {rank}")
    return flag(T, "assumption", "n < d and X has full row rank (interpolators exist)", ok,
                "; ".join(dict.fromkeys(notes)))


def _residuals(run) -> np.ndarray:
    """||Xw - y|| / ||y|| at the end of each run, sqrt(L_final / L_0) from the recorded loss (w(0) = 0)."""
    L, L0 = final(run.results, "loss"), initial(run.results, "loss")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(L / L0)


# -- Woodworth et al. 2020: the limit is the Q_alpha minimiser ----------------------------------------------
class WoodworthLimit(Theorem):
    """Woodworth et al. 2020, Theorem 1 (D = 2) and Sec. 5 (D >= 3), S6: if gradient flow on the square loss for
    w = u^D - v^D from u = v = alpha 1 reaches zero loss, its limit is argmin Q_alpha^D(w) s.t. Xw = y.

    tol: the prediction ||w_GF - w_alpha|| / ||w_alpha|| <= tol at every alpha (default 1e-4, the issue's
        criterion; the reference is exact to rounding, the flow is integrated at rtol <= 1e-8).
    residual_factor: "interpolation reached" is read as ||Xw - y|| / ||y|| <= residual_factor x tol at the end of
        the run: a residual r still moves w by about ||X^+ r||, of relative size ~ ||r|| / ||y||, so it must sit
        below tol (default 0.1). At D = 3 and small alpha the last directions of the residual decay at a rate
        ~ alpha^(2D - 2), and the flow stops at max_time with such a residual.
    Where float64 cannot reach the reference (depth >= 3 at small alpha, see `DeepDiagonalPotential`), that alpha
    is left out of the prediction and named in its note.
    """

    tol: float = pydantic.Field(1e-4, gt=0.0)
    residual_factor: float = pydantic.Field(0.1, gt=0.0, le=1.0)

    @property
    def title(self) -> str:
        return "Woodworth et al. 2020, Theorem 1"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        return [
            _difference_net(T, run, 2),
            _positive_alpha(T, run),
            loss_verdict(T, run, ("square",)),
            _method_is_flow(T, run),
            _underdetermined(T, run),
            over_runs(T, "assumption", "interpolation reached: ||Xw - y|| / ||y|| at the end", _residuals(run),
                      "<=", self.residual_factor * self.tol, labels=self._labels(run)),
        ]

    @staticmethod
    def _labels(run) -> list[str]:
        return [f"alpha = {s.init_scale:.3g}" for s in run.runs]

    def predictions(self, run) -> list[Verdict]:
        dist, skipped, labels, notes = [], [], [], []
        for r, spec in enumerate(run.runs):
            ref, w = q_alpha_reference(run, r), stored_predictor(run, r)
            if isinstance(ref, Exception) or w is None:
                why = "no diagonal-network parameters stored" if w is None else f"{type(ref).__name__}: {ref}"
                skipped.append(f"alpha = {spec.init_scale:.3g} ({why})")
                continue
            dist.append(relative_distance(w, ref.w))
            labels.append(f"alpha = {spec.init_scale:.3g}")
            notes.append(f"reference rounding error {ref.rounding_error:.2g}")
        note = f"left out, no reference or no predictor: {'; '.join(skipped)}" if skipped else ""
        return [over_runs(self.title, "prediction",
                          f"GF limit = argmin Q_alpha^D s.t. Xw = y: ||w_GF - w_alpha|| / ||w_alpha|| (D = "
                          f"{run.spec.model.depth})", dist or None, "<=", self.tol, labels=labels,
                          run_notes=notes, note=note)]


# -- the mirror-flow view ---------------------------------------------------------------------------------
class MirrorFlowPath(Theorem):
    """The trajectory of gradient flow on w = u^D - v^D from u = v = alpha 1 is that of mirror flow
    d/dt grad psi(w) = -c grad L(w) with psi = `diagonal_net_potential(alpha, D)` and c =
    `diagonal_net_time_scale(alpha, D)` (S6; Woodworth et al. 2020, Sec. 4; derivation in
    `implicitbias.reference.woodworth`). Checked on the stored trajectory (keep_trajectory) against the mirror
    flow integrated on the host (`mirror_flow_path`) at the same checkpoint times.

    tol: max_k ||w_GF(t_k) - w_MF(t_k)|| / ||w_GF(t_end)|| <= tol (default 1e-4: both integrators run at
        tolerances <= 1e-8).
    time_scale: c; None (default) derives it from alpha and D. Any other value is a deliberately wrong
        mirror flow (the negative control of the tests).
    """

    tol: float = pydantic.Field(1e-4, gt=0.0)
    time_scale: float | None = pydantic.Field(None, gt=0.0)

    @property
    def title(self) -> str:
        return "Woodworth et al. 2020, mirror-flow view"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        stored = any(k.startswith("trajectory.theta.") for k in run.results.data_vars)
        return [
            _difference_net(T, run, 2),
            _positive_alpha(T, run),
            loss_verdict(T, run, ("square",)),
            _method_is_flow(T, run),
            flag(T, "assumption", "the trajectory is stored (keep_trajectory)", stored),
        ]

    def predictions(self, run) -> list[Verdict]:
        gaps = [self.gap(run, r) for r in range(run.n_runs)]
        labels = [f"alpha = {s.init_scale:.3g}" for s in run.runs]
        flat = [f"{s.init_scale:.3g}" for s in run.runs if not s.init_scale > 0]
        return [over_runs(self.title, "prediction",
                          f"GF path = mirror-flow path: max_k ||w_GF(t_k) - w_MF(t_k)|| / ||w_GF(t_end)|| (D = "
                          f"{run.spec.model.depth})", gaps, "<=", self.tol, where="over the checkpoints",
                          labels=labels, note=f"no potential psi for alpha = {', '.join(flat)}" if flat else "")]

    def gap(self, run, r: int) -> float:
        """max_k ||w_GF(t_k) - w_MF(t_k)|| / ||w_GF(t_end)|| of run r (nan without a trajectory, or for alpha <= 0,
        where the potential is undefined)."""
        if not run.runs[r].init_scale > 0:
            return math.nan
        path = mirror_flow_comparison(run, r, self.time_scale)
        if path is None:
            return math.nan
        _, W, M = path
        end = float(np.linalg.norm(W[-1]))
        return float(np.max(np.linalg.norm(W - M, axis=1))) / end if end > 0 else math.nan


def mirror_flow_comparison(run, r: int, time_scale: float | None = None):
    """(times, w_GF(t_k), w_MF(t_k)) of run r at its distinct checkpoint times, the mirror flow integrated with
    `diagonal_net_potential(alpha, D)` at rate `time_scale` (None: `diagonal_net_time_scale(alpha, D)`); None
    when the run stored no trajectory. Cached per run and rate."""
    from implicitbias.reference import diagonal_net_potential, diagonal_net_time_scale

    W = stored_predictor(run, r, trajectory=True)
    if W is None:
        return None
    spec, data = run.runs[r], run.data[r]
    alpha, depth = float(spec.init_scale), int(spec.model.depth)
    times = np.asarray(run.results["time"].values[r], dtype=np.float64)
    keep = np.concatenate([[True], np.diff(times) > 0])  # a stopped run repeats its last row
    times, W = times[keep], W[keep]
    c = time_scale if time_scale is not None else diagonal_net_time_scale(alpha, depth)

    def make():
        ref = q_alpha_reference(run, r)
        scale = float(np.max(np.abs(ref.nu))) if not isinstance(ref, Exception) else 1.0
        return mirror_flow_path(data.X, data.y, diagonal_net_potential(alpha, depth), c, times, nu_scale=scale)

    M = _cached(("mf", spec.key(), c, times.tobytes()), make)
    return times, W, M


# -- Gunasekar et al. 2018: l_{2/D} max margin --------------------------------------------------------------
#: a fitted line needs this many points: two residual degrees of freedom, so that the standard error of its slope
#: is estimated from more than one residual
MIN_FIT_POINTS = 4


@functools.lru_cache(maxsize=64)
def _lp_slack(X_bytes: bytes, y_bytes: bytes, shape: tuple) -> tuple[float, str]:
    from implicitbias.reference import l1_max_margin

    X, y = np.frombuffer(X_bytes).reshape(shape), np.frombuffer(y_bytes)
    res = l1_max_margin(X, y)
    w, lam = np.asarray(res.w), np.asarray(res.alphas)
    Z = y[:, None] * X
    scale = float(np.max(np.abs(Z.T @ lam)))
    g = Z.T @ lam / scale  # ||Z^T lam||_inf = 1 at the LP's dual optimum
    support = np.abs(w) > 1e-9 * np.max(np.abs(w))
    active = lam > 1e-9 * np.max(lam)
    off = 1.0 - np.abs(g[~support])
    delta = float(np.min(off)) if off.size else math.inf
    what = (f"LP: {int(support.sum())} nonzero coordinates, {int(active.sum())} points with a positive dual weight, "
            f"smallest complementarity slack delta* = 1 - |(Z^T lambda)_j| off the support = {delta:.4g}")
    if support.sum() != active.sum() or not delta > 1e-6:
        return math.nan, what + "; a degenerate LP (the optimum is not a nondegenerate vertex): no derived rate"
    return delta, what


def l1_margin_rate(X, y) -> tuple[float, str]:
    """(r, what) with r = min(delta*, 1) the slowest rate, in s = log(||w||_inf / alpha^2), at which the depth-2
    diagonal network's direction approaches the l1 max-margin LP's (`GunasekarDiagonal`), and a note on the LP:
    delta* = min_j (1 - |(Z^T lambda)_j|) over the coordinates off the LP's support, lambda the dual optimum
    (||Z^T lambda||_inf = 1), Z = diag(y) X. r is nan where the LP is degenerate (support size != number of points
    with a positive dual weight, or delta* = 0): its optimum is then not a nondegenerate vertex, and no rate follows.
    Cached per data set."""
    X, y = np.ascontiguousarray(X, np.float64), np.ascontiguousarray(y, np.float64)
    delta, what = _lp_slack(X.tobytes(), y.tobytes(), X.shape)
    return min(delta, 1.0), what


class GunasekarDiagonal(Theorem):
    """Gunasekar et al. 2018 (S6, classification): for the diagonal network w = u^D - v^D trained by gradient
    flow (or GD) on separable data with the logistic or exponential loss, w(t) / ||w(t)|| converges to the
    direction of a stationary point of min ||w||_{2/D} s.t. y_i <w, x_i> >= 1. The approach is logarithmically
    slow, so each prediction at a finite time is a rate or a fitted trend, fitted on the last half of the
    checkpoints with L < l(0)/n (the margin-maximising regime), at distinct times, with at least MIN_FIT_POINTS = 4
    of them (two residual degrees of freedom: the slope's standard error is estimated):

    D = 1: the l2 hard-margin SVM; the direction error decays like log log t / log t (Soudry et al. 2018,
        Theorem 3): || w/||w|| - w_svm/||w_svm|| || <= rate_constant x log log t / log t.
    D = 2: the l1 max-margin predictor w* (a linear program). Along the flow theta = arcsinh(w / (2 alpha^2)) =
        Z^T nu(t) with nu >= 0 growing like kappa(t) lambda + O(1), lambda the LP's dual optimum (||Z^T lambda||_inf
        = 1), Z = diag(y) X. On the LP's support |theta_j| = kappa + O(1) = s + O(1), s = log(||w||_inf / alpha^2);
        off it |theta_j| = kappa (1 - delta_j) + O(1), so |w_j| / ||w||_inf ~ exp(-delta_j s) with delta_j = 1 -
        |(Z^T lambda)_j| > 0 at a nondegenerate vertex. The active points' margins differ by O(1) while they grow
        like ||w||_inf, an error exp(-s) relative. Hence both the direction error and the l1-normalised margin gap
        1 - gamma_1(w) / gamma_1* (first order in the off-support mass) decay like a sum of exp(-delta_j s), at the
        slowest at the rate r = min(delta*, 1), delta* = min_j delta_j (`l1_margin_rate`, from the LP's dual). The
        predictions are rates: the slope of log(gap) and of log(unit-vector distance to w*) against s, with its 95%
        confidence interval, must lie nearer -r (or below: the faster terms) than the nearest wrong rate, 0 (a limit
        off the LP's optimum: the gap levels off), i.e. below -r/2 (`rate_verdict`). A degenerate LP gives no rate:
        not evaluated, with the reason.
    D >= 3: min ||w||_{2/D} is not convex and has no exact reference; its stationary points are the KKT points
        of min ||theta||^2 s.t. y_i f(x_i; theta) >= 1 in parameter space (S10, Lyu & Li 2020, who give no rate),
        so the KKT stationarity residual decreases: the slope of its log against log log(1/L), with its 95%
        confidence interval, lies below 0 (holds), above it (fails: the residual rises at the end of the run), or
        straddles it (inconclusive).

    rate_constant: the constant of the D = 1 rate bound (default 1, ours).
    """

    rate_constant: float = pydantic.Field(1.0, gt=0.0)

    @property
    def title(self) -> str:
        return "Gunasekar et al. 2018, diagonal networks"

    def assumptions(self, run) -> list[Verdict]:
        T = self.title
        kind = run.spec.method.kind
        n = run.data[0].n
        return [
            _difference_net(T, run, 1),
            _positive_alpha(T, run),
            loss_verdict(T, run),
            flag(T, "assumption", "method is gradient flow or GD", kind in ("gf", "gd"), f"method = {kind}"),
            self._separable(run),
            over_runs(T, "assumption", "the loss fell below l(0)/n (the margin-maximising regime)",
                      final(run.results, "loss"), "<", math.log(2.0) / n if run.spec.loss.name == "logistic"
                      else 1.0 / n, labels=run_labels(run)),
        ]

    def _separable(self, run) -> Verdict:
        from implicitbias.reference import NonSeparableDataError, check_separable

        try:
            for data in run.data:
                check_separable(data.X, data.y)
        except NonSeparableDataError as exc:
            return flag(self.title, "assumption", "the data are linearly separable", False, str(exc))
        return flag(self.title, "assumption", "the data are linearly separable", True, "LP feasibility")

    def _late(self, run, r: int) -> np.ndarray:
        L = np.asarray(run.results["loss"].values[r], dtype=float)
        t = np.asarray(run.results["time"].values[r], dtype=float)
        fresh = np.concatenate([[True], np.diff(t) > 0])
        level = math.log(2.0) if run.spec.loss.name == "logistic" else 1.0
        return fresh & (L < level / run.data[r].n) & (L > 0)

    def fit_window(self, run, r: int, values) -> np.ndarray:
        """The checkpoints a trend of run r is fitted on: the last half (rounded up) of the late checkpoints (L <
        l(0)/n, distinct times) where `values` is finite and > 0."""
        keep = self._late(run, r) & np.isfinite(values) & (np.asarray(values) > 0)
        idx = np.flatnonzero(keep)
        out = np.zeros_like(keep)
        out[idx[idx.size // 2:]] = True
        return out

    def _trend(self, run, r: int, x, values) -> LineFit:
        """The least-squares line of log(values) against x over `fit_window` (the slope undefined, nan, with fewer
        than MIN_FIT_POINTS points there)."""
        values = np.asarray(values, dtype=float)
        keep = self.fit_window(run, r, values)
        if keep.sum() < MIN_FIT_POINTS:
            return LineFit(math.nan, math.nan, math.nan, math.nan, int(keep.sum()))
        return linear_fit(np.asarray(x, dtype=float)[keep], np.log(values[keep]))

    @staticmethod
    def _references(run, r: int) -> dict[str, np.ndarray] | None:
        """`max_margin_references`, None where the data are not separable (the prediction is then undefined)."""
        from implicitbias.reference import NotSeparableError, ReferenceSolverError

        try:
            return max_margin_references(run, r)
        except (NotSeparableError, ReferenceSolverError):
            return None

    def predictions(self, run) -> list[Verdict]:
        depth, T, labels = int(run.spec.model.depth), self.title, run_labels(run)
        over = functools.partial(over_runs, T, "prediction", labels=labels)
        if depth >= 3:
            return [self._kkt_trend(run, depth)]
        refs = [self._references(run, r) for r in range(run.n_runs)]
        finals = [None if ref is None else stored_predictor(run, r) for r, ref in enumerate(refs)]
        unseparable = [labels[r] for r, ref in enumerate(refs) if ref is None]
        over = functools.partial(over, note="no max-margin reference, data not separable: " + ", ".join(unseparable)
                                 if unseparable else "")
        if depth == 1:
            t = final(run.results, "time")
            with np.errstate(divide="ignore", invalid="ignore"):
                lt = np.log(t)
                bound = np.where(lt > 1.0, self.rate_constant * np.log(lt) / lt, np.nan)
            gaps = [math.nan if w is None else unit_distance(w, ref["l2"]) for w, ref in zip(finals, refs)]
            return [over("D = 1: w/||w|| -> the l2 hard-margin SVM direction: unit-vector distance", gaps, "<=", bound,
                         note=over.keywords["note"] or "bound: rate_constant x log log t / log t at the final t "
                         "(Soudry et al. 2018)")]
        return self._l1_rates(run, refs)

    def _l1_rates(self, run, refs) -> list[Verdict]:
        """The two D = 2 rate predictions (class docstring), each on the worst run."""
        T, labels = self.title, run_labels(run)
        statements = ("D = 2: the l1-normalised margin min_i y_i <w, x_i> / ||w||_1 approaches the l1 max-margin LP's: "
                      "rate of log(1 - gamma_1(w) / gamma_1*) in s = log(||w||_inf / alpha^2)",
                      "D = 2: w/||w|| approaches the l1 max-margin direction: rate of log(unit-vector distance) in "
                      "s = log(||w||_inf / alpha^2)")
        found: list[list[Verdict]] = [[], []]
        for r, ref in enumerate(refs):
            W = stored_predictor(run, r, trajectory=True)
            why = ("data not separable: no l1 max-margin LP" if ref is None else
                   "no stored trajectory (keep_trajectory): the rate needs w at the checkpoints" if W is None else "")
            if why:
                for k in range(2):
                    found[k].append(Verdict(T, "prediction", statements[k], None, "~", None, "not_evaluated",
                                            f"{labels[r]}: {why}"))
                continue
            data, alpha = run.data[r], float(run.runs[r].init_scale)
            rate, lp = l1_margin_rate(data.X, data.y)
            Z = data.y[:, None] * data.X
            w1 = ref["l1"]
            best = float((Z @ w1).min() / np.abs(w1).sum())
            norm1 = np.abs(W).sum(axis=1)
            top = np.abs(W).max(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                gap = 1.0 - (Z @ W.T).min(axis=0) / norm1 / best
                s = np.log(top / alpha**2)
            dist = np.array([unit_distance(v, w1) for v in W])
            for k, values in enumerate((gap, dist)):
                fit = self._trend(run, r, s, values)
                note = f"{labels[r]}; {lp}; fitted on the last half of the checkpoints with L < l(0)/n ({fit.n})"
                if not math.isfinite(rate):
                    found[k].append(Verdict(T, "prediction", statements[k], fit.slope, "~", None, "not_evaluated", note))
                    continue
                if fit.n < MIN_FIT_POINTS:
                    note += f": fewer than {MIN_FIT_POINTS}, the slope's uncertainty cannot be estimated"
                found[k].append(rate_verdict(T, statements[k], fit, -rate, [0.0], note=note + (
                    f"; last value {values[np.isfinite(values)][-1]:.3g}" if np.isfinite(values).any() else "")))
        return [_worst_rate(v) for v in found]

    def _kkt_trend(self, run, depth: int) -> Verdict:
        """D >= 3: the slope of log(KKT stationarity residual) against log log(1/L) (class docstring)."""
        T, labels = self.title, run_labels(run)
        statement = (f"D = {depth}: a KKT point of the parameter-space margin problem (a stationary point of "
                     f"||w||_(2/{depth})) is approached: slope of log(KKT stationarity residual) against log log(1/L)")
        kkt = curve(run.results, "kkt_stationarity")
        if kkt is None:
            return Verdict(T, "prediction", statement, None, "<", 0.0, "not_evaluated",
                           "the KKT residual was not recorded (kkt = True)")
        found = []
        for r in range(run.n_runs):
            L = np.asarray(run.results["loss"].values[r], dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.log(np.log(1.0 / L))
            fit = self._trend(run, r, x, kkt[r])
            found.append(_sign_verdict(T, statement, fit, f"{labels[r]}; fitted on the last half of the checkpoints "
                                       f"with L < l(0)/n ({fit.n}); last residual {kkt[r][np.isfinite(kkt[r])][-1]:.3g}"
                                       if np.isfinite(kkt[r]).any() else labels[r]))
        return _worst_rate(found)


def _sign_verdict(theorem: str, statement: str, fit: LineFit, note: str, level: float = 0.95) -> Verdict:
    """A fitted slope that must be negative: holds when its `level` confidence interval lies below 0, fails when it
    lies at or above 0 (a slope of exactly 0 with no residual included: a constant), not_evaluated (inconclusive)
    when it straddles 0 or cannot be estimated (fewer than MIN_FIT_POINTS points)."""
    lo, hi = fit.interval(level)
    head = f"slope {fit.slope:.4g} +- {fit.se:.2g} (SE), {level:.0%} CI [{lo:.4g}, {hi:.4g}], n = {fit.n}"
    if fit.n < MIN_FIT_POINTS or not math.isfinite(lo):
        return Verdict(theorem, "prediction", statement, fit.slope if math.isfinite(fit.slope) else None, "<", 0.0,
                       "not_evaluated", f"{head}: fewer than {MIN_FIT_POINTS} points, or no residual degree of freedom, "
                       f"so the slope's uncertainty cannot be estimated; {note}")
    outcome = "holds" if hi < 0.0 else "fails" if lo >= 0.0 else "not_evaluated"
    if outcome == "not_evaluated":
        head = "inconclusive: the confidence interval straddles 0; " + head
    return Verdict(theorem, "prediction", statement, fit.slope, "<", 0.0, outcome, f"{head}; {note}")


def _worst_rate(verdicts: list[Verdict]) -> Verdict:
    """The verdict of the worst run: a failure first, then an undecided one, else the largest (slowest) slope."""
    for outcome in ("fails", "not_evaluated"):
        hit = [v for v in verdicts if v.outcome == outcome]
        if hit:
            return max(hit, key=lambda v: -math.inf if v.measured is None else v.measured)
    return max(verdicts, key=lambda v: v.measured)
