"""The test suite's wall and CPU time under settings that differ only in the environment, measured in turns.

Each configuration runs the README's test command (`python -m pytest -q -n 2 --dist loadgroup`, or the tests
given after `--`) in a fresh process tree, the configurations alternating (A B A B ... for `--repeat` rounds), so
that a machine whose speed drifts during the benchmark (a shared host) weighs on both alike.  It prints, per
configuration, the median wall time and the median CPU time of the process tree (user + system of pytest and
every process it started, from `os.wait4`), and each configuration's ratio to the first one (above 1: faster).

The configurations:
- `default`: the suite as shipped (tests/conftest.py: the persistent compilation cache writes every program,
  IMPLICITBIAS_CACHE_MIN_COMPILE_S=0);
- `threshold`: the package's own threshold (programs that compile in >= 0.5 s are written), tried for issue 42
  item 9: writing every small program costs about as much as compiling it, but the suite's processes read many
  back;
- `no-cache`: IMPLICITBIAS_JAX_CACHE=0, no persistent cache at all;
- `eigen-1`: XLA's Eigen operations (matrix products) on one thread (`--xla_cpu_multi_thread_eigen=false`): with two
  xdist workers, each process's XLA pool has as many threads as the machine has cores.  Tried for issue 42 item 9
  (2026-12-07, 7 quick variants of tests/test_cli.py, 2 rounds): wall 118.6 s -> 115.4 s, CPU 210.9 -> 207.3 s,
  within the rounds' spread (111.7-125.4 s); not shipped.
- `before` (with `--before DIR`): the suite of another commit, checked out in DIR, as shipped; then the baseline.
- `split-32`: XLA's own `--xla_cpu_parallel_codegen_split_count=32` (each program's LLVM module split into up to
  32 parts, compiled on threads), where tests/conftest.py sets 1 (issue 42 item 9).
- `O0`: LLVM's -O0 instead of the suite's -O1 (`--xla_backend_optimization_level=0`).  Tried for issue 42 item 9
  (2026-12-07, idle, one round): 344.5 s -> 395.4 s wall, CPU 609 -> 712 s: faster compiles, far slower runs; not
  shipped.

`--compiles` runs the suite once, as shipped, with a listener in every Python process it starts (a
`sitecustomize` module put first on PYTHONPATH): JAX's compile events (tracing, lowering to MLIR, XLA's backend
compile, the persistent cache's hits) and every backend compile with its program's name and the test that asked for
it (PYTEST_CURRENT_TEST).  It prints the process tree's CPU time, the seconds of each compile stage, and the
backend compiles by program and by test file: where the suite's time goes when most of it is compiling.
Processes that end without running `atexit` (Dask's worker processes, killed at shutdown) are not counted.

    python benchmarks/bench_test_suite.py                                   # whole suite, ~25 min on 2 cores
    python benchmarks/bench_test_suite.py --configs default,threshold --repeat 1 -- tests/test_sweep.py
    python benchmarks/bench_test_suite.py --before /tmp/before --configs default --repeat 1   # a change's A/B
    python benchmarks/bench_test_suite.py --compiles                        # one run of the suite, ~9 min
    python benchmarks/bench_test_suite.py --compiles -- tests/test_sliding.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = {
    "default": {},
    "threshold": {"IMPLICITBIAS_CACHE_MIN_COMPILE_S": "0.5"},
    "no-cache": {"IMPLICITBIAS_JAX_CACHE": "0"},
    "eigen-1": {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"},
    "split-32": {"XLA_FLAGS": "--xla_cpu_parallel_codegen_split_count=32"},
    "O0": {"XLA_FLAGS": "--xla_backend_optimization_level=0"},
}


def run_once(env_changes: dict[str, str], tests: list[str], workers: int, root: Path = ROOT) -> dict:
    """One run of the suite: wall seconds, CPU seconds of the whole process tree, exit code, pytest's last line.
    root: the source tree whose tests run, and whose src/ is imported (another commit's `git worktree`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("IMPLICITBIAS_CACHE_MIN_COMPILE_S", "IMPLICITBIAS_JAX_CACHE")}
    env.update(env_changes)
    if root != ROOT:  # ahead of the editable install of this checkout
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root / "src"), env.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "--dist", "loadgroup", "-p", "no:cacheprovider",
               *tests]
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    # wait4 gives the child's rusage, which includes every descendant it waited for (pytest waits for its
    # workers, and they for the processes they start)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    last = [line for line in out.splitlines() if line.strip()][-1] if out.strip() else ""
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "code": proc.returncode, "summary": last}


