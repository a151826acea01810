"""Run every full variant (or the quick ones, or a filter of names), one after another, and record what each took.

Each variant runs in its own process, `implicitbias run NAME [--quick] --out DIR/NAME --no-progress`, from a fresh
output directory (nothing resumed) and, by default, a fresh empty JAX compile cache (`--cache cold`: every
measurement includes its compilations, so it does not depend on what ran before). While it runs, the process tree
(the CLI and every child: Dask's nanny and workers included) is polled with psutil every `--poll` seconds; the record
keeps

- the wall time of the process, and its CPU time (user + system, its own and that of every descendant it
  waited for: `getrusage(RUSAGE_CHILDREN)` of this process before and after);
- the peak memory: the largest sum of the resident set sizes of the tree's processes seen at one poll (pages
  shared between processes, e.g. the libraries each worker maps, count once per process: an upper bound);
- the machine's load average (1, 5, 15 minutes) just before, and the 1-minute load's mean and max while it ran
  (the machine is shared: a time says little without the load it was measured at);
- the exit code, the outcomes of its predictions and of its assumptions, counted apart (`checks.json`: how many
  hold, fail, are not evaluated, outside scope);
- the runs, steps and gradient evaluations of its training (`results.nc`: each run's last checkpoint);
- the commit of the source that ran (`--src`: a `git worktree` at a fixed commit keeps a long benchmark from
  picking up edits made to the working tree while it runs).

The records go to `src/implicitbias/experiments/runtimes.json` (`--record`, the default; `--no-record` only prints),
which `implicitbias list` reads: each variant's line shows the measured time with its date and load, or "not
measured yet". A table of the variants measured in this call is printed at the end, and `--json` writes it too.

    python benchmarks/bench_full_variants.py                       # every full variant
    python benchmarks/bench_full_variants.py --quick               # every quick variant
    python benchmarks/bench_full_variants.py arora2019-deep-completion frei2023-xor [--timeout 3600]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def source_commit(src: Path) -> str:
    """The commit of the source tree that runs (with "+dirty" when it has uncommitted changes), or "unknown"."""
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no", "--", "."],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def run_one(name: str, quick: bool, out: Path, *, cache: str, workers: int | None, timeout: float,
            poll: float, src: Path | None = None) -> dict:
    """Run one variant in a child process and measure it (the record of the module docstring, without the
    verdicts and counts, which `collect` adds from its output directory)."""
    if out.exists():
        shutil.rmtree(out)
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    cache_dir = None
    if cache == "cold":
        cache_dir = tempfile.mkdtemp(prefix="ib-bench-cache-")
        env["IMPLICITBIAS_CACHE_DIR"] = cache_dir
    cmd = [sys.executable, "-m", "implicitbias.cli", "run", name, "--out", str(out), "--no-progress"]
    if quick:
        cmd.append("--quick")
    if workers is not None:
        cmd += ["--workers", str(workers)]
    load_before = list(os.getloadavg())
    started_at = datetime.datetime.now(datetime.UTC)
    start = time.perf_counter()
    log = (out.parent / f"{out.name}.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    root = psutil.Process(proc.pid)
    peak, loads = 0, []
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed_out = False
    try:
        while proc.poll() is None:
            rss = 0
            for p in _tree(root):
                try:
                    rss += p.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            peak = max(peak, rss)
            loads.append(os.getloadavg()[0])
            if time.perf_counter() - start > timeout:
                timed_out = True
                for p in reversed(_tree(root)):
                    try:
                        p.kill()
                    except psutil.NoSuchProcess:
                        pass
                break
            time.sleep(poll)
    finally:
        code = proc.wait()
        log.close()
        if cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    record = {
        "date": started_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(peak / 2**20, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_during": {"mean": round(sum(loads) / len(loads), 2), "max": round(max(loads), 2)} if loads else {},
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "compile_cache": cache,
        "exit_code": code,
        "command": " ".join(["implicitbias", "run", name] + cmd[cmd.index("--no-progress") + 1:]),
    }
    if timed_out:
        record["timed_out_after_s"] = timeout
    return record


def collect(out: Path) -> dict:
    """Verdict counts from checks.json and the runs, steps and gradient evaluations from results.nc."""
    found: dict = {}
    checks = out / "checks.json"
    if checks.is_file():
        verdicts = json.loads(checks.read_text())
        for kind in ("prediction", "assumption"):
            found[f"{kind}s"] = dict(Counter(c.get("outcome", "?") for c in verdicts if c.get("kind") == kind))
    results = out / "results.nc"
    if results.is_file():
        from implicitbias.storage.stacked import load_results

        res = load_results(results)
        steps = evals = 0
        for ds in res.arrays:
            if "step" in ds:
                steps += int(ds["step"].isel(checkpoint=-1).sum())
            if "grad_evals" in ds:
                evals += int(ds["grad_evals"].isel(checkpoint=-1).sum())
        found.update(runs=len(res.runs), steps=steps, grad_evals=evals)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="experiments to run (default: every experiment in the catalogue)")
    parser.add_argument("--quick", action="store_true", help="the quick variants instead of the full ones")
    parser.add_argument("--out", default=None, help="where the runs' directories go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the runs' directories (default: removed after)")
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold",
                        help="cold: a fresh empty JAX compile cache per run (default); warm: the user's cache")
    parser.add_argument("--workers", type=int, default=None, help="passed to `implicitbias run` (default: its own)")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds before a run is stopped")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between memory and load samples")
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="print only; do not update src/implicitbias/experiments/runtimes.json")
    parser.add_argument("--runtimes", default=None, help="the run-time file to update (default: the package's)")
    parser.add_argument("--json", default=None, help="also write this call's table as JSON")
    parser.add_argument("--src", default=None,
                        help="import implicitbias from this source folder (e.g. the src of a `git worktree` at a fixed "
                             "commit), so that edits to the working tree during a long benchmark change nothing")
    args = parser.parse_args()

    from implicitbias.experiments import catalog
    from implicitbias.experiments.runtimes import describe, record_measurement

    known = catalog()
    names = args.names or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"error: unknown experiments {unknown}; expected names from `implicitbias list`", file=sys.stderr)
        return 2
    if args.poll <= 0 or args.timeout <= 0:
        print("error: --poll and --timeout must be > 0", file=sys.stderr)
        return 2
    variant = "quick" if args.quick else "full"
    src = Path(args.src).resolve() if args.src else None
    if src is not None and not (src / "implicitbias" / "__init__.py").is_file():
        print(f"error: --src {args.src!r} is not allowed: expected a folder holding the implicitbias package",
              file=sys.stderr)
        return 2
    commit = source_commit(src if src is not None else Path(__file__).resolve().parent.parent / "src")
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ib-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    table = {}
    for name in names:
        out = root / f"{name}-{variant}"
        print(f"{name} ({variant}) -> {out}", flush=True)
        record = run_one(name, args.quick, out, cache=args.cache, workers=args.workers, timeout=args.timeout,
                         poll=args.poll, src=src)
        record["commit"] = commit
        try:
            record.update(collect(out))
        except Exception as exc:  # noqa: BLE001 - a damaged output is recorded as such, the timing is kept
            record["collect_error"] = f"{type(exc).__name__}: {exc}"[:300]
        table[name] = record
        print(f"  {describe(record)}", flush=True)
        if args.record:  # a run stopped by --timeout is recorded as such: the catalogue says "not finished"
            record_measurement(name, variant, record, args.runtimes)
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    print("\n| variant | wall | peak memory | CPU | load before / mean / max during | predictions | runs | steps | "
          "gradient evaluations | exit |\n|---|---|---|---|---|---|---|---|---|---|")
    for name, r in table.items():
        load = r.get("load_during") or {}
        verdicts = ", ".join(f"{n} {k}" for k, n in sorted((r.get("predictions") or {}).items()))
        unmet = (r.get("assumptions") or {}).get("fails", 0)
        verdicts += f" ({unmet} assumptions not met)" if unmet else ""
        print(f"| {name} ({variant}) | {r['wall_s']:.1f} s | {r['peak_rss_mb']:.0f} MB | {r['cpu_s']:.0f} s | "
              f"{r['load_before'][0]:.1f} / {load.get('mean', float('nan')):.1f} / {load.get('max', float('nan')):.1f} | "
              f"{verdicts} | {r.get('runs', '')} | {r.get('steps', '')} | {r.get('grad_evals', '')} | {r['exit_code']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
