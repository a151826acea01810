"""Li, Ma & Zhang 2018 on quadratic networks: from a small initialisation, gradient flow ends at the minimum
nuclear norm interpolant, which above the recovery threshold is the teacher's M*.

The tolerance of both predictions is the midpoint between the claimed limit (alpha -> 0: ratio 1, error 0) and the
kernel-regime limit (alpha -> infinity). With signed outer weights, W_-(0) = W_+(0) and W^T W = 2 alpha^2 I at
initialisation, the tangent kernel is 8 alpha^2 (x . x')^2 = 8 alpha^2 <x x^T, x' x'^T>, so the linearised flow
(the lazy limit alpha -> infinity, Chizat, Oyallon & Bach 2019) ends at the minimum-Frobenius interpolant M_F.
An end point within the midpoint is nearer the claim than the kernel regime's answer; a large init fails.
"""

from __future__ import annotations

import numpy as np
import pydantic

from implicitbias.reference import memo, min_nuclear_norm_sensing
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import final, flag, over_runs, run_labels
from implicitbias_quadratic.data import QuadraticTeacher
from implicitbias_quadratic.model import QuadraticNet

_PAPER = "Li, Ma & Zhang 2018 (COLT): small init recovers the low-rank PSD M* (sensing, quadratic activations)"
_MIDPOINT = ("gap_fraction: ours, the midpoint between the claimed limit and the kernel-regime limit alpha -> "
             "infinity, the minimum-Frobenius interpolant (isotropic tangent kernel; Chizat, Oyallon & Bach 2019)")
#: the reference solver's tolerance (part of its memo key)
SOLVER_TOL = 1e-8


def final_matrices(results) -> np.ndarray | None:
    """M = W^T diag(a) W at the end of every run, (run, d, d), from the stored theta.W and const.a (None without)."""
    if "theta.W" not in results or "const.a" not in results:
        return None
    W, a = np.asarray(results["theta.W"].values, np.float64), np.asarray(results["const.a"].values, np.float64)
    return np.einsum("rji,rj,rjk->rik", W, a, W)


def min_nuclear(data, data_key: str):
    """argmin ||M||_* over the interpolants <x_i x_i^T, M> = y_i (`NuclearNormResult`), solved once per data set
    through the core's reference memo (kept in the run directory)."""
    A, d = np.einsum("ni,nj->nij", data.X, data.X), data.d
    return memo.memoized("quadratic_min_nuclear_norm", data_key, {"tol": SOLVER_TOL, "method": "admm"},
                         lambda: min_nuclear_norm_sensing(A, data.y, (d, d), method="admm", tol=SOLVER_TOL))


def min_frobenius(data) -> np.ndarray:
    """argmin ||M||_F over the interpolants: M_F = sum_i c_i x_i x_i^T with K c = y, K_ij = (x_i . x_j)^2."""
    c = np.linalg.lstsq((data.X @ data.X.T) ** 2, data.y, rcond=None)[0]
    return data.X.T @ (c[:, None] * data.X)


def quantities(run) -> dict[str, np.ndarray]:
    """Per run of a cell: alpha, ||M||_* / min, the same ratio for M_F, ||M - M*||_F / ||M*||_F, the same for M_F
    and for the minimum-nuclear-norm interpolant."""
    def compute():
        nuc = lambda M: np.linalg.svd(M, compute_uv=False).sum()
        out = {k: [] for k in ("alpha", "ratio", "ratio_F", "error", "error_F", "error_ref")}
        Ms = final_matrices(run.results)
        for r in range(run.n_runs):
            data, key = run.data[r], run.runs[r].data_key()
            star = data.info.get("M_star")
            values = dict.fromkeys(out, np.nan)  # NaN (not evaluated) on another model's or generator's runs
            if Ms is not None and star is not None and Ms.shape[-1] == star.shape[0]:
                ref, M, M_F = min_nuclear(data, key), Ms[r], min_frobenius(data)
                err = lambda A, star=star: np.linalg.norm(A - star) / np.linalg.norm(star)
                values = {"ratio": nuc(M) / ref.nuclear_norm, "ratio_F": nuc(M_F) / ref.nuclear_norm, "error": err(M),
                          "error_F": err(M_F), "error_ref": err(ref.W)}
            for name in out:
                out[name].append(run.runs[r].init_scale if name == "alpha" else values[name])
        return {k: np.asarray(v, np.float64) for k, v in out.items()}
    return run.once("quadratic.quantities", compute)