#: the listener of `--compiles`, written as sitecustomize.py into a scratch folder put first on PYTHONPATH
LISTENER = r"""
import atexit, collections, json, os, resource, sys, time

_events = collections.Counter()
_compiles = []

try:
    import jax.monitoring
    import jax._src.compiler as _compiler

    jax.monitoring.register_event_duration_secs_listener(lambda event, secs, **kw: _events.update({event: secs}))
    _backend_compile = _compiler.backend_compile_and_load

    def _timed(backend, module, *args, **kwargs):
        started = time.perf_counter()
        try:
            return _backend_compile(backend, module, *args, **kwargs)
        finally:
            try:
                name = str(module.operation.attributes["sym_name"]).strip('"')
            except Exception:
                name = "?"
            _compiles.append((name, time.perf_counter() - started, os.environ.get("PYTEST_CURRENT_TEST", "")))

    _compiler.backend_compile_and_load = _timed
except Exception as exc:  # a process without jax: only its CPU time is recorded
    _events["listener not installed: " + type(exc).__name__] += 0.0


def _dump():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {"pid": os.getpid(), "cpu_s": usage.ru_utime + usage.ru_stime, "argv": " ".join(sys.argv)[:160],
              "events": dict(_events), "compiles": _compiles}
    with open(os.environ["IMPLICITBIAS_BENCH_EVENTS"], "a") as f:
        f.write(json.dumps(record) + "\n")


atexit.register(_dump)
"""


def compile_report(tests: list[str], workers: int) -> dict:
    """One run of the suite with `LISTENER` in every Python process; prints and returns where compile time went."""
    import collections
    import tempfile

    with tempfile.TemporaryDirectory(prefix="implicitbias-bench-events-") as scratch:
        Path(scratch, "sitecustomize.py").write_text(LISTENER)
        events = Path(scratch, "events.jsonl")
        pythonpath = os.pathsep.join(p for p in (scratch, os.environ.get("PYTHONPATH", "")) if p)
        run = run_once({"PYTHONPATH": pythonpath, "IMPLICITBIAS_BENCH_EVENTS": str(events)}, tests, workers)
        records = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    print(f"suite: wall {run['wall_s']:.1f} s, CPU of the process tree {run['cpu_s']:.1f} s, exit {run['code']} "
          f"({run['summary']}); {len(records)} processes reported")
    totals = collections.Counter()
    for r in records:
        totals.update(r["events"])
    for event in ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration", "/jax/compilation_cache/compile_time_saved_sec"):
        print(f"  {event:55s} {totals.get(event, 0.0):8.1f} s")
    compiles = [c for r in records for c in r["compiles"]]
    print(f"backend compiles: {len(compiles)}, {sum(c[1] for c in compiles):.1f} s (wall seconds of each call; XLA "
          "may compile on threads of its own)")
    tables = {"program": lambda c: c[0].split(".")[0], "test file": lambda c: c[2].split("::")[0] or "(outside a test)"}
    for title, key in tables.items():
        by = collections.defaultdict(lambda: [0, 0.0])
        for c in compiles:
            by[key(c)][0] += 1
            by[key(c)][1] += c[1]
        print(f"by {title} (seconds, compiles):")
        for name, (count, secs) in sorted(by.items(), key=lambda kv: -kv[1][1])[:12]:
            print(f"  {secs:8.1f} s {count:6d}  {name}")
    return {"run": run, "events": dict(totals), "compiles": compiles}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="default,threshold", help="comma-separated, from: " + ", ".join(CONFIGS))
    parser.add_argument("--repeat", type=int, default=2, help="rounds (each runs every configuration once)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (-n), 2 as in the README")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--compiles", action="store_true",
                        help="one run of the suite as shipped, reporting its JAX compile time (see above)")
    parser.add_argument("--before", metavar="DIR",
                        help="also run the suite of another commit, checked out in DIR (`git worktree add DIR COMMIT`), "
                             "as shipped: configuration `before`, the baseline of the ratios")
    parser.add_argument("tests", nargs="*", help="after --: the tests to run (default: the whole suite)")
    args = parser.parse_args()
    if args.compiles:
        report = compile_report(args.tests, args.workers)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1))
        return
    names = args.configs.split(",")
    if args.before:
        if not (Path(args.before) / "tests" / "conftest.py").exists():
            parser.error(f"--before: {args.before} is not a checkout of implicitbias (no tests/conftest.py in it)")
        names = ["before", *names]
    unknown = [n for n in names if n not in CONFIGS and not (n == "before" and args.before)]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; allowed: {', '.join(CONFIGS)}")
    records: dict[str, list[dict]] = {n: [] for n in names}
    print(f"load average before: {os.getloadavg()}", flush=True)
    for round_ in range(args.repeat):
        for name in names:
            before = name == "before"
            r = run_once(CONFIGS["default" if before else name], args.tests, args.workers,
                         Path(args.before) if before else ROOT)
            records[name].append(r)
            print(f"round {round_ + 1} {name:10s} wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s  exit {r['code']}  "
                  f"({r['summary']})", flush=True)
    base = names[0]
    med = {n: (statistics.median(r["wall_s"] for r in rs), statistics.median(r["cpu_s"] for r in rs))
           for n, rs in records.items()}
    print(f"\nmedians over {args.repeat} rounds; ratio = {base} / configuration (above 1: faster than {base})")
    for n in names:
        w, c = med[n]
        print(f"  {n:10s} wall {w:7.1f} s ({med[base][0] / w:.3f})   cpu {c:7.1f} s ({med[base][1] / c:.3f})")
    if any(r["code"] != 0 for rs in records.values() for r in rs):
        print("warning: a run did not pass (exit code above); its time is not the suite's")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
