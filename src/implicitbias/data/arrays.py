"""A researcher's own data, given as arrays: a data source that an experiment sweeps over, stores and reports like
a generator's.

`Arrays(path="my_data.npz")` reads `X` and `y` (and optionally `X_test`, `y_test`) from a `.npz` file, or the
variables of the same names from a NetCDF file (`.nc`).  The file's content hash (SHA-256) is part of the spec,
so a run's identity, and with it resume and the stored results, follow the data itself: a changed file is refused
rather than silently mixed with runs trained on the old one.  In a notebook, `Arrays.of(X, y)` writes the arrays
to a content-addressed file (under ~/.cache/implicitbias/arrays, or $IMPLICITBIAS_CACHE_DIR/arrays) and returns
the spec.  The data are fixed: every seed gives the same arrays (trials then vary the initialisation only).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Literal

import numpy as np
import pydantic
import xarray as xr

from implicitbias._spec import ConfigError
from implicitbias.data.dataset import Dataset, DataSpec, Task

#: the variables a file provides (the test pair is optional)
VARIABLES = ("X", "y", "X_test", "y_test")


def file_digest(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _cache_dir() -> Path:
    root = os.environ.get("IMPLICITBIAS_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "implicitbias"))
    return Path(root) / "arrays"


class Arrays(DataSpec):
    """Data given as arrays in a file (S0: any data set the models accept).

    path: a .npz file with arrays X (n, d) and y (n,), optionally X_test and y_test; or a NetCDF file (.nc) with
        variables of these names.
    sha256: the file's content hash, computed when the spec is built (part of the run's identity) and checked when
        the data are drawn (a file changed since the experiment was configured is refused).
    task: "classification" (labels +-1), "regression" or "multiclass" (labels 0..k-1).
    """

    name: Literal["arrays"] = "arrays"
    path: str
    sha256: str = ""
    task: Task = "classification"

    @pydantic.model_validator(mode="before")
    @classmethod
    def _digest(cls, values):
        """The content hash is always the file's own (a sha256 carried over from another path, e.g. by a grid over
        data.path, is replaced); a spec read back from stored results keeps its hash when the file is gone (its data
        are stored with the results)."""
        if not isinstance(values, dict) or not isinstance(values.get("path"), str):
            return values
        file = Path(values["path"])
        if file.suffix not in (".npz", ".nc"):
            raise ValueError(f"data.path = {values['path']!r} is not allowed: expected a .npz or .nc file")
        if file.is_file():
            return {**values, "path": str(file.resolve()), "sha256": file_digest(file)}  # workers read the same file
        if values.get("sha256"):
            return values
        raise ValueError(f"data.path = {values['path']!r} is not allowed: no such file; expected a .npz or .nc file "
                         f"with arrays {', '.join(VARIABLES[:2])} (and optionally {', '.join(VARIABLES[2:])})")

    @classmethod
    def of(cls, X, y, X_test=None, y_test=None, *, task: Task = "classification") -> Arrays:
        """Arrays held in memory (a notebook's), written once to a content-addressed .npz file: the spec of
        that file."""
        arrays = {k: np.asarray(v) for k, v in zip(VARIABLES, (X, y, X_test, y_test)) if v is not None}
        Dataset(task=task, **{k: v for k, v in arrays.items()}).validate()
        h = hashlib.sha256()
        for k in sorted(arrays):
            a = np.ascontiguousarray(arrays[k])
            h.update(f"{k}{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        folder = _cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{h.hexdigest()[:32]}.npz"
        if not path.exists():
            tmp = folder / f".{path.name}.{os.getpid()}.tmp.npz"
            np.savez(tmp, **arrays)
            os.replace(tmp, path)
        return cls(path=str(path), task=task)

    def _read(self) -> dict[str, np.ndarray]:
        if self.path.endswith(".npz"):
            with np.load(self.path, allow_pickle=False) as f:
                return {k: np.asarray(f[k]) for k in VARIABLES if k in f.files}
        with xr.open_dataset(self.path) as ds:
            return {k: np.asarray(ds[k].values) for k in VARIABLES if k in ds.variables}

    def generate(self, seed: int) -> Dataset:
        """The file's arrays (the same for every seed), checked against the spec's content hash."""
        digest = file_digest(self.path)
        if digest != self.sha256:
            raise ConfigError(f"data.path = {self.path!r} is not allowed: its content changed since the experiment "
                              f"was configured (sha256 {digest[:12]}..., expected {self.sha256[:12]}...); configure "
                              "it again to train on the new data")
        arrays = self._read()
        missing = [k for k in VARIABLES[:2] if k not in arrays]
        if missing:
            raise ConfigError(f"data.path = {self.path!r} is not allowed: it has no {', '.join(missing)}; expected "
                              f"arrays {', '.join(VARIABLES[:2])} (and optionally {', '.join(VARIABLES[2:])})")
        return Dataset(arrays["X"], arrays["y"], arrays.get("X_test"), arrays.get("y_test"), self.task,
                       {"path": self.path, "sha256": self.sha256}).validate()
