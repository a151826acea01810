"""Run an experiment: declare its runs, train them as a sweep (`implicitbias.sweeps`), check theorems.

Every run is stored in `DIR/runs/` the moment it finishes; a rerun into the same directory loads
finished runs instead of training them again, so an interrupted sweep resumes and loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from implicitbias.experiments.base import Experiment
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.runs.results import Results
from implicitbias.storage.store import RunStore
from implicitbias.sweeps.sweep import SweepOutcome, run_sweep
from implicitbias.theorems.base import CellsContext, RunContext, Verdict


def run_experiment(experiment: Experiment, config: ExperimentConfig, out_dir: str | Path, *, workers: int | None = None,
                   scheduler: str | None = None, cluster: str | None = None, progress: bool = False,
                   log: Callable[[str], None] = print, **sweep_options) -> tuple[Results, SweepOutcome]:
    """Train (or load) every run of the experiment under `out_dir` and evaluate its checks.  Runs whose
    task raised are left out of the results and listed in the outcome; diverged runs are kept (as
    diverged) and left out of cells, figures and fits.  `sweep_options` go to `run_sweep` (worker_timeout, ...)."""
    runs = experiment.runs(config)
    outcome = run_sweep(runs, RunStore(out_dir, warn=log), workers=workers, scheduler=scheduler, cluster=cluster,
                        progress=progress, say=log, **sweep_options)
    kept = [i for i, ds in enumerate(outcome.arrays) if ds is not None]
    results = Results(experiment.name, config, [runs[i] for i in kept], [outcome.arrays[i] for i in kept],
                      dict(outcome.datasets))
    results.checks = evaluate_checks(experiment, results)
    return results, outcome


def evaluate_checks(experiment: Experiment, results: Results) -> list[dict]:
    """Every theorem of every cell, then the paper's claims across cells (`CellsTheorem`s)."""
    out = []
    for cell in results.cells:
        ctx = RunContext.of(cell)
        for theorem in experiment.theorems(cell):
            for verdict in theorem.check(ctx):
                out.append({"cell": cell.label, **verdict.to_dict()})
    claims = experiment.claims
    if callable(claims):  # the former form, a function of the results (kept while experiments move over)
        claims = [_LegacyClaims(claims, experiment.paper)]
    ctx = CellsContext(results)
    for claim in claims or ():
        try:
            verdicts = claim.check(ctx)
        except (IndexError, KeyError, ValueError) as exc:
            verdicts = [Verdict(claim.title, "prediction", "the paper's claims across cells", None, "", None,
                                "not_evaluated", f"not evaluated: some runs are missing ({type(exc).__name__}: {exc})")]
        out.extend({"cell": "all cells", **v.to_dict()} for v in verdicts)
    return out


class _LegacyClaims:
    def __init__(self, fn, title):
        self.fn, self.title = fn, title

    def check(self, ctx):
        return self.fn(ctx.results)


def load(path: str | Path) -> Results:
    """The results of a finished experiment (a run directory or its `results.nc`): typed run specs,
    their arrays, the data sets, the checks and the experiment's config."""
    from implicitbias.experiments.config import ExperimentConfig
    from implicitbias.storage.stacked import load_results

    path = Path(path)
    file = path / "results.nc" if path.is_dir() else path
    if not file.exists():
        from implicitbias._spec import ConfigError

        raise ConfigError(f"{file} does not exist: give the directory written by `implicitbias run`")
    results = load_results(file)
    results.config = ExperimentConfig(**results.config)
    return results
