"""Cost of the full `chistikov2023-fig1` grid by d: measured runs, and a projection for the larger d.

The grid is 2 schemes x 5 d x 5 trials calls, each over the 16 lambdas.  The training advances the
running members in groups of similar pace, so a call costs about (gradient evaluations of all its
members) x (cost of one member's evaluation) + a fixed part (compilation, solver overhead).  The
evaluations are set by the dynamics (plateau, alignment, exponential tail) and change little with d
(measured per member in `results.nc`); the cost of one evaluation grows like n d m = d^2 m.  So:

1. time one member's gradient evaluation (jitted, the function the solver calls) at every d;
2. read the measured wall time and the members' gradient evaluations of finished calls (`--runs DIR
   ...`, results of `implicitbias run chistikov2023-fig1 ...`);
3. project a column at every d: (mean evaluations of a call over the largest d with a whole column) x
   (cost of an evaluation at d), plus the fixed part measured at the largest d that ran; where a whole
   column was measured, print the measurement.

    python benchmarks/bench_fig1_scaling.py --runs runs/fig1-d64 runs/fig1-d256-t0
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import jax
import numpy as np

from implicitbias.data import make_dataset
from implicitbias.experiments import get
from implicitbias.experiments.runner import load_results
from implicitbias.storage import results as store
from implicitbias.storage.results import config_of
from implicitbias.training.problem import Problem

DIMS = (4, 16, 64, 256, 1024)
CALLS_PER_D = 10  # 2 schemes x 5 trials


def gradient_seconds(d: int, members: int = 1, repeats: int = 5) -> float:
    config = get("chistikov2023-fig1").config
    lambdas = config.grid["init_scale"][:members]
    data = make_dataset(config.data.replace(d=d), 0)
    problem = Problem(config.model, config.loss)
    hp = {"seed": np.arange(len(lambdas)), "init_scale": np.asarray(lambdas)}

    def member(h):
        theta, const = problem.init(h, d)
        return theta, const

    theta, const = jax.jit(jax.vmap(member))(hp)
    grad = jax.jit(jax.vmap(jax.grad(lambda th, c: problem.risk(hp, th, c, data.X, data.y)), in_axes=(0, 0)))
    jax.block_until_ready(grad(theta, const))
    times = []
    for _ in range(repeats):
        n = 1
        while True:
            start = time.perf_counter()
            for _ in range(n):
                out = grad(theta, const)
            jax.block_until_ready(out)
            elapsed = time.perf_counter() - start
            if elapsed > 0.2:
                break
            n *= 2
        times.append(elapsed / n)
    return float(np.median(times))


def measured_calls(paths: list[str]) -> dict[int, list[tuple[float, int]]]:
    """{d: [(wall seconds, gradient evaluations of all members) per call]} from finished runs: each run
    directory's `results.nc`, or, for a run still going, its finished cells and trials in `cells/`."""
    out: dict[int, list[tuple[float, int]]] = {}
    for path in paths:
        if os.path.exists(os.path.join(path, "results.nc")):
            cells = [c.results for c in load_results(os.path.join(path, "results.nc"), with_data=False).cells]
        else:
            cells = [store.load(f) for f in sorted(glob.glob(os.path.join(path, "cells", "cell_*.nc")))]
        for ds in cells:
            d = int(config_of(ds)["data"]["d"])
            # one call per trial: the wall time of a cell is the sum over its calls
            trials = np.unique(ds.trial.values)
            for t in trials:
                evals = ds["grad_evals"].values[ds.trial.values == t, -1]
                out.setdefault(d, []).append((float(ds.attrs["wall_time_s"]) / len(trials), int(evals.sum())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="*", default=[], help="directories of finished chistikov2023-fig1 runs")
    parser.add_argument("--dims", default=",".join(map(str, DIMS)))
    args = parser.parse_args()
    dims = [int(x) for x in args.dims.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; jax {jax.__version__}, {jax.devices()[0].platform}")
    cost = {d: gradient_seconds(d) for d in dims}
    base = dims[0]
    print("\none member's gradient evaluation (jitted)")
    for d in dims:
        print(f"  d = {d:5d}: {cost[d] * 1e3:10.4f} ms   ratio to d = {base}: {cost[d] / cost[base]:9.1f}")
    calls = measured_calls(args.runs)
    if not calls:
        return
    print("\nmeasured calls (one trial: 16 lambdas)")
    fixed = {}
    for d, rows in sorted(calls.items()):
        walls = np.array([w for w, _ in rows])
        evals = np.array([e for _, e in rows])
        # wall = fixed + evaluations x cost(d): the part not explained by the evaluations
        fixed[d] = float(np.mean(walls - evals * cost[d]))
        print(f"  d = {d:5d}: {len(rows)} calls, wall per call mean {walls.mean():7.1f} s (max {walls.max():.1f} s), "
              f"member evaluations per call mean {int(evals.mean())}; evaluations x cost = "
              f"{np.mean(evals * cost[d]):.1f} s, the rest {fixed[d]:.1f} s")
    # evaluations per call: the mean over the largest d with a whole column (both schemes: the uncentred
    # runs that end at the time budget need several times more than the centred ones); the fixed part of a
    # call (compilation, solver overhead, metrics): from the largest d measured at all
    complete = [d for d in calls if len(calls[d]) >= CALLS_PER_D]
    ref = max(complete) if complete else max(calls)
    ref_evals = float(np.mean([e for _, e in calls[ref]]))
    top = max(calls)
    print(f"\nprojection: {int(ref_evals)} member evaluations per call (mean at d = {ref}) x the cost of an "
          f"evaluation at d, plus {fixed[top]:.0f} s a call (the rest at d = {top}):")
    total = 0.0
    for d in dims:
        if d in calls and len(calls[d]) >= CALLS_PER_D:
            column, how = sum(w for w, _ in calls[d]), "measured"
        else:
            column, how = CALLS_PER_D * (ref_evals * cost[d] + fixed[top]), "projected"
        total += column
        print(f"  d = {d:5d}: one call {column / CALLS_PER_D / 60:8.1f} min, column of {CALLS_PER_D} calls "
              f"{column / 3600:7.2f} h ({how})")
    print(f"  whole grid: {total / 3600:.1f} h on this machine")


if __name__ == "__main__":
    main()
