"""Results as an `xarray.Dataset`, saved to and loaded from NetCDF unchanged.

Layout of a result:
- dimensions `run` (members of the batch) and `checkpoint`;
- run coordinates: every batched hyper-parameter (`seed`, `init_scale`, `lr`, `model.<field>`);
- `step`, `time` and `grad_evals` over (run, checkpoint): GD step k sits at time t = lr k;
- one variable per metric over (run, checkpoint) (see `implicitbias.training.recorder`);
- `status` (0 running, 1 converged, 2 budget reached, 3 diverged, 4 solver failed), `status_name`,
  `message` and `fail_step` per run;
- the final parameters of every run as `theta.<name>` (and fixed arrays as `const.<name>`) with
  dimensions (run, <name>_0, <name>_1, ...); with `keep_trajectory`, the parameters at every
  checkpoint as `trajectory.theta.<name>` over (run, checkpoint, ...);
- attributes: `config` (the full resolved configuration, YAML), `method`, `wall_time_s`, `version`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import yaml

from implicitbias._spec import ConfigError, ResourceError
from implicitbias.status import Status

CLOCK = ("step", "time", "grad_evals")


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
               trajectory=(), first_checkpoint=None):
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
        "config": yaml.safe_dump(_plain(config), sort_keys=False),
        "method": method.kind,
        "wall_time_s": float(wall_time),
        # seconds from entering `train` to the first recorded checkpoint: tracing and compiling included
        "first_checkpoint_s": float("nan") if first_checkpoint is None else float(first_checkpoint),
        "version": __import__("implicitbias").__version__,
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def _plain(obj):
    """Config values as plain YAML-able Python objects."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def theta_of(ds: xr.Dataset, run: int) -> tuple[dict, dict]:
    """(theta, const) of one run, as dicts of NumPy arrays."""
    theta = {k[len("theta."):]: ds[k].isel(run=run).values for k in ds.data_vars if k.startswith("theta.")}
    const = {k[len("const."):]: ds[k].isel(run=run).values for k in ds.data_vars if k.startswith("const.")}
    return theta, const


def write_netcdf(obj, path: str | os.PathLike) -> None:
    """`obj.to_netcdf(path)` (a Dataset or a DataTree) with this process's own file locks.  With a Dask
    distributed client active, xarray would otherwise take a distributed lock through the scheduler
    for every variable it writes (a round trip each: ~0.3 s a run file instead of ~10 ms)."""
    import dask

    with dask.config.set(scheduler="synchronous"):
        obj.to_netcdf(path, engine="netcdf4")


def atomic_file(write: Callable[[Path], None], path: Path) -> Path:
    """Call `write(tmp)` on a fresh temporary name beside `path` (unique per process and call, so two
    processes writing the same file never share one), then rename it to `path`: a reader sees the old file
    or the new one, never half of one.  A Ctrl-C that arrives meanwhile is held back until the file is in
    place (see `deferred_interrupt`).  The temporary name ends in .tmp: `write` must not infer the format
    from the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
    with deferred_interrupt():
        try:
            write(tmp)
            os.replace(tmp, path)
        except Exception as exc:
            reason = _no_space(tmp, exc)
            if reason is None:
                raise
            raise DiskFull(f"no space to write {path}: {reason}; free some space (or give another --out) and rerun the "
                           "same command: every run stored so far is kept") from None
        finally:
            if tmp.exists():
                tmp.unlink()
    return path


#: the suffix of `atomic_file`'s temporary files (a file still carrying it was left by a killed write)
TMP_SUFFIX = ".tmp"


class DiskFull(ResourceError):
    """A write failed because the file system is full or the file size limit (`ulimit -f`) was reached."""


def _no_space(tmp: Path, exc: BaseException) -> str | None:
    """Why a failed write failed, when it is space: NetCDF/HDF5 reports a full disk only as "HDF error", so the
    file system and the file size limit are asked directly.  None when space is not the cause."""
    import errno
    import resource
    import shutil

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the file system is full ({exc.strerror})"
    size = tmp.stat().st_size if tmp.exists() else 0
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if (isinstance(exc, OSError) and exc.errno == errno.EFBIG) or (soft != resource.RLIM_INFINITY and size >= soft - (1 << 16)):
        return f"the file size limit of this process (ulimit -f) is {soft} bytes, reached by the file"
    try:
        free = shutil.disk_usage(tmp.parent).free
    except OSError:
        return None
    if free < max(1 << 20, size // 10):
        return f"the file system holding {tmp.parent} is full ({free} bytes free)"
    return None


@contextlib.contextmanager
def deferred_interrupt():
    """Hold SIGINT back for the duration of the block and raise KeyboardInterrupt after it.

    A KeyboardInterrupt raised inside xarray's `to_netcdf`, between the acquisition of its file lock and
    the `try` that releases it, leaves the lock held; the `finally` that closes the file then waits for it
    forever (seen: a sweep interrupted while storing a run hung instead of exiting).  A file write takes
    milliseconds, so the interrupt is only delayed.  Outside the main thread (where signal handlers cannot
    be set) the block runs unprotected."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
    elif caught and previous == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


