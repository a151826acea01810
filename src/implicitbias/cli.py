"""The `implicitbias` command line: list, describe, run and report experiments."""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import time
from pathlib import Path

import yaml

from implicitbias._spec import ConfigError

EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_PREDICTION_FAILED = 2, 3, 1


def _parse_sets(items: list[str]) -> dict:
    overrides = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r} is not allowed: expected field=value, e.g. --set model.width=50")
        key, raw = item.split("=", 1)
        overrides[key.strip()] = yaml.safe_load(raw) if raw.strip() else raw
    return overrides


def cmd_list(args) -> int:
    from implicitbias.experiments import catalog

    rows = [(e.name, e.paper, ",".join(e.systems), e.runtime_quick, e.runtime_full, e.summary)
            for e in catalog().values()]
    for name, paper, systems, quick, full, summary in rows:
        print(f"{name}\n  paper:    {paper}  [{systems}]\n  shows:    {summary}\n"
              f"  run time: quick {quick}; full {full}\n")
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

    exp = get(args.name)
    config = exp.resolve(quick=args.quick, overrides=_parse_sets(args.set), seed=args.seed)
    runs = exp.runs(config)  # every run validated before anything trains
    _preflight(config, args)
    if args.scheduler is None and args.cluster is None:
        from implicitbias.runs.budget import check_fits

        check_fits(runs, args.workers)
    out = Path(args.out or f"runs/{exp.name}{'-quick' if args.quick else ''}")
    out.mkdir(parents=True, exist_ok=True)
    command = "implicitbias " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if args.argv is None else args.argv
    (out / "config.yaml").write_text(
        f"# {exp.name} ({'quick' if args.quick else 'full'}), rerun with: {command}\n"
        + yaml.safe_dump({"experiment": exp.name, "quick": bool(args.quick), **config.model_dump()},
                         sort_keys=False))
    started = time.perf_counter()
    started_at = datetime.datetime.now().isoformat(timespec="seconds")
    say = lambda m: print(m, file=sys.stderr)
    say(f"{exp.name}: {len(runs)} runs -> {out}/runs/ (a rerun of this command resumes)")
    try:
        results, outcome = run_experiment(exp, config, out, workers=args.workers, scheduler=args.scheduler,
                                          cluster=args.cluster, progress=not args.no_progress, log=say)
    except KeyboardInterrupt:
        say(f"interrupted: the finished runs are kept in {out}/runs/; rerun the same command to resume")
        return 130
    wall = time.perf_counter() - started
    try:
        return _finish(exp, config, args, out, results, outcome, runs, command, started_at, wall, say)
    except KeyboardInterrupt:
        say(f"interrupted while writing the results: every run is stored in {out}/runs/; rerun the same command "
            "to write the results, figures and report without training")
        return 130


def _finish(exp, config, args, out, results, outcome, runs, command, started_at, wall, say) -> int:
    """After the sweep: results.nc, figures, report and the terminal summary; the exit code."""
    from implicitbias.experiments.outputs import write_outputs
    from implicitbias.storage.results import save_results

    if len(results.failed) < len(results.runs):  # something to show: results, figures and report
        save_results(results, out / "results.nc")
        report = write_outputs(exp, results, out, {
            "variant": "quick" if args.quick else "full", "method": config.method.kind,
            "started": started_at, "wall_time_s": f"{wall:.1f}", "command": command,
        }, warn=say)
        print(_summary(results.checks, args, {"report": str(report), "results": str(out / "results.nc"),
                                              "log": str(out / "log.txt")}))
        print(f"wall time {wall:.1f} s ({len(runs)} runs: {outcome.trained} trained, {outcome.reused} loaded)")
    failed = outcome.failed
    if failed:
        print(f"\nerror: {len(failed)} of {len(runs)} runs failed (stored as such, left out of figures and fits):",
              file=sys.stderr)
        for spec, message in failed[:20]:
            print(f"  {spec.label()} [{spec.key()}]: {message}", file=sys.stderr)
        if len(failed) > 20:
            print(f"  ... and {len(failed) - 20} more (see {out}/log.txt)", file=sys.stderr)
        return EXIT_RUN_FAILED
    predictions_failed = [c for c in results.checks if c["kind"] == "prediction" and c["outcome"] == "fails"]
    return EXIT_PREDICTION_FAILED if args.strict and predictions_failed else 0


def _preflight(config, args) -> None:
    """Checks that need the data source (e.g. a CIFAR-10 path) or the execution options, before
    anything trains."""
    locate = getattr(config.data, "locate", None)
    if callable(locate):
        locate()
    if args.workers is not None and args.workers < 0:
        raise ConfigError(f"--workers {args.workers} is not allowed: expected an integer >= 0 (0: in this process)")
    if sum(x is not None for x in (args.scheduler, args.cluster)) > 1:
        raise ConfigError("--scheduler and --cluster are not allowed together: give one of them")


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

    out = Path(args.dir)
    results = load(out)
    exp = get(results.experiment)
    results.checks = evaluate_checks(exp, results)
    report = write_outputs(exp, results, out, {"rebuilt from": str(out / "results.nc")})
    print(_summary(results.checks, args, {"report": str(report), "results": str(out / "results.nc")}))
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
