"""Does this jaxlib deadlock when two batched LAPACK operations of one compiled program run at once?

Found for issue 40: the sliding-flow prototype at d = 1024, K = 48 hung after 40 accepted steps, every thread
parked.  gdb showed two of XLA's CPU worker threads ("tf_XLAEigen") inside `lapack_dtrsm_ffi`, each waiting in
`jax::ParallelBatchMap` (an `absl::BlockingCounter`) for the parts of its batch it had handed to the same thread
pool: with both workers waiting, no thread is left to run those parts.  `--xla_cpu_multi_thread_eigen=false` did
not help.  The prototype now solves its small SPD systems with a Cholesky factorisation in XLA's own operations
(`prototype_sliding_flow.spd_solve`).  In the package, only the kvaerno5 solver of gradient flow solves linear systems
(lineax's LU in its Newton iterations, one after another: the one-chain case, which finishes).

Each case below runs in a process of its own under a timeout: a jitted loop of 20 iterations that applies the
operation to two independent batches (two chains XLA may run side by side), called 200 times.  A case that has not
finished within --timeout seconds is reported as hanging.  Run it again after upgrading jax:

    python benchmarks/check_batched_solve_deadlock.py            # solve, svd and qr at batch 200, 48 x 48
    python benchmarks/check_batched_solve_deadlock.py --ops solve --batch 8 --size 4

Measured with jax/jaxlib 0.10.2 on the 2-core machine of issue 40: `solve` with two chains hangs after its first
call; `solve` with one chain, `svd` and `qr` with two, and `solve` at batch 8 of 4 x 4 finish.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CASE = r"""
import sys, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
op, B, K, chains = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
keys = jax.random.split(jax.random.PRNGKey(0), 4)
def spd(key):
    M = jax.random.normal(key, (B, K, 2 * K))
    return M @ M.transpose(0, 2, 1)
A1, A2 = spd(keys[0]), spd(keys[1])
b1, b2 = jax.random.normal(keys[2], (B, K, 1)), jax.random.normal(keys[3], (B, K, 1))
F = {"solve": lambda A, b: jnp.linalg.solve(A, b),
     "svd": lambda A, b: jnp.linalg.svd(A, compute_uv=False)[..., :1, None] * b,
     "qr": lambda A, b: jnp.linalg.qr(A)[1][..., :1] * b}[op]

@jax.jit
def loop(A1, A2, b1, b2):
    def body(i, c):
        x1, x2 = c
        return F(A1, x1) / 10.0, (F(A2, x2) / 10.0 if chains == 2 else x2)
    return jax.lax.fori_loop(0, 20, body, (b1, b2))

for i in range(200):
    jax.block_until_ready(loop(A1, A2, b1, b2))
"""


def run_case(op: str, batch: int, size: int, chains: int, timeout: float) -> str:
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", CASE, op, str(batch), str(size), str(chains)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"HANGS (no end within {timeout:.0f} s)"
    if proc.returncode != 0:
        return f"fails (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1] if proc.stderr else ''}"
    return f"finishes ({time.perf_counter() - started:.1f} s)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", nargs="+", default=["solve", "svd", "qr"], choices=["solve", "svd", "qr"])
    p.add_argument("--batch", type=int, default=200)
    p.add_argument("--size", type=int, default=48)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as hanging")
    args = p.parse_args()
    import jax
    import jaxlib

    print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}; batch {args.batch} of {args.size} x {args.size}")
    for op in args.ops:
        for chains in ((1, 2) if op == "solve" else (2,)):
            print(f"  {op:5s} {chains} chain{'s' if chains > 1 else ' '}: "
                  f"{run_case(op, args.batch, args.size, chains, args.timeout)}", flush=True)


if __name__ == "__main__":
    main()
