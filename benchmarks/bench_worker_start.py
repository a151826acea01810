"""Starting a local Dask cluster until every worker can train: workers forked from a preloaded forkserver (what
`local_client` does, `implicitbias.sweeps.cluster.FORKSERVER_CONFIG`) against workers spawned as fresh
interpreters (Dask's default, the baseline).

Each measurement is a fresh Python process (a forkserver lives as long as the process that started it): it
imports implicitbias, starts `local_client(n)`, and runs on every worker what a training task imports first
(`implicitbias.runs.execute`, the models and methods); printed: the wall seconds from the call to `local_client`
until every worker has done so, and the CPU seconds of the worker processes and of the forkserver (psutil),
each the median over `--repeat` rounds in which the two ways alternate; then the ratios baseline / forkserver
(above 1: faster, fewer CPU seconds).

    python benchmarks/bench_worker_start.py                 # 2 workers, 3 rounds (~1 min here)
    python benchmarks/bench_worker_start.py --workers 4 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
import psutil
import implicitbias.sweeps.cluster as clusters
if sys.argv[1] == "spawn":
    clusters.FORKSERVER_CONFIG = {"distributed.worker.multiprocessing-method": "spawn"}

def ready():
    import implicitbias.runs.execute  # noqa: F401  (what train_task imports: training, models, methods)
    return os.getpid(), os.getppid()

start = time.perf_counter()
client = clusters.local_client(int(sys.argv[2]), dashboard=False)
pids = client.run(ready)
wall = time.perf_counter() - start
procs = {pid for pid, _ in pids.values()} | {ppid for _, ppid in pids.values() if ppid != os.getpid()}
cpu = sum(sum(psutil.Process(p).cpu_times()[:2]) for p in procs)
clusters.close(client)
print(json.dumps({"wall": wall, "cpu": cpu, "forked": any(ppid != os.getpid() for _, ppid in pids.values())}))
"""


def _once(method: str, workers: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, method, str(workers)], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"the {method} measurement failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    got: dict[str, list[dict]] = {"spawn": [], "forkserver": []}
    for _ in range(args.repeat):
        for method in got:
            got[method].append(_once(method, args.workers))
    print(f"{args.workers} workers, median of {args.repeat} rounds (alternating)")
    print(f"{'start':12s} {'wall s':>8s} {'worker CPU s':>13s} {'forked':>7s}")
    med = {}
    for method, rows in got.items():
        med[method] = (statistics.median(r["wall"] for r in rows), statistics.median(r["cpu"] for r in rows))
        print(f"{method:12s} {med[method][0]:8.2f} {med[method][1]:13.2f} {str(rows[0]['forked']):>7s}")
    print(f"ratio spawn / forkserver: wall {med['spawn'][0] / med['forkserver'][0]:.2f}, "
          f"CPU {med['spawn'][1] / med['forkserver'][1]:.2f}")


if __name__ == "__main__":
    main()
