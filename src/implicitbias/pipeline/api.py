"""`implicitbias.run`: one experiment from config to report, the same call for the command line, a notebook and a
cluster; `implicitbias.report` and `implicitbias.load` for a finished run directory.

`run` validates everything first (the experiment, the overrides, every run, the output directory, the execution
options, the memory budget, the data), then trains the runs a sweep has not stored yet (`implicitbias.sweeps`),
checks the theorems, and writes config.yaml, results.nc, figures/, checks.json, report.html and the runs index.
Every run is stored in `DIR/runs/` the moment it finishes: the same call on the same directory resumes.
A script that calls `run` at its top level needs no `if __name__ == "__main__":` for the local workers (they
start without importing it again, `sweeps.cluster.workers_skip_main`); a process of its own that imports it
again (multiprocessing's spawn) is refused at once (`_refuse_in_spawned_main`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic
import yaml

import implicitbias
from implicitbias._spec import ConfigError
from implicitbias.experiments.base import Experiment
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.pipeline import definitions, preflight
from implicitbias.pipeline.checks import evaluate_checks
from implicitbias.pipeline.outputs import write_config, write_outputs
from implicitbias.reference.memo import memo_directory
from implicitbias.reports import write_index
from implicitbias.runs.budget import check_fits
from implicitbias.runs.execute import dataset_of
from implicitbias.runs.results import Results
from implicitbias.storage.files import atomic_file
from implicitbias.storage.lock import directory_lock
from implicitbias.storage.stacked import load_results, save_results
from implicitbias.storage.store import RunStore
from implicitbias.sweeps import cluster as clusters
from implicitbias.sweeps.sweep import cluster_scope, run_sweep

#: what the figures and the report may raise on complete results: reported, and the results are kept
DRAWING_ERRORS = (ArithmeticError, ValueError, TypeError, IndexError, KeyError, RuntimeError)


@dataclasses.dataclass
class RunRecord:
    """How a call of `run` went: runs trained and loaded, the runs that failed (with their messages), the
    paths written, its times, and a one-line warning when the figures or report could not be drawn.

    wall_time_s: what the caller waited, to the end of the call (checks, training, figures, report and the
    cluster's shutdown included), from the start of the process when this is the first `run` of a command or
    script (its interpreter's start-up and imports are then `startup_s` of it, not counting what a shell ran
    before it exec'd the interpreter; 0.0 in a notebook, in a later call, or where the process's start cannot be
    read), else from the start of the call; training_s: the sweep
    alone (loading stored runs, starting the workers, training).  run.json keeps all three."""

    out: str = ""
    runs: int = 0
    trained: int = 0
    reused: int = 0
    failed: list[tuple[Any, str]] = dataclasses.field(default_factory=list)
    raised: int = 0
    paths: dict[str, str] = dataclasses.field(default_factory=dict)
    wall_time_s: float = 0.0
    training_s: float = 0.0
    startup_s: float = 0.0
    outputs_error: str | None = None

    def failure_report(self, limit: int = 20) -> str:
        """The failed runs, where they are kept, and their messages (the first `limit`)."""
        total = self.runs
        n_div = len(self.failed) - self.raised
        where = [f"{n_div} diverged or unsolved: stored as such in {self.out}/runs/"] if n_div else []
        where += [f"{self.raised} raised: recorded with their errors in {self.out}/failed/, tried again by a rerun"] \
            if self.raised else []
        lines = [f"\nerror: {len(self.failed)} of {total} runs failed ({'; '.join(where)}; left out of figures and "
                 "fits):"]
        lines += [f"  {spec.label()} [{spec.key()}]: {message}" for spec, message in self.failed[:limit]]
        if len(self.failed) > limit:
            lines.append(f"  ... and {len(self.failed) - limit} more (see {self.out}/log.txt)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"RunRecord(trained={self.trained}, reused={self.reused}, failed={len(self.failed)}, "
                f"wall_time_s={self.wall_time_s:.1f}, training_s={self.training_s:.1f})")


def run(experiment: str | Experiment, *, quick: bool = False, overrides: Mapping[str, Any] | None = None,
        seed: int | None = None, out: str | os.PathLike | None = None, workers: int | None = None,
        scheduler: str | None = None, cluster: str | os.PathLike | None = None, progress: bool = True,
        worker_timeout: float | None = None, dashboard: str | None = None,
        log: Callable[[str], None] | None = None, command: str | None = None,
        reuse: Sequence[str | os.PathLike] = ()) -> Results:
    """Run an experiment: validate, train or resume, check, and write every output; returns its `Results`.

    experiment: a catalogued name (`implicitbias list`) or an `Experiment` object (e.g. defined in a notebook
        cell, over the catalogued models, data and theorems).
    quick: the small variant (<= 60 s on 2 cores); overrides: dotted fields, e.g. {"model.width": 50,
        "grid.init_scale": [0.1, 1.0]}; seed: the base seed of data and initialisation.
    out: the run directory (str or Path; default runs/NAME, or runs/NAME-quick); the same call on the same
        directory loads the finished runs instead of training them again.
    workers: Dask worker processes on this machine (None: one per core; 0: in this process); scheduler: the
        address of a running Dask scheduler; cluster: a SLURM/PBS cluster file (dask-jobqueue).
    progress: a progress bar; worker_timeout, dashboard: as the command line's --worker-timeout, --dashboard;
    log: where messages go (default: standard error); command: the command recorded in config.yaml.
    reuse: run directories (e.g. of another experiment) whose stored runs are this run's computations under other
        labels (`RunSpec.compute_key`: the same but for part and trial): copied in, not trained again.

    `results.checks` holds the verdicts, `results.record` how the call went (failed runs and their messages,
    paths, wall and training times).  Bad input raises `ConfigError` before anything is written.  Called while a
    spawned process imports the main script again (the script has no `if __name__ == "__main__":`), it exits that
    process at once with one line saying so (`_refuse_in_spawned_main`).
    """
    called, startup = time.perf_counter(), _startup_s()
    _refuse_in_spawned_main()
    say = log or (lambda message: print(message, file=sys.stderr))
    exp = definitions.resolve(experiment)
    if out is None:
        out = f"runs/{exp.name}{'-quick' if quick else ''}"
    out = preflight.output_dir(out)
    reuse = preflight.reuse_dirs(reuse)
    preflight.check_devices()
    config = exp.resolve(quick=quick, overrides=dict(overrides or {}), seed=seed)
    runs = exp.runs(config)  # expanded once: every run validated before anything trains
    record = RunRecord(out=str(out), runs=len(runs))
    with contextlib.ExitStack() as held:
        # the sweep's cluster closes when this block ends: after the results, figures and report are written
        held.enter_context(cluster_scope(warn=say))
        preflight.check_options(config, workers=workers, scheduler=scheduler, cluster=cluster,
                                worker_timeout=worker_timeout, dashboard=dashboard)
        options = {k: v for k, v in (("worker_timeout", worker_timeout), ("dashboard_address", dashboard))
                   if v is not None}
        if scheduler is not None:
            options["client"] = client = clusters.connect(scheduler)
            held.callback(clusters.close, client, warn=say)
        if scheduler is None and cluster is None:
            check_fits(runs, workers)
        preflight.check_runs_against_their_data(runs)  # after the memory budget: it draws data
        _take(out, held, say)  # everything is checked: from here on the directory is written
        command = command or _command(exp, quick, overrides, seed, out)
        write_config(exp, config, quick, out, command)
        definitions.keep(exp, out)
        started, started_at = time.perf_counter(), datetime.datetime.now().isoformat(timespec="seconds")
        say(f"{exp.name}: {len(runs)} runs -> {out}/runs/ (a rerun of this command resumes)")
        if reuse:
            copied = RunStore(out, warn=say).adopt(runs, reuse)
            say(f"{copied} runs copied from {', '.join(map(str, reuse))} (the same computations): not trained again")
        try:
            with memo_directory(out):  # references a run needs while it trains (an SVM): solved once, kept in out
                outcome = run_sweep(runs, RunStore(out, warn=say), workers=workers, scheduler=scheduler,
                                    cluster=None if cluster is None
                                    else os.fspath(cluster), progress=progress, say=say, **options)
        except KeyboardInterrupt:
            say(f"interrupted: the finished runs are kept in {out}/runs/; rerun the same command to resume")
            raise
        kept = [i for i, ds in enumerate(outcome.arrays) if ds is not None]
        results = Results(exp.name, config, [runs[i] for i in kept], [outcome.arrays[i] for i in kept],
                          dict(outcome.datasets))
        results.definition = exp
        record.trained, record.reused, record.failed = outcome.trained, outcome.reused, outcome.failed
        record.raised = sum(1 for spec, _ in outcome.failed if spec.key() in outcome.errors)
        record.training_s = time.perf_counter() - started
        results.record = record
        if len(results.failed) < len(results.runs):  # something to show: checks, results, figures and report
            try:
                _finish(exp, results, out, record, {"variant": "quick" if quick else "full",
                                                    "method": config.method.kind, "started": started_at,
                                                    "training_s": round(record.training_s, 1), "command": command},
                        say)
            except KeyboardInterrupt:
                say(f"interrupted while writing the results: every run is stored in {out}/runs/; rerun the same "
                    "command to write the results, figures and report without training")
                raise
    record.startup_s, record.wall_time_s = startup, startup + time.perf_counter() - called
    if "report" in record.paths:
        _record_times(out, record, say)
    return results


def _finish(exp: Experiment, results: Results, out: Path, record: RunRecord, info: dict, say) -> None:
    with memo_directory(out):  # the checks' and the tables' references: solved once, kept in the run directory
        results.checks = evaluate_checks(exp, results)
        save_results(results, out / "results.nc")
        record.paths.update({"results": str(out / "results.nc"), "log": str(out / "log.txt")})
        try:
            record.paths["report"] = str(write_outputs(exp, results, out, info, warn=say))
        except DRAWING_ERRORS as exc:
            record.outputs_error = outputs_failed(exc, out)
            say(record.outputs_error)  # the results are complete: only their pictures are missing


def report(path: str | os.PathLike, *, experiment: Experiment | None = None,
           log: Callable[[str], None] | None = None, partial: bool = False) -> Results:
    """Check again and redraw a finished run directory (or its results.nc) without training: figures, tables,
    checks.json and report.html.  Reference solutions come from the directory's memo: none is solved again.
    A drawing failure raises (`RuntimeError` with the line `outputs_failed` prints).

    partial: the directory of a run that has not finished (interrupted, or still training in another process):
    the results are the runs of its config.yaml stored so far in its runs/ (`finished_so_far`), written to
    results.nc with figures, checks and a report that say how many of the runs they hold; a later `implicitbias
    run` of the same command resumes and writes the whole results over them.  A plain report of such results
    (their results.nc holds the mark) says again how many runs they hold."""
    say = log or (lambda message: print(message, file=sys.stderr))
    out = Path(path)
    if not out.exists():
        raise ConfigError(f"{out} does not exist: give the directory written by `implicitbias run` (or its results.nc)")
    file = out / "results.nc" if out.is_dir() else out
    preflight.check_devices()  # the checks are recomputed with JAX
    info: dict = {"rebuilt from": str(file)}
    if partial:
        if not out.is_dir():
            raise ConfigError(f"--partial needs the run directory, not {out}: its config.yaml and runs/ are read")
        results, total, quick = finished_so_far(out, experiment=experiment, warn=say)
        info = {"variant": "quick" if quick else "full",
                "partial": f"{len(results.runs)} of {total} runs finished (read from {out}/runs/)"}
        say(f"{results.experiment}: {len(results.runs)} of {total} runs finished")
        results.partial = info["partial"]
        save_results(results, file)
    else:
        try:
            results = load(out, experiment=experiment)
        except ConfigError as exc:
            text = str(exc)
            raise ConfigError(text if str(file) in text else f"{file} is damaged or from another version: {text}") \
                from None
        if results.partial:  # the results.nc of an earlier `report --partial`: its report says so again
            info["partial"] = results.partial
    out = file.parent
    with memo_directory(out):
        results.checks = evaluate_checks(results.definition, results)
    record = RunRecord(out=str(out), runs=len(results.runs), reused=len(results.runs), paths={"results": str(file)})
    results.record = record
    try:
        with memo_directory(out):
            record.paths["report"] = str(write_outputs(results.definition, results, out, info, warn=say))
    except DRAWING_ERRORS as exc:
        record.outputs_error = outputs_failed(exc, out, "error")
        raise RuntimeError(record.outputs_error) from exc
    failures = RunStore(out).failures()
    if failures:
        say(f"{len(failures)} runs raised and are not in these results (their errors in {out}/failed/):")
        for failure in list(failures.values())[:10]:
            say(f"  {failure.get('label', '')} [{failure.get('key', '')}]: {failure.get('error', '')}")
    return results


def finished_so_far(out: str | os.PathLike, *, experiment: Experiment | None = None,
                    warn: Callable[[str], None] = print) -> tuple[Results, int, bool]:
    """(the results of the runs stored so far in a run directory, the number of runs its config.yaml declares,
    whether it is a quick variant).

    The runs are those `implicitbias run` expands from the directory's config.yaml; each one found in runs/ is
    read (a file that is unreadable or holds another run is reported and left out), with its data set from
    data/ (drawn again from its seed when absent)."""
    out = Path(out)
    path = out / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: give the directory written by `implicitbias run`")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is damaged: it is not YAML ({type(exc).__name__}: {exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("experiment"), str):
        raise ConfigError(f"{path} is damaged: the config.yaml of `implicitbias run` is a mapping naming its "
                          "experiment")
    name, quick = doc.pop("experiment"), bool(doc.pop("quick", False))
    exp = experiment if experiment is not None else definitions.definition_of(name, out)
    try:
        config = ExperimentConfig(**doc)
    except (pydantic.ValidationError, TypeError) as exc:
        raise ConfigError(f"{path} is damaged: its config is not valid ({exc})") from None
    runs = exp.runs(config)
    store = RunStore(out, warn=warn)
    kept, arrays, datasets = [], [], {}
    for spec in runs:
        ds = store.load_run(spec) if store.done(spec) else None
        if ds is None:
            continue
        if spec.data_key() not in datasets:
            datasets[spec.data_key()] = store.load_data(spec) or dataset_of(spec)
        kept.append(spec)
        arrays.append(ds)
    if not kept:
        raise ConfigError(f"{out}/runs/ holds none of the {len(runs)} runs of {path}: nothing to report yet")
    results = Results(name, config, kept, arrays, datasets)
    results.definition = exp
    return results, len(runs), quick


def load(path: str | os.PathLike, *, experiment: Experiment | None = None) -> Results:
    """The results of `implicitbias run` (a run directory or its results.nc): typed run specs (`runs`), each
    run's arrays (`arrays`, xarray), the data sets, the checks and the config; select runs by any spec field with
    `select(...)` / `group_by(...)`, stack them with `stack(...)`, draw a figure with `plot(...)`.

    experiment: the `Experiment` of a notebook-defined run whose kept definition (experiment.pkl) cannot be
    read any more; catalogued experiments and kept definitions are found by themselves."""
    path = Path(path)
    file = path / "results.nc" if path.is_dir() else path
    if not file.exists():
        raise ConfigError(f"{file} does not exist: give the directory written by `implicitbias run`")
    results = load_results(file)
    results.config = ExperimentConfig(**results.config)
    results.definition = experiment if experiment is not None else definitions.definition_of(results.experiment,
                                                                                             file.parent)
    return results


def outputs_failed(exc: BaseException, out: Path, level: str = "warning") -> str:
    """One line for a figure or page that could not be drawn from complete results (an edge case of the plotting
    code, e.g. a log axis with no positive value): the results stay usable."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return (f"{level}: the figures and report could not be written ({type(exc).__name__}: {exc}{where}); "
            f"{out}/results.nc holds every result, and `implicitbias report {out}` draws them again")


