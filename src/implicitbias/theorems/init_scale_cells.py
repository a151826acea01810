"""What the theorems on small-initialisation two-layer networks share (Chistikov et al. 2023, Boursier et al.
2022): the per-lambda summaries of a cell whose batch runs over the init scale lambda x trials, and the
assumptions on the network (ReLU, both layers trained, no bias) and on the training method (gradient flow).

- `lambdas`, `run_lambdas`: the lambda of every run (of stacked results, of a `RunContext`);
- `by_lambda`, `group_by_lambda`: a reduction (the median by default) over the runs of each lambda;
- `fmt_lambda`: lambda as a power of 4 where it is one;
- `trials`: one representative run per trial; `theta_sq`: ||theta||^2 at the final checkpoint;
- `relu_net_verdict`, `method_verdict`: the assumptions on the network and the method.
"""

from __future__ import annotations

import math

import numpy as np

from implicitbias.models import TwoLayer
from implicitbias.runs.spec import group_by
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import curve, final, flag

__all__ = ["by_lambda", "fmt_lambda", "group_by_lambda", "lambdas", "method_verdict", "relu_net_verdict",
           "run_lambdas", "theta_sq", "trials"]


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


def fmt_lambda(lam: float) -> str:
    """lambda as a power of 4 where it is one ("4^-7"), else to 3 significant digits."""
    k = math.log(lam) / math.log(4.0)
    return f"4^{k:.0f}" if abs(k - round(k)) < 1e-9 else f"{lam:.3g}"


def trials(run) -> list[int]:
    """One representative run per trial (data set) of the cell: the first run of each `trial`."""
    return [members[0] for members in group_by(run.runs, "trial").values()]


def theta_sq(results) -> np.ndarray | None:
    """||theta||^2 at the final checkpoint of every run."""
    p = final(results, "param_norm")
    return None if p is None else p**2


def relu_net_verdict(theorem: str, run, balanced: bool) -> Verdict:
    """Model: ReLU, both layers trained, no bias (and the balanced init of S11 when `balanced`); the
    stored initial balancedness max_j |a_j^2 - ||w_j||^2| is shown."""
    model = run.spec.model
    what = "balanced init w_j = lambda z_j, a_j = s_j ||w_j||" if balanced else "small init"
    statement = f"ReLU network, both layers trained, no bias, {what}"
    if not isinstance(model, TwoLayer):
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
    """Method: gradient flow; GD with a small step is reported not_evaluated (it approximates the flow and is
    checked as for GF)."""
    kind = run.spec.method.kind
    statement = "trained by gradient flow"
    if kind == "gf":
        return flag(theorem, "assumption", statement, True, "method = gf (adaptive, error-controlled)")
    return flag(theorem, "assumption", statement, None,
                f"method = {kind}: GD with a small step approximates the flow; checked as for GF")