def save(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write to NetCDF4 atomically (a uniquely named temporary file renamed into place), with Ctrl-C held
    back until the file is in place (`atomic_file`)."""
    return atomic_file(lambda tmp: write_netcdf(ds, tmp), Path(path))


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a result written by `save`; values, dtypes and attributes round-trip unchanged."""
    import dask

    with dask.config.set(scheduler="synchronous"), xr.open_dataset(path, engine="netcdf4") as ds:
        out = ds.load()
    for name in ("status_name", "message"):
        if name in out:
            out[name] = out[name].astype(object)
    return out


# -- results.nc: every run of an experiment with its spec, and every data set it used ------------------
def save_results(results, path: str | os.PathLike) -> Path:
    """Write a `implicitbias.runs.results.Results` to one NetCDF file (atomically): node `runs/sNNNN`
    stacks the runs of one layout over `run` (padded along `checkpoint`; `run_index` is each run's position
    in the results, `run_checkpoints` its own number of checkpoints, the attribute `run_attrs` the JSON list
    of the runs' attributes, among them each run's spec as JSON), node `data/<key>` each data set used
    (training and test arrays), the root the experiment's name, config (YAML) and checks (JSON).  The file
    is readable without the package.  `load_results` also reads the older layout (one node per run)."""
    import json

    from implicitbias.storage.store import data_to_xarray

    config = results.config.model_dump() if hasattr(results.config, "model_dump") else results.config
    root = xr.Dataset(attrs={
        "experiment": results.experiment,
        "config": yaml.safe_dump(_plain(config), sort_keys=False),
        "checks": json.dumps(results.checks),
        "runs": len(results.runs),
    })
    nodes = {"/": root}
    # runs whose arrays have the same variables and shapes (up to the number of checkpoints) are stacked into
    # one node: a file with a group per run took time quadratic in the number of runs to write (240 s for
    # 100 runs of the census), a handful of stacks takes seconds
    stacks: dict[tuple, list[int]] = {}
    for i, ds in enumerate(results.arrays):
        stacks.setdefault(_layout(ds), []).append(i)
    for g, members in enumerate(stacks.values()):
        nodes[f"runs/s{g:04d}"] = _stack_runs([results.arrays[i] for i in members], members)
    for spec in results.runs:
        key = spec.data_key()
        if f"data/{key}" not in nodes:
            nodes[f"data/{key}"] = data_to_xarray(results.datasets[key], spec)
    tree = xr.DataTree.from_dict(nodes)
    return atomic_file(lambda tmp: write_netcdf(tree, tmp), Path(path))


def load_results(path: str | os.PathLike):
    """The `Results` of a `results.nc`: typed run specs, each run's arrays and every data set (nothing
    regenerated); `config` is the experiment config as a dict."""
    import json

    from implicitbias.runs.results import Results
    from implicitbias.runs.spec import RunSpec
    from implicitbias.storage.store import data_from_xarray

    try:
        tree = xr.open_datatree(path, engine="netcdf4").load()
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"{path} is damaged or not a results file: it cannot be read ({type(exc).__name__}: {exc}); "
                          "expected a results.nc written by `implicitbias run` (rerun it with the same --out to write it "
                          "again from the stored runs)") from None
    if "runs" not in tree.children or "experiment" not in tree.attrs:
        raise ConfigError(f"{path} holds no runs: is it a results.nc written by `implicitbias run` (this version)?")
    where = "its root attributes"
    try:
        config = yaml.safe_load(tree.attrs["config"])
        checks = json.loads(tree.attrs.get("checks", "[]"))
        if not isinstance(config, dict) or not isinstance(checks, list):
            raise ValueError("the attribute config is not a mapping or checks not a list")
        found: dict[int, xr.Dataset] = {}
        for name in sorted(tree["runs"].children):
            where = f"node runs/{name}"
            node = tree["runs"][name].to_dataset()
            found.update(_unstack_runs(node) if "run_attrs" in node.attrs else {len(found): node})
        arrays = [found[i] for i in sorted(found)]
        for ds in arrays:
            for var in ("status_name", "message"):
                if var in ds:
                    ds[var] = ds[var].astype(object)
        where = "the runs' spec attributes"
        runs = [RunSpec.from_json(ds.attrs["spec"]) for ds in arrays]
        where = "node data"
        datasets = {name: data_from_xarray(tree["data"][name].to_dataset()) for name in tree["data"].children} \
            if "data" in tree.children else {}
    except Exception as exc:  # noqa: BLE001 - whatever is damaged, the file is named as such
        detail = " ".join(str(exc).split())[:300]
        raise ConfigError(f"{path} is damaged: {where} cannot be read ({type(exc).__name__}: {detail}); rerun "
                          "`implicitbias run` with the same --out to write it again from the stored runs") from None
    return Results(tree.attrs["experiment"], config, runs, arrays, datasets, checks)


