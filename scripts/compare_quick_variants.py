"""Compare every quick variant before and after a change: identical verdicts, stored values equal to 1e-12.

A redesign must keep every number.  This script runs each catalogued experiment's quick variant from a given
source tree (`snapshot`) and compares two snapshots (`compare`):

    git worktree add /tmp/before <commit>
    python scripts/compare_quick_variants.py snapshot /tmp/snap-before --src /tmp/before/src
    python scripts/compare_quick_variants.py snapshot /tmp/snap-after --src src
    python scripts/compare_quick_variants.py compare /tmp/snap-before /tmp/snap-after

`compare` checks, for every variant:
- checks.json: the same number of rows, and row by row the same theorem, kind, statement, relation and outcome,
  and the same measured value and bound to 1e-12 relative (cell labels may be reworded; a relabelled cell is
  listed, not counted as a difference);
- results.nc: every stored variable (metrics over run and checkpoint, final parameters, status, ...) equal to
  1e-12 relative, elementwise (NaN equal to NaN); a variable present on one side only is a difference.
Timings (wall_time_s, first_checkpoint_s, ...) are not compared.  Exit 0 when nothing differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

RTOL = 1e-12
MAIN = "import sys; from implicitbias.cli import main; sys.exit(main(sys.argv[1:]))"
TIMING = ("wall", "first_checkpoint", "elapsed", "seconds")


def _names(src: Path) -> list[str]:
    code = ("from implicitbias.experiments.registry import catalog; "
            "print('\\n'.join(catalog()))")
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return [line for line in out.split() if line]


def snapshot(out: Path, src: Path, only: list[str] | None, workers: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    names = only or _names(src)
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    for name in names:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", MAIN, "run", name, "--quick", "--out", str(out / name),
                               "--no-progress", "--workers", str(workers)], env=env, capture_output=True, text=True)
        (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
        print(f"{name}: exit {proc.returncode} in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """The largest elementwise relative difference (NaN == NaN, inf == inf of the same sign)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if same.all():
        return 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), np.finfo(float).tiny)
    rel = np.where(same, 0.0, rel)
    return float(np.nan_to_num(rel, nan=np.inf).max())


def _compare_checks(before: list[dict], after: list[dict]) -> tuple[list[str], list[str]]:
    problems, relabelled = [], []
    if len(before) != len(after):
        problems.append(f"checks.json: {len(before)} rows before, {len(after)} after")
    for i, (b, a) in enumerate(zip(before, after)):
        what = f"checks.json row {i} ({b.get('statement', '')[:60]})"
        for key in ("theorem", "kind", "statement", "relation", "outcome"):
            if b.get(key) != a.get(key):
                problems.append(f"{what}: {key} {b.get(key)!r} -> {a.get(key)!r}")
        for key in ("measured", "bound"):
            vb, va = b.get(key), a.get(key)
            if isinstance(vb, (int, float)) and isinstance(va, (int, float)):
                r = _rel(np.array(vb), np.array(va))
                if r > RTOL:
                    problems.append(f"{what}: {key} {vb!r} -> {va!r} (relative difference {r:.1e})")
            elif vb != va:
                problems.append(f"{what}: {key} {vb!r} -> {va!r}")
        if b.get("cell") != a.get("cell"):
            relabelled.append(f"{b.get('cell')!r} -> {a.get('cell')!r}")
    return problems, sorted(set(relabelled))


def _nodes(path: Path) -> dict[str, xr.Dataset]:
    """Every node of a results.nc (a NetCDF file with groups: runs/sNNNN, data/<key>), by its path."""
    tree = xr.open_datatree(path).load()
    return {node.path: node.to_dataset() for node in tree.subtree}


def _compare_results(before: Path, after: Path) -> tuple[list[str], int]:
    """The differences between two results.nc files, and how many stored values were compared."""
    problems = []
    nodes_b, nodes_a = _nodes(before), _nodes(after)
    for path in sorted(set(nodes_b) ^ set(nodes_a)):
        problems.append(f"results.nc: node {path} only {'before' if path in nodes_b else 'after'}")
    compared = 0
    for path in sorted(set(nodes_b) & set(nodes_a)):
        db, da = nodes_b[path], nodes_a[path]
        names_b, names_a = set(db.variables), set(da.variables)
        for name in sorted(names_b ^ names_a):
            problems.append(f"results.nc: {path}/{name} only {'before' if name in names_b else 'after'}")
        for name in sorted(names_b & names_a):
            if any(t in name for t in TIMING):
                continue
            vb, va = db[name].values, da[name].values
            compared += vb.size
            if vb.shape != va.shape:
                problems.append(f"results.nc: {path}/{name} shape {vb.shape} -> {va.shape}")
            elif vb.dtype.kind in "fciub" and va.dtype.kind in "fciub":
                r = _rel(vb, va)
                if r > RTOL:
                    problems.append(f"results.nc: {path}/{name} differs (largest relative difference {r:.1e})")
            elif not np.array_equal(vb.astype(str), va.astype(str)):
                problems.append(f"results.nc: {path}/{name} differs (text)")
        if "run_attrs" in db.attrs or "run_attrs" in da.attrs:  # each run's identity, in order
            keys_b = [r.get("key") for r in json.loads(db.attrs.get("run_attrs", "[]"))]
            keys_a = [r.get("key") for r in json.loads(da.attrs.get("run_attrs", "[]"))]
            if keys_b != keys_a:
                problems.append(f"results.nc: {path} holds other runs (their keys differ)")
    if compared == 0:
        problems.append("results.nc: no stored value was compared (an empty or unreadable file)")
    return problems, compared


def compare(before: Path, after: Path) -> int:
    names = sorted(p.name for p in before.iterdir() if p.is_dir())
    bad = 0
    for name in names:
        b, a = before / name, after / name
        if not (a / "checks.json").exists():
            print(f"{name}: MISSING after")
            bad += 1
            continue
        problems, relabelled = _compare_checks(json.loads((b / "checks.json").read_text()),
                                               json.loads((a / "checks.json").read_text()))
        more, values = _compare_results(b / "results.nc", a / "results.nc")
        problems += more
        rows = len(json.loads((b / "checks.json").read_text()))
        note = f"; {len(relabelled)} cells relabelled" if relabelled else ""
        print(f"{name}: {'identical' if not problems else f'{len(problems)} differences'} ({rows} checks, {values} stored "
              f"values{note})")
        for line in problems[:10]:
            print(f"    {line}")
        bad += bool(problems)
    print(f"\n{len(names) - bad} of {len(names)} quick variants identical (verdicts equal, values to {RTOL:g} relative)")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("snapshot", help="run every quick variant from SRC into OUT/NAME")
    p.add_argument("out", type=Path)
    p.add_argument("--src", type=Path, default=Path("src"))
    p.add_argument("--only", nargs="*")
    p.add_argument("--workers", type=int, default=2)
    p = sub.add_parser("compare", help="compare two snapshots")
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "snapshot":
        return snapshot(args.out, args.src, args.only, args.workers)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
