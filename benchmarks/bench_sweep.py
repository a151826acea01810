"""Sweep throughput on Dask: one column of `chistikov2023-fig1` with 1 worker and with N workers.

The d = 16 column is 2 schemes x 16 lambdas x 5 trials = 160 gradient-flow runs, one task each.  The
same runs are trained into a fresh directory once per worker count, each with a fresh LocalCluster and
JAX's persistent compilation cache off (so no count profits from another's compilations).  Printed per
count: the wall time (cluster start and shutdown included), the cluster start and shutdown, the seconds
spent inside tasks summed over workers, and the idle share 1 - task seconds / (workers x the sweep's own
time, from `run_sweep` to its return): everything in the sweep that is not training (Dask's scheduling,
transfers, and the tail where one worker finishes the last long task alone).  The counts are timed in
turn, `--repeats` times, so that a change of this shared machine's load hits every count alike; then the
throughput ratio of the median walls against 1 worker, and that the results are identical.  `--ceiling`
also trains the runs in 1 and N plain processes, pinned like the workers but without Dask, each with a
fixed share of the runs: what this machine allows for them, against which the Dask ratio is read.

The projection of the whole Figure 1 grid (d = 4 ... 1024) that `--project` made here assumed as many
gradient evaluations per run at every d as at d = 16; `bench_fig1_grid.py` measures them at every d.

    python benchmarks/bench_sweep.py                      # d = 16, 1 and 2 workers, 2 repeats (~5 min here)
    python benchmarks/bench_sweep.py --cache warm         # the same with a filled compilation cache
    python benchmarks/bench_sweep.py --ceiling            # and the same runs in plain processes, no Dask
    python benchmarks/bench_sweep.py --limit 16           # a smoke run on 16 of the runs
"""

from __future__ import annotations

import argparse
import json
import os
import sys  # noqa: E402
import tempfile
import time

#: --cache off (default): JAX's persistent compilation cache off, each worker compiles its programs;
#: --cache warm: a fresh persistent cache, filled before any timing with one run of each compiled program
#: (what a researcher's second sweep of the same shapes finds).  Read before implicitbias is imported,
#: here and in the workers (which inherit the environment).
WARM = "--cache=warm" in sys.argv or any(a == "--cache" and b == "warm" for a, b in zip(sys.argv, sys.argv[1:]))
if WARM:
    os.environ["IMPLICITBIAS_JAX_CACHE"] = "1"
    if "BENCH_SWEEP_CACHE" not in os.environ:  # the workers run this module again, with the parent's environment
        os.environ["BENCH_SWEEP_CACHE"] = tempfile.mkdtemp(prefix="bench-sweep-cache-")
    os.environ["IMPLICITBIAS_CACHE_DIR"] = os.environ["BENCH_SWEEP_CACHE"]
    os.environ["IMPLICITBIAS_CACHE_MIN_COMPILE_S"] = "0"
else:
    os.environ["IMPLICITBIAS_JAX_CACHE"] = "0"

import jax  # noqa: E402
import numpy as np  # noqa: E402

from implicitbias.experiments import get  # noqa: E402
from implicitbias.storage.store import RunStore  # noqa: E402
from implicitbias.sweeps import run_sweep  # noqa: E402
from implicitbias.sweeps.cluster import close, local_client  # noqa: E402


def sweep(runs, workers: int) -> dict:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        client = local_client(workers, dashboard=False)
        up = time.perf_counter() - started
        try:
            out = run_sweep(runs, RunStore(tmp), client=client, say=lambda m: None)
        finally:
            closing = time.perf_counter()
            close(client)
        wall = time.perf_counter() - started
        shutdown = time.perf_counter() - closing
    after = resource.getrusage(resource.RUSAGE_SELF)
    main_cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    busy = out.compute_s / (workers * max(out.wall_time_s, 1e-9))
    return {"workers": workers, "wall_s": wall, "cluster_start_s": up, "shutdown_s": shutdown,
            "sweep_s": out.wall_time_s, "task_s": out.compute_s, "main_cpu_s": main_cpu,
            "idle_share": 1.0 - busy, "failed": len(out.failed), "arrays": out.arrays}


def _plain_process(core: int, spec_jsons: list[str], root: str) -> None:
    """One plain process of `plain`: pinned to `core` before JAX starts its threads, trains its runs one by
    one and stores them, as a Dask worker does, with no Dask around."""
    os.sched_setaffinity(0, {core})
    from implicitbias.sweeps.sweep import train_task

    for spec in spec_jsons:
        train_task([spec], root)


