"""The max-margin reference of a run's training data, shared by the theorems of S4 and S5 (Soudry et al. 2018,
Nacson et al. 2019, Ji & Telgarsky 2019): the hard-margin SVM for labels +-1, the multiclass SVM for class
indices, solved once per data set (`reference.memo`), and what the theorems read against it: separability, the
margin constraints with their multipliers, the angle and margin gaps of a run.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from implicitbias.models import MulticlassLinear
from implicitbias.reference import (
    MulticlassSVMResult,
    NonSeparableDataError,
    NotSeparableError,
    ReferenceSolverError,
    SVMResult,
    max_margin_svm,
    multiclass_svm,
    unseparable_points,
)
from implicitbias.reference.memo import array_key, memoized
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import curve, over_runs, run_labels


@dataclasses.dataclass(frozen=True)
class MaxMarginReference:
    """The max-margin reference of one data set: `svm` (an `SVMResult` or a `MulticlassSVMResult`), or None when
    the data are not separable, with the points the solver named (`points`, None when it named none)."""

    svm: SVMResult | MulticlassSVMResult | None
    points: np.ndarray | None = None


def classes_of(run, r: int) -> int:
    """The number of classes of run r's multiclass data (the model's `classes`, else the largest label + 1)."""
    model = run.runs[r].model
    return int(model.classes) if isinstance(model, MulticlassLinear) else int(np.max(run.data[r].y)) + 1


def max_margin_reference(run, r: int) -> MaxMarginReference:
    """The max-margin reference of run r's training data, solved once per data set (`reference.memo`, keyed by
    the arrays): the
    hard-margin SVM (`reference.max_margin_svm`) for labels +-1, the multiclass SVM (`reference.multiclass_svm`,
    S4) for class indices."""
    data = run.data[r]
    multiclass = data.task == "multiclass"
    k = classes_of(run, r) if multiclass else None

    def solve() -> MaxMarginReference:
        try:
            if multiclass:
                return MaxMarginReference(multiclass_svm(data.X, data.y.astype(int), k))
            return MaxMarginReference(max_margin_svm(data.X, data.y))
        except (NotSeparableError, ReferenceSolverError) as exc:
            points = exc.points if isinstance(exc, NonSeparableDataError) else None
            return MaxMarginReference(None, None if points is None else np.asarray(points))

    name, params = ("multiclass_svm", {"classes": k}) if multiclass else ("max_margin_svm", {})
    # keyed by the arrays, not the run's data key: a check may be handed data that its spec does not generate
    return memoized(name, array_key(data.X, data.y), params, solve)


def svm_of(run, r: int):
    """The max-margin solution of run r's data (`max_margin_reference`), None when they are not separable."""
    return max_margin_reference(run, r).svm


def separability_verdict(theorem: str, run) -> Verdict:
    """"the data are linearly separable through the origin": the SVM margin gamma_hat > 0 on every run's data,
    or the points that cannot be separated (an irreducible set, `reference.unseparable_points`)."""
    margins, notes = [], []
    for r in range(run.n_runs):
        ref = max_margin_reference(run, r)
        svm = ref.svm
        if svm is not None:
            margins.append(svm.margin)
            support = svm.support if isinstance(svm, SVMResult) else None
            notes.append(f"SVM margin {svm.margin:.4g}" + (f", support vectors {support.tolist()}"
                                                           if support is not None else ""))
            continue
        X, y = run.data[r].X, run.data[r].y
        points = ref.points
        if points is None and run.data[r].task != "multiclass":
            points = unseparable_points(y[:, None] * X, np.arange(X.shape[0]), X, y)
        margins.append(0.0)
        notes.append(f"not separable: points {[] if points is None else np.asarray(points).tolist()} cannot all be "
                     "classified correctly by one linear predictor through the origin")
    return over_runs(theorem, "assumption", "data linearly separable through the origin: SVM margin gamma_hat > 0",
                     margins, ">", 0.0, where="on the training data", labels=run_labels(run), run_notes=notes)


def angle_gaps(run) -> np.ndarray | None:
    """|| w/||w|| - w_hat/||w_hat|| || over (run, checkpoint): the recorded `unit_distance_to_reference`, else
    computed from the parameters of every checkpoint (`trajectory.theta.w` or `.W`, a multiclass W compared in
    Frobenius norm with the multiclass SVM); None when neither was recorded."""
    res = run.results
    recorded = curve(res, "unit_distance_to_reference")
    if recorded is not None:
        return recorded
    name = next((n for n in ("trajectory.theta.w", "trajectory.theta.W") if n in res.data_vars), None)
    if name is None:
        return None
    out = np.full((run.n_runs, res.sizes["checkpoint"]), np.nan)
    for r in range(run.n_runs):
        svm = svm_of(run, r)
        if svm is None:
            continue
        P = np.asarray(res[name].values[r], dtype=np.float64).reshape(res.sizes["checkpoint"], -1)
        norms = np.linalg.norm(P, axis=1, keepdims=True)
        out[r] = np.linalg.norm(P / np.where(norms > 0, norms, 1.0) - svm.direction.ravel()[None, :], axis=1)
    return out


def margin_gap(results, run) -> np.ndarray:
    """(gamma_hat - gamma(w(t))) / gamma_hat over (run, checkpoint), from the recorded normalised margin."""
    gamma = curve(results, "normalized_margin")
    out = np.full((run.n_runs, results.sizes["checkpoint"]), np.nan)
    if gamma is None:
        return out
    for r in range(run.n_runs):
        svm = svm_of(run, r)
        if svm is not None:
            out[r] = (svm.margin - gamma[r]) / svm.margin
    return out


def constraint_system(run, r: int, svm) -> tuple[np.ndarray, np.ndarray]:
    """(A, lam): the margin constraints <a_j, w> >= 1 of run r's data as rows of A, and their SVM multipliers.
    Binary: a_i = y_i x_i, lam = alpha. Multiclass (W flattened row-major): a_ic = (e_(y_i) - e_c) x_i^T, c != y_i."""
    data = run.data[r]
    if data.task != "multiclass":
        return data.y[:, None] * data.X, np.asarray(svm.alphas)
    k, (n, d), y = svm.W.shape[0], data.X.shape, data.y.astype(int)
    rows, lam = [], []
    for i in range(n):
        for c in range(k):
            if c != y[i]:
                a = np.zeros((k, d))
                a[y[i]], a[c] = data.X[i], -data.X[i]
                rows.append(a.ravel())
                lam.append(svm.multipliers[i, c])
    return np.asarray(rows), np.asarray(lam)