def _refuse_in_spawned_main() -> None:
    """Exit at once, in one line, when `run` is called while this process imports the main script again as
    `__mp_main__`: a process that multiprocessing's spawn (or forkserver) started from a script without
    `if __name__ == "__main__":` re-runs the script's top level to find what was pickled by reference to
    `__main__`, and there `run` would train the whole experiment again or wait forever on the run directory the
    parent holds (how the README's snippet hung in its Dask workers, before they stopped importing the script).
    A function of the script called later by such a process (a Pool task) is not refused: only while the
    script's top level runs."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            script = frame.f_globals.get("__file__") or frame.f_code.co_filename
            print(f"error: implicitbias.run was called while {script} was imported again by a process it started "
                  "(multiprocessing's spawn imports the main script as __mp_main__), which would run the experiment a "
                  f'second time; put the call under `if __name__ == "__main__":` in {Path(script).name}', file=sys.stderr)
            raise SystemExit(2)  # not an exception: its traceback would run through multiprocessing's bootstrap
        frame = frame.f_back


#: how many calls of `run` this process has made (only the first counts the process's start-up)
_CALLS = [0]


def _startup_s() -> float:
    """Seconds from this process's start to now, for the first `run` of a process started as a command or a
    script (`__main__` has a file: `implicitbias run`, `python script.py`); 0.0 for a later call, in a notebook or
    an interactive session (whose start is not what its user waits for), and where the start cannot be read.

    Linux only: the process's start (/proc/self/stat, field 22, clock ticks since boot) against CLOCK_BOOTTIME,
    the clock that field counts on (/proc/uptime may be a container's own uptime under lxcfs); 10 ms ticks.
    That start is the fork, not the exec: a shell that runs its last command in place (`bash -c 'pip install
    ... && implicitbias run ...'`, `exec`) would count its own earlier commands too (a fresh install's 60 s of
    pip were printed as start-up).  So the age is capped by what this interpreter can have spent: the wall time
    since `implicitbias` was imported plus the CPU time it had used by then (the interpreter's start and the
    script's earlier imports, CPU-bound)."""
    _CALLS[0] += 1
    if _CALLS[0] > 1 or not getattr(sys.modules.get("__main__"), "__file__", None):
        return 0.0
    age = _process_age_s()
    if age is None:
        return 0.0
    imported_wall, imported_cpu = implicitbias._IMPORTED_AT
    return min(age, time.perf_counter() - imported_wall + imported_cpu)


def _process_age_s() -> float | None:
    """Seconds since this process was forked (/proc/self/stat against CLOCK_BOOTTIME, see `_startup_s`), or None
    where that cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as file:
            stat = file.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])  # the fields after "(comm)" start at field 3
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0.0 <= age < 86_400 * 365 else None


def _record_times(out: Path, record: RunRecord, say) -> None:
    """Add the whole call's wall time (and its start-up) to run.json, written before the report and the cluster's
    shutdown were done, and list it so in runs/index.html.  A failure is a warning: every result is written."""
    path = out / "run.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        info.update(wall_time_s=round(record.wall_time_s, 1), training_s=round(record.training_s, 1),
                    **({"startup_s": round(record.startup_s, 1)} if record.startup_s else {}))
        atomic_file(lambda tmp: tmp.write_text(json.dumps(info, indent=2)), path)
        if out.resolve().parent.name == "runs":  # the default layout, whose index `write_outputs` keeps current
            write_index(out.resolve().parent)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        say(f"warning: {path} does not record the wall time ({type(exc).__name__}: {exc}); every result is written")


def _take(out: Path, held: contextlib.ExitStack, say) -> None:
    """Create the directory and hold its lock (a second command on it waits); remove an interrupted write's
    temporary files."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        held.enter_context(directory_lock(out, say=say))
    except OSError as exc:
        raise ConfigError(f"--out {str(out)!r} is not allowed: {exc.strerror or exc} ({exc.filename or out}); "
                          "expected a directory this user can write (created if absent)") from None
    removed = RunStore(out).clean_temporaries()
    if removed:
        say(f"removed {len(removed)} temporary files left by an interrupted write in {out}")


def _command(exp: Experiment, quick: bool, overrides, seed, out: Path) -> str:
    """The command line that reruns this call (a notebook-defined experiment: the library call)."""
    sets = " ".join(shlex.quote(f"{k}={v}") for k, v in (overrides or {}).items())
    args = (["--quick"] if quick else []) + ([f"--set {sets}"] if sets else []) + \
        ([f"--seed {seed}"] if seed is not None else []) + [f"--out {shlex.quote(str(out))}"]
    if definitions.is_catalogued(exp):
        return f"implicitbias run {exp.name} " + " ".join(args)
    return f"implicitbias.run(<the notebook's Experiment {exp.name!r}>, ...) (options: {' '.join(args)})"
