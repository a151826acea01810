"""What Chistikov et al.'s theorems (Theorems 7 and 8, Theorem 7 on the census) share: the angles between the
final network's neurons and the rank-1 limit's finite-time bound.  The per-lambda summaries and the assumptions
on the network and the method, which Boursier et al. 2022 share with them, are the core's
(`implicitbias.theorems.init_scale_cells`).
"""

from __future__ import annotations

import numpy as np

from implicitbias.metrics.neurons import WEIGHT_REL, max_angle_pair, weighted_max_angle
from implicitbias.theorems.fitting import final
from implicitbias.theorems.two_layer_bounds import final_parameters, rank_one_bounds

#: the source of the rank-1 predictions of Theorems 7 and 8 (a declaration's `source`)
RANK_ONE_SOURCE = ("Chistikov et al. 2023, Theorem 7 (balanced rank-1 limit); bound: two_layer_bounds.rank_one_bounds, "
                   "what the rank-1 limit allows at the run's final loss, bundle angle and imbalance (derived)")


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