_FILL = {"f": np.nan, "c": np.nan, "i": 0, "u": 0, "b": False, "O": "", "U": "", "S": b""}


def _layout(ds: xr.Dataset) -> tuple:
    """What must agree for runs to share a stack: each variable's dimensions, shape (the checkpoint axis
    excepted) and dtype."""
    return tuple(sorted(
        (name, v.dims, tuple(n for d, n in zip(v.dims, v.shape) if d != "checkpoint"), v.dtype.str)
        for name, v in ds.variables.items() if name not in ("run", "checkpoint")))


def _stack_runs(arrays: list[xr.Dataset], index: list[int]) -> xr.Dataset:
    """Runs of one layout as one Dataset over `run`, padded along `checkpoint` (NaN, 0, False or ""), with each
    run's position in the results (`run_index`), its number of checkpoints and its attributes (JSON)."""
    import json

    sizes = [ds.sizes.get("checkpoint", 0) for ds in arrays]
    n = max(sizes)
    first = arrays[0]
    out = {}
    for name, v in first.variables.items():
        if name in ("run", "checkpoint"):
            continue
        stacked = []
        for ds in arrays:
            a = ds[name].values
            if "checkpoint" in v.dims:
                axis = v.dims.index("checkpoint")
                pad = [(0, 0)] * a.ndim
                pad[axis] = (0, n - a.shape[axis])
                a = np.pad(a, pad, constant_values=_FILL[a.dtype.kind]) if a.dtype.kind != "O" else \
                    np.concatenate([a, np.full(tuple(n - a.shape[axis] if i == axis else s for i, s in
                                                     enumerate(a.shape)), "", dtype=object)], axis=axis)
            stacked.append(a if "run" in v.dims else a[None])
        dims = v.dims if "run" in v.dims else ("run",) + v.dims
        out[name] = (dims, np.concatenate(stacked, axis=0), v.attrs)
    stack = xr.Dataset({k: xr.Variable(*val) for k, val in out.items()})
    stack["run_index"] = ("run", np.asarray(index, dtype=np.int64))
    stack["run_checkpoints"] = ("run", np.asarray(sizes, dtype=np.int64))
    stack.attrs["run_attrs"] = json.dumps([dict(ds.attrs) for ds in arrays], default=_json_default)
    # what each run had without a run axis, and which variables were coordinates: restored by `_unstack_runs`
    stack.attrs["run_free"] = json.dumps([k for k, v in first.variables.items() if "run" not in v.dims
                                          and k not in ("run", "checkpoint")])
    stack.attrs["run_coords"] = json.dumps([k for k in first.coords if k not in ("run", "checkpoint")])
    return stack


def _unstack_runs(stack: xr.Dataset) -> dict[int, xr.Dataset]:
    import json

    attrs = json.loads(stack.attrs["run_attrs"])
    free, coords = json.loads(stack.attrs["run_free"]), json.loads(stack.attrs["run_coords"])
    index, sizes = stack["run_index"].values, stack["run_checkpoints"].values
    body = stack.drop_vars(["run_index", "run_checkpoints"])
    body.attrs = {}
    out = {}
    for j, (i, n) in enumerate(zip(index, sizes)):
        one = body.isel(run=[j])
        if "checkpoint" in one.dims:
            one = one.isel(checkpoint=slice(0, int(n)))
        one = one.assign({k: one[k].isel(run=0, drop=True) for k in free}).set_coords(coords)
        one = one.assign_coords(run=[0])
        if "checkpoint" in one.dims:
            one = one.assign_coords(checkpoint=np.arange(int(n)))
        one.attrs = attrs[j]
        out[int(i)] = one
    return out


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"attribute value {value!r} is not JSON serialisable")
