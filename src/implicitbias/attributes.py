"""Attribute encoding: configs, specs and metadata as NetCDF attributes (YAML and JSON strings).

Shared by training (the attributes of a run's Dataset) and storage (run files, data sets, results.nc), so it
lives below both and imports nothing of the package.  NetCDF attributes hold strings and numbers only, so
nested values are written as text:

- `config_yaml(config)`: a configuration (a mapping, possibly holding NumPy values) as YAML;
- `plain(obj)`: a value with its NumPy scalars and arrays made plain Python, recursively;
- `strict_json_default`: the `default=` of `json.dumps` for attributes that hold only numbers and strings
  (NumPy scalars become Python ones, anything else is refused);
- `lenient_json_default`: the `default=` for free-form metadata (a data set's `info`): NumPy values become
  Python ones, anything else its `str`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import yaml


def plain(obj):
    """Config values as plain YAML-able Python objects."""
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def config_yaml(config) -> str:
    """A configuration as the YAML text of an attribute (keys in their given order)."""
    return yaml.safe_dump(plain(config), sort_keys=False)


def strict_json_default(value):
    """`json.dumps(..., default=strict_json_default)`: NumPy scalars as Python numbers, nothing else."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"attribute value {value!r} is not JSON serialisable")


def lenient_json_default(value):
    """`json.dumps(..., default=lenient_json_default)`: NumPy scalars and arrays as Python values, anything
    else as its `str`."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
