"""The parser of the `implicitbias` command line (`implicitbias.cli`): its subcommands, their options and help."""

from __future__ import annotations

import argparse
from collections.abc import Callable

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
    ("--reuse", list, "a run directory (e.g. of another experiment) whose runs are this run's computations under "
     "other labels: copied in, not trained again (repeatable)"),
    ("--no-progress", bool, "no progress bar"),
    ("--verbose", bool, "print every assumption and prediction row"),
]


def make_parser(description: str, commands: dict[str, Callable]) -> argparse.ArgumentParser:
    """The parser of `implicitbias`: its subcommands list, describe, run, report and index, each with its options
    and help, and each calling `commands[NAME](args)` (set as `args.fn`; `args.parser` is its own parser)."""
    parser = argparse.ArgumentParser(prog="implicitbias", description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    text = "every experiment, one line each: paper, systems, run times"
    listing = sub.add_parser("list", help=text, description=text)
    listing.set_defaults(fn=commands["list"], parser=listing)
    sets = dict(nargs="*", action="extend", default=[], metavar="FIELD=VALUE",
                help="override config fields, e.g. model.width=50, or a grid axis: grid.init_scale=[0.1,1]")
    option = {flag: (flag, kind, help_) for flag, kind, help_ in RUN_OPTIONS}
    name = ("name", "a catalogued experiment, e.g. frei2023-kkt (`implicitbias list` lists them)")
    commands = [("describe", commands["describe"], name, "the resolved config and the checks of an experiment",
                 [option["--quick"]]),
                ("run", commands["run"], name, "train an experiment and write config, results, figures, checks, report",
                 RUN_OPTIONS),
                ("report", commands["report"], ("dir", "a run directory written by `implicitbias run`, or its results.nc"),
                 "rebuild figures and report from DIR/results.nc without training",
                 [option["--strict"], option["--verbose"],
                  ("--partial", bool, "the runs finished so far of a run not finished yet")]),
                ("index", commands["index"], ("dir", "the folder holding run directories, e.g. runs/"),
                 "write DIR/index.html listing every run directory under DIR", [])]
    for command, fn, (positional, positional_help), text, options in commands:
        p = sub.add_parser(command, help=text, description=text)
        p.add_argument(positional, help=positional_help)
        for flag, kind, help_ in options:
            kinds = {bool: {"action": "store_true"}, list: {"action": "append", "default": [], "metavar": "DIR"}}
            p.add_argument(flag, **kinds.get(kind, {"type": kind}), help=help_)
        if command in ("describe", "run"):
            p.add_argument("--set", **sets)
        p.set_defaults(fn=fn, argv=None, parser=p)
    return parser
