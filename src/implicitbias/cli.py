"""The `implicitbias` command line: list, describe, run and report experiments.

Exit codes: 0 done; 1 a prediction failed (with --strict); 2 bad input or an environment that cannot do what
was asked (one line naming the option or field, the value and what is allowed; nothing written); 3 some runs
diverged or raised (reported, the rest kept); 4 the code of a check raised (one line each; outcome "error" in
checks.json, the other verdicts written; `implicitbias report DIR` checks again); 130 interrupted (finished runs
are kept and a rerun resumes).  When several apply: 3, then 4, then 1.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys

from implicitbias._spec import SPACE_ERRNOS, ConfigError, machine_error, parse_overrides
from implicitbias.cli_parser import RUN_OPTIONS, make_parser  # noqa: F401 - RUN_OPTIONS: the options of `run`

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
                      command=command, reuse=args.reuse)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # the pipeline said what is kept and how to resume
    record = results.record
    timing = (f"wall time {record.wall_time_s:.1f} s"
              + (f" (of which start-up {record.startup_s:.1f} s)" if record.startup_s else "")
              + f"; training {record.training_s:.1f} s ({record.runs} runs: {record.trained} trained, "
              f"{record.reused} loaded)")
    return conclude(results, args, EXIT_RUN_FAILED if record.failed else 0, timing)


def conclude(results, args, code: int = 0, timing: str = "") -> int:
    """Print the verdicts (one line per theorem, the failed predictions, the paths; --verbose: every row), the
    times, the failed runs and one line per raised check; return the exit code (`pipeline.checks.exit_code`)."""
    from implicitbias.pipeline.checks import exit_code
    from implicitbias.reports import summarize

    record = results.record
    if "results" in record.paths:
        print(summarize(results.checks, paths=record.paths, verbose=args.verbose, color=sys.stdout.isatty(),
                        width=shutil.get_terminal_size().columns) + (f"\n{timing}" if timing else ""))
    if record.failed:
        print(record.failure_report(), file=sys.stderr)
    message, code = exit_code(results.checks, args.strict, record.out, code)
    return print(message, file=sys.stderr) or code if message else code


def cmd_report(args) -> int:
    from implicitbias.pipeline import report

    try:
        results = report(args.dir, partial=args.partial)
    except RuntimeError as exc:  # the figures or the page could not be drawn: the line says what is kept
        print(exc, file=sys.stderr)
        return EXIT_PREDICTION_FAILED
    return conclude(results, args)


def cmd_index(args) -> int:
    from implicitbias.reports import write_index

    if not os.path.isdir(args.dir):
        raise ConfigError(f"{args.dir} is not a directory: give the folder holding run directories (e.g. runs/)")
    print(f"index: {write_index(args.dir)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (`implicitbias.cli_parser.make_parser`) with this module's commands."""
    return make_parser(__doc__, {"list": cmd_list, "describe": cmd_describe, "run": cmd_run, "report": cmd_report,
                                 "index": cmd_index})


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed arguments; a refusal (exit 2) prints the usage of the subcommand it concerns, not the top-level
    one (argparse leaves the arguments a subcommand does not take to the top-level parser)."""
    args, extra = build_parser().parse_known_args(argv)
    if extra:
        args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the command line (argv: the arguments after the program name; None: sys.argv); returns the exit code."""
    try:
        args = parse(argv)
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
