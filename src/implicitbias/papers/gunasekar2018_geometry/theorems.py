"""Linear regression and mirror descent (SCIENCE.md S7; survey, seed 002; Gunasekar, Lee, Soudry & Srebro 2018,
"Characterizing implicit bias in terms of optimization geometry", ICML, Sec. 2).

On the square loss L(w) = |Xw - y|^2 / (2n) with n < d and X of full row rank, every gradient is in the row space
of X.  Hence gradient descent (and SGD, whose batch gradients are in it too) keeps w_k - w0 in row(X), and mirror
descent grad psi(w_{k+1}) = grad psi(w_k) - lr grad L(w_k) keeps grad psi(w_k) - grad psi(w0) in row(X).  A limit
that interpolates (Xw = y) therefore satisfies the optimality conditions of the Bregman projection

    w_psi = argmin D_psi(w, w0)  s.t.  Xw = y,                                               (S7)

which for psi = |w|^2 / 2 is the closed form w0 + X^+ (y - X w0).  `BregmanLimit` checks this on every run:

assumptions (on the data and the run): n < d and rank X = n (interpolators exist and w_psi is unique); the
step size is small enough for the iteration to converge — GD: lr < 2 / beta with beta = lambda_max(X^T X) / n;
SGD: lr < 2 / max_i |x_i|^2 (a bound on the smoothness of every batch loss); mirror descent: lr beta sup 1/psi''
<= 1 over the box the recorded iterates span (L is then (beta sup 1/psi'')-smooth relative to psi, and
lr <= 1 / (relative smoothness) makes the loss decrease; Lu, Freund & Nesterov 2018, Lemma 3.1); the run has
reached interpolation closely enough for the limit to be resolved: the first-order distance to the limit,
kappa |X w_K - y| / |w_psi| with kappa = |H X^T (X H X^T)^{-1}|_2, H = hess psi*(grad psi(w_psi)) (the change of
the projection under a change r of the residual, linearised), is at most `resolve` x tol;

prediction: |w_K - w_psi| / |w_psi| <= tol, the accuracy the S7 checks claim (1e-8 for GD and SGD against the
closed form, 1e-6 for mirror descent against the convex solve, issue 8), which the converged run resolves by
the factor 1 / `resolve` above its first-order distance.
"""

from __future__ import annotations

import jax
import numpy as np
import pydantic

from implicitbias.reference import LpPotential, bregman_projection, min_l2_interpolator
from implicitbias.reference.memo import array_key, memoized
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import over_runs, run_labels
from implicitbias.training.methods import SGD, MirrorDescent


def potential_of(method):
    """The reference potential whose Bregman projection is the limit of `method` (S7): psi = |w|^2 / 2 for
    GD and SGD, the method's own potential for mirror descent."""
    return method.potential.reference() if isinstance(method, MirrorDescent) else LpPotential(2.0)


def initial_point(results, r: int, spec) -> np.ndarray:
    """w0 of run r: the first stored trajectory point (step 0), else the model's init recomputed."""
    if "trajectory.theta.w" in results:
        return np.asarray(results["trajectory.theta.w"].values[r, 0], dtype=float)
    d = results["theta.w"].shape[-1]
    theta, _ = spec.model.init(jax.random.PRNGKey(spec.seed), d, spec.init_scale)
    return np.asarray(theta["w"], dtype=float)


def predicted_limit(X, y, w0, potential) -> np.ndarray:
    """argmin D_psi(w, w0) s.t. Xw = y: the closed form w0 + X^+ (y - X w0) for psi = |w|^2 / 2, else the
    regularised-Newton dual solve of `implicitbias.reference.bregman_projection`, solved once per (X, y, w0, psi)
    (`reference.memo`)."""
    X, y, w0 = (np.ascontiguousarray(a, dtype=float) for a in (X, y, w0))

    def solve() -> np.ndarray:
        if isinstance(potential, LpPotential) and potential.p == 2.0:
            return min_l2_interpolator(X, y, w0)
        return bregman_projection(X, y, w0, potential).w

    return memoized("bregman_projection", array_key(X, y, w0), {"potential": repr(potential)}, solve).copy()


def residual_gain(X, w_limit, potential) -> float:
    """kappa = |H X^T (X H X^T)^{-1}|_2 with H = hess psi*(grad psi(w_limit)): to first order, a point that
    satisfies the mirror-descent invariant with residual r = Xw - y lies kappa |r| or less from w_limit."""
    H = potential.conjugate_curvature(potential.mirror_map(w_limit))
    if not np.all(np.isfinite(H)):
        return float("nan")
    G = (X * H) @ X.T
    return float(np.linalg.norm((H[:, None] * X.T) @ np.linalg.pinv(G), 2))


def step_size_bound(method, X, iterates) -> tuple[float, float, str]:
    """(lr x smoothness, its bound, what was measured) of the step-size assumption (module docstring)."""
    n = X.shape[0]
    if isinstance(method, MirrorDescent):
        beta = float(np.linalg.eigvalsh(X.T @ X / n)[-1])
        scale = float(np.max(method.potential.inverse_curvature(iterates)))
        return method.lr * beta * scale, 1.0, "lr beta sup 1/psi'' over the recorded iterates"
    if isinstance(method, SGD):
        return method.lr * float(np.max(np.sum(X**2, axis=1))), 2.0, "lr max_i |x_i|^2"
    return method.lr * float(np.linalg.eigvalsh(X.T @ X / n)[-1]), 2.0, "lr beta, beta = lambda_max(X^T X) / n"


