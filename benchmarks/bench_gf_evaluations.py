"""Gradient evaluations of every gradient-flow run of the quick variants, against another source tree.

Counts, not times: each experiment's quick variant is split into its tasks (`group_runs`) and every task whose
method is gradient flow is trained in this process (`train_group`, no Dask, no files); the printed number is the
sum over its runs of the last checkpoint's `grad_evals` (every evaluation of the vector field, rejected steps
included), with the steps the solver took and the largest relative difference of the final parameters.  The
counts are deterministic: the load of the machine does not change them.

With `--against SRC` (the `src` folder of another checkout, e.g. a `git worktree` of an older commit) the same
counting runs in a child process that imports `implicitbias` from SRC, and the table shows both and their ratio.

    git worktree add /tmp/old 16f9b6b
    python benchmarks/bench_gf_evaluations.py --against /tmp/old/src [--only NAME,...] [--json out.json]

With `--set KEY=VALUE ...` (config overrides, as `implicitbias run --set` takes them) and no `--against`, the
quick variants are counted twice in this process, without and with the overrides, and compared the same way: e.g.
the sliding flow against the plain one (runs matched by their position in the experiment's order of runs).

    python benchmarks/bench_gf_evaluations.py --only chistikov2023-fig1,chistikov2023-fig2 --set method.kinks=slide
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import yaml


def count(names: list[str], params_out: str | None, overrides: dict | None = None) -> dict:
    """{name: {"runs", "evals", "steps"}} for the gradient-flow runs of each quick variant (this process), with the
    config `overrides`."""
    from implicitbias.experiments import get
    from implicitbias.runs.execute import train_group
    from implicitbias.runs.spec import group_runs

    out, params = {}, {}
    for name in names:
        exp = get(name)
        runs = evals = steps = 0
        for group in group_runs(exp.runs(exp.resolve(quick=True, overrides=overrides))):
            if group[0].method.kind != "gf":
                continue
            for ds in train_group(group):
                evals += int(ds["grad_evals"].values[0, -1])
                steps += int(ds["step"].values[0, -1])
                flat = [np.ravel(ds[v].values) for v in sorted(ds.data_vars) if v.startswith("theta.")]
                params[f"{name}/{runs}"] = np.concatenate(flat)
                runs += 1
        out[name] = {"runs": runs, "evals": evals, "steps": steps}
    if params_out:
        np.savez(params_out, **params)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated experiment names (default: every experiment)")
    parser.add_argument("--against", help="the src folder of another checkout to compare with")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides; without --against, compared with the same variants without them")
    parser.add_argument("--json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from implicitbias.experiments.registry import catalog

    names = args.only.split(",") if args.only else list(catalog())
    if args.child:
        print(json.dumps(count(names, args.params)))
        return
    overrides = {key: yaml.safe_load(value) for key, _, value in (item.partition("=") for item in args.set)}
    with tempfile.TemporaryDirectory() as tmp:
        ours = count(names, os.path.join(tmp, "ours.npz"), overrides)
        theirs, mine, other = None, np.load(os.path.join(tmp, "ours.npz")), None
        if overrides and not args.against:
            theirs = count(names, os.path.join(tmp, "theirs.npz"))
            other = np.load(os.path.join(tmp, "theirs.npz"))
        elif args.against:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(args.against)}
            child = subprocess.run([sys.executable, __file__, "--child", "--only", ",".join(names),
                                    "--params", os.path.join(tmp, "theirs.npz")],
                                   env=env, capture_output=True, text=True, check=True)
            theirs = json.loads(child.stdout.strip().splitlines()[-1])
            other = np.load(os.path.join(tmp, "theirs.npz"))
        print(f"{'experiment':34s} {'gf runs':>7s} {'evals':>10s} {'steps':>8s}"
              + (f" {'against':>10s} {'steps':>8s} {'ratio':>7s} {'max rel. diff θ':>16s}" if theirs else ""))
        for name in names:
            row = ours[name]
            if row["runs"] == 0:
                continue
            line = f"{name:34s} {row['runs']:7d} {row['evals']:10d} {row['steps']:8d}"
            if theirs:
                base = theirs[name]
                diffs = [np.linalg.norm(mine[k] - other[k]) / max(np.linalg.norm(other[k]), 1e-300)
                         for k in mine.files if k.startswith(name + "/") and k in other.files]
                line += (f" {base['evals']:10d} {base['steps']:8d} {row['evals'] / max(base['evals'], 1):6.2f}x"
                         f" {max(diffs) if diffs else float('nan'):16.1e}")
            print(line)
        total = sum(r["evals"] for r in ours.values())
        if theirs:
            base_total = sum(r["evals"] for r in theirs.values())
            print(f"all: {total} against {base_total} gradient evaluations ({total / max(base_total, 1):.2f}x)")
        else:
            print(f"all: {total} gradient evaluations")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ours": ours, "against": theirs, "against_src": args.against}, f, indent=2)


if __name__ == "__main__":
    main()
