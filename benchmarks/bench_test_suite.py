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

    python benchmarks/bench_test_suite.py                                   # whole suite, ~25 min on 2 cores
    python benchmarks/bench_test_suite.py --configs default,threshold --repeat 1 -- tests/test_sweep.py
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
}


def run_once(env_changes: dict[str, str], tests: list[str], workers: int) -> dict:
    """One run of the suite: wall seconds, CPU seconds of the whole process tree, exit code, pytest's last line."""
    env = {k: v for k, v in os.environ.items() if k not in ("IMPLICITBIAS_CACHE_MIN_COMPILE_S", "IMPLICITBIAS_JAX_CACHE")}
    env.update(env_changes)
    command = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "--dist", "loadgroup", "-p", "no:cacheprovider",
               *tests]
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    # wait4 gives the child's rusage, which includes every descendant it waited for (pytest waits for its
    # workers, and they for the processes they start)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    last = [line for line in out.splitlines() if line.strip()][-1] if out.strip() else ""
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "code": proc.returncode, "summary": last}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="default,threshold", help="comma-separated, from: " + ", ".join(CONFIGS))
    parser.add_argument("--repeat", type=int, default=2, help="rounds (each runs every configuration once)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (-n), 2 as in the README")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("tests", nargs="*", help="after --: the tests to run (default: the whole suite)")
    args = parser.parse_args()
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; allowed: {', '.join(CONFIGS)}")
    records: dict[str, list[dict]] = {n: [] for n in names}
    print(f"load average before: {os.getloadavg()}", flush=True)
    for round_ in range(args.repeat):
        for name in names:
            r = run_once(CONFIGS[name], args.tests, args.workers)
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
