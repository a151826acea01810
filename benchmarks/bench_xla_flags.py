"""XLA CPU defaults: `implicitbias` turns XLA's CPU fusion emitters off (`--xla_cpu_use_fusion_emitters=false`,
see `implicitbias._xla_cpu_defaults`), and the test suite also compiles with LLVM's -O1
(`--xla_backend_optimization_level=1`, set in `tests/conftest.py`).  This measures both against XLA's own
defaults, in the same run.

Each workload runs in a fresh process per configuration, the persistent compilation cache off, the
configurations in turn, `--repeat` times (the median is printed):
- `gf-compile`: a small gradient-flow run (two-layer ReLU net, m = 20, d = 4, RKC): seconds of XLA compilation
  (JAX's `backend_compile_duration` events) and the whole `train` call;
- `gf-runs`: 38 gradient-flow runs of `chistikov2023-fig1`'s d = 16 column, one at a time, timed after two
  runs that compile (what a sweep's worker does once compiled);
- `gd-steps`: 2000 GD steps of the S1 network at (n, d, m) = (100, 1000, 100), timed compiled;
- the quick variants of a few experiments (`implicitbias run NAME --quick --workers 0`): wall time of the
  process, imports included.
Ratios are XLA's default / each configuration (above 1: faster than XLA's default).

    python benchmarks/bench_xla_flags.py                 # ~8 min on 2 cores
    python benchmarks/bench_xla_flags.py --repeat 1 --experiments frei2023-kkt
    python benchmarks/bench_xla_flags.py --configs "ours;ours, split 2"

`ours, split 2`: each program's LLVM module compiled in 2 parts (`--xla_cpu_parallel_codegen_split_count`; XLA's
default is 32 parts, on threads of their own).  The test suite compiles in one part (tests/conftest.py).
Measured 2026-12-07 (`--configs "ours;ours, split 2"`, medians of 2, idle): XLA compile of the small run 3.35 s ->
2.70 s, 38 compiled runs 14.19 s -> 13.55 s, GD 1137 -> 1162 steps/s, frei2023-kkt --quick 17.69 s -> 17.10 s,
chistikov2023-fig1 --quick 14.07 s -> 15.31 s: one process using both cores gains little, so the package keeps
XLA's default; the suite's two processes on two cores gain 7% (benchmarks/bench_test_suite.py, config split-32).
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

COMPILE_SCRIPT = r"""
import json, time
import jax, jax.monitoring
compile_s = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, d, **kw: compile_s.append(d) if event.endswith("backend_compile_duration") else None)
from implicitbias.papers.chistikov2023.data import TeacherNeuron
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

RUNS_SCRIPT = r"""
import json, time
from implicitbias.experiments import get
from implicitbias.runs.execute import train_group
exp = get("chistikov2023-fig1")
runs = exp.runs(exp.resolve(overrides={"grid.data.d": [16]}))[::4]
for group in (runs[:1], runs[1:2]):
    train_group(group)
t = time.perf_counter()
for run in runs[2:]:
    train_group([run])
print(json.dumps({"seconds": time.perf_counter() - t, "runs": len(runs) - 2}))
"""

GD_SCRIPT = r"""
import json, time
from implicitbias.data import GaussianMixture
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.training.methods import GD
from implicitbias.training.stopping import Stop
from implicitbias.training.train import train
data = GaussianMixture(n=100, d=1000, n_test=0).generate(0)
net = TwoLayer(width=100)
def run(k):
    return train(net, data, Loss(name="logistic"), GD(lr=0.01), stop=Stop(max_steps=10**9), checkpoints=[0, k], kkt=False)
run(1), run(2001)  # compile
t = time.perf_counter(); run(1); fixed = time.perf_counter() - t
t = time.perf_counter(); run(2001); total = time.perf_counter() - t
print(json.dumps({"steps_per_s": 2000 / (total - fixed)}))
"""

EXPERIMENTS = ("frei2023-kkt", "chistikov2023-fig1")

#: configuration -> (IMPLICITBIAS_XLA_DEFAULTS, XLA_FLAGS)
CONFIGS = {
    "XLA default": ("0", ""),
    "ours": ("1", ""),
    "ours, -O1 (tests)": ("1", "--xla_backend_optimization_level=1"),
    "ours, split 2": ("1", "--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=2"),
}


def _env(config: str) -> dict:
    defaults, flags = CONFIGS[config]
    env = {**os.environ, "IMPLICITBIAS_JAX_CACHE": "0", "IMPLICITBIAS_XLA_DEFAULTS": defaults}
    env.pop("XLA_FLAGS", None)
    if flags:
        env["XLA_FLAGS"] = flags
    return env


def script(source: str, config: str) -> dict:
    out = subprocess.run([sys.executable, "-c", source], env=_env(config), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def experiment(name: str, config: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "implicitbias.cli", "run", name, "--quick", "--workers", "0",
                        "--no-progress", "--out", tmp], env=_env(config), capture_output=True, check=True)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--experiments", nargs="*", default=list(EXPERIMENTS))
    parser.add_argument("--configs", default=";".join(CONFIGS),
                        help="separated by ';', the first is the baseline; from: " + "; ".join(CONFIGS))
    args = parser.parse_args()
    chosen = [c.strip() for c in args.configs.split(";")]
    unknown = [c for c in chosen if c not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; allowed: {'; '.join(CONFIGS)}")
    selected = {name: CONFIGS[name] for name in chosen}  # in the order given: the first is the baseline
    CONFIGS.clear()
    CONFIGS.update(selected)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    workloads = [
        ("gf-compile: XLA compile s", lambda c: script(COMPILE_SCRIPT, c)["compile_s"], False),
        ("gf-compile: train s", None, False),
        ("gf-runs: 38 compiled runs s", lambda c: script(RUNS_SCRIPT, c)["seconds"], False),
        ("gd-steps: steps/s", lambda c: script(GD_SCRIPT, c)["steps_per_s"], True),
    ] + [(f"{name} --quick: wall s", (lambda c, name=name: experiment(name, c)), False) for name in args.experiments]
    rows = []
    for label, fn, higher in workloads:
        if fn is None:
            continue
        samples = {c: [] for c in CONFIGS}
        train_s = {c: [] for c in CONFIGS}
        for _ in range(args.repeat):
            for config in CONFIGS:
                if label.startswith("gf-compile"):
                    out = script(COMPILE_SCRIPT, config)
                    samples[config].append(out["compile_s"])
                    train_s[config].append(out["train_s"])
                else:
                    samples[config].append(fn(config))
        rows.append((label, {c: statistics.median(v) for c, v in samples.items()}, higher))
        if label.startswith("gf-compile"):
            rows.append(("gf-compile: train s", {c: statistics.median(v) for c, v in train_s.items()}, False))
        print(f"  done: {label}", flush=True)
    names = list(CONFIGS)
    print(f"{'workload':<40}" + "".join(f"{n:>14}" for n in names) + "".join(f"{'ratio ' + n:>20}" for n in names[1:]))
    for label, med, higher in rows:
        base = med[names[0]]
        ratios = [(med[n] / base if higher else base / med[n]) for n in names[1:]]
        print(f"{label:<40}" + "".join(f"{med[n]:14.2f}" for n in names) + "".join(f"{r:19.2f}x" for r in ratios))
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
