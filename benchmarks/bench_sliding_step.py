"""What the sliding flow's pieces cost, in plain gradient evaluations measured in the same run.

`GradientFlow(kinks="slide")` (`implicitbias.training.sliding`) evaluates a projected field at every stage of RKC and,
after every accepted step, tests for crossings, solves the sliding QP, prepares the new set (Gram matrices and
their inverses) and projects the neurons onto their kinks.  This benchmark times each piece, jitted, on Figure 1's
network (m = 200, both layers trained, the square loss) and a data set of n = d points, with `--held` pairs held on
half the neurons (their first slots), and prints it in milliseconds and as a ratio to the plain gradient
(`jax.value_and_grad` of the risk) timed beside it: above 1, the piece costs more than one plain evaluation.

    python benchmarks/bench_sliding_step.py                      # d = 256 and 1024, 4 and 12 pairs held
    python benchmarks/bench_sliding_step.py --d 1024 --held 12 --repeat 100

The end-of-step handling (`handle`) is timed with `--crossings` pairs (default 100) that crossed their kink over the
step; the QP (`sliding`) and the preparation (`prepare`) are also timed alone.  Each time is the median of
`--rounds` rounds of `--repeat` calls.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import implicitbias  # noqa: F401  (float64)
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.training.problem import Problem
from implicitbias.training.sliding import _Kinks


def _time(fn, args, repeat: int, rounds: int) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - start) / repeat)
    return statistics.median(times)


def measure(d: int, held: int, slots: int, crossings: int, repeat: int, rounds: int, m: int = 200) -> dict[str, float]:
    """Seconds per call of each piece on one member (see the module docstring)."""
    rng = np.random.default_rng(0)
    X = jnp.asarray((rng.standard_normal((d, d)) + 1.0) / np.sqrt(d))
    y = jnp.asarray(np.maximum(rng.standard_normal(d), 0.0))
    problem = Problem(TwoLayer(width=m, activation="relu", train_outer=True, init_scheme="gaussian"), Loss(name="square"))
    hp = {"seed": 0, "init_scale": 1.0}
    theta, const = problem.init(hp, d)
    kinks = _Kinks(problem, hp, const, X, y, min(slots, d), 512)
    S = -np.ones((m, kinks.K), np.int64)
    S[: m // 2, :held] = np.stack([rng.choice(d, held, replace=False) for _ in range(m // 2)])
    S = jnp.asarray(S)
    args = jax.jit(kinks.prepare)(S)
    end, _ = jax.jit(kinks.value_and_field)(0.0, theta, args)
    # pre-activations at the start of the step: `crossings` pairs off the held set on the other side
    Z1 = np.asarray(end["Z"])
    free = np.argwhere(~np.asarray(args["mask"]))
    flip = free[rng.choice(len(free), crossings, replace=False)]
    Z0 = Z1.copy()
    Z0[flip[:, 0], flip[:, 1]] *= -1.0
    Z0 = jnp.asarray(Z0)
    a = kinks.outer(theta)
    b = jnp.take_along_axis(end["CXX"], jnp.maximum(S, 0), axis=1)
    pieces = {
        "plain gradient": (jax.jit(lambda th: jax.value_and_grad(lambda t: problem.risk(hp, t, const, X, y))(th)),
                           (theta,)),
        "sliding field": (jax.jit(lambda th, ar: kinks.value_and_field(0.0, th, ar)), (theta, args)),
        "handle (after a step)": (jax.jit(kinks.handle), (theta, args, Z0, end)),
        "  of which the QP": (jax.jit(kinks.sliding), (b, a, end["g"], S)),
        "  of which prepare": (jax.jit(kinks.prepare), (S,)),
    }
    return {name: _time(fn, fargs, repeat, rounds) for name, (fn, fargs) in pieces.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, nargs="*", default=[256, 1024], help="dimensions (n = d points)")
    p.add_argument("--held", type=int, nargs="*", default=[4, 12], help="pairs held on each of half the neurons")
    p.add_argument("--slots", type=int, default=24, help="kink_slots (default: the method's, 24)")
    p.add_argument("--crossings", type=int, default=100, help="pairs that crossed their kink over the step")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5)
    opts = p.parse_args()
    print(f"jax {jax.__version__}, {jax.default_backend()}, m = 200, {opts.slots} slots, "
          f"{opts.crossings} crossings; median of {opts.rounds} rounds of {opts.repeat} calls")
    for d in opts.d:
        for held in opts.held:
            times = measure(d, held, opts.slots, opts.crossings, opts.repeat, opts.rounds)
            base = times["plain gradient"]
            print(f"\nd = n = {d}, {held} pairs held on half the neurons")
            for name, seconds in times.items():
                print(f"  {name:24s} {seconds * 1e3:8.3f} ms   {seconds / base:5.2f} x the plain gradient")


if __name__ == "__main__":
    main()
