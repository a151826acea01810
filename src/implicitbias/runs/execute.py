"""Train a group of runs (one compiled, vmapped `train` call) and split the result per run.

This is what a sweep task does on a worker: it needs only the run specs, so it can run in any
process.  The specs go down whole: `training.train.train_runs` reads the static part and the
per-member values (`training.batch.Batch.of`) from them.  Each returned Dataset holds one run
(`run` dimension of length 1), its spec as JSON in the attribute `spec` and its identity in `key`;
the per-run hyper-parameters are not stored as coordinates (the spec is the one place that says
what a run is).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import numpy as np
import xarray as xr

from implicitbias.data import Dataset, data_spec, make_dataset
from implicitbias.metrics.final import final_variables
from implicitbias.reference import max_margin_svm
from implicitbias.reference.memo import memoized
from implicitbias.runs.spec import RESULTS_FORMAT, RunSpec
from implicitbias.training.train import train_runs


@functools.lru_cache(maxsize=256)
def _dataset(data_json: str, seed: int) -> Dataset:
    return make_dataset(data_spec(json.loads(data_json)), seed)


def dataset_of(spec: RunSpec) -> Dataset:
    """The run's data set (drawn once per process for each generator spec and seed)."""
    return _dataset(spec.data.model_dump_json(), spec.data_seed)


def reference_of(spec: RunSpec) -> np.ndarray | None:
    """The per-run reference direction the recorder compares the linear predictor with (the max-margin SVM of
    the run's data, from the reference memo: solved once per data set)."""
    if spec.reference == "svm":
        ds = dataset_of(spec)
        tol = {"tol": 1e-6, "support_tol": 1e-6}
        return memoized("svm_direction", spec.data_key(), tol, lambda: max_margin_svm(ds.X, ds.y, **tol).w)
    return None


def train_group(runs: Sequence[RunSpec], progress: bool = False) -> list[xr.Dataset]:
    """Train runs that share a static part in one call; one Dataset per run, in order."""
    first = runs[0]
    if any(r.static_key() != first.static_key() for r in runs):
        raise ValueError("train_group needs runs with one static part (see RunSpec.static_key)")
    data = [dataset_of(r) for r in runs]
    same_data = all(r.data_key() == first.data_key() for r in runs)
    refs = [reference_of(r) for r in runs]
    reference = None if refs[0] is None else np.stack(refs)
    ds = train_runs(runs, data[0] if same_data else data, reference=reference, progress=progress)
    if reference is not None:
        ds["reference"] = (("run", "reference_0"), reference)
    wall = float(ds.attrs.get("wall_time_s", 0.0)) / len(runs)
    out = []
    batch_coords = [c for c in ds.coords if "run" in ds[c].dims and c != "run"]
    for i, spec in enumerate(runs):
        one = _own_checkpoints(ds.isel(run=[i]).drop_vars(batch_coords).assign_coords(run=[0]))
        one.update(final_variables(spec, one, data[i]))  # one merge for all of them, in their order
        one.attrs = {"spec": spec.to_json(), "key": spec.key(), "format": RESULTS_FORMAT, "wall_time_s": wall,
                     "group_size": len(runs), "version": ds.attrs.get("version", "")}
        out.append(one)
    return out


def _own_checkpoints(one: xr.Dataset) -> xr.Dataset:
    """The run's own checkpoints: a call records until its last member stops, so a member that stopped
    earlier repeats its final row (its step no longer moves); those repeats are dropped, which makes a
    run's result independent of the members it was grouped with."""
    step = np.asarray(one["step"].values[0])
    last = len(step) - 1
    while last > 0 and step[last] == step[last - 1]:
        last -= 1
    return one.isel(checkpoint=slice(0, last + 1))
