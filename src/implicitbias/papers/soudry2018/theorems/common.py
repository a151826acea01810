"""What the theorems of Soudry et al. 2018 and Nacson et al. 2019 share (SCIENCE.md S4; the mathematics is in
`theorems.limits`'s docstring): Theorem 3's w_tilde and the rate at which rho(t) approaches it, the weight of the
constraints off the support, the smoothness constants behind the step-size assumptions, the fit of a gap's rate
against ||w||, and `SeparableLinear`, the assumptions every one of these theorems makes.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pydantic

from implicitbias.reference import MulticlassSVMResult
from implicitbias.theorems.base import Theorem, Verdict, assumption
from implicitbias.theorems.fitting import LineFit, curve, flag, late_window, linear_fit, over_runs, run_labels
from implicitbias.theorems.max_margin import constraint_system, separability_verdict
from implicitbias.theorems.two_layer_common import loss_verdict
from implicitbias.training.methods import DiscreteMethod

#: sup_q l''(q) of the logistic loss (the smoothness constant beta_l of Soudry et al., Assumption 2)
LOGISTIC_BETA = 0.25


# -- the limit of Theorem 3, smoothness ------------------------------------------------------------------------
def soudry_w_tilde(run, r: int, svm) -> np.ndarray | None:
    """Soudry et al.'s w_tilde (Theorem 3): w(t) - w_hat log t -> w_tilde, where n alpha_j exp(-<a_j, w_tilde>) = 1
    on the support vectors j (our risk (1/n) sum_j l, time t = lr k; the exponential tail of the loss balances
    w_hat / t = -grad L). Returned (the solution in the span of the support vectors) when they span all the
    constraint rows, so that gradient descent from 0 stays in their span; None otherwise."""
    A, lam = constraint_system(run, r, svm)
    S = lam > 1e-8 * lam.max()
    if np.linalg.matrix_rank(A[S]) < np.linalg.matrix_rank(A):
        return None
    w_tilde, *_ = np.linalg.lstsq(A[S], -np.log(run.data[r].n * lam[S]), rcond=None)
    return w_tilde


def nonsupport_weight(run, r: int, svm, t: float) -> tuple[float, float]:
    """(theta_min, t^(1 - theta_min)): the smallest margin <a_j, w_hat> of a constraint off the support (in units of
    the SVM margin, > 1 for almost every data set) and the weight at time t of its loss term relative to the support
    vectors' (t^-theta against t^-1). The limits of Theorem 3 are reached once that weight is small; (inf, 0) when
    every constraint is a support vector."""
    A, lam = constraint_system(run, r, svm)
    w_hat = svm.W.ravel() if isinstance(svm, MulticlassSVMResult) else svm.w
    off = ~(lam > 1e-8 * lam.max())
    if not off.any():
        return math.inf, 0.0
    theta = float(np.min(A[off] @ w_hat))
    return theta, float(t ** (1.0 - theta)) if t > 0 else math.inf


def gd_smoothness(X, loss_name: str, loss0: float) -> float:
    """beta of L(w) = (1/n) sum_i l(y_i <w, x_i>): its Hessian is (1/n) X^T diag(l''(q)) X.

    logistic: l'' <= 1/4 everywhere, so beta = sigma_max(X)^2 / (4 n) (Soudry et al.'s beta sigma_max^2, with our
    1/n). exponential: not globally smooth; on the sublevel set {L <= L(w_0)}, which GD with eta < 2/beta does not
    leave, l''(q_i) = e^{-q_i} and sum_i e^{-q_i} x_i x_i^T <= n L(w) max_i ||x_i||^2, so beta = L(w_0) max ||x_i||^2.
    """
    X = np.asarray(X, dtype=np.float64)
    if loss_name == "logistic":
        return LOGISTIC_BETA * float(np.linalg.norm(X, 2)) ** 2 / X.shape[0]
    return float(loss0) * float(np.max(np.sum(X * X, axis=1)))


def sgd_smoothness(X, batch_size: int) -> float:
    """beta of every mini-batch risk (1/B) sum_{i in batch} l(y_i <w, x_i>) of the logistic loss: its Hessian is
    at most (1/4) ||X_B||_2^2 / B, and ||X_B||_2^2 / B <= min(max_i ||x_i||^2, ||X||_2^2 / B) for every batch B."""
    X = np.asarray(X, dtype=np.float64)
    per_batch = min(float(np.max(np.sum(X * X, axis=1))), float(np.linalg.norm(X, 2)) ** 2 / batch_size)
    return LOGISTIC_BETA * per_batch



def residual_rate(run, r: int, svm) -> tuple[float, str]:
    """nu = min(lambda_min(M), theta_min - 1, 1): the slowest rate t^-nu at which rho(t) -> w_tilde (module
    docstring). M = sum_j alpha_j a_j a_j^T over the support constraints, its smallest eigenvalue on their span."""
    A, lam = constraint_system(run, r, svm)
    S = lam > 1e-8 * lam.max()
    M = (A[S].T * lam[S]) @ A[S]
    ev = np.linalg.eigvalsh(M)
    ev = ev[ev > 1e-9 * ev.max()]
    theta, _ = nonsupport_weight(run, r, svm, 1.0)
    nu = min(float(ev.min()), theta - 1.0, 1.0)
    return nu, f"nu = min(lambda_min(M) = {ev.min():.3g}, theta_min - 1 = {theta - 1:.3g}, 1) = {nu:.3g}"



def gap_fit(time, gap, norm, window) -> tuple[LineFit, str]:
    """The line log gap ~ -q log ||w|| + b over the fit window (t > 1, gap > 0): its slope is -q.

    Theorem 3 gives gap = Theta(1/log t) = Theta(1/||w||) (||w|| ~ ||w_hat|| log t): q = 1. Reading the rate against
    ||w|| rather than log t removes the offset of log t (the clock t = lr k, the intercept of ||w||), which biases
    exponents fitted against log log t at finite t. Returns the fit (slope = -q) and a note with the span of the data."""
    if gap is None:
        return linear_fit([], []), "not recorded"
    t, g, w = (np.asarray(a, dtype=np.float64) for a in (time, gap, norm))
    keep = window & (t > 1.0) & (g > 0) & (w > 0)
    fit = linear_fit(np.log(w[keep]), np.log(g[keep]))
    idx = np.flatnonzero(keep)
    span = f"gap {g[idx[0]]:.4g} -> {g[idx[-1]]:.4g} while ||w|| {w[idx[0]]:.4g} -> {w[idx[-1]]:.4g}" if idx.size else ""
    return fit, span



class SeparableLinear(Theorem):
    """Shared assumptions of the S4 theorems: separable data, a linear model, an exponentially tailed loss, the
    method and its step size, and the asymptotic regime (every point classified correctly in the fit window)."""

    late_fraction: float = pydantic.Field(0.5, gt=0.0, le=1.0)

    method_kind: ClassVar[str] = "gd"
    model_kind: ClassVar[str] = "linear"

    def _step_bound(self, run, r: int) -> tuple[float, str]:
        raise NotImplementedError

    def _losses(self) -> tuple[str, ...]:
        return ("logistic", "exponential")

    def _step_statement(self) -> str:
        return "step size lr < 2/beta"

    def _late(self) -> str:
        return f"over the last {self.late_fraction:g} of the checkpoints"

    @assumption("the data are linearly separable through the origin: the SVM margin gamma_hat > 0",
                source="Soudry et al. 2018, Assumption 1")
    def separable(self, run) -> Verdict:
        """Assumption: the data are linearly separable through the origin: the SVM margin gamma_hat > 0."""
        return separability_verdict(self.title, run)

    @assumption("the predictor is the linear model the theorem is about", source="Soudry et al. 2018, Sec. 2")
    def linear_model(self, run) -> Verdict:
        """Assumption: the predictor is the linear model the theorem is about."""
        model = run.spec.model.kind
        return flag(self.title, "assumption", f"linear predictor ({self.model_kind})", model == self.model_kind,
                    f"model = {model}")

    @assumption("the loss is exponentially tailed (logistic or exponential; cross-entropy for the multiclass model)",
                source="Soudry et al. 2018, Assumption 3 and Sec. 4.3")
    def tailed_loss(self, run) -> Verdict:
        """Assumption: the loss is exponentially tailed (logistic or exponential; cross-entropy for the multiclass
        model)."""
        return loss_verdict(self.title, run, self._losses())

    @assumption("the method is the one the theorem is about (GD, SGD or normalised GD)",
                source="Soudry et al. 2018, Theorem 3; Nacson et al. 2019 (SGD; normalised GD)")
    def method(self, run) -> Verdict:
        """Assumption: the method is the one the theorem is about (GD, SGD or normalised GD)."""
        kind = run.spec.method.kind
        return flag(self.title, "assumption", f"method is {self.method_kind}", kind == self.method_kind,
                    f"method = {kind}")

    @assumption("the step size is below 2 over the smoothness of the risk",
                source="Soudry et al. 2018, Theorem 3 (eta < 2/beta); beta derived here for each method "
                       "(gd_smoothness, sgd_smoothness, the class docstrings)")
    def step_size(self, run) -> Verdict:
        """Assumption: the step size is below 2 over the smoothness of the risk."""
        bounds, notes = [], []
        for r in range(run.n_runs):
            bound, note = self._step_bound(run, r)
            bounds.append(bound)
            notes.append(note)
        lrs = [spec.method.lr if isinstance(spec.method, DiscreteMethod) else math.nan for spec in run.runs]
        return over_runs(self.title, "assumption", self._step_statement(), lrs, "<", bounds, where="",
                         labels=run_labels(run), run_notes=notes)

    @assumption("the asymptotic regime is reached: every point is classified correctly over the fit window",
                threshold="late_fraction",
                source="ours: Theorem 3 is asymptotic, its rates are read on the late checkpoints")
    def regime(self, run) -> Verdict:
        """Assumption: the asymptotic regime is reached: every point is classified correctly over the fit window."""
        q, t = curve(run.results, "min_margin"), curve(run.results, "time")
        if q is None or t is None:
            return over_runs(self.title, "assumption", "asymptotic regime", None, ">", 0.0)
        worst = [float(np.min(q[r][late_window(t[r], self.late_fraction)], initial=np.inf)) for r in range(run.n_runs)]
        return over_runs(self.title, "assumption", "asymptotic regime reached: min_i y_i <w, x_i> > 0 over the fit "
                         f"window (the last {self.late_fraction:g} of the checkpoints)", worst, ">", 0.0, where="",
                         labels=run_labels(run))


