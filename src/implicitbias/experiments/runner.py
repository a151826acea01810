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


def _batch(config: ExperimentConfig, runs: list[dict]) -> tuple[dict, list[int]]:
    """Batch lists for `train` (product of batch axes, times trials) and the trial of each run."""
    batch: dict[str, list] = {}
    trials = []
    for t in range(config.trials):
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

    refs = [max_margin_svm(ds.X, ds.y).w for ds in datasets]
    return np.stack([refs[t] for t in trials])


def cell_key(config: ExperimentConfig) -> str:
    return hashlib.sha256(json.dumps(config.model_dump(), sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_cell(index: int, values: dict, config: ExperimentConfig, progress: bool, cache_dir: Path | None) -> Cell:
    datasets = cell_datasets(config)
    path = cache_dir / f"cell_{index:03d}.nc" if cache_dir else None
    key = cell_key(config)
    if path is not None and path.exists():
        cached = store.load(path)
        if cached.attrs.get("cell_key") == key:
            return Cell(index, values, config, cached, datasets)
    runs = config.batch_runs()
    batch, trials = _batch(config, runs)
    data = [datasets[t] for t in trials] if config.trials > 1 else datasets[0]
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
    ds.attrs.update(cell_key=key, cell=json.dumps(values), cell_index=index)
    failed = [m for m in ds.message.values if m]
    if failed and ds.status_name.values.tolist().count("diverged") + ds.status_name.values.tolist().count(
            "solver_failed"):
        raise RunFailed(f"{len(failed)} of {ds.sizes['run']} runs failed; first: {failed[0]}")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        store.save(ds, path)
    return Cell(index, values, config, ds, datasets)


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
