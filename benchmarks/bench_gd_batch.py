"""What a GD step costs one member in batches of different sizes: the basis of `task_sizes()`'s 16 on a CPU.

A sweep trains fixed-step runs that share a static part as vmapped batches (one batch a task).  On a CPU a
wider batch does not compute more member-steps per second once a member's matmuls dominate, and a batch
advances until its slowest member stops, so large tasks gather a sweep's slowest members on one worker.  This
benchmark times the compiled GD loop of S11's network (`chistikov2023-fig1`'s: m = 200, ReLU, both layers,
square loss, float64) for batches of B members at each d, by difference (T(K2 steps) - T(K1 steps), after a
warm-up call: compilation and checkpoint records cancel), and prints the microseconds per member-step and the
ratio to B = 1 measured in the same run.

    python benchmarks/bench_gd_batch.py [--dims 4,16] [--sizes 1,8,16,32,64] [--steps 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.training import GD, Stop, train

NET = TwoLayer(width=200, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")


def seconds(data, size: int, steps: int) -> float:
    start = time.perf_counter()
    # loss_tol = 0: every member runs all the steps (a small init keeps the loss far from 0 anyway)
    train(NET, data[:size] if size > 1 else data[0], Loss(name="square"), GD(lr=0.01),
          stop=Stop(loss_tol=0, max_steps=steps), batch={"init_scale": [1e-3] * size, "seed": list(range(size))},
          checkpoints=[0, steps], kkt=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="4,16")
    parser.add_argument("--sizes", default="1,8,16,32,64")
    parser.add_argument("--steps", type=int, default=20_000, help="steps timed (the difference of two calls)")
    parser.add_argument("--json")
    args = parser.parse_args()
    sizes = [int(b) for b in args.sizes.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs", flush=True)
    out = []
    for d in [int(x) for x in args.dims.split(",")]:
        data = [TeacherNeuron(d=d, scheme="uncentred").generate(seed=s) for s in range(max(sizes))]
        base = None
        for size in sizes:
            seconds(data, size, 1000)  # compile
            per = (seconds(data, size, 2000 + args.steps) - seconds(data, size, 2000)) / args.steps / size
            base = base or per
            out.append({"d": d, "members": size, "us_per_member_step": per * 1e6, "ratio_to_one": per / base})
            print(f"d = {d:3d}, batch of {size:3d}: {per * 1e6:6.2f} us a member-step, {per / base:.2f} x one member "
                  "alone", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
