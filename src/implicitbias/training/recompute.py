"""Recompute a run's recorded metrics from its stored parameters: every number in a result is checkable.

`recompute(ds, spec, data)` evaluates the same `Recorder` on the parameters stored for one run (the
final ones, or those of every checkpoint when the run kept its trajectory), with the model, loss and
hyper-parameters read from its `RunSpec` (the per-member values through the same declaration as training:
`Batch.of([spec])`), and returns the metrics shaped like the stored ones:
{name: (1,) at the last checkpoint, or (1, checkpoint) with a trajectory}.  Final host metrics
(`implicitbias.metrics.final`) are recomputed too.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from implicitbias.metrics.final import final_metrics_of
from implicitbias.training.batch import Batch
from implicitbias.training.problem import Problem
from implicitbias.training.recorder import Recorder
from implicitbias.training.train import _pow2


@functools.lru_cache(maxsize=32)
def _record(recorder: Recorder):
    return jax.jit(jax.vmap(recorder.record, in_axes=(None, 0, None, None, None, None, None, None)))


def recompute(ds: xr.Dataset, spec, data) -> dict[str, np.ndarray]:
    """Metrics of the single run stored in `ds` (run dimension of length 1), recomputed from its
    stored parameters; `spec` is its RunSpec, `data` its training data."""
    problem = Problem(spec.model, spec.loss)
    reference = ds["reference"].values[0] if "reference" in ds else None
    recorder = Recorder(problem, spec.loss.is_classification, data.X_test is not None, reference is not None)
    batch = Batch.of([spec])  # one member: every model field keeps the spec's own (static) value
    hp = jax.tree_util.tree_map(jnp.asarray, batch.member(0))
    X, y = jnp.asarray(data.X), jnp.asarray(data.y)
    Xt, yt = (jnp.asarray(data.X_test), jnp.asarray(data.y_test)) if data.X_test is not None else (X, y)
    ref = jnp.zeros(()) if reference is None else jnp.asarray(reference)
    const = {k[len("const."):]: jnp.asarray(ds[k].values[0]) for k in ds.data_vars if k.startswith("const.")}
    traj = [k for k in ds.data_vars if k.startswith("trajectory.theta.")]
    if traj:
        # every checkpoint at once: the parameters of the trajectory are vmapped over the checkpoints, padded (the
        # last checkpoint repeated) to a power of two, so that runs that stopped at different checkpoints share
        # a few compiled programs instead of one each
        count = ds[traj[0]].shape[1]
        pad = _pow2(count) - count
        theta = {k[len("trajectory.theta."):]: jnp.asarray(
            np.pad(ds[k].values[0], [(0, pad)] + [(0, 0)] * (ds[k].ndim - 2), mode="edge")) for k in traj}
    else:
        theta = {k[len("theta."):]: jnp.asarray(ds[k].values[0:1]) for k in ds.data_vars if k.startswith("theta.")}
    # metrics in float64, as in training, also for a run stored in float32 (`method.dtype`)
    theta = {k: v.astype(jnp.float64) if jnp.issubdtype(v.dtype, jnp.floating) else v for k, v in theta.items()}
    rows = recorder.host(jax.device_get(_record(recorder)(hp, theta, const, X, y, Xt, yt, ref)))
    out = {k: np.asarray(v)[None, :count] if traj else np.asarray(v) for k, v in rows.items()}
    if "kkt_stationarity" in ds and not traj:
        last = {k: np.asarray(v) for k, v in theta.items()}
        const_np = {k: np.asarray(v)[None] for k, v in const.items()}
        out.update(recorder.kkt_host(batch, last, const_np, np.asarray(data.X), np.asarray(data.y)))
    out.update(final_metrics_of(spec, ds, data))
    return out
