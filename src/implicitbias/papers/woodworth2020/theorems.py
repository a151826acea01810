"""Diagonal linear networks (SCIENCE.md S6) as theorem objects.

- `WoodworthLimit`: Woodworth et al. 2020 ("Kernel and rich regimes in overparametrized models"), Theorem 1
  (depth 2) and Sec. 5 (depth D): gradient flow on the square loss for w = u^D - v^D from u = v = alpha 1, if it
  reaches zero loss, converges to w_alpha = argmin Q_alpha^D(w) s.t. Xw = y (`reference.q_alpha_interpolator`).
- `MirrorFlowPath`: the same flow seen in w is mirror flow d/dt grad psi(w) = -c grad L(w) with psi the
  hyperbolic entropy psi_beta, beta = 2 alpha^2, and c = 4 (depth 2), or psi_D with c = D (D - 2) alpha^(D-2)
  (`reference.diagonal_net_potential`, `diagonal_net_time_scale`; derivation in `reference.diagonal_nets`): the
  stored trajectory w(t_k) equals the mirror flow integrated independently on the host.

Every helper reads the run's spec (`run.runs[r]`) and its data (`run.data[r]`); references are solved once per
data set and parameters (`reference.memo`, helpers in `theorems.diagonal_common`), so figures and checks share one
solve. Gunasekar et al. 2018's `GunasekarDiagonal` on the same networks is in `implicitbias.papers.gunasekar2018`.
"""

from __future__ import annotations

import math

import numpy as np
import pydantic
import scipy.integrate
import threadpoolctl

from implicitbias.metrics.extrapolation import relative_distance
from implicitbias.reference.diagonal_nets import diagonal_net_potential, diagonal_net_time_scale
from implicitbias.reference.memo import memoized
from implicitbias.theorems.base import Theorem, Verdict, assumption, prediction
from implicitbias.theorems.diagonal_common import (
    difference_net,
    interpolator_references,
    max_margin_references,
    method_is_flow,
    positive_alpha,
    q_alpha_reference,
    residuals,
    stored_predictor,
    underdetermined,
)
from implicitbias.theorems.fitting import flag, over_runs
from implicitbias.theorems.two_layer_common import loss_verdict

__all__ = ["MirrorFlowPath", "WoodworthLimit", "host_rtol", "interpolator_references",
           "max_margin_references", "mirror_flow_comparison", "mirror_flow_path", "q_alpha_reference",
           "stored_predictor"]


# -- mirror flow on the host ------------------------------------------------------------------------------
def mirror_flow_path(X, y, potential, c: float, times, *, rtol: float = 1e-8, nu_scale: float = 1.0) -> np.ndarray:
    """w(t_k) of the mirror flow d/dt grad psi(w) = -c grad L(w), L = ||Xw - y||^2 / (2n), from grad psi(w(0)) = 0,
    at the increasing times t_k >= 0: (len(times), d).

    grad psi(w(t)) - grad psi(w(0)) = -c int grad L stays in the row space of X, so the flow is integrated on
    nu in R^n with grad psi(w) = X^T nu: d nu/dt = -c (X grad psi*(X^T nu) - y) / n, by the implicit Radau method
    with its exact Jacobian -c X diag(hess psi*(X^T nu)) X^T / n (the flow is stiff at small alpha).
    nu_scale: the size of nu at the end (e.g. that of the limit's dual variable); the absolute tolerance is
    rtol x nu_scale.
    rtol: 1e-8 by default; `mirror_flow_comparison` passes `host_rtol` of the run's method.  On
    woodworth2020-kernel-rich's quick variant (33 runs) the path gaps at 1e-8 and at 1e-10 differ by at most 1.4e-8,
    where the gaps themselves are 3e-7 (median) to 9e-6 (largest) and come from gradient flow's own integration;
    1e-10 took 3x longer."""
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



#: the source shared by the assumptions on the diagonal network and its training
WOODWORTH = "Woodworth et al. 2020, Theorem 1 (D = 2) and Sec. 5 (D >= 3)"


# -- the setting both theorems share ----------------------------------------------------------------------
class _DiagonalFlow(Theorem):
    """Gradient flow on the square loss for the diagonal network w = u^D - v^D from u = v = alpha 1, alpha > 0
    (Woodworth et al. 2020): the assumptions `WoodworthLimit` and `MirrorFlowPath` share, declared once."""

    @assumption("the model is w = u^D - v^D from u = v = alpha 1, D >= 2", source=WOODWORTH)
    def diagonal_net(self, run) -> Verdict:
        """Assumption: the model is w = u^D - v^D from u = v = alpha 1, D >= 2."""
        return difference_net(self.title, run, 2)

    @assumption("the init scale alpha is positive", source=WOODWORTH)
    def positive_scale(self, run) -> Verdict:
        """Assumption: the init scale alpha is positive."""
        return positive_alpha(self.title, run)

    @assumption("the loss is the square loss", source=WOODWORTH)
    def square_loss(self, run) -> Verdict:
        """Assumption: the loss is the square loss."""
        return loss_verdict(self.title, run, ("square",))

    @assumption("the method is gradient flow", source=WOODWORTH)
    def flow(self, run) -> Verdict:
        """Assumption: the method is gradient flow."""
        return method_is_flow(self.title, run)


