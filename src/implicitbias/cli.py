"""The `implicitbias` command line: list, describe, run and report experiments.

Exit codes: 0 done; 1 a prediction failed (with --strict); 2 bad input or an environment that cannot do what
was asked (a value out of range, an unreadable file, a full disk, a cluster that gives no worker): one line
naming the option or field, the value and what is allowed, no traceback, and nothing written when the input
is refused; 3 some runs diverged or raised (reported, the rest kept); 130 interrupted (Ctrl-C: finished runs
are kept and a rerun resumes).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import math
import os
import shlex
import sys
import time
from pathlib import Path

import yaml

from implicitbias._spec import ConfigError, ResourceError

EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_PREDICTION_FAILED = 2, 3, 1


def _parse_sets(items: list[str]) -> dict:
    overrides = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r} is not allowed: expected field=value, e.g. --set model.width=50")
        key, raw = item.split("=", 1)
        if not key.strip():
            raise ConfigError(f"--set {item!r} is not allowed: expected field=value with a field name, e.g. --set "
                              "model.width=50")
        try:
            overrides[key.strip()] = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError as exc:
            detail = " ".join(str(exc).split())[:160]
            raise ConfigError(f"--set {item!r} is not allowed: the value {raw!r} is not valid YAML ({detail}); "
                              "expected a number, a word or a list such as [1, 2]") from None
    return overrides


def cmd_list(args) -> int:
    from implicitbias.experiments.runtimes import catalogue_lines

    print("\n".join(catalogue_lines()))
    return 0


def cmd_describe(args) -> int:
    from implicitbias.experiments import get
    from implicitbias.runs.spec import group_runs

    exp = get(args.name)
    config = exp.resolve(quick=args.quick, overrides=_parse_sets(args.set))
    runs = exp.runs(config)
    print(f"# {exp.name} ({'quick' if args.quick else 'full'} variant): {exp.paper}\n# {exp.summary}")
    print(f"# settings: {exp.settings_source}\n")
    print(yaml.safe_dump(config.model_dump(), sort_keys=False))
    groups = group_runs(runs)
    print(f"# {len(runs)} runs in {len(groups)} compiled calls (tasks of a sweep)")
    from implicitbias.runs.results import Cell, cell_indices

    cells = [Cell([runs[i] for i in idx], None, [], idx) for idx in cell_indices(runs)]
    print(f"# {len(cells)} cells (runs checked together):")
    for cell in cells:
        print(f"  {cell.label}: {len(cell.runs)} runs, {cell.trials} trials")
    print("# theorem checks per cell:")
    seen = set()
    for cell in cells:
        for theorem in exp.theorems(cell):
            line = f"  {theorem.title}: {theorem.model_dump()}"
            if line not in seen:
                seen.add(line)
                print(line)
    if exp.claims:
        print("  the paper's qualitative claims across cells")
    print("# figures:")
    for fig in exp.figures:
        print(f"  figures/{fig.name}.png|pdf: {fig.title}")
    return 0


def cmd_run(args) -> int:
    from implicitbias.experiments import get
    from implicitbias.experiments.runner import run_experiment
    from implicitbias.storage.lock import directory_lock
    from implicitbias.storage.store import RunStore
    from implicitbias.sweeps.sweep import cluster_scope

    exp = get(args.name)
    out = _output_dir(args.out or f"runs/{exp.name}{'-quick' if args.quick else ''}")
    _check_devices()
    config = exp.resolve(quick=args.quick, overrides=_parse_sets(args.set), seed=args.seed)
    runs = exp.runs(config)  # every run validated before anything trains
    say = lambda m: print(m, file=sys.stderr)
    with contextlib.ExitStack() as held:
        # the sweep's cluster is closed when this block ends: after the results, figures and report are written
        # (a failure to close is a warning)
        held.enter_context(cluster_scope(warn=say))
        options = _preflight(config, runs, args, held, say)
        if args.scheduler is None and args.cluster is None:
            from implicitbias.runs.budget import check_fits

            check_fits(runs, args.workers)
        _check_runs_against_their_data(runs)  # after the memory budget: it draws data
        # everything is checked: from here on the directory is written
        try:
            out.mkdir(parents=True, exist_ok=True)
            held.enter_context(directory_lock(out, say=say))  # a second command on this directory waits here
        except OSError as exc:
            raise ConfigError(f"--out {str(out)!r} is not allowed: {exc.strerror or exc} ({exc.filename or out}); "
                              "expected a directory this user can write (created if absent)") from None
        removed = RunStore(out).clean_temporaries()
        if removed:
            say(f"removed {len(removed)} temporary files left by an interrupted write in {out}")
        command = "implicitbias " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if args.argv is None else args.argv
        (out / "config.yaml").write_text(
            f"# {exp.name} ({'quick' if args.quick else 'full'}), rerun with: {command}\n"
            + yaml.safe_dump({"experiment": exp.name, "quick": bool(args.quick), **config.model_dump()},
                             sort_keys=False))
        started = time.perf_counter()
        started_at = datetime.datetime.now().isoformat(timespec="seconds")
        say(f"{exp.name}: {len(runs)} runs -> {out}/runs/ (a rerun of this command resumes)")
        try:
            results, outcome = run_experiment(exp, config, out, workers=args.workers, scheduler=args.scheduler,
                                              cluster=args.cluster, progress=not args.no_progress, log=say, **options)
        except KeyboardInterrupt:
            say(f"interrupted: the finished runs are kept in {out}/runs/; rerun the same command to resume")
            return 130
        wall = time.perf_counter() - started
        try:
            return _finish(exp, config, args, out, results, outcome, runs, command, started_at, wall, say)
        except KeyboardInterrupt:
            say(f"interrupted while writing the results: every run is stored in {out}/runs/; rerun the same "
                "command to write the results, figures and report without training")
            return 130


def _check_devices() -> None:
    """JAX can compute here: a JAX_PLATFORMS this machine cannot serve (cuda without a GPU, a misspelling) is an
    environment error, reported before anything is written."""
    import jax

    try:
        jax.devices()
    except Exception as exc:  # noqa: BLE001 - JAX reports an unusable platform as RuntimeError or AssertionError
        platforms = os.environ.get("JAX_PLATFORMS", "")
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ResourceError(f"JAX_PLATFORMS={platforms!r} cannot be used on this machine ({detail}): expected a platform "
                            "it has (unset JAX_PLATFORMS to let JAX choose; a GPU needs `pip install implicitbias[gpu]`)") \
            from None


def _outputs_failed(exc: BaseException, out: Path, level: str = "warning") -> str:
    """One line for a figure or page that could not be drawn from complete results (an edge case of the plotting
    code, e.g. a log axis with no positive value): the results stay usable."""
    import traceback

    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return (f"{level}: the figures and report could not be written ({type(exc).__name__}: {exc}{where}); "
            f"{out}/results.nc holds every result, and `implicitbias report {out}` draws them again")


def _output_dir(value: str) -> Path:
    """The --out directory, refused before anything is written when it names a file or cannot be created here."""
    out = Path(value)
    existing = out
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
    except OSError as exc:  # a name too long, a loop of links
        raise ConfigError(f"--out {value!r} is not allowed: {exc.strerror}; expected a directory path") from None
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {value!r} is not allowed: it is a file; expected a directory (created if absent)")
    if not existing.is_dir():
        raise ConfigError(f"--out {value!r} is not allowed: {existing} is a file, not a directory; expected a "
                          "directory path (created if absent)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {value!r} is not allowed: {existing} is not writable by this user; expected a "
                          "directory this user can write")
    return out


def _finish(exp, config, args, out, results, outcome, runs, command, started_at, wall, say) -> int:
    """After the sweep: results.nc, figures, report and the terminal summary; the exit code."""
    from implicitbias.experiments.outputs import write_outputs
    from implicitbias.storage.stacked import save_results

    if len(results.failed) < len(results.runs):  # something to show: results, figures and report
        save_results(results, out / "results.nc")
        paths = {}
        try:
            paths["report"] = str(write_outputs(exp, results, out, {
                "variant": "quick" if args.quick else "full", "method": config.method.kind,
                "started": started_at, "wall_time_s": f"{wall:.1f}", "command": command,
            }, warn=say))
        except (ArithmeticError, ValueError, TypeError, IndexError, KeyError, RuntimeError) as exc:
            say(_outputs_failed(exc, out))  # the results are complete: only their pictures are missing
        print(_summary(results.checks, args, {**paths, "results": str(out / "results.nc"), "log": str(out / "log.txt")}))
        print(f"wall time {wall:.1f} s ({len(runs)} runs: {outcome.trained} trained, {outcome.reused} loaded)")
    failed = outcome.failed
    if failed:
        raised = sum(1 for spec, _ in failed if spec.key() in outcome.errors)
        where = [f"{len(failed) - raised} diverged or unsolved: stored as such in {out}/runs/"] if len(failed) > raised else []
        where += [f"{raised} raised: recorded with their errors in {out}/failed/, tried again by a rerun"] if raised else []
        print(f"\nerror: {len(failed)} of {len(runs)} runs failed ({'; '.join(where)}; left out of figures and fits):",
              file=sys.stderr)
        for spec, message in failed[:20]:
            print(f"  {spec.label()} [{spec.key()}]: {message}", file=sys.stderr)
        if len(failed) > 20:
            print(f"  ... and {len(failed) - 20} more (see {out}/log.txt)", file=sys.stderr)
        return EXIT_RUN_FAILED
    predictions_failed = [c for c in results.checks if c["kind"] == "prediction" and c["outcome"] == "fails"]
    return EXIT_PREDICTION_FAILED if args.strict and predictions_failed else 0


def _check_runs_against_their_data(runs) -> None:
    """What `train` checks of the data (the loss fits its task, labels and shapes, the method's needs), done here
    for the first run of every compiled program (static part), so that no run fails on it later in a worker: one
    data set drawn per program (kept in this process's cache, which an in-process sweep reuses)."""
    from implicitbias.runs.execute import dataset_of
    from implicitbias.training.validation import validate_inputs

    seen = set()
    for spec in runs:
        if spec.static_key() in seen:
            continue
        seen.add(spec.static_key())
        where = f"{spec.part + ': ' if spec.part else ''}{spec.label()}"
        try:
            validate_inputs(spec.model, [dataset_of(spec)], spec.loss, spec.method, spec.stop)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (run {where})") from None


def _preflight(config, runs, args, held: contextlib.ExitStack, say) -> dict:
    """Checks that need the data source (e.g. a CIFAR-10 path) or the execution options, before anything is
    written; returns the sweep's options (a --scheduler is connected to here, and closed by `held`)."""
    from implicitbias.sweeps import cluster as clusters

    locate = getattr(config.data, "locate", None)
    if callable(locate):
        locate()
    cores = len(clusters.usable_cores())
    if args.workers is not None and not 0 <= args.workers <= cores:
        raise ConfigError(f"--workers {args.workers} is not allowed: expected an integer from 0 to {cores}, the cores "
                          "this process may use (0: in this process; more workers than cores only share them)")
    if args.worker_timeout is not None and not (math.isfinite(args.worker_timeout) and args.worker_timeout > 0):
        raise ConfigError(f"--worker-timeout {args.worker_timeout} is not allowed: expected a finite number of "
                          "seconds > 0")
    if args.dashboard is not None:
        _check_dashboard(args.dashboard)
    if sum(x is not None for x in (args.scheduler, args.cluster)) > 1:
        raise ConfigError("--scheduler and --cluster are not allowed together: give one of them")
    if args.workers is not None and (args.scheduler or args.cluster):
        raise ConfigError(f"--workers {args.workers} is not allowed with --{'scheduler' if args.scheduler else 'cluster'}: "
                          "the workers are the scheduler's or the cluster file's (jobs x processes)")
    options = {k: v for k, v in (("worker_timeout", args.worker_timeout), ("dashboard_address", args.dashboard))
               if v is not None}
    if args.cluster is not None:
        clusters.read_cluster_file(args.cluster)
    if args.scheduler is not None:
        options["client"] = client = clusters.connect(args.scheduler)
        held.callback(clusters.close, client, warn=say)
    return options


def _check_dashboard(value: str) -> None:
    """Refuse a --dashboard address that is not HOST:PORT of this machine, free to listen on."""
    import socket

    from distributed.comm.addressing import parse_host_port

    allowed = ("expected HOST:PORT of this machine, e.g. 127.0.0.1:8787 (this machine only, the default on a free "
               "port) or 0.0.0.0:8787 (every interface: anyone on the network can see and control the sweep)")
    try:
        host, port = parse_host_port(value, default_port=0)
    except (ValueError, TypeError):
        host, port = None, None
    if not host or not isinstance(port, int) or not 0 <= port < 65536:
        raise ConfigError(f"--dashboard {value!r} is not allowed: {allowed}")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as exc:
        raise ConfigError(f"--dashboard {value!r} is not allowed: cannot listen there ({exc.strerror or exc}); "
                          f"{allowed}") from None


def _summary(checks: list[dict], args, paths: dict[str, str]) -> str:
    """One line per theorem, the failed or out-of-scope predictions by name, the paths (--verbose: every row)."""
    import shutil

    from implicitbias.reports import summarize

    return summarize(checks, paths=paths, verbose=args.verbose, color=sys.stdout.isatty(),
                     width=shutil.get_terminal_size().columns)


def cmd_report(args) -> int:
    from implicitbias.experiments import get
    from implicitbias.experiments.outputs import write_outputs
    from implicitbias.experiments.runner import evaluate_checks, load
    from implicitbias.storage.store import RunStore

    out = Path(args.dir)
    if not out.exists():
        raise ConfigError(f"{out} does not exist: give the directory written by `implicitbias run` (or its results.nc)")
    file = out / "results.nc" if out.is_dir() else out
    _check_devices()  # the checks are recomputed with JAX
    try:
        results = load(out)
    except ConfigError as exc:
        text = str(exc)
        raise ConfigError(text if str(file) in text else f"{file} is damaged or from another version: {text}") from None
    exp = get(results.experiment)
    results.checks = evaluate_checks(exp, results)
    out = file.parent
    try:
        report = write_outputs(exp, results, out, {"rebuilt from": str(file)})
    except (ArithmeticError, ValueError, TypeError, IndexError, KeyError, RuntimeError) as exc:
        print(_outputs_failed(exc, out, "error"), file=sys.stderr)
        return EXIT_PREDICTION_FAILED
    print(_summary(results.checks, args, {"report": str(report), "results": str(file)}))
    failures = RunStore(out).failures()
    if failures:
        print(f"{len(failures)} runs raised and are not in these results (their errors in {out}/failed/):", file=sys.stderr)
        for record in list(failures.values())[:10]:
            print(f"  {record.get('label', '')} [{record.get('key', '')}]: {record.get('error', '')}", file=sys.stderr)
    return 0


def cmd_index(args) -> int:
    from implicitbias.reports import write_index

    root = Path(args.dir)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory: give the folder holding run directories (e.g. runs/)")
    print(f"index: {write_index(root)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="implicitbias", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every experiment, with paper, systems and run times").set_defaults(fn=cmd_list)
    p = sub.add_parser("describe", help="the resolved config and the checks of an experiment")
    p.add_argument("name")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--set", nargs="*", action="extend", default=[], metavar="FIELD=VALUE")
    p.set_defaults(fn=cmd_describe)
    p = sub.add_parser("run", help="train an experiment and write config, results, figures, checks, report")
    p.add_argument("name")
    p.add_argument("--quick", action="store_true", help="the small variant (<= 60 s on 2 cores)")
    p.add_argument("--out", help="output directory (default runs/NAME[-quick])")
    p.add_argument("--set", nargs="*", action="extend", default=[], metavar="FIELD=VALUE",
                   help="override config fields (repeat --set or list several after one)")
    p.add_argument("--seed", type=int, help="base seed of data and initialisation")
    p.add_argument("--strict", action="store_true", help="exit 1 when a prediction fails")
    p.add_argument("--workers", type=int, help="Dask worker processes on this machine (default: one per core; "
                   "0: train in this process)")
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--cluster", help="YAML file describing a SLURM/PBS cluster for dask-jobqueue "
                   "(see implicitbias.sweeps.cluster)")
    p.add_argument("--worker-timeout", type=float, metavar="SECONDS",
                   help="give up (exit 2) when the cluster has no worker for this long (default: 30 s for local "
                   "workers, 60 s for --scheduler, 300 s for --cluster)")
    p.add_argument("--dashboard", metavar="HOST:PORT", help="where the Dask dashboard listens (default 127.0.0.1 on a "
                   "free port: this machine only; 0.0.0.0:8787 exposes it to the network)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--verbose", action="store_true", help="print every assumption and prediction row")
    p.set_defaults(fn=cmd_run, argv=None)
    p = sub.add_parser("report", help="rebuild figures and report from DIR/results.nc without training")
    p.add_argument("dir")
    p.add_argument("--verbose", action="store_true", help="print every assumption and prediction row")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("index", help="write DIR/index.html listing every run directory under DIR")
    p.add_argument("dir")
    p.set_defaults(fn=cmd_index)
    return parser


#: errors of the file system that are the machine's, not the program's: reported in one line, exit 2
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                errno.EISDIR, errno.ENOENT, errno.ENAMETOOLONG, errno.ELOOP)


def main(argv: list[str] | None = None) -> int:
    """Run the command line (argv: the arguments after the program name; None: sys.argv); returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except ConfigError as exc:  # bad input, and an environment that cannot do what was asked (ResourceError)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        if exc.errno not in SPACE_ERRNOS:
            raise
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        print(f"error: {exc.filename or ''}: {exc.strerror}: {'the disk is full: free some space' if full else 'check the path'}"
              " and rerun the same command (finished runs are kept)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
