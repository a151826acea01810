"""A batch of runs in one vmapped `train` call against the same runs one `train` call at a time.

16 init scales of the S1 model (Frei et al.'s two-layer leaky ReLU network, fixed outer layer, logistic
loss, float64, full-batch GD) on one mid-size problem, trained for the same number of steps:

- batched:    one call, `train(..., batch={"init_scale": [16 values]})`;
- sequential: 16 calls, `train(..., init_scale=s)`, one per scale.

Both are warmed up first with the same shapes (the compiled functions are cached by `train`), so neither
timing contains compilation; each timing is a whole `train` call (recording at steps 0 and K, kkt=False), the
time a user waits.  The final parameters of the two are compared before timing.

    python benchmarks/bench_vmap.py [--quick] [--repeats 3] [--json results.json]

Target: the batched call at least 1.5x faster per run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

N_RUNS = 16
FULL = {"n": 100, "d": 500, "m": 50, "steps": 2000}
QUICK = {"n": 50, "d": 200, "m": 20, "steps": 300}
TARGET = 1.5


def make_problem(n: int, d: int, m: int, seed: int = 0):
    from implicitbias.data import GaussianMixture
    from implicitbias.losses import Loss
    from implicitbias.models.two_layer import TwoLayer
    from implicitbias.training.methods import GD

    data = GaussianMixture(n=n, d=d, n_test=0).generate(seed)
    model = TwoLayer(width=m, activation="leaky_relu", gamma=0.5, train_outer=False,
                     outer_scale="inv_sqrt_width", outer_signs="balanced")
    lr = 0.5 / float(np.max(np.sum(data.X**2, axis=1)))  # well below 2 / beta
    return data, model, Loss(name="logistic"), GD(lr=lr)


def init_scales() -> list[float]:
    return [float(s) for s in np.logspace(-4, -1, N_RUNS)]


def run_batched(problem, steps: int, scales: list[float]):
    from implicitbias.training.stopping import Stop
    from implicitbias.training.train import train

    data, model, loss, method = problem
    return train(model, data, loss, method, stop=Stop(max_steps=steps), checkpoints=[0, steps], kkt=False,
                 batch={"init_scale": scales})


def run_sequential(problem, steps: int, scales: list[float]):
    from implicitbias.training.stopping import Stop
    from implicitbias.training.train import train

    data, model, loss, method = problem
    return [train(model, data, loss, method, stop=Stop(max_steps=steps), checkpoints=[0, steps], kkt=False,
                  init_scale=s) for s in scales]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def check_agreement(batched, sequential, steps: int) -> float:
    """Max relative difference of the final W between the batched and the one-by-one runs."""
    worst = 0.0
    for r, ds in enumerate(sequential):
        for name, res in (("batched", batched), ("sequential", ds)):
            i = r if name == "batched" else 0
            if int(res["step"].values[i, -1]) != steps:
                raise RuntimeError(f"{name} run {r} stopped at step {int(res['step'].values[i, -1])} before "
                                   f"{steps}: {res['message'].values[i]}")
        Wb, Ws = batched["theta.W"].values[r], ds["theta.W"].values[0]
        worst = max(worst, float(np.max(np.abs(Wb - Ws)) / max(np.max(np.abs(Ws)), 1e-300)))
    if not worst < 1e-8:
        raise RuntimeError(f"batched and sequential runs disagree: max relative difference of W {worst:.2e}")
    return worst


def load_average() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:  # pragma: no cover
        return None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"smoke run: a small problem ({QUICK})")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats of each (median kept)")
    parser.add_argument("--json", type=str, default=None, help="write the results to this JSON file")
    args = parser.parse_args(argv)

    import jax

    import implicitbias  # noqa: F401  (enables float64 in JAX)

    cfg = QUICK if args.quick else FULL
    repeats = args.repeats or (1 if args.quick else 3)
    problem = make_problem(cfg["n"], cfg["d"], cfg["m"])
    scales, steps = init_scales(), cfg["steps"]
    load_before = load_average()

    # warm-up (compilation) and agreement
    t_first_b = timed(lambda: run_batched(problem, steps, scales[:]))
    t_first_s = timed(lambda: run_sequential(problem, steps, scales[:1]))
    agreement = check_agreement(run_batched(problem, steps, scales), run_sequential(problem, steps, scales),
                                steps)

    times = {"batched": [], "sequential": []}
    for _ in range(repeats):  # interleaved, so that a change of load hits both alike
        times["batched"].append(timed(lambda: run_batched(problem, steps, scales)))
        times["sequential"].append(timed(lambda: run_sequential(problem, steps, scales)))
    med = {k: statistics.median(v) for k, v in times.items()}
    per_run = {k: v / N_RUNS for k, v in med.items()}
    ratio = med["sequential"] / med["batched"]
    flops = 4.0 * cfg["n"] * cfg["d"] * cfg["m"] * steps * N_RUNS

    print(f"\n{N_RUNS} init scales of the S1 model, (n, d, m) = ({cfg['n']}, {cfg['d']}, {cfg['m']}), "
          f"{steps} GD steps each, float64, median of {repeats}")
    print(f"first calls (with compilation): batched {t_first_b:.2f} s, one sequential run {t_first_s:.2f} s")
    print(f"batched and sequential final W agree to {agreement:.1e} (relative)")
    head = f"{'mode':>11} {'total s':>9} {'ms/run':>9} {'steps/s/run':>12} {'GFLOP/s':>9}"
    print(head)
    print("-" * len(head))
    for k in ("batched", "sequential"):
        print(f"{k:>11} {med[k]:>9.3f} {1e3 * per_run[k]:>9.2f} {steps / per_run[k]:>12.0f} "
              f"{flops / med[k] / 1e9:>9.2f}")
    ok = ratio >= TARGET
    print(f"\nbatched speed-up per run (sequential / batched): {ratio:.2f}x  "
          f"[{'PASS' if ok else 'MISS'}: target >= {TARGET}x]")
    if args.quick:
        print(f"(quick run: a smoke test; the target is set for the full problem {FULL})")
    out = {
        "benchmark": "vmap", "quick": bool(args.quick), "config": cfg, "n_runs": N_RUNS,
        "init_scales": scales,
        "repeats": repeats, "times_s": times, "median_s": med, "per_run_s": per_run, "speedup": ratio,
        "target": TARGET, "pass": ok, "agreement_relative": agreement, "first_call_s": {
            "batched": t_first_b, "sequential_one_run": t_first_s},
        "load_average_before": load_before, "load_average_after": load_average(),
        "machine": {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__,
                    "cpus": os.cpu_count()},
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
        print(f"results written to {args.json}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
