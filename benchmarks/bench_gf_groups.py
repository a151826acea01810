"""One real gradient-flow call with and without advancing the running members in groups.

`chistikov2023-fig1`, uncentred data, d = 64, trial 0: 16 lambdas, of which 12 run to the time budget
and two need ~5e4 and ~8e4 gradient evaluations.  Prints the wall time of each checkpoint's chunk, the
group sizes after it, and the total; the gradient evaluations of every member must be the same both ways.

    python benchmarks/bench_gf_groups.py              # grouped (the default of `train`)
    python benchmarks/bench_gf_groups.py --no-compact # the whole batch in lockstep
"""

from __future__ import annotations

import argparse
import importlib
import time

import jax
import numpy as np

from implicitbias.experiments import get
from implicitbias.runs.execute import dataset_of
from implicitbias.training import train

T = importlib.import_module("implicitbias.training.train")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-compact", action="store_true", help="advance the whole batch in lockstep")
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--scheme", default="uncentred")
    args = parser.parse_args()
    exp = get("chistikov2023-fig1")
    cfg = exp.resolve(overrides={"trials": 1, "grid.data.d": [args.d], "grid.data.scheme": [args.scheme]})
    runs = exp.runs(cfg)  # one trial: the 16 lambdas of one data set, batched in one call here
    cell, data = runs[0], dataset_of(runs[0])
    batch = {"seed": [r.seed for r in runs], "init_scale": [r.init_scale for r in runs]}
    real = T._Active.advance

    def timed(self, advance, carry, target):
        start = time.perf_counter()
        out = real(self, advance, carry, target)
        jax.block_until_ready(out["theta"])
        groups = None if self.groups is None else [len(m) for m, _, _ in self.groups]
        running = int((np.asarray(out["status"]) == 0).sum())
        print(f"t = {target:10.3g}: {time.perf_counter() - start:7.2f} s, running {running:2d}, groups {groups}",
              flush=True)
        return out

    T._Active.advance = timed
    start = time.perf_counter()
    ds = train(cell.model, data, cell.loss, cell.method, stop=cell.stop, batch=batch,
               checkpoints=cell.checkpoints, kkt=False, compact=not args.no_compact)
    print(f"total {time.perf_counter() - start:.1f} s (compact={not args.no_compact}); gradient evaluations per "
          f"member: {np.sort(ds.grad_evals.values[:, -1]).tolist()}")


if __name__ == "__main__":
    main()
