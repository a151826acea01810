"""Time to first step: seconds from calling `train` to its first recorded checkpoint, per experiment.

For every catalogued experiment, the first task of its quick variant (the runs one sweep task trains in
one compiled call, `group_runs`) is trained in a fresh Python process, three times:

- cold: persistent compilation cache off (what a first run on a new machine pays: tracing + XLA);
- first / warm: with an empty persistent cache directory, then again with the cache the first process
  wrote (what every later run of the same shapes pays, e.g. a rerun, a `--set` of a traced value, or
  another worker of a sweep).

`train` records `first_checkpoint_s` itself: entering `train` to the first checkpoint row on the host
(initialisation, tracing, compilation or cache load, the first advance and the first record).  Each child
calls the same task twice; the second call is compiled, so its `first_checkpoint_s` is the first chunk's own
work, and the start-up printed is the difference (what the issue calls time to first step).  Import time is
not included; it is printed separately (`import implicitbias` and the experiment modules).

    python benchmarks/bench_first_step.py [--only NAME,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import implicitbias
from implicitbias.experiments import get
from implicitbias.runs.spec import group_runs
from implicitbias.runs.execute import train_group
T = sys.modules["implicitbias.training.train"]
imported = time.perf_counter() - t0
exp = get(sys.argv[1])
runs = exp.runs(exp.resolve(quick=True))
group = group_runs(runs)[0]
seen = {}
original = T.train
def timed(*a, **k):
    ds = original(*a, **k)
    seen["first"] = ds.attrs["first_checkpoint_s"]
    seen["wall"] = ds.attrs["wall_time_s"]
    return ds
T.train = timed
train_group(group)
first, wall = seen["first"], seen["wall"]
train_group(group)  # the same call again, compiled: what the first chunk itself costs
print(json.dumps({"import_s": imported, "first_s": first, "again_s": seen["first"], "wall_s": wall,
                  "startup_s": max(first - seen["first"], 0.0), "runs": len(group), "method": group[0].method.kind}))
"""


def child(name: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, name], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated experiment names (default: every experiment)")
    parser.add_argument("--json")
    args = parser.parse_args()
    from implicitbias.experiments.registry import catalog

    todo = args.only.split(",") if args.only else list(catalog())
    base = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    print(f"load average {os.getloadavg()[0]:.2f}; {len(todo)} experiments; first task of each quick variant")
    print("start-up = first checkpoint of the first call - first checkpoint of the same call again (compiled);")
    print("chunk = that compiled first checkpoint (the first chunk's own work, not start-up)")
    print(f"{'experiment':34s} {'method':>7s} {'runs':>4s} {'cold':>7s} {'warm':>7s} {'chunk':>7s} {'import':>7s}")
    out, started = {}, time.perf_counter()
    for name in todo:
        with tempfile.TemporaryDirectory() as cache:
            cold = child(name, {**base, "IMPLICITBIAS_JAX_CACHE": "0"})
            env = {**base, "IMPLICITBIAS_JAX_CACHE": "1", "IMPLICITBIAS_CACHE_DIR": cache}
            first = child(name, env)
            warm = child(name, env)
        out[name] = {"cold": cold, "first": first, "warm": warm}
        if "error" in cold or "error" in warm:
            print(f"{name:34s} error: {cold.get('error') or warm.get('error')}")
            continue
        print(f"{name:34s} {cold['method']:>7s} {cold['runs']:4d} {cold['startup_s']:6.2f}s {warm['startup_s']:6.2f}s "
              f"{warm['again_s']:6.2f}s {warm['import_s']:6.2f}s")
    ok = [v for v in out.values() if "startup_s" in v["warm"] and "startup_s" in v["cold"]]
    if ok:
        worst_cold = max(v["cold"]["startup_s"] for v in ok)
        worst_warm = max(v["warm"]["startup_s"] for v in ok)
        print(f"worst cold {worst_cold:.2f} s, worst warm {worst_warm:.2f} s (target <= 3 s); "
              f"load average after {os.getloadavg()[0]:.2f}; {time.perf_counter() - started:.0f} s in all")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
