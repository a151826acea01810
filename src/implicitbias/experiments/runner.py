"""Run an experiment: one compiled, batched `train` call per cell, theorem checks per cell.

Each finished cell is written to `DIR/cells/cell_XXX.nc` at once; a rerun into the same directory
with the same config loads finished cells instead of training them again, so an interrupted sweep
resumes and loses nothing that finished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import yaml

from implicitbias._spec import ConfigError
from implicitbias.data import make_dataset
from implicitbias.experiments.base import Experiment
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.storage import results as store
from implicitbias.theorems.base import RunContext, Verdict
from implicitbias.training.train import train

#: data seeds of the trials of a cell: seed + TRIAL_STRIDE * trial
TRIAL_STRIDE = 1000


class RunFailed(RuntimeError):
    """A run diverged or its solver failed: nothing is saved as a result."""


@dataclasses.dataclass
class Cell:
    index: int
    values: dict[str, Any]
    config: ExperimentConfig
    results: xr.Dataset
    data: list

    @property
    def label(self) -> str:
        return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in self.values.items()) or "all runs"


@dataclasses.dataclass
class Results:
    experiment: str
    config: ExperimentConfig
    cells: list[Cell]
    checks: list[dict] = dataclasses.field(default_factory=list)


def cell_datasets(config: ExperimentConfig) -> list:
    return [make_dataset(config.data, config.seed + TRIAL_STRIDE * t) for t in range(config.trials)]


def _batch(config: ExperimentConfig, runs: list[dict], which: list[int]) -> tuple[dict, list[int]]:
    """Batch lists for `train` (product of batch axes, times the given trials) and the trial of each run."""
    batch: dict[str, list] = {}
    trials = []
    for t in which:
        for run in runs:
            trials.append(t)
            batch.setdefault("seed", []).append(int(run.get("seed", config.seed)) + TRIAL_STRIDE * t)
            for k, v in run.items():
                if k != "seed":
                    batch.setdefault("lr" if k == "method.lr" else k, []).append(v)
    return batch, trials


def _reference(config: ExperimentConfig, datasets: list, trials: list[int]):
    if config.reference == "none":
        return None
    from implicitbias.reference import max_margin_svm

    refs = {t: max_margin_svm(datasets[t].X, datasets[t].y).w for t in sorted(set(trials))}
    return np.stack([refs[t] for t in trials])


def cell_key(config: ExperimentConfig) -> str:
    return hashlib.sha256(json.dumps(config.model_dump(), sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_cell(index: int, values: dict, config: ExperimentConfig, progress: bool, cache_dir: Path | None) -> Cell:
    datasets = cell_datasets(config)
    path = cache_dir / f"cell_{index:03d}.nc" if cache_dir else None
    key = cell_key(config)
    cached = _load_cached(path, key)
    if cached is not None:
        return Cell(index, values, config, cached, datasets)
    runs = config.batch_runs()
    if config.trials_batched() or config.trials == 1:
        ds = _train_trials(config, runs, datasets, list(range(config.trials)), progress)
    else:
        # one call per trial, each saved at once so that an interrupted cell resumes after its last trial
        parts = []
        for t in range(config.trials):
            part_path = _trial_path(path, t) if path is not None else None
            part = _load_cached(part_path, key)
            if part is None:
                part = _train_trials(config, runs, datasets, [t], progress)
                _raise_if_failed(part)
                if part_path is not None:
                    part.attrs["cell_key"] = key
                    _save(part, part_path)
            parts.append(part)
        ds = concat_runs(parts)
    ds.attrs.update(cell_key=key, cell=json.dumps(values), cell_index=index)
    _raise_if_failed(ds)
    if path is not None:
        _save(ds, path)
        for t in range(config.trials):
            _trial_path(path, t).unlink(missing_ok=True)
    return Cell(index, values, config, ds, datasets)


def _train_trials(config: ExperimentConfig, runs: list[dict], datasets: list, which: list[int],
                  progress: bool) -> xr.Dataset:
    """One compiled, batched `train` call over the runs of the given trials."""
    batch, trials = _batch(config, runs, which)
    data = [datasets[t] for t in trials] if len(which) > 1 else datasets[which[0]]
    reference = _reference(config, datasets, trials)
    ds = train(
        config.model, data, config.loss, config.method, stop=config.stop, seed=config.seed,
        init_scale=config.init_scale, batch=batch, checkpoints=config.checkpoints,
        reference=reference, kkt=config.kkt, progress=progress,
        keep_trajectory=config.keep_trajectory, config=config.model_dump(),
    )
    ds = ds.assign_coords(trial=("run", np.asarray(trials)))
    if reference is not None:
        ds["reference"] = (("run", "reference_0"), reference)
    return ds


def concat_runs(parts: list[xr.Dataset]) -> xr.Dataset:
    """The results of separate calls as one Dataset over their runs.  A call whose members all stopped
    before the last checkpoint recorded fewer checkpoints; its last row is repeated, which is exactly
    what it would have recorded (a stopped member no longer changes)."""
    n = max(p.sizes["checkpoint"] for p in parts)
    longest = next(p for p in parts if p.sizes["checkpoint"] == n)
    padded = []
    for p in parts:
        k = p.sizes["checkpoint"]
        p = p.isel(checkpoint=np.minimum(np.arange(n), k - 1)).assign_coords(
            checkpoint=np.arange(n), target=("checkpoint", longest["target"].values))
        padded.append(p)
    ds = xr.concat(padded, dim="run", data_vars="minimal", coords="minimal", compat="override",
                   combine_attrs="override")
    ds = ds.assign_coords(run=np.arange(ds.sizes["run"]))
    ds.attrs["wall_time_s"] = float(sum(p.attrs.get("wall_time_s", 0.0) for p in parts))
    return ds


def _trial_path(cell_path: Path, trial: int) -> Path:
    """Where one trial of a cell trained one call at a time is kept until the whole cell is saved."""
    return cell_path.with_name(f"{cell_path.stem}.trial_{trial:03d}.nc")


def _load_cached(path: Path | None, key: str) -> xr.Dataset | None:
    if path is None or not path.exists():
        return None
    cached = store.load(path)
    return cached if cached.attrs.get("cell_key") == key else None


def _save(ds: xr.Dataset, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    store.save(ds, path)


def _raise_if_failed(ds: xr.Dataset) -> None:
    names = ds.status_name.values.tolist()
    failed = [m for m in ds.message.values if m]
    if failed and names.count("diverged") + names.count("solver_failed"):
        raise RunFailed(f"{len(failed)} of {ds.sizes['run']} runs failed; first: {failed[0]}")


def run_experiment(experiment: Experiment, config: ExperimentConfig, *, progress: bool = False,
                   cache_dir: Path | None = None, log=print) -> Results:
    cells = []
    grid = config.cells()
    for i, values in enumerate(grid):
        cfg = config.for_cell(values) if values else config
        label = ", ".join(f"{k}={v}" for k, v in values.items()) or "single cell"
        log(f"[{i + 1}/{len(grid)}] {experiment.name}: {label}")
        cells.append(run_cell(i, values, cfg, progress, cache_dir))
    results = Results(experiment.name, config, cells)
    results.checks = evaluate_checks(experiment, results)
    return results


def evaluate_checks(experiment: Experiment, results: Results) -> list[dict]:
    out = []
    for cell in results.cells:
        ctx = RunContext(data=cell.data, results=cell.results, config=cell.config.model_dump(),
                         model=cell.config.model, loss=cell.config.loss, method=cell.config.method,
                         extra={"experiment": results.config})
        for theorem in experiment.theorems(cell.config):
            for verdict in theorem.check(ctx):
                out.append({"cell": cell.label, **_verdict_dict(verdict)})
    if experiment.claims is not None:
        out.extend({"cell": "all cells", **_verdict_dict(v)} for v in experiment.claims(results))
    return out


def _verdict_dict(v: Verdict) -> dict:
    return v.to_dict()


# -- files ---------------------------------------------------------------------------------------
def to_tree(results: Results) -> xr.DataTree:
    root = xr.Dataset(attrs={
        "experiment": results.experiment,
        "config": yaml.safe_dump(results.config.model_dump(), sort_keys=False),
        "checks": json.dumps(results.checks),
    })
    nodes = {"/": root}
    for cell in results.cells:
        nodes[f"cell_{cell.index:03d}"] = cell.results
    return xr.DataTree.from_dict(nodes)


def save_results(results: Results, path: Path) -> Path:
    tmp = path.with_suffix(".nc.tmp")
    to_tree(results).to_netcdf(tmp, engine="netcdf4")
    tmp.replace(path)
    return path


def load_results(path: Path, with_data: bool = True) -> Results:
    """Results from `results.nc` (no training); data sets are regenerated from their seeds."""
    tree = xr.open_datatree(path, engine="netcdf4").load()
    config = ExperimentConfig(**yaml.safe_load(tree.attrs["config"]))
    cells = []
    for name in sorted(tree.children):
        ds = tree[name].to_dataset()
        for var in ("status_name", "message"):
            if var in ds:
                ds[var] = ds[var].astype(object)
        values = json.loads(ds.attrs["cell"])
        cfg = config.for_cell(values) if values else config
        cells.append(Cell(int(ds.attrs["cell_index"]), values, cfg, ds, cell_datasets(cfg) if with_data else []))
    if not cells:
        raise ConfigError(f"{path} holds no cells: is it a results.nc written by `implicitbias run`?")
    return Results(tree.attrs["experiment"], config, cells, json.loads(tree.attrs.get("checks", "[]")))
