"""Cost of the full `chistikov2023-fig1` grid by d: measured runs, and a projection for the larger d.

The grid is 2 schemes x 5 d x 5 trials batched calls of the 16 lambdas.  A batched gradient-flow call
costs (number of batched vector-field evaluations) x (cost of one batched evaluation): the first is
about the same for every d (it is set by the dynamics: plateau, alignment, the exponential tail, and
measured per call in `results.nc`), the second grows like n d m = d^2 m.  So:

1. time one batched evaluation (the gradient of the 16 members, vmapped and jitted, exactly the
   function the solver calls) at every d, as a ratio to the smallest d, measured in this run;
2. read the measured wall time of finished calls (`--runs DIR ...`, results of `implicitbias run
   chistikov2023-fig1 ...`) and the gradient evaluations of their members;
3. project the wall time of one call and of the 10 calls of a column at every d from the measured
   calls at the largest measured d, scaled by the ratio of step 1.

    python benchmarks/bench_fig1_scaling.py --runs runs/fig1-d64 runs/fig1-d256-t0
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

from implicitbias.data import make_dataset
from implicitbias.experiments import get
from implicitbias.experiments.runner import load_results
from implicitbias.training.problem import Problem

DIMS = (4, 16, 64, 256, 1024)
CALLS_PER_D = 10  # 2 schemes x 5 trials


def batched_gradient_seconds(d: int, repeats: int = 5) -> float:
    config = get("chistikov2023-fig1").config
    lambdas = config.grid["init_scale"]
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
    """{d: [(wall seconds, max gradient evaluations of a member) per call]} from finished runs."""
    out: dict[int, list[tuple[float, int]]] = {}
    for path in paths:
        results = load_results(os.path.join(path, "results.nc"), with_data=False)
        for cell in results.cells:
            ds = cell.results
            d = int(cell.config.data.d)
            # one call per trial: the cell's wall time is the sum over its calls
            trials = int(ds.trial.max()) + 1
            for t in range(trials):
                evals = ds["grad_evals"].values[ds.trial.values == t, -1]
                out.setdefault(d, []).append((float(ds.attrs["wall_time_s"]) / trials, int(evals.max())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="*", default=[], help="directories of finished chistikov2023-fig1 runs")
    parser.add_argument("--dims", default=",".join(map(str, DIMS)))
    args = parser.parse_args()
    dims = [int(x) for x in args.dims.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; jax {jax.__version__}, {jax.devices()[0].platform}")
    cost = {d: batched_gradient_seconds(d) for d in dims}
    base = dims[0]
    print("\none batched evaluation (16 members: gradient of the risk, vmapped, jitted)")
    for d in dims:
        print(f"  d = {d:5d}: {cost[d] * 1e3:10.3f} ms   ratio to d = {base}: {cost[d] / cost[base]:9.1f}")
    calls = measured_calls(args.runs)
    if not calls:
        return
    print("\nmeasured calls (one trial: 16 lambdas)")
    for d, rows in sorted(calls.items()):
        walls = [w for w, _ in rows]
        evals = [e for _, e in rows]
        print(f"  d = {d:5d}: {len(rows)} calls, wall per call median {np.median(walls):8.1f} s "
              f"(max {max(walls):.1f} s), max evaluations of a member median {int(np.median(evals))}")
    ref = max(calls)
    ref_wall = float(np.mean([w for w, _ in calls[ref]]))
    print(f"\nprojection from the measured calls at d = {ref} (mean {ref_wall:.1f} s per call), scaled by the "
          "cost of one batched evaluation:")
    total = 0.0
    for d in dims:
        if d in calls and len(calls[d]) >= CALLS_PER_D:
            column = sum(w for w, _ in calls[d])
            how = "measured"
        else:
            column = CALLS_PER_D * ref_wall * max(cost[d] / cost[ref], 1.0 if d >= ref else 0.0)
            how = "projected"
        total += column
        print(f"  d = {d:5d}: one call {column / CALLS_PER_D / 60:8.1f} min, column of {CALLS_PER_D} calls "
              f"{column / 3600:7.2f} h ({how})")
    print(f"  whole grid: {total / 3600:.1f} h on this machine")


if __name__ == "__main__":
    main()
