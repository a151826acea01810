"""What the theorems on diagonal linear networks (S6: Woodworth et al. 2020, Gunasekar et al. 2018) share: the
predictor w = u^D - v^D of a stored run, the references of its data (solved once per data set and parameters,
`reference.memo`, so that figures and checks share one solve) and the assumptions on the model and the method.
"""

from __future__ import annotations

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.models import DiagonalLinear
from implicitbias.reference import (
    NotSeparableError,
    ReferenceSolverError,
    l1_max_margin,
    min_l1_interpolator,
    min_l2_interpolator,
)
from implicitbias.reference.diagonal_nets import q_alpha_interpolator
from implicitbias.reference.memo import memoized
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import final, flag, initial, over_runs, run_labels
from implicitbias.theorems.max_margin import max_margin_reference


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


# -- references, solved once per data set -----------------------------------------------------------------
def q_alpha_solution(data_key: str, X, y, alpha: float, depth: int):
    """argmin Q_alpha^D s.t. Xw = y of the data set `data_key` (X, y), solved once per data set, alpha and D
    (`reference.memo`): the BregmanProjection, or the ReferenceSolverError raised where float64 cannot reach it
    (depth >= 3 at small alpha), or the ConfigError raised where Q_alpha^D is undefined (alpha <= 0, D < 2)."""

    def solve():
        try:
            return q_alpha_interpolator(X, y, alpha, depth=depth)
        except (ReferenceSolverError, ConfigError) as exc:
            return exc

    return memoized("q_alpha_interpolator", data_key, {"alpha": alpha, "depth": depth}, solve)


def q_alpha_reference(run, r: int):
    """`q_alpha_solution` of run r's data at alpha = its init scale and D = its depth."""
    spec, data = run.runs[r], run.data[r]
    return q_alpha_solution(spec.data_key(), data.X, data.y, float(spec.init_scale), int(spec.model.depth))


def interpolator_references(run, r: int) -> dict[str, np.ndarray]:
    """{"l1": argmin ||w||_1, "l2": argmin ||w||_2} over the interpolators Xw = y of run r's data."""
    data, key = run.data[r], run.runs[r].data_key()
    return {"l1": memoized("min_l1_interpolator", key, {}, lambda: min_l1_interpolator(data.X, data.y)),
            "l2": memoized("min_l2_interpolator", key, {}, lambda: min_l2_interpolator(data.X, data.y))}


def max_margin_references(run, r: int) -> dict[str, np.ndarray]:
    """{"l2": the hard-margin SVM w, "l1": the l1 max-margin LP w} of run r's (separable) data; NotSeparableError
    when the data are not separable."""
    data = run.data[r]
    svm = max_margin_reference(run, r).svm
    if svm is None:
        raise NotSeparableError("the data are not linearly separable through the origin: no max-margin reference")
    lp = memoized("l1_max_margin", run.runs[r].data_key(), {}, lambda: l1_max_margin(data.X, data.y))
    return {"l2": svm.w, "l1": lp.w}


# -- shared assumptions -------------------------------------------------------------------------------------
def difference_net(T: str, run, min_depth: int) -> Verdict:
    """"the model is w = u^D - v^D from u = v = alpha 1, D >= min_depth" on the cell's model."""
    m = run.spec.model
    ok = isinstance(m, DiagonalLinear) and m.form == "difference" and m.depth >= min_depth
    what = f"kind = {m.kind}" + (f", form = {m.form}, depth = {m.depth}" if isinstance(m, DiagonalLinear) else "")
    return flag(T, "assumption", f"model is w = u^D - v^D from u = v = alpha 1, D >= {min_depth}", ok, what)


def positive_alpha(T: str, run) -> Verdict:
    """"init scale alpha > 0" on every run."""
    alphas = np.asarray([s.init_scale for s in run.runs], dtype=float)
    return over_runs(T, "assumption", "init scale alpha > 0", alphas, ">", 0.0, where="", labels=run_labels(run))


def method_is_flow(T: str, run) -> Verdict:
    """"the method is gradient flow"."""
    kind = run.spec.method.kind
    return flag(T, "assumption", "method is gradient flow", kind == "gf", f"method = {kind}")


def underdetermined(T: str, run) -> Verdict:
    """n < d and rank X = n (an affine space of interpolators exists and the dual is strictly convex)."""
    seen, ok, notes = set(), True, []
    for spec, data in zip(run.runs, run.data):
        if spec.data_key() in seen:
            continue
        seen.add(spec.data_key())
        rank = int(np.linalg.matrix_rank(data.X))
        ok = ok and data.n < data.d and rank == data.n
        notes.append(f"n = {data.n}, d = {data.d}, rank X = {rank}")
    return flag(T, "assumption", "n < d and X has full row rank (interpolators exist)", ok,
                "; ".join(dict.fromkeys(notes)))


def residuals(run) -> np.ndarray:
    """||Xw - y|| / ||y|| at the end of each run, sqrt(L_final / L_0) from the recorded loss (w(0) = 0)."""
    L, L0 = final(run.results, "loss"), initial(run.results, "loss")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(L / L0)