def plain(runs, processes: int) -> float:
    """The ceiling without Dask: `processes` plain processes, each pinned to its own core with its share of
    the runs (every k-th, so that slow and fast lambdas mix), started together; the wall time from their
    start (imports included, as a cluster start is) to the last one's end."""
    import multiprocessing

    from implicitbias.sweeps.cluster import SINGLE_THREAD_ENV, usable_cores

    os.environ.update(SINGLE_THREAD_ENV)  # inherited by the spawned processes
    cores = usable_cores()
    specs = [r.to_json() for r in runs]
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        procs = [ctx.Process(target=_plain_process, args=(cores[i % len(cores)], specs[i::processes], tmp))
                 for i in range(processes)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        wall = time.perf_counter() - started
        if any(p.exitcode for p in procs):
            raise RuntimeError(f"a plain process failed: exit codes {[p.exitcode for p in procs]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--workers", default="1,2", help="worker counts, the first is the baseline")
    parser.add_argument("--cache", choices=("off", "warm"), default="off",
                        help="persistent compilation cache: off, or filled before timing (see WARM)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats of every worker count")
    parser.add_argument("--limit", type=int, help="only every k-th run, so that about this many remain")
    parser.add_argument("--ceiling", action="store_true",
                        help="also time the same runs in plain pinned processes without Dask (see `plain`)")
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args()
    exp = get("chistikov2023-fig1")
    runs = exp.runs(exp.resolve(overrides={"grid.data.d": [args.d]}))
    if args.limit:
        runs = runs[:: max(1, len(runs) // args.limit)][: args.limit]
    if WARM:
        programs = list({r.static_key(): r for r in runs}.values())
        print(f"filling the compilation cache with {len(programs)} run(s), one per compiled program")
        for w in sorted({int(x) for x in args.workers.split(",")}):
            sweep(programs, w)  # per worker count: the programs of a worker process, not this one's
    load = os.getloadavg()[0]
    print(f"chistikov2023-fig1, d = {args.d}: {len(runs)} runs; load average {load:.2f}; {os.cpu_count()} CPUs; "
          f"jax {jax.__version__}; compilation cache {args.cache}")
    counts = [int(x) for x in args.workers.split(",")]
    rows: dict[int, list[dict]] = {w: [] for w in counts}
    for r in range(args.repeats):  # interleaved, so that a change of this machine's load hits every count
        for w in counts:
            row = sweep(runs, w)
            rows[w].append(row)
            print(f"  [{r + 1}/{args.repeats}] {w} worker(s): wall {row['wall_s']:7.1f} s (cluster start "
                  f"{row['cluster_start_s']:.1f} s, shutdown {row['shutdown_s']:.1f} s), inside tasks "
                  f"{row['task_s']:7.1f} s, idle share "
                  f"{100 * row['idle_share']:5.1f}%, main process CPU {row['main_cpu_s']:.1f} s "
                  f"({100 * row['main_cpu_s'] / (w * row['wall_s']):.1f}% of the workers' cores), "
                  f"failed runs {row['failed']}", flush=True)
    ceiling: dict[int, list[float]] = {w: [] for w in counts}
    if args.ceiling:
        for r in range(args.repeats):
            for w in counts:
                ceiling[w].append(plain(runs, w))
                print(f"  [{r + 1}/{args.repeats}] {w} plain process(es), no Dask: wall {ceiling[w][-1]:7.1f} s",
                      flush=True)
    base_w = counts[0]
    base = rows[base_w][0]
    for w in counts[1:]:
        same = all(np.array_equal(a[v].values, b[v].values, equal_nan=True)
                   for row in rows[w] for a, b in zip(base["arrays"], row["arrays"])
                   for v in a.data_vars if a[v].dtype.kind == "f")
        ratios = [b["wall_s"] / row["wall_s"] for b, row in zip(rows[base_w], rows[w])]
        median = float(np.median([r["wall_s"] for r in rows[base_w]]) / np.median([r["wall_s"] for r in rows[w]]))
        sweeping = float(np.median([r["sweep_s"] for r in rows[base_w]]) / np.median([r["sweep_s"] for r in rows[w]]))
        idle = float(np.median([r["idle_share"] for r in rows[w]]))
        print(f"  throughput {w} workers / {base_w}: {median:.2f}x (ratio of median walls; per repeat "
              f"{', '.join(f'{x:.2f}' for x in ratios)}); while sweeping (cluster start and shutdown left out) "
              f"{sweeping:.2f}x; median idle share {100 * idle:.1f}%; "
              f"results identical: {same}")
        if args.ceiling:
            bound = float(np.median(ceiling[base_w]) / np.median(ceiling[w]))
            print(f"  the same with {w} plain processes / {base_w}, no Dask: {bound:.2f}x (this machine's ceiling for "
                  f"these runs); Dask reaches {median / bound:.0%} of it")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    report = {"d": args.d, "runs": len(runs), "load_before": load,
              "rows": [{k: v for k, v in r.items() if k != "arrays"} for w in counts for r in rows[w]],
              "plain_wall_s": ceiling}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2, default=float)
    if WARM:
        import shutil

        shutil.rmtree(os.environ["BENCH_SWEEP_CACHE"], ignore_errors=True)


if __name__ == "__main__":
    main()
