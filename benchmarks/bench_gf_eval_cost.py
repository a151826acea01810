"""The cost of one gradient evaluation inside the gradient-flow loop, against one bare jitted gradient.

For `chistikov2023-fig1`'s network (m = 200, both layers trained, ReLU, square loss) at d = 16 and 64:
one gradient-flow run (lambda = 4^-6, trial 0, centred data), timed compiled, divided by its gradient
evaluations; against the median time of `jax.jit(jax.grad(risk))` on the same parameters (its dispatch
included).  Every time is measured twice: wall clock, and the CPU time of this process (all its threads),
which other processes on a loaded machine disturb much less.  Two loops are timed:

- solver loop: the method's own stepping (`GradientFlow.stepper`), vmapped and jitted as `train` does, advanced
  checkpoint by checkpoint; what the solver, the stopping rule and the step-size control add to every
  evaluation.  The target (issue 7) is a ratio <= 3 for this one.
- train: the whole `train` call, which also records the metrics of every checkpoint (singular values,
  neuron angles, ...) and builds the dataset.

    python benchmarks/bench_gf_eval_cost.py [--dims 16,64] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from implicitbias.experiments import get
from implicitbias.runs.execute import dataset_of
from implicitbias.training import train
from implicitbias.training.batch import build_batch
from implicitbias.training.problem import Problem
from implicitbias.training.stopping import Status


def clocks() -> np.ndarray:
    return np.array([time.perf_counter(), time.process_time()])


def bare_gradient(spec, data) -> np.ndarray:
    """(wall, CPU) seconds of one call, medians over 7 timings."""
    problem = Problem(spec.model, spec.loss)
    hp = {"seed": np.asarray(spec.seed), "init_scale": np.asarray(spec.init_scale)}
    theta, const = problem.init(hp, data.d)
    grad = jax.jit(jax.grad(lambda th: problem.risk(hp, th, const, data.X, data.y)))
    jax.block_until_ready(grad(theta))
    times = []
    for _ in range(7):
        n = 1
        while True:
            start = clocks()
            for _ in range(n):
                out = grad(theta)
            jax.block_until_ready(out)
            elapsed = clocks() - start
            if elapsed[0] > 0.2:
                break
            n *= 2
        times.append(elapsed / n)
    return np.median(times, axis=0)


def solver_loop(spec, data):
    """A function running the gradient flow of `spec` to its end, checkpoint by checkpoint, without records;
    it returns ((wall, CPU) seconds, gradient evaluations)."""
    problem, method, stop = Problem(spec.model, spec.loss), spec.method, spec.stop
    hp, _ = build_batch(spec.model, method, spec.seed, spec.init_scale, None)
    hp = jax.tree_util.tree_map(jnp.asarray, hp)
    X, y = jnp.asarray(data.X), jnp.asarray(data.y)
    init_carry, advance = method.stepper(problem, stop, X.shape[-2])

    def init_member(hp, X, y):
        theta, const = problem.init(hp, X.shape[-1])
        return init_carry(hp, theta, const, X, y), const

    init = jax.jit(jax.vmap(init_member, in_axes=(0, None, None)))
    adv = jax.jit(jax.vmap(advance, in_axes=(0, None, 0, 0, None, None)))
    grid = method.checkpoint_grid(spec.checkpoints, stop)

    def once():
        start = clocks()
        carry, const = init(hp, X, y)
        for target in grid:
            carry = adv(carry, target, hp, const, X, y)
            if not np.any(np.asarray(carry["status"]) == Status.RUNNING):
                break
        return clocks() - start, int(carry["evals"][0])

    return once


def train_run(spec, data):
    def once():
        start = clocks()
        ds = train(spec.model, data, spec.loss, spec.method, stop=spec.stop, seed=spec.seed, init_scale=spec.init_scale,
                   checkpoints=spec.checkpoints, kkt=False)
        return clocks() - start, int(ds["grad_evals"].values[0, -1])

    return once


def timed(once, repeat: int) -> tuple[np.ndarray, int]:
    once()  # compile
    runs = [once() for _ in range(repeat)]
    return np.median([w for w, _ in runs], axis=0), runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="16,64")
    parser.add_argument("--repeat", type=int, default=3)
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
        out[d] = {"bare_s": bare[0], "bare_cpu_s": bare[1]}
        print(f"d = {d:4d}, m = {spec.model.width}: bare jitted gradient {bare[0] * 1e6:8.1f} us wall, "
              f"{bare[1] * 1e6:8.1f} us CPU")
        for name, make in (("solver loop", solver_loop), ("train", train_run)):
            (wall, cpu), evals = timed(make(spec, data), args.repeat)
            ratio, ratio_cpu = wall / evals / bare[0], cpu / evals / bare[1]
            out[d][name] = {"in_loop_s": wall / evals, "in_loop_cpu_s": cpu / evals, "evals": evals, "wall_s": wall,
                            "cpu_s": cpu, "ratio": ratio, "ratio_cpu": ratio_cpu}
            target = " (target <= 3x)" if name == "solver loop" else " (checkpoint records included)"
            print(f"    {name:11s}: {evals} gradient evaluations in {wall:6.2f} s -> {wall / evals * 1e6:8.1f} us each; "
                  f"ratio {ratio:5.2f}x wall, {ratio_cpu:5.2f}x CPU{target}", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
