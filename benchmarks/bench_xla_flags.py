"""XLA CPU defaults: `implicitbias` turns XLA's CPU fusion emitters off (`--xla_cpu_use_fusion_emitters=false`,
see `implicitbias._xla_cpu_defaults`).  This measures the choice against XLA's own default in the same run.

Each workload runs in a fresh process, once with IMPLICITBIAS_XLA_DEFAULTS=0 (XLA's default) and once with
our default, the persistent compilation cache off, alternating, `--repeat` times (the median is printed):
- `gf-compile`: a small gradient-flow run (two-layer ReLU net, m = 20, d = 4, RKC): seconds of XLA compilation
  (JAX's `backend_compile_duration` events) and the whole `train` call;
- the quick variants of a few experiments (`implicitbias run NAME --quick --workers 0`): wall time of the
  process, imports included.
Ratios are XLA default / ours (above 1: ours is faster).

    python benchmarks/bench_xla_flags.py                 # ~4 min on 2 cores
    python benchmarks/bench_xla_flags.py --repeat 1 --experiments frei2023-kkt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GF_SCRIPT = r"""
import json, time
import jax, jax.monitoring
compile_s = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, d, **kw: compile_s.append(d) if event.endswith("backend_compile_duration") else None)
from implicitbias.data import TeacherNeuron
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop
from implicitbias.training.train import train
data = TeacherNeuron(d=4, scheme="centred", n_test=0).generate(0)
net = TwoLayer(width=20, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
t = time.perf_counter()
train(net, data, Loss(name="square"), GradientFlow(solver="rkc", rtol=1e-6), stop=Stop(loss_tol=1e-6, max_time=100.0),
      checkpoints=5)
print(json.dumps({"compile_s": sum(compile_s), "train_s": time.perf_counter() - t}))
"""

EXPERIMENTS = ("frei2023-kkt", "frei2023-xor", "chistikov2023-fig1", "arora2019-deep-completion")


def _env(ours: bool) -> dict:
    return {**os.environ, "IMPLICITBIAS_JAX_CACHE": "0", "IMPLICITBIAS_XLA_DEFAULTS": "1" if ours else "0"}


def gf(ours: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", GF_SCRIPT], env=_env(ours), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def experiment(name: str, ours: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "implicitbias.cli", "run", name, "--quick", "--workers", "0",
                        "--no-progress", "--out", tmp], env=_env(ours), capture_output=True, check=True)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--experiments", nargs="*", default=list(EXPERIMENTS))
    args = parser.parse_args()
    rows = []
    samples = {True: [], False: []}
    for _ in range(args.repeat):
        for ours in (False, True):
            samples[ours].append(gf(ours))
    for key in ("compile_s", "train_s"):
        base = statistics.median(s[key] for s in samples[False])
        mine = statistics.median(s[key] for s in samples[True])
        rows.append((f"gf-compile: {key}", base, mine))
    for name in args.experiments:
        walls = {True: [], False: []}
        for _ in range(args.repeat):
            for ours in (False, True):
                walls[ours].append(experiment(name, ours))
        rows.append((f"{name} --quick: wall s", statistics.median(walls[False]), statistics.median(walls[True])))
    print(f"{'workload':<48} {'XLA default':>12} {'ours':>10} {'ratio':>7}")
    for label, base, mine in rows:
        print(f"{label:<48} {base:12.2f} {mine:10.2f} {base / mine:7.2f}x")


if __name__ == "__main__":
    main()
