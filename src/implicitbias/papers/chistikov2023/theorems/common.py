"""What the small-initialisation ReLU theorems (Chistikov et al. 2023, Boursier et al. 2022, Theorem 7 on the
census) share: the per-lambda summaries of a cell whose batch runs over the init scale lambda x trials, the
angles between the final network's neurons, the rank-1 limit's finite-time bound, and the assumptions on the
network and the training method.

The experiments' figures, tables and claims read the same summaries (`lambdas`, `by_lambda`, `theta_sq`).
"""

from __future__ import annotations

import math

import numpy as np

from implicitbias.metrics.neurons import WEIGHT_REL, max_angle_pair, weighted_max_angle
from implicitbias.models import TwoLayer
from implicitbias.runs.spec import group_by
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import curve, final, flag
from implicitbias.theorems.two_layer_bounds import final_parameters, rank_one_bounds

#: the source of the rank-1 predictions of Theorems 7 and 8 (a declaration's `source`)
RANK_ONE_SOURCE = ("Chistikov et al. 2023, Theorem 7 (balanced rank-1 limit); bound: two_layer_bounds.rank_one_bounds, "
                   "what the rank-1 limit allows at the run's final loss, bundle angle and imbalance (derived)")


# -- per-lambda summaries of a cell ---------------------------------------------------------------------------
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


# -- the final network's neurons ------------------------------------------------------------------------------
def _per_run(results, datasets, fn) -> np.ndarray:
    """fn(W, a, X) on each run's final parameters and training inputs; NaN where none are stored."""
    out = np.full(results.sizes["run"], np.nan)
    for r in range(out.size):
        params = final_parameters(results, r)
        if params is not None:
            out[r] = fn(*params, datasets[r].X)
    return out


def weighted_max_angles(results, datasets, rel: float = 1e-6) -> np.ndarray:
    """Per run, `metrics.neurons.weighted_max_angle` of the final parameters: the max angle (rad) between the
    active neurons with |a_j| ||w_j|| >= rel x sum_k |a_k| ||w_k||. `datasets[r]` is run r's training data."""
    return _per_run(results, datasets, lambda W, a, X: weighted_max_angle(W, a, X, rel))


def angle_setting_shares(results, datasets) -> np.ndarray:
    """Per run, the weight share of the lighter neuron of the pair that makes the max angle between active
    neurons (`metrics.neurons.max_angle_pair`), from the final parameters; NaN where there is none."""
    return _per_run(results, datasets, lambda W, a, X: max_angle_pair(W, a, X)[1])


def v_star_norm(run, r: int) -> float:
    """||v*|| of run r's data (info["v_star"]; 1 when the generator does not record a teacher)."""
    v = run.data[r].info.get("v_star")
    return 1.0 if v is None else float(np.linalg.norm(v))


def ds_angle(ds, v_star) -> float:
    """The largest angle (rad) between v* and a training input of the data set."""
    cos = ds.X @ v_star / (np.linalg.norm(ds.X, axis=1) * np.linalg.norm(v_star))
    return float(np.max(np.arccos(np.clip(cos, -1.0, 1.0))))


def rank_one_bound(run, r: int) -> dict | None:
    """`two_layer_bounds.rank_one_bounds` of run r at its final checkpoint (None without parameters), computed
    on the network without its dead weight: the neurons inactive on every input that carry weight,
    |a_j| ||w_j|| >= WEIGHT_REL x sum_k |a_k| ||w_k||.

    Those neurons do not change the output, so the bound stays valid for the rest of the network; the measured
    ||theta||^2 and ||W||_* still include them. rank_one_bounds forgives every neuron outside the bundle (its
    c_R / s, sum_R ||w_j|| / sqrt(s), and kappa c_R / s through e); Theorem 7's limit has no such weight (every
    nonzero neuron a positive multiple of v*), so forgiving a neuron that grew and then left every input's
    half-space would pass the network that "||theta||^2 -> 2||v*||" excludes (issue 24: weight 1/4 along -v*
    gave a gap 0.25 under a bound 0.51). Neurons below the share stay forgiven: those left near their init
    size lambda ||z_j||, whose share vanishes like lambda^2, as the active light ones the bundle leaves out.

    Computed once per run of a context (`run.once`): Theorems 7 and 8 both read it."""
    return run.once(f"chistikov.rank_one_bound/{r}", lambda: _rank_one_bound(run, r))


def _rank_one_bound(run, r: int) -> dict | None:
    params = final_parameters(run.results, r)
    v = run.data[r].info.get("v_star")
    loss = final(run.results, "loss")
    if params is None or v is None or loss is None:
        return None
    ds = run.data[r]
    W, a = params
    weight = np.abs(a) * np.linalg.norm(W, axis=1)
    dead = ~np.any(ds.X @ W.T > 0, axis=0) & (weight >= WEIGHT_REL * weight.sum()) & (weight > 0)
    out = rank_one_bounds(W[~dead], a[~dead], ds.X, ds.y, v, float(loss[r]))
    if dead.any():
        out["note"] += (f"; {int(dead.sum())} inactive neuron(s) carrying weight {float(weight[dead].sum()):.3g} "
                        "(dead weight, not forgiven: the limit has none)")
    return out


# -- assumptions on the network and the method ----------------------------------------------------------------
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
