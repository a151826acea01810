"""The stacked results file, `results.nc`: every run of an experiment with its spec, and every data set it used.

One NetCDF4 file (an `xarray.DataTree`), readable without the package:

    /                 attributes `experiment`, `config` (YAML), `checks` (JSON), `runs` (their number)
    /runs/sNNNN       the runs of one layout stacked over `run` (see `save_results`)
    /data/<key>       each data set used (`implicitbias.storage.datasets`)

`save_results` writes a `implicitbias.runs.results.Results`, `load_results` reads one back (typed run specs,
each run's arrays exactly as stored, the data sets), nothing regenerated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import xarray as xr
import yaml

from implicitbias._spec import ConfigError
from implicitbias.attributes import config_yaml, strict_json_default
from implicitbias.runs.results import Results
from implicitbias.runs.spec import RunSpec
from implicitbias.storage.datasets import data_from_xarray, data_to_xarray
from implicitbias.storage.files import atomic_file, write_netcdf


def save_results(results: Results, path: str | os.PathLike) -> Path:
    """Write a `implicitbias.runs.results.Results` to one NetCDF file (atomically): node `runs/sNNNN`
    stacks the runs of one layout over `run` (padded along `checkpoint`; `run_index` is each run's position
    in the results, `run_checkpoints` its own number of checkpoints, the attribute `run_attrs` the JSON list
    of the runs' attributes, among them each run's spec as JSON), node `data/<key>` each data set used
    (training and test arrays), the root the experiment's name, config (YAML) and checks (JSON).  The file
    is readable without the package; the root's `partial` says how many runs a partial report's results hold
    (absent for a finished run).  `load_results` also reads the older layout (one node per run)."""
    config = results.config.model_dump() if hasattr(results.config, "model_dump") else results.config
    root = xr.Dataset(attrs={
        "experiment": results.experiment,
        "config": config_yaml(config),
        "checks": json.dumps(results.checks),
        "runs": len(results.runs),
        **({"partial": results.partial} if results.partial else {}),
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


def load_results(path: str | os.PathLike) -> Results:
    """The `Results` of a `results.nc`: typed run specs, each run's arrays and every data set (nothing
    regenerated); `config` is the experiment config as a dict."""
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
    return Results(tree.attrs["experiment"], config, runs, arrays, datasets, checks,
                   partial=str(tree.attrs.get("partial", "")))


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
    stack.attrs["run_attrs"] = json.dumps([dict(ds.attrs) for ds in arrays], default=strict_json_default)
    # what each run had without a run axis, and which variables were coordinates: restored by `_unstack_runs`
    stack.attrs["run_free"] = json.dumps([k for k, v in first.variables.items() if "run" not in v.dims
                                          and k not in ("run", "checkpoint")])
    stack.attrs["run_coords"] = json.dumps([k for k in first.coords if k not in ("run", "checkpoint")])
    return stack


def _unstack_runs(stack: xr.Dataset) -> dict[int, xr.Dataset]:
    """The runs of a stack written by `_stack_runs`, by their position in the results, each exactly as it was
    (its own checkpoints, variables without a run axis, coordinates and attributes)."""
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