# -- Woodworth et al. 2020: the limit is the Q_alpha minimiser ----------------------------------------------
class WoodworthLimit(_DiagonalFlow):
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
        """The theorem's name, as its verdicts give it."""
        return "Woodworth et al. 2020, Theorem 1"

    @assumption("n < d and X has full row rank: interpolators exist", source=WOODWORTH)
    def interpolators_exist(self, run) -> Verdict:
        """Assumption: n < d and X has full row rank: interpolators exist."""
        return underdetermined(self.title, run)

    @assumption("the flow reaches zero loss", threshold="residual_factor, tol",
                source="Woodworth et al. 2020, Theorem 1 (if the flow reaches zero loss); residual_factor: ours, a "
                       "residual r still moves w by about ||X^+ r||, so it must sit below tol")
    def interpolates(self, run) -> Verdict:
        """Assumption: the flow reaches zero loss."""
        return over_runs(self.title, "assumption", "interpolation reached: ||Xw - y|| / ||y|| at the end",
                         residuals(run), "<=", self.residual_factor * self.tol, labels=self._labels(run))

    @staticmethod
    def _labels(run) -> list[str]:
        return [f"alpha = {s.init_scale:.3g}" for s in run.runs]

    @prediction("the limit of gradient flow is argmin Q_alpha^D(w) s.t. Xw = y", threshold="tol",
                source="Woodworth et al. 2020, Theorem 1 and Sec. 5; tol: the issue's criterion (the reference is "
                       "exact to rounding, the flow is integrated at rtol <= 1e-8)")
    def q_alpha_limit(self, run) -> Verdict:
        """Prediction: the limit of gradient flow is argmin Q_alpha^D(w) s.t. Xw = y."""
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
class MirrorFlowPath(_DiagonalFlow):
    """The trajectory of gradient flow on w = u^D - v^D from u = v = alpha 1 is that of mirror flow
    d/dt grad psi(w) = -c grad L(w) with psi = `diagonal_net_potential(alpha, D)` and c =
    `diagonal_net_time_scale(alpha, D)` (S6; Woodworth et al. 2020, Sec. 4; derivation in
    `implicitbias.reference.diagonal_nets`). Checked on the stored trajectory (keep_trajectory) against the mirror
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
        """The theorem's name, as its verdicts give it."""
        return "Woodworth et al. 2020, mirror-flow view"

    @assumption("the trajectory is stored (keep_trajectory)", source="ours: the path is compared checkpoint by "
                "checkpoint")
    def trajectory_stored(self, run) -> Verdict:
        """Assumption: the trajectory is stored (keep_trajectory)."""
        stored = any(k.startswith("trajectory.theta.") for k in run.results.data_vars)
        return flag(self.title, "assumption", "the trajectory is stored (keep_trajectory)", stored)

    @prediction("the gradient-flow path is the mirror-flow path", threshold="tol, time_scale",
                source="Woodworth et al. 2020, Sec. 4 (derivation for depth D in reference.diagonal_nets); tol: ours, "
                       "both integrators run at tolerances <= 1e-8")
    def mirror_path(self, run) -> Verdict:
        """Prediction: the gradient-flow path is the mirror-flow path."""
        gaps = [self.gap(run, r) for r in range(run.n_runs)]
        labels = [f"alpha = {s.init_scale:.3g}" for s in run.runs]
        flat = [f"{s.init_scale:.3g}" for s in run.runs if not s.init_scale > 0]
        return over_runs(self.title, "prediction",
                         f"GF path = mirror-flow path: max_k ||w_GF(t_k) - w_MF(t_k)|| / ||w_GF(t_end)|| (D = "
                         f"{run.spec.model.depth})", gaps, "<=", self.tol, where="over the checkpoints",
                         labels=labels, note=f"no potential psi for alpha = {', '.join(flat)}" if flat else "")

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


def host_rtol(method) -> float:
    """The host mirror flow's rtol for a run trained by `method`: 1e-8, or the gradient flow's own rtol where that is
    tighter (woodworth2020's depth-3 runs use 1e-10: near a saddle a small error shifts the time of a sharp rise, and
    the host integration must not be the looser of the two)."""
    flow_rtol = getattr(method, "rtol", None)
    return 1e-8 if flow_rtol is None else min(1e-8, float(flow_rtol))


def mirror_flow_comparison(run, r: int, time_scale: float | None = None):
    """(times, w_GF(t_k), w_MF(t_k)) of run r at its distinct checkpoint times, the mirror flow integrated with
    `diagonal_net_potential(alpha, D)` at rate `time_scale` (None: `diagonal_net_time_scale(alpha, D)`); None
    when the run stored no trajectory. The mirror flow is integrated once per data set, alpha, D, rate and times
    (`reference.memo`)."""
    W = stored_predictor(run, r, trajectory=True)
    if W is None:
        return None
    spec, data = run.runs[r], run.data[r]
    alpha, depth = float(spec.init_scale), int(spec.model.depth)
    times = np.asarray(run.results["time"].values[r], dtype=np.float64)
    keep = np.concatenate([[True], np.diff(times) > 0])  # a stopped run repeats its last row
    times, W = times[keep], W[keep]
    c = time_scale if time_scale is not None else diagonal_net_time_scale(alpha, depth)
    rtol = host_rtol(spec.method)

    def solve():
        ref = q_alpha_reference(run, r)
        scale = float(np.max(np.abs(ref.nu))) if not isinstance(ref, Exception) else 1.0
        return mirror_flow_path(data.X, data.y, diagonal_net_potential(alpha, depth), c, times, rtol=rtol,
                                nu_scale=scale)

    M = memoized("mirror_flow_path", spec.data_key(), {"alpha": alpha, "depth": depth, "c": float(c),
                                                       "times": times, "rtol": rtol}, solve)
    return times, W, M


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [MirrorFlowPath, WoodworthLimit]
