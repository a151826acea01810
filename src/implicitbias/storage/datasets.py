"""Data sets as `xarray.Dataset`s: the training and test arrays of a run, stored once per generator spec and seed.

`data_to_xarray` writes the arrays `X`, `y`, `X_test`, `y_test` (those present), every array-valued `info`
entry as a variable `info.<name>`, the other `info` entries as the JSON attribute `info`, the task, and with
a run spec the generator spec (`data`), the seed (`data_seed`) and the data set's identity (`key`);
`data_from_xarray` reads them back into an `implicitbias.data.Dataset`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from implicitbias.attributes import lenient_json_default
from implicitbias.data import Dataset

if TYPE_CHECKING:
    from implicitbias.runs.spec import RunSpec


def data_to_xarray(data: Dataset, spec: RunSpec | None = None) -> xr.Dataset:
    """Training and test arrays, array-valued `info` entries as variables, the rest as JSON."""
    out = xr.Dataset()
    for name in ("X", "y", "X_test", "y_test"):
        arr = getattr(data, name)
        if arr is not None:
            arr = np.asarray(arr)
            out[name] = (tuple(f"{name}_{i}" for i in range(arr.ndim)), arr)
    scalars = {}
    for k, v in data.info.items():
        if isinstance(v, np.ndarray):
            out[f"info.{k}"] = (tuple(f"info.{k}_{i}" for i in range(v.ndim)), v)
        else:
            scalars[k] = v.item() if isinstance(v, np.generic) else v
    out.attrs["task"] = data.task
    out.attrs["info"] = json.dumps(scalars, default=lenient_json_default)
    if spec is not None:
        out.attrs["data"] = spec.data.model_dump_json()
        out.attrs["data_seed"] = spec.data_seed
        out.attrs["key"] = spec.data_key()
    return out


def data_from_xarray(ds: xr.Dataset) -> Dataset:
    """The `implicitbias.data.Dataset` stored by `data_to_xarray` (arrays and info unchanged)."""
    arrays = {name: (ds[name].values if name in ds else None) for name in ("X", "y", "X_test", "y_test")}
    info = json.loads(ds.attrs.get("info", "{}"))
    for name in ds.data_vars:
        if name.startswith("info."):
            info[name[len("info."):]] = ds[name].values
    return Dataset(arrays["X"], arrays["y"], arrays["X_test"], arrays["y_test"], ds.attrs["task"], info)
