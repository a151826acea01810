"""A single neuron f(x; w) = sigma(<w, x>) trained by gradient flow on the square loss with realisable labels
and n < d (Vardi & Shamir 2021, "Implicit regularization in ReLU networks with the square loss", COLT; survey,
seed 002; SCIENCE.md S9).

- `VardiLeakyNeuron`: a strictly monotone sigma (leaky ReLU, slope gamma > 0): grad L(w) = (1/n) sum_i r_i
  sigma'(<w, x_i>) x_i lies in the row space of X, so w(t) - w0 stays in it, and the only zero-loss point of
  w0 + rowspace(X) is w0 + X^+ (sigma^{-1}(y) - X w0) (`implicitbias.reference.neuron_preimage_projection`):
  the limit is the interpolator closest to w0.
- `VardiReluNeuron`: the ReLU: no non-trivial function R(w) describes the limit, but from a small init the
  zero-loss limit satisfies ||w(inf)|| <= 2 ||w_min||, w_min the minimum-norm zero-loss solution
  (a quadratic program, `implicitbias.reference.single_neuron_min_norm`, polished and certified by a duality gap:
  `implicitbias.reference.single_neuron.certified_relu_min_norm`).

Both read the initial parameters w0 from the stored trajectory (`keep_trajectory`), checkpoint 0.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pydantic

from implicitbias.models import SingleNeuron
from implicitbias.reference import neuron_preimage_projection
from implicitbias.reference.memo import array_key, memoized
from implicitbias.reference.single_neuron import ReluMinNorm, certified_relu_min_norm
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import final, flag, over_runs, run_labels

_SOURCE = "Vardi & Shamir 2021"


def relu_min_norm_certified(data) -> ReluMinNorm:
    """The certified w_min of a data set (`reference.single_neuron.certified_relu_min_norm`: the QP's answer
    polished on its active set, with a duality-gap bound on its error), solved once per data set (X, y) in the memo
    of reference solutions (`reference.memo`)."""
    return memoized("certified_relu_min_norm", array_key(data.X, data.y), {},
                    lambda: certified_relu_min_norm(data.X, data.y))


def relu_min_norm(data) -> np.ndarray:
    """w_min of a data set (`relu_min_norm_certified`)."""
    return relu_min_norm_certified(data).w


def initial_weights(results) -> np.ndarray | None:
    """w0 of every run, (run, d), from the stored trajectory (checkpoint 0), or None without a trajectory."""
    name = "trajectory.theta.w"
    if name not in results.data_vars:
        return None
    return np.asarray(results[name].values[:, 0, :], dtype=np.float64)


def final_weights(results) -> np.ndarray:
    """w(inf) of every run, (run, d): the stored final parameters."""
    return np.asarray(results["theta.w"].values, dtype=np.float64)


def ratio_to_min_norm(run) -> np.ndarray:
    """||w(inf)|| / ||w_min|| of every run of a `RunContext`."""
    w = final_weights(run.results)
    return np.array([np.linalg.norm(w[r]) / np.linalg.norm(relu_min_norm(run.data[r])) for r in range(run.n_runs)])


def ratio_upper_bound(run) -> np.ndarray:
    """||w(inf)|| / (||w_min|| - e) of every run, e the certified error of w_min (`ReluMinNorm.error`): an upper
    bound of the ratio to the exact minimum norm."""
    w = final_weights(run.results)
    out = []
    for r in range(run.n_runs):
        ref = relu_min_norm_certified(run.data[r])
        out.append(float(np.linalg.norm(w[r]) / max(np.linalg.norm(ref.w) - ref.error, np.finfo(float).tiny)))
    return np.asarray(out)


def _model_verdict(theorem: str, run, activations: tuple[str, ...], what: str) -> Verdict:
    model = run.spec.model
    neuron = isinstance(model, SingleNeuron)
    ok = neuron and model.activation in activations
    note = f"model = {model.kind}" + (f", activation = {model.activation}, gamma = {model.gamma:g}" if neuron else "")
    return flag(theorem, "assumption", f"a single neuron sigma(<w, x>) with {what}", ok, note)


def _flow_verdict(theorem: str, run) -> Verdict:
    kind = run.spec.method.kind
    ok = True if kind == "gf" else None
    return flag(theorem, "assumption", "trained by gradient flow on the square loss",
                ok and run.spec.loss.name == "square", f"method = {kind}, loss = {run.spec.loss.name}")


def _underdetermined(theorem: str, run) -> Verdict:
    """n < d and X of full row rank (rank n), on every data set of the cell (smallest singular value shown)."""
    smin = np.array([np.linalg.svd(ds.X, compute_uv=False)[-1] if ds.n < ds.d else 0.0 for ds in run.data])
    shape = f"n = {run.data[0].n}, d = {run.data[0].d}"
    return over_runs(theorem, "assumption", "n < d and X of full row rank: sigma_n(X) > 0", smin, ">", 1e-10,
                     labels=run_labels(run), where="over the runs' data", note=shape)


def _zero_loss(theorem: str, run, tol: float) -> Verdict:
    loss = final(run.results, "loss")
    return over_runs(theorem, "assumption", f"gradient flow reached zero loss (final loss <= {tol:.3g})", loss,
                     "<=", tol, labels=run_labels(run), note="the theorem describes zero-loss limits")


def _loss_tol(run, explicit: float | None) -> float:
    if explicit is not None:
        return float(explicit)
    tol = run.spec.stop.loss_tol
    return float(tol) if tol > 0 else 1e-20


class _VardiNeuron(Theorem):
    """The setting of both Vardi & Shamir theorems, declared once: a single neuron with the theorem's activation
    (`activations`, described as `activation_words`), gradient flow on the square loss, n < d with X of full row
    rank."""

    activations: ClassVar[tuple[str, ...]] = ()
    activation_words: ClassVar[str] = ""

    @assumption("a single neuron sigma(<w, x>) with the theorem's activation (leaky ReLU: strictly monotone; ReLU)",
                source=f"{_SOURCE}, the strictly monotone and the ReLU cases")
    def neuron(self, run) -> Verdict:
        """The model is a single neuron with one of `activations`."""
        return _model_verdict(self.title, run, self.activations, self.activation_words)

    @assumption("trained by gradient flow on the square loss", source=f"{_SOURCE}, the method and loss")
    def square_loss_flow(self, run) -> Verdict:
        """The method is gradient flow and the loss the square loss."""
        return _flow_verdict(self.title, run)

    @assumption("n < d and X of full row rank", source=f"{_SOURCE}, the data")
    def underdetermined(self, run) -> Verdict:
        """sigma_n(X) > 0 with n < d on every data set of the cell."""
        return _underdetermined(self.title, run)


class VardiLeakyNeuron(_VardiNeuron):
    """Vardi & Shamir 2021, the strictly monotone case (S9): for sigma the leaky ReLU with slope gamma in (0, 1],
    realisable labels, n < d and X of full row rank, gradient flow from w0 that reaches zero loss converges to
    w_ref = w0 + X^+ (sigma^{-1}(y) - X w0), the zero-loss point closest to w0.

    At finite time the run stops at loss L > 0. Since w(t) - w0 and w_ref - w0 both lie in rowspace(X) exactly,
    ||w - w_ref|| <= ||X (w - w_ref)|| / sigma_n(X) and |<w - w_ref, x_i>| <= |sigma(<w, x_i>) - y_i| / gamma, so
    ||w - w_ref|| <= sqrt(2 n L) / (gamma sigma_n(X)): the `allowance` the final loss leaves (derived, not
    tuned). Predictions: ||w(inf) - w_ref|| <= allowance + rounding (rounding_rel x ||w_ref||), and the
    relative distance ||w(inf) - w_ref|| / ||w_ref|| <= distance_tol (1e-8, the accuracy the survey's
    closed form is checked to; the stopping loss is chosen so that the allowance is far below it).
    loss_tol: zero loss means final loss <= loss_tol (default: the cell's stop.loss_tol, else 1e-20).
    """

    activations: ClassVar[tuple[str, ...]] = ("leaky_relu",)
    activation_words: ClassVar[str] = "a strictly monotone sigma (leaky ReLU)"

    distance_tol: float = pydantic.Field(1e-8, gt=0.0)
    rounding_rel: float = pydantic.Field(1e-12, ge=0.0)
    loss_tol: float | None = pydantic.Field(None, gt=0.0)

    @property
    def title(self) -> str:
        """The theorem\'s name, as its verdicts give it."""
        return "Vardi & Shamir 2021, strictly monotone neuron"

    @assumption("gradient flow reached zero loss", threshold="loss_tol",
                source=f"{_SOURCE} (a statement about zero-loss limits); loss_tol: the cell's stopping loss")
    def zero_loss(self, run) -> Verdict:
        """The final loss of every run is <= loss_tol."""
        return _zero_loss(self.title, run, _loss_tol(run, self.loss_tol))

    def references(self, run) -> np.ndarray | None:
        """w_ref = w0 + X^+ (sigma^-1(y) - X w0) of every run (`reference.neuron_preimage_projection`), (run, d);
        None without a stored trajectory (w0 unknown)."""
        w0 = initial_weights(run.results)
        if w0 is None:
            return None
        gamma = float(run.spec.model.gamma)
        return np.stack([neuron_preimage_projection(run.data[r].X, run.data[r].y, w0[r], gamma)
                         for r in range(run.n_runs)])

    def _distances(self, run) -> dict | None:
        """||w(inf) - w_ref||, ||w_ref||, the allowance of the final loss and the notes, per run (once per context);
        None when there is no reference (no trajectory, or not a leaky neuron)."""
        model = run.spec.model
        refs = self.references(run) if isinstance(model, SingleNeuron) and model.activation == "leaky_relu" else None
        if refs is None:
            return None
        w = final_weights(run.results)
        dist = np.linalg.norm(w - refs, axis=1)
        scale = np.linalg.norm(refs, axis=1)
        loss = final(run.results, "loss")
        gamma = float(model.gamma)
        smin = np.array([np.linalg.svd(ds.X, compute_uv=False)[-1] for ds in run.data])
        n = np.array([ds.n for ds in run.data])
        allowance = np.sqrt(2.0 * n * np.maximum(loss, 0.0)) / (gamma * smin) + self.rounding_rel * scale
        notes = [f"final loss {lo:.3g}, allowance {a:.3g}" for lo, a in zip(loss, allowance)]
        return {"dist": dist, "scale": scale, "allowance": allowance, "notes": notes}

    @prediction("||w(inf) - w_ref|| <= sqrt(2 n L) / (gamma sigma_n(X)), the distance the final loss allows",
                threshold="rounding_rel",
                source=f"{_SOURCE}, the closest interpolator; the allowance: derived (class docstring); rounding_rel: "
                       "ours, float64 rounding")
    def within_allowance(self, run) -> list[Verdict]:
        """The distance to w_ref within the allowance of the final loss (no verdict without a reference: the next
        prediction says why)."""
        d = run.once(f"vardi_leaky.distances:{self.rounding_rel!r}", lambda: self._distances(run))
        if d is None:
            return []
        return [over_runs(self.title, "prediction", "||w(inf) - w_ref|| <= sqrt(2 n L) / (gamma sigma_n(X)) (the "
                          "distance the final loss allows)", d["dist"], "<=", d["allowance"], labels=run_labels(run),
                          run_notes=d["notes"])]

    @prediction("w(inf) = w0 + X^+ (sigma^-1(y) - X w0), the zero-loss point closest to w0", threshold="distance_tol",
                source=f"{_SOURCE}, the strictly monotone case; distance_tol: the accuracy the survey's closed form is "
                       "checked to (1e-8)")
    def closest_interpolator(self, run) -> Verdict:
        """||w(inf) - w_ref|| / ||w_ref|| <= distance_tol on every run."""
        statement = "w(inf) = w0 + X^+ (sigma^-1(y) - X w0): ||w(inf) - w_ref|| / ||w_ref||"
        d = run.once(f"vardi_leaky.distances:{self.rounding_rel!r}", lambda: self._distances(run))
        if d is None:
            why = ("no stored trajectory (w0 unknown): set keep_trajectory" if initial_weights(run.results) is None
                   else "not a leaky ReLU neuron")
            return compare(self.title, "prediction", statement, None, "<=", self.distance_tol, why)
        return over_runs(self.title, "prediction", statement, d["dist"] / d["scale"], "<=", self.distance_tol,
                         labels=run_labels(run), run_notes=d["notes"])


class VardiReluNeuron(_VardiNeuron):
    """Vardi & Shamir 2021, the ReLU neuron (S9): with realisable labels y_i = [<w*, x_i>]_+ and n < d, gradient
    flow from a small init that reaches zero loss ends at ||w(inf)|| <= 2 ||w_min||, w_min = argmin ||w|| s.t.
    <w, x_i> = y_i (y_i > 0), <w, x_i> <= 0 (y_i = 0). The factor 2 is the theorem's; it is checked on the worst
    run of the cell (every seed), with the ratio read as ||w(inf)|| / (||w_min|| - e), e the certified error of
    the reference (`relu_min_norm_certified`), an upper bound of the ratio to the exact w_min.

    init_ratio_max: "small init" is read as ||w0|| <= init_ratio_max ||w_min|| on every run (ours, default
        0.01: the bound's slack from the init is then at most a percent).
    bound: the constant of the theorem, 2.
    min_runs: the bound is checked on the runs that reached zero loss (the theorem's hypothesis, run by run); at
        least min_runs of them are required (the experiment asks for 100).
    loss_tol: zero loss means final loss <= loss_tol (default: the cell's stop.loss_tol, else 1e-20).
    """

    activations: ClassVar[tuple[str, ...]] = ("relu",)
    activation_words: ClassVar[str] = "the ReLU"

    init_ratio_max: float = pydantic.Field(0.01, gt=0.0)
    bound: float = pydantic.Field(2.0, gt=0.0)
    min_runs: int = pydantic.Field(1, ge=1)
    loss_tol: float | None = pydantic.Field(None, gt=0.0)

    @property
    def title(self) -> str:
        """The theorem\'s name, as its verdicts give it."""
        return "Vardi & Shamir 2021, ReLU neuron"

    @assumption("labels realisable by a ReLU neuron", source=f"{_SOURCE}, realisable labels y_i = [<w*, x_i>]_+")
    def realisable(self, run) -> Verdict:
        """Every data set's minimum-norm QP is feasible and fits its labels (to the solver's accuracy, 1e-6)."""
        worst = 0.0
        for ds in run.data:
            if np.any(ds.y < 0):
                return flag(self.title, "assumption", "labels realisable by a ReLU neuron", False,
                            "a negative label: no ReLU neuron outputs it")
            try:
                w = relu_min_norm(ds)
            except ValueError as exc:
                return flag(self.title, "assumption", "labels realisable by a ReLU neuron", False, str(exc))
            worst = max(worst, float(np.max(np.abs(np.maximum(ds.X @ w, 0.0) - ds.y))))
        return flag(self.title, "assumption", "labels realisable by a ReLU neuron (the min-norm QP is feasible)",
                    worst <= 1e-6, f"max_i |[<w_min, x_i>]_+ - y_i| = {worst:.2g} (QP solver accuracy)")

    @assumption("small init: ||w0|| / ||w_min|| <= init_ratio_max", threshold="init_ratio_max",
                source=f"{_SOURCE}, 'a small initialisation'; init_ratio_max: ours (0.01)")
    def small_init(self, run) -> Verdict:
        """||w0|| / ||w_min|| on every run, w0 from the stored trajectory."""
        w0 = initial_weights(run.results)
        statement = f"small init: ||w0|| / ||w_min|| <= {self.init_ratio_max:g}"
        if w0 is None:
            return flag(self.title, "assumption", statement, None, "no stored trajectory: set keep_trajectory")
        try:
            ratio = [float(np.linalg.norm(w0[r]) / np.linalg.norm(relu_min_norm(run.data[r])))
                     for r in range(run.n_runs)]
        except ValueError as exc:  # no w_min (labels not realisable): the scale of "small" is undefined
            return flag(self.title, "assumption", statement, None, str(exc))
        return over_runs(self.title, "assumption", statement, ratio, "<=", self.init_ratio_max,
                         labels=run_labels(run), where="at init")

    def in_scope(self, run) -> np.ndarray:
        """The runs that satisfy the theorem's hypothesis: gradient flow reached zero loss (final loss <= tol)."""
        loss = final(run.results, "loss")
        return loss <= _loss_tol(run, self.loss_tol)

    @assumption("gradient flow reached zero loss on at least min_runs runs", threshold="min_runs, loss_tol",
                source=f"{_SOURCE} (zero-loss limits; the others are outside its scope); min_runs: the experiment's")
    def enough_zero_loss_runs(self, run) -> Verdict:
        """The number of runs that reached zero loss against min_runs; the others are left out of the prediction."""
        keep = self.in_scope(run)
        out = [f"seed {spec.seed}" for spec, k in zip(run.runs, keep) if not k]
        note = (f"{int(keep.sum())} of {keep.size} runs reached zero loss; the theorem describes zero-loss limits, so "
                f"the others (a ReLU neuron can stop at a spurious stationary point with dead points) are outside its "
                f"scope and left out of the prediction" + (f": {', '.join(out[:20])}" if out else ""))
        return compare(self.title, "assumption", f"gradient flow reached zero loss (final loss <= "
                       f"{_loss_tol(run, self.loss_tol):.3g}) on at least {self.min_runs} runs (number of runs)",
                       float(keep.sum()), ">=", float(self.min_runs), note)

    @prediction("||w(inf)|| <= 2 ||w_min|| on every run that reached zero loss", threshold="bound",
                source=f"{_SOURCE}, the ReLU neuron from a small init (the factor 2 is the theorem's)")
    def norm_bound(self, run) -> Verdict:
        """||w(inf)|| / (||w_min|| - e) <= bound on the zero-loss runs, e the certified error of w_min."""
        statement = f"||w(inf)|| <= {self.bound:g} ||w_min||: ||w(inf)|| / ||w_min||"
        model = run.spec.model
        if not (isinstance(model, SingleNeuron) and model.activation == "relu"):
            return compare(self.title, "prediction", statement, None, "<=", self.bound, "not a ReLU neuron")
        try:
            ratio = ratio_upper_bound(run)
        except ValueError as exc:
            return compare(self.title, "prediction", statement, None, "<=", self.bound, str(exc))
        keep = self.in_scope(run)
        if not keep.any():
            return compare(self.title, "prediction", statement, None, "<=", self.bound, "no run reached zero loss")
        ratio = ratio[keep]
        labels = [lab for lab, k in zip(run_labels(run), keep) if k]
        errors = [relu_min_norm_certified(ds).error / np.linalg.norm(relu_min_norm(ds)) for ds in run.data]
        spread = (f"ratios over the {ratio.size} zero-loss runs: min {np.min(ratio):.4g}, median "
                  f"{np.median(ratio):.4g}; each is ||w(inf)|| / (||w_min|| - e) with e the certified error of the QP "
                  f"reference (relative error at most {max(errors):.2g}: duality gap and constraint violation)")
        return over_runs(self.title, "prediction", statement, ratio, "<=", self.bound, labels=labels, note=spread)


def distance_to_min_norm(run) -> np.ndarray:
    """||w(inf) - w_min|| / ||w_min|| of every run: how far the ReLU limit is from the minimum-norm solution."""
    w = final_weights(run.results)
    out = []
    for r in range(run.n_runs):
        wm = relu_min_norm(run.data[r])
        out.append(float(np.linalg.norm(w[r] - wm) / np.linalg.norm(wm)))
    return np.asarray(out) if out else np.zeros(0) * math.nan


#: the theorems this paper registers (entry-point group `implicitbias.theorems`)
THEOREMS = [VardiLeakyNeuron, VardiReluNeuron]
