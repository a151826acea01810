"""A batch's training outputs as one `xarray.Dataset` (what `train` returns), and the parameters of a run read back.

Layout:
- dimensions `run` (members of the batch) and `checkpoint`;
- run coordinates: every batched hyper-parameter (`seed`, `init_scale`, `lr`, `model.<field>`);
- `step`, `time` and `grad_evals` over (run, checkpoint): GD step k sits at time t = lr k;
- one variable per metric over (run, checkpoint) (see `implicitbias.training.recorder`);
- `status` (0 running, 1 converged, 2 budget reached, 3 diverged, 4 solver failed), `status_name`,
  `message` and `fail_step` per run;
- the final parameters of every run as `theta.<name>` (and fixed arrays as `const.<name>`) with
  dimensions (run, <name>_0, <name>_1, ...); with `keep_trajectory`, the parameters at every
  checkpoint as `trajectory.theta.<name>` over (run, checkpoint, ...);
- attributes: `config` (the full resolved configuration, YAML), `method`, `wall_time_s`,
  `first_checkpoint_s`, `version`.

Storing it (`implicitbias.storage`) writes this Dataset to NetCDF unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

import implicitbias
from implicitbias.attributes import config_yaml
from implicitbias.status import Status


def _stack_rows(rows: list[dict]) -> dict[str, np.ndarray]:
    names = list(rows[0])
    return {k: np.stack([np.asarray(r[k]) for r in rows], axis=1) for k in names}


def _param_vars(prefix: str, tree: Mapping[str, Any]) -> dict:
    out = {}
    for name, arr in tree.items():
        arr = np.asarray(arr)
        dims = ("run",) + tuple(f"{prefix}.{name}_{i}" for i in range(arr.ndim - 1))
        out[f"{prefix}.{name}"] = (dims, arr)
    return out


def to_dataset(*, rows, kkt_rows, ticks, hp, status, messages, carry, const, method, wall_time, config,
               trajectory=(), first_checkpoint=None) -> xr.Dataset:
    """The Dataset of one `train` call (see the module docstring for its layout).

    rows, kkt_rows: the recorded metrics of every checkpoint (dicts of per-run arrays); ticks: the checkpoints'
    targets; hp: the batched hyper-parameters (`Batch.hp`); status, messages: how each run ended; carry: the
    final state (`theta`, `fail_step`); const: the fixed arrays; method: the method spec; wall_time: seconds
    of training; config: the configuration written to the `config` attribute; trajectory: the parameters at
    every checkpoint (empty unless kept); first_checkpoint: seconds to the first checkpoint."""
    metrics = _stack_rows(rows)
    if kkt_rows and kkt_rows[0]:
        metrics.update(_stack_rows(kkt_rows))
    data_vars: dict[str, Any] = {k: (("run", "checkpoint"), v) for k, v in metrics.items()}
    data_vars["status"] = (("run",), np.asarray(status, dtype=np.int32))
    data_vars["status_name"] = (("run",), np.array([Status(int(s)).name.lower() for s in status], dtype=object))
    data_vars["message"] = (("run",), np.array(messages, dtype=object))
    data_vars["fail_step"] = (("run",), np.asarray(carry["fail_step"], dtype=np.int64))
    data_vars.update(_param_vars("theta", carry["theta"]))
    data_vars.update(_param_vars("const", const))
    if trajectory:
        for name in trajectory[0]:
            arr = np.stack([np.asarray(t[name]) for t in trajectory], axis=1)
            dims = ("run", "checkpoint") + tuple(f"theta.{name}_{i}" for i in range(arr.ndim - 2))
            data_vars[f"trajectory.theta.{name}"] = (dims, arr)
    coords = {k: ("run", np.asarray(v)) for k, v in hp.items() if k != "model"}
    coords.update({f"model.{k}": ("run", np.asarray(v)) for k, v in hp.get("model", {}).items()})
    coords["run"] = np.arange(len(status))
    coords["checkpoint"] = np.arange(len(ticks))
    coords["target"] = ("checkpoint", np.asarray(ticks))
    attrs = {
        "config": config_yaml(config),
        "method": method.kind,
        "wall_time_s": float(wall_time),
        # seconds from entering `train` to the first recorded checkpoint: tracing and compiling included
        "first_checkpoint_s": float("nan") if first_checkpoint is None else float(first_checkpoint),
        "version": implicitbias.__version__,
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def theta_of(ds: xr.Dataset, run: int) -> tuple[dict, dict]:
    """(theta, const) of one run, as dicts of NumPy arrays."""
    theta = {k[len("theta."):]: ds[k].isel(run=run).values for k in ds.data_vars if k.startswith("theta.")}
    const = {k[len("const."):]: ds[k].isel(run=run).values for k in ds.data_vars if k.startswith("const.")}
    return theta, const
