"""Assumption checks and readings shared by the theorems on two-layer networks with a fixed outer layer,
f(x; W) = sum_j a_j phi(<w_j, x>) (Frei et al. 2023, S1 and S2; Kou et al. 2023, S3), and the loss check that
every margin theorem shares (Lyu & Li 2020, Soudry et al. 2018, Ji & Telgarsky 2019, the diagonal networks).

- `condition_verdict`: Frei et al.'s near-orthogonality condition R_min^2 >= C gamma^-3 R^2 n max|<x_i, x_j>|;
- `activation_verdict`, `outer_layer_verdict`, `loss_verdict`: the model and loss a theorem is stated for;
- `leaky_slope`, `outer_signs`, `stored_W`, `two_layer`, `two_layer_outputs`: typed reads of run r's model and
  stored parameters;
- `first_below`: the first recorded time the loss is below a level.
"""

from __future__ import annotations

import math

import numpy as np

from implicitbias.data.stats import near_orthogonality
from implicitbias.models import SingleNeuron, TwoLayer
from implicitbias.models.activations import activation
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import curve, flag, over_runs, run_labels

#: Frei et al.'s condition (Theorem 3.2), with its constant C
CONDITION = "R_min^2 >= {C:g} gamma^-3 R^2 n max_(i!=j) |<x_i,x_j>|"


def leaky_slope(run, r: int) -> float | None:
    """gamma of run r (its model's `gamma`); identity counts as gamma = 1; None for a model without a leaky slope
    (neither a two-layer network nor a single neuron)."""
    model = run.runs[r].model
    if not isinstance(model, TwoLayer | SingleNeuron):
        return None
    if model.activation == "identity":
        return 1.0
    return float(model.gamma)


def orthogonality_stats(run, r: int, C_kou: float | None = None):
    """Near-orthogonality statistics (`data.stats.near_orthogonality`) of run r's data, computed once per data set
    (spec and seed) and context: the theorems checked on one cell share them."""
    key = run.runs[r].data_key()
    return run.once(f"near_orthogonality:{key}:{C_kou!r}", lambda: near_orthogonality(run.data[r].X, C_kou=C_kou))


def condition_verdict(theorem: str, run, C: float = 3.0, kind="assumption", statement: str | None = None) -> Verdict:
    """Frei et al.'s near-orthogonality condition R_min^2 >= C gamma^-3 R^2 n max|<x_i,x_j>| on every
    run's data (C = 3 in Theorem 3.2), both sides printed, worst run reported."""
    lhs, rhs, notes = [], [], []
    for r in range(run.n_runs):
        s, g = orthogonality_stats(run, r), leaky_slope(run, r)
        need = C * s.R**2 * s.n * s.max_inner
        lhs.append(s.frei_lhs)
        rhs.append(math.nan if g is None else need / g**3)
        g_min = np.cbrt(need / s.frei_lhs) if s.frei_lhs > 0 else math.inf
        notes.append(
            f"gamma = {g}, n = {s.n}, R = {s.R:.4g}, max|<x_i,x_j>| = {s.max_inner:.4g}; "
            + (f"holds for gamma >= {g_min:.4g}" if g_min <= 1 else f"no gamma in (0, 1] (would need {g_min:.4g})")
        )
    statement = statement or CONDITION.format(C=C)
    return over_runs(theorem, kind, statement, lhs, ">=", rhs, where="on the training data", labels=run_labels(run),
                     run_notes=notes)


def activation_verdict(theorem: str, run, allowed: tuple[str, ...], statement: str) -> Verdict:
    """The activation of the cell's model is one of `allowed`, with a leaky slope gamma in (0, 1] on every run."""
    model = run.spec.model
    name = model.activation if isinstance(model, TwoLayer | SingleNeuron) else None
    gammas = {leaky_slope(run, r) for r in range(run.n_runs)}
    ok = name in allowed and all(g is not None and 0 < g <= 1 for g in gammas)
    return flag(theorem, "assumption", statement, ok,
                f"activation = {name}, gamma = {', '.join(f'{g:g}' for g in sorted(gammas) if g is not None) or 'n/a'}")


def outer_signs(run, r: int) -> np.ndarray | None:
    """The fixed outer layer a of run r (`const.a`), or None when it is not stored."""
    if "const.a" not in run.results.data_vars:
        return None
    return np.asarray(run.results["const.a"].values[r], dtype=np.float64)


def outer_layer_verdict(theorem: str, run, equal_halves: bool = False) -> Verdict:
    """Fixed outer layer a_j = +-c (both signs present; Kou: m1 = m2), no hidden bias."""
    model = run.spec.model
    statement = (
        "outer layer fixed, a_j = +-c in two equal halves (m1 = m2; Kou: c = 1/m), no bias"
        if equal_halves
        else "outer layer fixed, a_j = +-c with both signs present (m1, m2 >= 1), no bias"
    )
    if not isinstance(model, TwoLayer):
        return flag(theorem, "assumption", statement, None, "no two-layer model in this cell")
    if model.train_outer or model.bias:
        return flag(theorem, "assumption", statement, False, f"train_outer = {model.train_outer}, bias = {model.bias}")
    worst, ok = "", True
    for r in range(run.n_runs):
        a = outer_signs(run, r)
        if a is None:
            return flag(theorem, "assumption", statement, None, "const.a not stored")
        m1, m2 = int(np.sum(a > 0)), int(np.sum(a < 0))
        equal = bool(np.allclose(np.abs(a), np.abs(a[0]), rtol=1e-12, atol=0.0))
        good = m1 >= 1 and m2 >= 1 and equal and (m1 == m2 or not equal_halves)
        if not good or not worst:
            worst = f"m1 = {m1}, m2 = {m2}, |a_j| = {abs(a[0]):.4g}" + ("" if equal else " (unequal)")
        ok &= good
    return flag(theorem, "assumption", statement, ok, worst + ("" if ok else " (a failing run)"))


def loss_verdict(theorem: str, run, allowed=("logistic", "exponential")) -> Verdict:
    """The cell's loss is one of `allowed` (by default the exponentially-tailed losses of the margin theorems)."""
    name = run.spec.loss.name
    return flag(theorem, "assumption", f"loss is {' or '.join(allowed)}", name in allowed, f"loss = {name}")


def two_layer_outputs(model, gamma: float, W, a, X, chunk: int = 256) -> np.ndarray:
    """f(x; W) = sum_j a_j phi(<w_j, x>) on the rows of X, in chunks (fresh inputs can be large)."""
    out = []
    for k in range(0, X.shape[0], chunk):
        pre = X[k : k + chunk] @ W.T
        out.append(np.asarray(activation(model.activation, pre, gamma)) @ a)
    return np.concatenate(out) if out else np.zeros(0)


def two_layer(run, r: int) -> TwoLayer | None:
    """Run r's model when it is a `TwoLayer`, else None."""
    model = run.runs[r].model
    return model if isinstance(model, TwoLayer) else None


def stored_W(run, r: int) -> np.ndarray | None:
    """Run r's final hidden layer W (`theta.W`), or None when it is not stored."""
    if "theta.W" not in run.results.data_vars:
        return None
    return np.asarray(run.results["theta.W"].values[r], dtype=np.float64)


def first_below(run, r: int, threshold: float) -> float:
    """The first recorded time at which run r's loss is below `threshold` (inf: never; nan: no loss curve)."""
    loss, time = curve(run.results, "loss"), curve(run.results, "time")
    if loss is None or time is None:
        return math.nan
    below = np.flatnonzero(loss[r] < threshold)
    return float(time[r, below[0]]) if below.size else math.inf
