"""The cost of one gradient evaluation inside the gradient-flow loop, against one bare jitted gradient.

For `chistikov2023-fig1`'s network (m = 200, both layers trained, ReLU, square loss) at d = 16 and 64:
one gradient-flow run (lambda = 4^-6, trial 0, centred data) through `train`, timed on its second call
(compiled), divided by its gradient evaluations; against the median time of `jax.jit(jax.grad(risk))` on
the same parameters.  The ratio is what the solver, the stopping rule and the checkpoint records add to
every evaluation.

    python benchmarks/bench_gf_eval_cost.py [--dims 16,64] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

from implicitbias.experiments import get
from implicitbias.runs.execute import dataset_of
from implicitbias.training import train
from implicitbias.training.problem import Problem


def bare_gradient(spec, data) -> float:
    problem = Problem(spec.model, spec.loss)
    hp = {"seed": np.asarray(spec.seed), "init_scale": np.asarray(spec.init_scale)}
    theta, const = problem.init(hp, data.d)
    grad = jax.jit(jax.grad(lambda th: problem.risk(hp, th, const, data.X, data.y)))
    jax.block_until_ready(grad(theta))
    times = []
    for _ in range(7):
        n = 1
        while True:
            start = time.perf_counter()
            for _ in range(n):
                out = grad(theta)
            jax.block_until_ready(out)
            elapsed = time.perf_counter() - start
            if elapsed > 0.2:
                break
            n *= 2
        times.append(elapsed / n)
    return float(np.median(times))


def in_loop(spec, data) -> tuple[float, int]:
    def once():
        start = time.perf_counter()
        ds = train(spec.model, data, spec.loss, spec.method, stop=spec.stop, seed=spec.seed, init_scale=spec.init_scale,
                   checkpoints=spec.checkpoints, kkt=False)
        return time.perf_counter() - start, int(ds["grad_evals"].values[0, -1])

    once()  # compile
    runs = [once() for _ in range(3)]
    wall = float(np.median([w for w, _ in runs]))
    return wall, runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="16,64")
    parser.add_argument("--json")
    args = parser.parse_args()
    exp = get("chistikov2023-fig1")
    print(f"load average {os.getloadavg()[0]:.2f}; jax {jax.__version__}")
    out = {}
    for d in [int(x) for x in args.dims.split(",")]:
        runs = exp.runs(exp.resolve(overrides={"trials": 1, "grid.data.d": [d], "grid.data.scheme": ["centred"],
                                               "grid.init_scale": [4.0**-6]}))
        spec = runs[0]
        data = dataset_of(spec)
        bare = bare_gradient(spec, data)
        wall, evals = in_loop(spec, data)
        per = wall / evals
        out[d] = {"bare_s": bare, "in_loop_s": per, "evals": evals, "wall_s": wall, "ratio": per / bare}
        print(f"d = {d:4d}, m = {spec.model.width}: {evals} gradient evaluations in {wall:.2f} s -> {per * 1e6:8.1f} us "
              f"each in the loop; bare jitted gradient {bare * 1e6:8.1f} us; ratio {per / bare:5.2f}x (target <= 3x)")
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