class BregmanLimit(Theorem):
    """GD, SGD and mirror descent on the square loss converge to the Bregman projection of w0 onto the
    interpolators (module docstring; SCIENCE.md S7).

    tol_euclidean / tol_mirror: the relative accuracy checked for psi = |w|^2/2 (GD, SGD) and for other
    potentials; resolve: the first-order distance of the run to its limit must be below resolve x tol."""

    tol_euclidean: float = pydantic.Field(1e-8, gt=0.0)
    tol_mirror: float = pydantic.Field(1e-6, gt=0.0)
    resolve: float = pydantic.Field(0.1, gt=0.0, le=1.0)

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return "Gunasekar et al. 2018, Sec. 2 (S7): limit = argmin D_psi(w, w0) s.t. Xw = y"

    def tol(self, method) -> float:
        """The accuracy checked for `method`: tol_mirror for mirror descent, else tol_euclidean."""
        return self.tol_mirror if isinstance(method, MirrorDescent) else self.tol_euclidean

    def _per_run(self, run) -> list[dict]:
        """Per run: the data, the final and predicted points, their distance, the first-order distance and the
        step-size measurement (once per run context)."""
        return run.once("BregmanLimit.per_run", lambda: self._measure(run))

    def _measure(self, run) -> list[dict]:
        out = []
        for r, spec in enumerate(run.runs):
            X, y = np.asarray(run.data[r].X, float), np.asarray(run.data[r].y, float)
            w0 = initial_point(run.results, r, spec)
            w = np.asarray(run.results["theta.w"].values[r], dtype=float)
            potential = potential_of(spec.method)
            try:
                limit = predicted_limit(X, y, w0, potential)
            except (ValueError, RuntimeError):  # no interpolator, or the solve failed: not evaluated
                limit = np.full_like(w, np.nan)
            scale = max(float(np.linalg.norm(limit)), np.finfo(float).tiny)
            traj = run.results["trajectory.theta.w"].values[r] if "trajectory.theta.w" in run.results else None
            iterates = np.concatenate([np.ravel(traj) if traj is not None else np.concatenate([w0, w]), limit])
            out.append({
                "X": X, "w": w, "limit": limit,
                "distance": float(np.linalg.norm(w - limit)) / scale,
                "first_order": residual_gain(X, limit, potential) * float(np.linalg.norm(X @ w - y)) / scale,
                "step": step_size_bound(spec.method, X, iterates),
            })
        return out

    @assumption("n < d: an under-determined regression, interpolators exist",
                source="Gunasekar et al. 2018 (ICML), Sec. 2 (S7)")
    def underdetermined(self, run) -> Verdict:
        """Assumption: n < d: an under-determined regression, interpolators exist."""
        n, d = run.data[0].X.shape
        return compare(self.title, "assumption", "n < d (an under-determined regression: interpolators exist)",
                       n, "<", d)

    @assumption("rank X = n: the projection onto {Xw = y} is unique", source="Gunasekar et al. 2018 (ICML), Sec. 2")
    def full_row_rank(self, run) -> Verdict:
        """Assumption: rank X = n: the projection onto {Xw = y} is unique."""
        n = run.data[0].X.shape[0]
        ranks = [int(np.linalg.matrix_rank(row["X"])) for row in self._per_run(run)]
        return over_runs(self.title, "assumption", "rank X = n (the projection onto {Xw = y} is unique)",
                         ranks, ">=", n, labels=run_labels(run))

    @assumption("the step size is below the method's convergence bound",
                source="GD: lr < 2 / beta; SGD: lr < 2 / max_i |x_i|^2; mirror descent: relative smoothness (Lu, "
                       "Freund & Nesterov 2018, Lemma 3.1)")
    def step_size(self, run) -> Verdict:
        """Assumption: the step size is below the method's convergence bound."""
        rows = self._per_run(run)
        _, bound, what = rows[0]["step"]
        return over_runs(self.title, "assumption", f"step size: {what} below its convergence bound",
                         [row["step"][0] for row in rows], "<" if bound == 2.0 else "<=", bound, labels=run_labels(run))

    @assumption("interpolation reached closely enough to resolve the limit", threshold="resolve, tol_euclidean, tol_mirror",
                source="ours: the first-order distance kappa |Xw - y| / |w_psi| of the run to its limit must be "
                       "resolve x tol or less")
    def interpolation(self, run) -> Verdict:
        """Assumption: interpolation reached closely enough to resolve the limit."""
        tol = self.tol(run.spec.method)
        return over_runs(self.title, "assumption",
                         f"interpolation reached: first-order distance to the limit kappa |Xw - y| / |w_psi| <= "
                         f"{self.resolve:g} x tol", [row["first_order"] for row in self._per_run(run)], "<=",
                         self.resolve * tol, labels=run_labels(run))

    @prediction("the limit is the Bregman projection argmin D_psi(w, w0) s.t. Xw = y",
                threshold="tol_euclidean, tol_mirror",
                source="Gunasekar et al. 2018 (ICML), Sec. 2 (S7); tol: the accuracy of the S7 checks (issue 8), "
                       "1e-8 against the closed form, 1e-6 against the convex solve")
    def bregman_limit(self, run) -> Verdict:
        """Prediction: the limit is the Bregman projection argmin D_psi(w, w0) s.t. Xw = y."""
        method = run.spec.method
        target = ("w0 + X^+ (y - X w0)" if not isinstance(method, MirrorDescent)
                  else f"argmin D_psi(w, w0) s.t. Xw = y, psi: {method.potential.label()}")
        return over_runs(self.title, "prediction", f"|w_K - w_psi| / |w_psi| <= tol, w_psi = {target}",
                         [row["distance"] for row in self._per_run(run)], "<=", self.tol(method),
                         labels=run_labels(run))