class LiMaZhang2018(Theorem):
    """Gradient flow (or GD) on the square loss of f(x) = x^T (W^T diag(a) W) x from W(0) = alpha [B; B], alpha -> 0,
    on labels y_i = x_i^T M* x_i of a low-rank PSD M* with n between the recovery threshold (~ r d) and d(d+1)/2,
    ends at the minimum nuclear norm interpolant, which is M* (Li, Ma & Zhang 2018; Gunasekar et al. 2017's
    conjecture, for these rank-one measurements). Read at the smallest alpha of the cell, on its worst run:
    ||M||_* / min ||M'||_* <= 1 + gap_fraction (rho_F - 1) and ||M - M*||_F / ||M*||_F <= gap_fraction e_F, where
    rho_F and e_F are the same quantities for the kernel-regime limit M_F (module docstring).
    gap_fraction: where between the claim (0) and the kernel answer (1) the bound lies (0.5: the midpoint).
    loss_tol: the end point interpolates when its final loss <= loss_tol.
    recovery_tol: the minimum-nuclear-norm interpolant is M* when their relative distance <= recovery_tol (1e4 times
        the solver's tolerance, far below e_F ~ 0.5).
    """

    gap_fraction: float = pydantic.Field(0.5, gt=0.0, lt=1.0)
    loss_tol: float = pydantic.Field(1e-10, gt=0.0)
    recovery_tol: float = pydantic.Field(1e-4, gt=0.0)

    @property
    def title(self) -> str:
        """The name its verdicts carry."""
        return "Li, Ma & Zhang 2018 (quadratic network, small init)"

    @assumption("f(x) = sum_j a_j (w_j . x)^2, a_j = +-1 fixed, W_-(0) = W_+(0), m/2 >= d",
                source=f"{_PAPER}; signed outer weights: ours. With a_j = +1 (M PSD), n ~ r d rank-one Gaussian "
                       "measurements leave a single PSD interpolant, M* (Candes & Li 2014; Kabanava et al. 2016): "
                       "every interpolating run would pass, so the prediction could not fail")
    def network(self, run) -> Verdict:
        """The model is a signed QuadraticNet with at least d neurons of each sign."""
        m, d = run.spec.model, run.data[0].d
        ok = isinstance(m, QuadraticNet) and m.outer == "signed" and m.width // 2 >= d
        note = f"outer = {m.outer}, width = {m.width}, d = {d}" if isinstance(m, QuadraticNet) else f"model = {m.kind}"
        return flag(self.title, "assumption", "a signed quadratic network with m/2 >= d", ok, note)

    @assumption("gradient flow or GD on the square loss", source=_PAPER)
    def method(self, run) -> Verdict:
        """The method is gf or gd, the loss square."""
        kind, loss = run.spec.method.kind, run.spec.loss.name
        return flag(self.title, "assumption", "gradient flow or GD on the square loss",
                    kind in ("gf", "gd") and loss == "square", f"method = {kind}, loss = {loss}")

    @assumption("x_i ~ N(0, I_d), y_i = x_i^T M* x_i with M* PSD of low rank", source=_PAPER)
    def teacher(self, run) -> Verdict:
        """The data come from `QuadraticTeacher`."""
        data = run.spec.data
        return flag(self.title, "assumption", "Gaussian inputs labelled by a low-rank PSD M*",
                    isinstance(data, QuadraticTeacher), f"data = {data.name}")

    @assumption("under-determined: n < d(d+1)/2", source=f"{_PAPER} (over-parameterised: many interpolants)")
    def underdetermined(self, run) -> Verdict:
        """n below the d(d+1)/2 unknowns of a symmetric M."""
        data = run.data[0]
        return compare(self.title, "assumption", "n < d(d+1)/2", data.n, "<", data.d * (data.d + 1) / 2)

    @assumption("n above the recovery threshold: the minimum nuclear norm interpolant is M*", threshold="recovery_tol",
                source=f"{_PAPER} (n ~ r d measurements); measured: ||M_min - M*||_F / ||M*||_F; recovery_tol: ours")
    def recovery_regime(self, run) -> Verdict:
        """The minimum-nuclear-norm interpolant of every run's data is M*."""
        return over_runs(self.title, "assumption", "||M_min - M*||_F / ||M*||_F <= recovery_tol",
                         quantities(run)["error_ref"], "<=", self.recovery_tol, labels=run_labels(run))

    @assumption("the end point interpolates: final loss <= loss_tol", threshold="loss_tol",
                source=f"{_PAPER} (the loss is driven to 0); loss_tol: ours, a residual far below the tolerances")
    def interpolates(self, run) -> Verdict:
        """The final loss of every run is at most loss_tol."""
        return over_runs(self.title, "assumption", f"final loss <= {self.loss_tol:g}", final(run.results, "loss"),
                         "<=", self.loss_tol, labels=run_labels(run))

    def _at_smallest(self, run, statement: str, value: str, reference: str, offset: float) -> Verdict:
        q = quantities(run)
        at = np.flatnonzero(q["alpha"] == q["alpha"].min())
        bound = offset + self.gap_fraction * (q[reference][at] - offset)
        notes = [f"kernel-regime limit M_F: {q[reference][r]:.4g}" for r in at]
        return over_runs(self.title, "prediction", statement, q[value][at], "<=", bound,
                         labels=[run_labels(run)[r] for r in at], run_notes=notes,
                         where=f"at the smallest alpha ({q['alpha'].min():.3g})")

    @prediction("||M||_* / min ||M'||_* <= 1 + gap_fraction (rho_F - 1) at the smallest alpha", threshold="gap_fraction",
                source=f"{_PAPER}; Gunasekar et al. 2017 (the limit is the minimum nuclear norm); {_MIDPOINT}")
    def nuclear_ratio(self, run) -> Verdict:
        """The nuclear norm of the end point over the minimum, against the midpoint to M_F's."""
        return self._at_smallest(run, "||M||_* / min over interpolants <= midpoint to the kernel limit's",
                                 "ratio", "ratio_F", 1.0)

    @prediction("||M - M*||_F / ||M*||_F <= gap_fraction e_F at the smallest alpha", threshold="gap_fraction",
                source=f"{_PAPER} (small init recovers M*); {_MIDPOINT}")
    def recovery(self, run) -> Verdict:
        """The relative distance of the end point to M*, against the midpoint to M_F's."""
        return self._at_smallest(run, "||M - M*||_F / ||M*||_F <= midpoint to the kernel limit's",
                                 "error", "error_F", 0.0)
