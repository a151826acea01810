"""Recompute recorded metrics from stored parameters: every number in a result is checkable.

`recompute(ds, model, loss, data)` evaluates the same `Recorder` on the parameters stored in a
result (the final ones, or those of every checkpoint when the run kept its trajectory) and returns
the metrics with the shape of the stored ones, so that `ds[name]` can be compared with them.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from implicitbias.losses import Loss
from implicitbias.models.base import Model
from implicitbias.training.problem import Problem
from implicitbias.training.recorder import Recorder


def _stack(data, trials):
    if isinstance(data, Sequence) and len(data) > 1:
        return lambda attr: jnp.asarray(np.stack([getattr(data[t], attr) for t in trials]))
    one = data[0] if isinstance(data, Sequence) else data
    return lambda attr: jnp.asarray(getattr(one, attr))


def recompute(ds: xr.Dataset, model: Model, loss: Loss, data, reference=None) -> dict[str, np.ndarray]:
    """Metrics recomputed from stored parameters: {name: (run,) array at the last checkpoint, or
    (run, checkpoint) when `trajectory.theta.*` is stored}.  `reference` defaults to the result's
    stored `reference` variable (the per-run reference direction, e.g. the SVM)."""
    if reference is None and "reference" in ds:
        reference = ds["reference"].values
    overrides = tuple(k.split(".", 1)[1] for k in ds.coords if k.startswith("model."))
    problem = Problem(model, loss, overrides)
    trials = ds.trial.values if "trial" in ds.coords else np.zeros(ds.sizes["run"], int)
    get = _stack(data, trials)
    batched = isinstance(data, Sequence) and len(data) > 1
    first = data[0] if isinstance(data, Sequence) else data
    has_test = first.X_test is not None
    X, y = get("X"), get("y")
    Xt, yt = (get("X_test"), get("y_test")) if has_test else (X, y)
    recorder = Recorder(problem, loss.is_classification, has_test, reference is not None)
    hp = {k: jnp.asarray(ds[k].values) for k in ds.coords if k in ("seed", "init_scale", "lr")
          or k.startswith("model.")}
    d_ax = 0 if batched else None
    ref = jnp.zeros(()) if reference is None else jnp.asarray(reference)
    rec = jax.vmap(recorder.record, in_axes=(0, 0, 0, d_ax, d_ax, d_ax, d_ax, 0 if ref.ndim == 2 else None))
    const = {k[len("const."):]: jnp.asarray(ds[k].values) for k in ds.data_vars if k.startswith("const.")}
    traj = [k for k in ds.data_vars if k.startswith("trajectory.theta.")]
    if traj:
        out = []
        for c in range(ds.sizes["checkpoint"]):
            theta = {k[len("trajectory.theta."):]: jnp.asarray(ds[k].values[:, c]) for k in traj}
            out.append(jax.device_get(rec(hp, theta, const, X, y, Xt, yt, ref)))
        return {k: np.stack([o[k] for o in out], axis=1) for k in out[0]}
    theta = {k[len("theta."):]: jnp.asarray(ds[k].values) for k in ds.data_vars if k.startswith("theta.")}
    out = {k: np.asarray(v) for k, v in jax.device_get(rec(hp, theta, const, X, y, Xt, yt, ref)).items()}
    if "kkt_stationarity" in ds:
        hp_np = {k: np.asarray(v) for k, v in hp.items()}
        out.update(recorder.kkt_host(hp_np, theta, const, X, y))
    return out
