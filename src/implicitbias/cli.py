"""The `implicitbias` command line: list, describe, run and report experiments.

Exit codes: 0 done; 1 a prediction failed (with --strict); 2 bad input or an environment that cannot do what
was asked (a value out of range, an unreadable file, a full disk, a cluster that gives no worker): one line
naming the option or field, the value and what is allowed, no traceback, and nothing written when the input
is refused; 3 some runs diverged or raised (reported, the rest kept); 130 interrupted (Ctrl-C: finished runs
are kept and a rerun resumes).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys

from implicitbias._spec import SPACE_ERRNOS, ConfigError, machine_error, parse_overrides

EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_PREDICTION_FAILED, EXIT_INTERRUPTED = 2, 3, 1, 130


def cmd_list(args) -> int:
    from implicitbias.experiments.runtimes import catalogue_lines

    return print("\n".join(catalogue_lines())) or 0


def cmd_describe(args) -> int:
    from implicitbias.experiments import get
    from implicitbias.pipeline.describe import describe

    print(describe(get(args.name), quick=args.quick, overrides=parse_overrides(args.set)))
    return 0


def cmd_run(args) -> int:
    from implicitbias.pipeline import run

    command = "implicitbias " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if args.argv is None else args.argv
    try:
        results = run(args.name, quick=args.quick, overrides=parse_overrides(args.set), seed=args.seed, out=args.out,
                      workers=args.workers, scheduler=args.scheduler, cluster=args.cluster,
                      progress=not args.no_progress, worker_timeout=args.worker_timeout, dashboard=args.dashboard,
                      command=command)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # the pipeline said what is kept and how to resume
    record = results.record
    if "results" in record.paths:
        print(summary(results.checks, args, record.paths))
        print(f"wall time {record.wall_time_s:.1f} s ({record.runs} runs: {record.trained} trained, "
              f"{record.reused} loaded)")
    if record.failed:
        print(record.failure_report(), file=sys.stderr)
        return EXIT_RUN_FAILED
    failed = [c for c in results.checks if c["kind"] == "prediction" and c["outcome"] == "fails"]
    return EXIT_PREDICTION_FAILED if args.strict and failed else 0


def summary(checks: list[dict], args, paths: dict[str, str]) -> str:
    """One line per theorem, the failed or out-of-scope predictions by name, the paths (--verbose: every row)."""
    from implicitbias.reports import summarize

    return summarize(checks, paths=paths, verbose=args.verbose, color=sys.stdout.isatty(),
                     width=shutil.get_terminal_size().columns)


def cmd_report(args) -> int:
    from implicitbias.pipeline import report

    try:
        results = report(args.dir, partial=args.partial)
    except RuntimeError as exc:  # the figures or the page could not be drawn: the line says what is kept
        print(exc, file=sys.stderr)
        return EXIT_PREDICTION_FAILED
    print(summary(results.checks, args, results.record.paths))
    return 0


def cmd_index(args) -> int:
    from implicitbias.reports import write_index

    if not os.path.isdir(args.dir):
        raise ConfigError(f"{args.dir} is not a directory: give the folder holding run directories (e.g. runs/)")
    print(f"index: {write_index(args.dir)}")
    return 0


#: the options of `implicitbias run`: flag, type (bool: a switch), help
RUN_OPTIONS = [
    ("--quick", bool, "the small variant (<= 60 s on 2 cores)"),
    ("--out", str, "output directory (default runs/NAME[-quick])"),
    ("--seed", int, "base seed of data and initialisation"),
    ("--strict", bool, "exit 1 when a prediction fails"),
    ("--workers", int, "Dask worker processes on this machine (default: one per core; 0: train in this process)"),
    ("--scheduler", str, "address of a running Dask scheduler, e.g. tcp://host:8786"),
    ("--cluster", str, "YAML file describing a SLURM/PBS cluster for dask-jobqueue (see implicitbias.sweeps.cluster)"),
    ("--worker-timeout", float, "give up (exit 2) when the cluster has no worker for this many seconds (default: 30 "
     "for local workers, 60 for --scheduler, 300 for --cluster)"),
    ("--dashboard", str, "HOST:PORT where the Dask dashboard listens (default 127.0.0.1 on a free port: this "
     "machine only; 0.0.0.0:8787 exposes it to the network)"),
    ("--no-progress", bool, "no progress bar"),
    ("--verbose", bool, "print every assumption and prediction row"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="implicitbias", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every experiment, with paper, systems and run times").set_defaults(fn=cmd_list)
    sets = dict(nargs="*", action="extend", default=[], metavar="FIELD=VALUE",
                help="override config fields, e.g. model.width=50, or a grid axis: grid.init_scale=[0.1,1]")
    commands = [("describe", cmd_describe, "name", "the resolved config and the checks of an experiment",
                 RUN_OPTIONS[:1]),
                ("run", cmd_run, "name", "train an experiment and write config, results, figures, checks, report",
                 RUN_OPTIONS),
                ("report", cmd_report, "dir", "rebuild figures and report from DIR/results.nc without training",
                 RUN_OPTIONS[-1:] + [("--partial", bool, "the runs finished so far of a run not finished yet")]),
                ("index", cmd_index, "dir", "write DIR/index.html listing every run directory under DIR", [])]
    for name, fn, positional, text, options in commands:
        p = sub.add_parser(name, help=text)
        p.add_argument(positional)
        for flag, kind, help_ in options:
            p.add_argument(flag, **({"action": "store_true"} if kind is bool else {"type": kind}), help=help_)
        if name in ("describe", "run"):
            p.add_argument("--set", **sets)
        p.set_defaults(fn=fn, argv=None)
    return parser


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
        print(f"error: {machine_error(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
