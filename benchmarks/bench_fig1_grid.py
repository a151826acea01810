"""What the whole grid of `chistikov2023-fig1` costs, per column d = 4 ... 1024, measured at every d.

Figure 1 of Chistikov et al. 2023 is 2 schemes x 16 lambdas x 5 trials at each d in {4, 16, 64, 256, 1024}: 800
gradient-flow runs.  For every d this benchmark trains a sample of that column's own runs (both schemes, the
lambdas picked by `--lambdas`, trial 0), one run per call as a sweep worker does, in this process, and records per
run its wall time, its gradient evaluations and its end (time t, loss).  The first run of each (d, scheme) also
compiles; it is timed again, compiled, so that the compile is measured apart.  Per d it prints:

- the gradient evaluations per run (median, max) and the seconds per evaluation inside a run, against a bare jitted
  gradient at the same d (the in-solver overhead, checkpoint records included);
- the projected column: 160 runs x the sample's mean seconds per run, plus one compile per worker;
- with `--reference RTOL`: the same sampled runs again at the tighter relative tolerance RTOL, and the worst
  relative gap of the final max angle (and of the max angle over neurons carrying weight) between the default
  tolerance and the reference: what Figure 1 would lose by the default's speed;
- with `--without-tail`: the same sampled runs again without the tail tolerance (`method.tail_rtol = None`: rtol
  until the end), with the ratio of evaluations and of wall time, measured in the same process: what the looser
  tolerance of the tail saves (and, with `--reference`, that baseline's own gap to the reference).

Then the whole grid in core-hours and on `--workers` cores (each worker one core, one run at a time), and, with
`--measured DIR` (the output directory of `implicitbias run chistikov2023-fig1`), the same per column from the
finished runs' own times (`wall_time_s` of every run: the seconds inside its task), with the ratio projected /
measured.

The projection that an earlier version of `bench_sweep.py --project` made assumed that a run needs as many
evaluations at every d as at d = 16; this one measures them at every d instead.

    python benchmarks/bench_fig1_grid.py                                   # every d, 4 lambdas (~6 min here)
    python benchmarks/bench_fig1_grid.py --dims 256,1024 --reference 1e-6  # and the accuracy of the default
    python benchmarks/bench_fig1_grid.py --dims 256 --lambdas=-1,-7,-13 --without-tail --reference 1e-6
    python benchmarks/bench_fig1_grid.py --measured runs/chistikov2023-fig1 --json out.json
    python benchmarks/bench_fig1_grid.py --measured runs/fig1-d256 runs/fig1-trial0 --no-sample
    python benchmarks/bench_fig1_grid.py --kinks runs/chistikov2023-fig1 --dims 256,1024   # no training
    python benchmarks/bench_fig1_grid.py --dims 256 --set method.kinks=slide     # the sliding flow (issue 40)

`--no-sample` trains nothing: it projects the whole grid from finished runs alone, each column's seconds inside
tasks scaled from the runs found to the column's 160 (a column run at trial 0 only counts each run five times), on
`--workers` cores.  The sampled projection above misses the costly uncentred runs at lambda = 4^-1 ... 4^-5 and
runs low; this one is as good as the trials it is given are typical.

`--compare BEFORE AFTER` trains nothing: it matches the stored runs of two finished outputs (e.g. without and with
the tail tolerance) by (d, scheme, lambda, trial) and prints per (d, scheme) the seconds inside tasks and the
evaluations, after against before, with the worst and median relative gap of the final max angles (recorded, off
the kinks: `kink_max_angle`, recomputed from the stored parameters of runs that predate it, and carrying weight);
then the runs, and the cell medians (what the figure shows, over cells with every trial in both), that moved by more
than 1%.  A
reference at a tight tolerance is an output like any other (`implicitbias run chistikov2023-fig1 --set
method.rtol=1e-6 method.tail_rtol=null`), compared as BEFORE.

    python benchmarks/bench_fig1_grid.py --compare runs/fig1-before runs/chistikov2023-fig1
    python benchmarks/bench_fig1_grid.py --compare runs/fig1-rtol-1e-6 runs/chistikov2023-fig1

`--sides D,SCHEME,K,TRIAL` trains one member of the grid at seven tolerances (rtol 1e-4 ... 1e-8 without a tail, the
default, the tail at 1e-2) and prints per tolerance the evaluations and the three final max angles, and the largest
cosine to a training input of every neuron that ends within 1e-3 of a kink on the active side at one tolerance and
on the inactive side at another: a neuron whose side no tolerance resolves (`metrics.neurons.KINK_COS`).

    python benchmarks/bench_fig1_grid.py --sides 256,uncentred,-9,4

`--kinks DIR` trains nothing: it reads the finished runs of DIR at the chosen d and prints, per (d, scheme) and
per run, the evaluations of the tail (from t = 100 to the end, when the loss is below ~1e-4 and the activation
pattern has settled) against the number of (neuron, training point) pairs whose pre-activation w_j . x_i lies within
|cos(w_j, x_i)| < 1e-6 of the ReLU kink at the end: the pairs that slide along a kink, where the vector field jumps
and an explicit step's error is O(h).  It prints the rank correlation of the two over the runs.

`--step-error DIR --run D,SCHEME,K,TRIAL` trains nothing either: from the final parameters stored for that run
(lambda = 4^K) it makes single RKC2 steps of several lengths h and prints the error estimate the step-size control
sees (rms of |err_i| / (atol + rtol |y_i|), the default tolerances) with the share of the neurons that carry it.  An
error of order h^3 (smooth flow) grows 1000-fold from h = 1 to h = 10; one that grows like h comes from steps that
cross ReLU kinks.

    python benchmarks/bench_fig1_grid.py --step-error runs/chistikov2023-fig1 --run 256,uncentred,-1,4
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time

import jax
import numpy as np
import xarray as xr
import yaml

from bench_gf_eval_cost import bare_gradient  # this folder is on sys.path when run as a script
from implicitbias.experiments import get
from implicitbias.metrics.neurons import kink_max_angle
from implicitbias.papers.chistikov2023.experiments.fig1 import KINK
from implicitbias.runs.execute import dataset_of, train_group

DIMS = (4, 16, 64, 256, 1024)
#: the final angles compared: recorded (active: cos > 0 to some input), off the kinks (cos > 1e-5), carrying weight
ANGLES = ("max_angle", KINK, "weighted_max_angle")
SCHEMES = ("centred", "uncentred")


def train_one(spec, keep_w: bool = False) -> dict:
    start = time.perf_counter()
    [ds] = train_group([spec])
    wall = time.perf_counter() - start
    extra = {KINK: float(np.ravel(ds[KINK].values)[-1])} if KINK in ds else {}
    if keep_w:
        extra["W"] = np.asarray(ds["theta.W"].values[0])
    return {**extra, "scheme": spec.data.scheme, "d": spec.data.d, "lambda": spec.init_scale, "trial": spec.trial,
            "wall_s": wall, "evals": float(ds["grad_evals"].values[0, -1]), "t_end": float(ds["time"].values[0, -1]),
            "loss": float(ds["loss"].values[0, -1]), "max_angle": float(np.ravel(ds["max_angle"].values)[-1]),
            "weighted_max_angle": float(np.ravel(ds["weighted_max_angle"].values)[-1])}


#: `--set KEY=VALUE` overrides of the experiment's config, applied to every run this benchmark trains (e.g.
#: `method.kinks=slide`)
SETTINGS: dict = {}


def sample_runs(d: int, lambdas: list[float], rtol: float | None = None, tail: bool = True) -> list:
    """Trial 0 of the column's runs at `lambdas`; at `rtol` throughout (no tail tolerance) if given; without the
    tail tolerance if not `tail`."""
    exp = get("chistikov2023-fig1")
    overrides = {**SETTINGS, "trials": 1, "grid": {"data.scheme": list(SCHEMES), "data.d": [d], "init_scale": lambdas}}
    if rtol is not None:
        overrides["method.rtol"] = rtol
    if rtol is not None or not tail:
        overrides["method.tail_rtol"] = None
    return exp.runs(exp.resolve(overrides=overrides))


def column(d: int, lambdas: list[float], per_column: int) -> dict:
    """Train the sample at dimension d; the column's projection from it."""
    runs = sample_runs(d, lambdas)
    rows, compile_s = [], []
    for scheme in SCHEMES:
        mine = [r for r in runs if r.data.scheme == scheme]
        first = train_one(mine[0])
        again = train_one(mine[0])  # compiled now: the first run's own time, without its compile
        compile_s.append(max(first["wall_s"] - again["wall_s"], 0.0))
        rows.append(again)
        rows += [train_one(r) for r in mine[1:]]
    bare = float(bare_gradient(runs[0], dataset_of(runs[0]))[0])  # wall seconds, median of 7
    wall = np.array([r["wall_s"] for r in rows])
    evals = np.array([r["evals"] for r in rows])
    per_eval = float(np.median(wall / evals))
    out = {"d": d, "rows": rows, "compile_s": float(np.mean(compile_s)), "bare_gradient_s": bare,
           "seconds_per_eval": per_eval, "overhead": per_eval / bare, "mean_run_s": float(wall.mean()),
           "max_run_s": float(wall.max()), "median_evals": float(np.median(evals)), "max_evals": float(evals.max()),
           "column_core_s": per_column * float(wall.mean())}
    print(f"d = {d:5d}: {len(rows)} runs, evaluations per run median {out['median_evals']:.0f} (max "
          f"{out['max_evals']:.0f}), {per_eval * 1e3:.3f} ms per evaluation = {out['overhead']:.2f} x a bare jitted "
          f"gradient ({bare * 1e3:.3f} ms); run {out['mean_run_s']:.2f} s mean, {out['max_run_s']:.2f} s max; "
          f"compile {out['compile_s']:.1f} s; column of {per_column} runs: {out['column_core_s'] / 3600:.3f} "
          "core-hours", flush=True)
    for r in rows:
        print(f"    {r['scheme']:9s} lambda {r['lambda']:9.3g}: {r['wall_s']:7.2f} s, {r['evals']:8.0f} evaluations, "
              f"t_end {r['t_end']:9.4g}, loss {r['loss']:.2e}, max angle {r['max_angle']:.4g}, "
              f"carrying weight {r['weighted_max_angle']:.4g}", flush=True)
    return out


def accuracy(d: int, lambdas: list[float], rows: list[dict], rtol: float, ref: list | None = None,
             what: str = "default") -> dict:
    """The sampled runs again at rtol (or the reference rows `ref`, already run): the worst relative gap of the
    final angles."""
    ref = [train_one(r) for r in sample_runs(d, lambdas, rtol)] if ref is None else ref
    gaps = {}
    for key in ("max_angle", "weighted_max_angle"):
        a = np.array([r[key] for r in rows])
        b = np.array([r[key] for r in ref])
        gap = np.abs(a - b) / np.abs(b)
        gaps[key] = float(np.max(gap))
        worst = int(np.argmax(gap))
        print(f"    {what}, {key}: worst relative gap to rtol {rtol:g}: {gap[worst]:.2e} ({ref[worst]['scheme']}, lambda "
              f"{ref[worst]['lambda']:.3g}: {a[worst]:.6g} against {b[worst]:.6g}); reference runs took "
              f"{sum(r['wall_s'] for r in ref):.1f} s, {sum(r['evals'] for r in ref):.0f} evaluations", flush=True)
    return {"rtol": rtol, "worst_relative_gap": gaps, "rows": ref}


def without_tail(d: int, lambdas: list[float], rows: list[dict]) -> dict:
    """The sampled runs again without the tail tolerance (rtol throughout): what the tail saves, measured here."""
    base = [train_one(r) for r in sample_runs(d, lambdas, tail=False)]
    for r, b in zip(rows, base):
        print(f"    without the tail: {b['scheme']:9s} lambda {b['lambda']:9.3g}: {b['wall_s']:7.2f} s, "
              f"{b['evals']:8.0f} evaluations ({r['evals'] / b['evals']:.2f} x of them with it), max angle "
              f"{b['max_angle']:.6g} (with: {r['max_angle']:.6g})", flush=True)
    ratio = sum(r["evals"] for r in rows) / sum(b["evals"] for b in base)
    print(f"    with the tail tolerance / without: {ratio:.3f} of the evaluations, "
          f"{sum(r['wall_s'] for r in rows) / sum(b['wall_s'] for b in base):.3f} of the wall time (first runs "
          "compile)", flush=True)
    return {"evals_ratio": ratio, "rows": base}


def _run_key(ds) -> tuple:
    """(d, scheme, lambda, trial) of a stored run of chistikov2023-fig1: what identifies it across outputs."""
    spec = json.loads(ds.attrs["spec"])
    return int(spec["data"]["d"]), spec["data"]["scheme"], float(spec["init_scale"]), int(spec["trial"])


def measured(directories: list[str]) -> dict[int, dict]:
    """Per d, from one or more `chistikov2023-fig1` outputs (a run found in several is counted once): runs, seconds
    inside tasks, evaluations, and the longest run's seconds."""
    seen: set = set()
    out: dict[int, dict] = {}
    for directory in directories:
        for path in sorted(glob.glob(os.path.join(directory, "runs", "*.nc"))):
            with xr.open_dataset(path) as ds:
                key = _run_key(ds)
                if key in seen:
                    continue
                seen.add(key)
                col = out.setdefault(key[0], {"runs": 0, "task_s": 0.0, "evals": [], "max_run_s": 0.0})
                col["runs"] += 1
                col["task_s"] += float(ds.attrs["wall_time_s"])
                col["max_run_s"] = max(col["max_run_s"], float(ds.attrs["wall_time_s"]))
                col["evals"].append(float(ds["grad_evals"].values[0, -1]))
    return out


def project_measured(found: dict[int, dict], per_column: int, workers: int) -> dict:
    """The whole grid projected from finished runs alone: each column's seconds inside tasks scaled from the runs
    found to the column's `per_column` runs (a column measured at trial 0 only counts each of its runs five
    times), summed, on `workers` cores (one run at a time each; at least the longest run)."""
    columns = {d: col["task_s"] * per_column / col["runs"] for d, col in found.items()}
    total = sum(columns.values())
    longest = max(col["max_run_s"] for col in found.values())
    return {"column_core_s": columns, "core_hours": total / 3600, "wall_h": max(total / workers, longest) / 3600}


def _finals(directory: str) -> dict:
    """{(d, scheme, lambda, trial): final numbers} of every stored run of a chistikov2023-fig1 output; the max angle
    off the kinks (`kink_max_angle`) from the stored final parameters where the run predates it."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "runs", "*.nc"))):
        with xr.open_dataset(path) as ds:
            key = _run_key(ds)
            out[key] = {"task_s": float(ds.attrs["wall_time_s"]), "evals": float(ds["grad_evals"].values[0, -1]),
                        "max_angle": float(np.ravel(ds["max_angle"].values)[-1]),
                        "weighted_max_angle": float(np.ravel(ds["weighted_max_angle"].values)[-1])}
            if KINK in ds:
                out[key][KINK] = float(ds[KINK].values[0])
            else:
                out[key][KINK] = kink_max_angle(ds["theta.W"].values[0], dataset_of(fig1_run(*key)).X)
    return out


def compare_grids(before: str, after: str, changed: float = 0.01) -> dict:
    """Two finished chistikov2023-fig1 outputs (e.g. without and with the tail tolerance), run by run: per (d,
    scheme) the seconds inside tasks and the evaluations, after / before, and the worst relative gap of the final
    max angles (recorded, off the kinks, and over the neurons carrying weight) between the two; then, over the whole grid, every
    run whose final max angle moved by more than `changed` (relative), and the cells (d, scheme, lambda) with all
    their trials in both whose median moved by more than `changed`: what the figure shows."""
    a, b = _finals(before), _finals(after)
    common = sorted(set(a) & set(b))
    print(f"{len(common)} runs in both ({len(a)} in {before}, {len(b)} in {after})", flush=True)
    out = {}
    for d, scheme in sorted({k[:2] for k in common}):
        keys = [k for k in common if k[:2] == (d, scheme)]
        row = {"runs": len(keys)}
        for what in ("task_s", "evals"):
            row[what] = (sum(a[k][what] for k in keys), sum(b[k][what] for k in keys))
        text = []
        for metric in ANGLES:
            gaps = [_gap(a[k][metric], b[k][metric]) for k in keys]
            worst = int(np.argmax(gaps))
            k = keys[worst]
            row[metric] = {"worst_relative_gap": gaps[worst], "median_relative_gap": float(np.median(gaps)),
                           "at": {"lambda": k[2], "trial": k[3], "before": a[k][metric], "after": b[k][metric]}}
            text.append(f"{metric} worst gap {gaps[worst]:.2e} (lambda {k[2]:.3g}, trial {k[3]}: {a[k][metric]:.6g} "
                        f"-> {b[k][metric]:.6g}), median {np.median(gaps):.1e}")
        print(f"d = {d:5d} {scheme:9s}: {len(keys)} runs; task seconds {row['task_s'][0]:.0f} -> "
              f"{row['task_s'][1]:.0f} ({row['task_s'][1] / row['task_s'][0]:.2f} x); evaluations "
              f"{row['evals'][0]:.0f} -> {row['evals'][1]:.0f} ({row['evals'][1] / row['evals'][0]:.2f} x); "
              + "; ".join(text), flush=True)
        out[f"{d} {scheme}"] = row
    trials = {k[:3]: [] for k in set(a) | set(b)}
    for k in set(a) | set(b):
        trials[k[:3]].append(k)
    full = sorted(c for c, ks in trials.items() if all(k in a and k in b for k in ks) and len(ks) > 1)
    for metric in ANGLES:
        moved = [(k, a[k][metric], b[k][metric]) for k in common if _gap(a[k][metric], b[k][metric]) > changed]
        cells = []
        for c in full:
            before_median = float(np.median([a[k][metric] for k in trials[c]]))
            after_median = float(np.median([b[k][metric] for k in trials[c]]))
            cells.append((_gap(before_median, after_median), c, before_median, after_median))
        cells.sort(reverse=True)
        over = [x for x in cells if x[0] > changed]
        print(f"{metric}: {len(moved)} of {len(common)} runs moved by more than {changed:.0%}; {len(over)} of "
              f"{len(cells)} cell medians (cells with every trial in both) moved by more than {changed:.0%}"
              + (f", the worst {cells[0][0]:.2e}" if cells else ""), flush=True)
        for (d, scheme, lam, trial), x, y in moved:
            print(f"    run d = {d}, {scheme}, lambda {lam:.3g}, trial {trial}: {x:.6g} -> {y:.6g}", flush=True)
        for _, (d, scheme, lam), x, y in over:
            print(f"    cell d = {d}, {scheme}, lambda {lam:.3g}: median {x:.6g} -> {y:.6g}", flush=True)
        out[f"{metric} moved"] = {"runs": [[*k, x, y] for k, x, y in moved], "cells": [[*c, x, y] for _, c, x, y in over],
                                  "cells_compared": len(cells), "worst_cell_gap": cells[0][0] if cells else None}
    return out


def _gap(before: float, after: float) -> float:
    """|after - before| / |before| (0 when both are 0)."""
    return abs(after - before) / abs(before) if before else float(after != before)


def fig1_run(d: int, scheme: str, lam: float, trial: int):
    """The RunSpec of chistikov2023-fig1 at (d, scheme, lambda, trial): the one a stored run of its grid holds."""
    exp = get("chistikov2023-fig1")
    return exp.runs(exp.resolve(overrides={**SETTINGS, "trials": trial + 1, "grid": {
        "data.scheme": [scheme], "data.d": [d], "init_scale": [lam]}}))[trial]


def point_cosines(W, X) -> np.ndarray:
    """cos(w_j, x_i) for every neuron j (rows of W) and training point i (rows of X)."""
    W, X = np.asarray(W), np.asarray(X)
    return (W @ X.T) / (np.linalg.norm(W, axis=1)[:, None] * np.linalg.norm(X, axis=1)[None, :])


def kinks(directory: str, dims: list[int], at: float = 100.0, tol: float = 1e-6) -> dict:
    """Per stored run at the given d: tail evaluations (t >= `at`) and the pairs within `tol` of a kink at the end."""
    from scipy.stats import spearmanr

    rows = []
    for path in sorted(glob.glob(os.path.join(directory, "runs", "*.nc"))):
        with xr.open_dataset(path) as ds:
            spec = json.loads(ds.attrs["spec"])
            if int(spec["data"]["d"]) not in dims:
                continue
            t, evals = ds["time"].values[0], ds["grad_evals"].values[0]
            W, seconds = ds["theta.W"].values[0], float(ds.attrs["wall_time_s"])
        start = int(np.searchsorted(t, at))
        run = fig1_run(int(spec["data"]["d"]), spec["data"]["scheme"], spec["init_scale"], spec["trial"])
        cos = point_cosines(W, dataset_of(run).X)
        rows.append({"d": run.data.d, "scheme": run.data.scheme, "lambda": run.init_scale, "trial": run.trial,
                     "tail_evals": float(evals[-1] - evals[min(start, len(t) - 1)]), "t_end": float(t[-1]),
                     "evals": float(evals[-1]), "task_s": seconds, "sliding_pairs": int(np.sum(np.abs(cos) < tol)),
                     "sliding_neurons": int(np.sum(np.any(np.abs(cos) < tol, axis=1)))})
    by: dict = {}
    for r in rows:
        by.setdefault((r["d"], r["scheme"]), []).append(r)
    out = {}
    for (d, scheme), mine in sorted(by.items()):
        tail = np.array([r["tail_evals"] for r in mine])
        pairs = np.array([r["sliding_pairs"] for r in mine])
        rho = float(spearmanr(tail, pairs)[0]) if len(mine) > 2 else float("nan")
        share = tail.sum() / max(sum(r["evals"] for r in mine), 1.0)
        print(f"d = {d:5d} {scheme:9s}: {len(mine)} runs; tail (t >= {at:g}) evaluations median {np.median(tail):.0f}, "
              f"max {tail.max():.0f}, {share:.0%} of all; sliding pairs at the end median {np.median(pairs):.0f}, "
              f"max {pairs.max()}; rank correlation tail evaluations ~ sliding pairs {rho:.2f}", flush=True)
        for r in sorted(mine, key=lambda r: -r["tail_evals"])[:3]:
            print(f"    lambda {r['lambda']:9.3g} trial {r['trial']}: {r['tail_evals']:8.0f} tail evaluations, "
                  f"{r['sliding_pairs']} pairs in {r['sliding_neurons']} neurons, {r['task_s']:.0f} s", flush=True)
        out[f"{d}-{scheme}"] = {"runs": mine, "spearman": rho, "tail_share": float(share)}
    return out


def step_error(directory: str, which: str, lengths=(1.0, 3.0, 10.0, 30.0, 100.0)) -> list[dict]:
    """One RKC2 step of each length from a stored run's final parameters: the controller's scaled error."""
    import jax.numpy as jnp

    from implicitbias.training.problem import Problem
    from implicitbias.training.rkc import RKC2, GradientFlowTerm

    d, scheme, k, trial = which.split(",")
    lam, trial = 4.0 ** int(k), int(trial)
    run = fig1_run(int(d), scheme, lam, trial)
    with xr.open_dataset(os.path.join(directory, "runs", f"{run.key()}.nc")) as ds:
        stored = {name: np.asarray(ds[f"theta.{name}"].values[0]) for name in ("W", "a")}
    data = dataset_of(run)
    X, y = jnp.asarray(data.X), jnp.asarray(data.y)
    problem = Problem(run.model, run.loss)
    theta0, const = problem.init({"seed": run.seed, "init_scale": lam}, int(d))
    theta = {name: jnp.asarray(stored[name]) for name in theta0}

    def rms(tree):
        return float(np.sqrt(sum(np.sum(np.asarray(v) ** 2) for v in tree.values())
                             / sum(np.size(v) for v in tree.values())))

    def field(t, th, args):
        value, grad = jax.value_and_grad(lambda p: problem.risk({}, p, const, X, y))(th)
        return value, jax.tree_util.tree_map(jnp.negative, grad)

    term, solver = GradientFlowTerm(field), RKC2()
    state = solver.init(term, 0.0, 1.0, theta, None)
    rtol = run.method.rtol
    atol = max(1e-5 * rms(theta0), run.method.atol_rel * rms(theta))  # as `make_flow` and ScaledAtolController
    W = np.asarray(theta["W"])
    cos = point_cosines(W, X)
    loss = float(problem.risk({}, theta, const, X, y))
    print(f"{run.label()}: loss {loss:.3g} at the end; atol {atol:.3g}, rtol {rtol:g}", flush=True)
    out = []
    for h in lengths:
        y1, err, _, after, _ = solver.step(term, 0.0, h, theta, None, state, False)
        scaled = {name: np.abs(np.asarray(err[name])) / (atol + rtol * np.maximum(np.abs(np.asarray(theta[name])),
                                                                                    np.abs(np.asarray(y1[name]))))
                  for name in theta}
        total = float(np.sqrt(sum(np.sum(v ** 2) for v in scaled.values()) / sum(v.size for v in scaled.values())))
        per = np.sum(scaled["W"] ** 2, axis=1) + scaled["a"] ** 2
        top = np.argsort(-per)[:20]
        out.append({"h": h, "scaled_error": total, "stages": int(after["stages"]),
                    "top20_share": float(per[top].sum() / per.sum()),
                    "top20_active_points": [int(np.sum(cos[j] > 0)) for j in top],
                    "top20_negative": int(np.sum(np.asarray(theta["a"])[top] < 0))})
        print(f"    h = {h:6.1f}: scaled error {total:.3g} ({after['stages']} stages); the 20 neurons that carry most "
              f"of it: {out[-1]['top20_share']:.0%}, {out[-1]['top20_negative']} of them with a < 0, active on "
              f"{min(out[-1]['top20_active_points'])}-{max(out[-1]['top20_active_points'])} points", flush=True)
    return out


#: the tolerances of `--sides`: (name, method overrides)
SIDES = (("rtol 1e-4, no tail", {"tail_rtol": None}),
         ("rtol 1e-5, no tail", {"rtol": 1e-5, "tail_rtol": None}),
         ("rtol 1e-6, no tail", {"rtol": 1e-6, "tail_rtol": None}),
         ("rtol 1e-7, atol_rel 1e-9", {"rtol": 1e-7, "tail_rtol": None, "atol_rel": 1e-9}),
         ("rtol 1e-8, atol_rel 1e-10", {"rtol": 1e-8, "tail_rtol": None, "atol_rel": 1e-10}),
         ("default (tail 1e-3)", {}),
         ("tail 1e-2", {"tail_rtol": 1e-2}))


def sides(which: str, near: float = 1e-3) -> list[dict]:
    """One member of the grid trained at each tolerance of SIDES: per run the evaluations and the final angles, and
    the largest cosine to a training input of every neuron that ends within `near` of a kink on the active side in
    one run and on the inactive side in another (same init, so neuron j is the same neuron in every run)."""
    d, scheme, k, trial = which.split(",")
    base = fig1_run(int(d), scheme, 4.0 ** int(k), int(trial))
    X = np.asarray(dataset_of(base).X)
    rows, cos = [], []
    for name, over in SIDES:
        row = train_one(base.model_copy(update={"method": base.method.model_copy(update=over)}), keep_w=True)
        cos.append(point_cosines(row.pop("W"), X).max(axis=1))
        rows.append({**row, "tolerance": name})
    cos = np.array(cos)
    flips = np.flatnonzero((np.abs(cos) < near).any(axis=0) & (cos > 0).any(axis=0) & (cos <= 0).any(axis=0))
    print(f"{base.label()}: neurons that end within {near:g} of a kink on both sides over the tolerances: "
          f"{', '.join(map(str, flips)) or 'none'}", flush=True)
    for r, c in zip(rows, cos):
        r["flipping_cos"] = {int(j): float(c[j]) for j in flips}
        print(f"    {r['tolerance']:26s} {r['evals']:8.0f} evaluations; max angle {r['max_angle']:.4g}, off the kinks "
              f"{r[KINK]:.4g}, carrying weight {r['weighted_max_angle']:.4g}; cos "
              + ", ".join(f"n{j} {c[j]:+.1e}" for j in flips), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default=",".join(map(str, DIMS)))
    parser.add_argument("--lambdas", default="2,-3,-8,-13", help="exponents k of the sampled lambdas 4^k")
    parser.add_argument("--reference", type=float, help="also run the sample at this rtol and compare the angles")
    parser.add_argument("--without-tail", action="store_true",
                        help="also run the sample without the tail tolerance (method.tail_rtol): what it saves")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"),
                        help="two finished chistikov2023-fig1 outputs: run by run, the time, evaluations and final "
                             "angles of AFTER against BEFORE (trains nothing)")
    parser.add_argument("--measured", nargs="+", metavar="DIR",
                        help="output directories of chistikov2023-fig1 runs, to compare with (a run in several counts once)")
    parser.add_argument("--no-sample", action="store_true",
                        help="with --measured: train no sample, project the whole grid from the finished runs alone")
    parser.add_argument("--kinks", help="output directory of chistikov2023-fig1: tail evaluations against the pairs "
                        "sliding along a kink, per stored run at --dims (trains nothing)")
    parser.add_argument("--step-error", help="output directory of chistikov2023-fig1: the error of single RKC "
                        "steps from the final parameters of --run (trains nothing)")
    parser.add_argument("--run", default="256,uncentred,-1,4", help="D,SCHEME,K,TRIAL of --step-error (lambda 4^K)")
    parser.add_argument("--sides", metavar="D,SCHEME,K,TRIAL",
                        help="train that member (lambda 4^K) at the tolerances of SIDES and print which neurons end on "
                        "either side of a kink (within 1e-3 of it) depending on the tolerance")
    parser.add_argument("--workers", type=int, default=2, help="cores of the projected sweep (one worker each)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides for every run trained here, as `implicitbias run --set` takes them "
                        "(e.g. method.kinks=slide method.kink_slots=96)")
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args()
    for item in args.set:
        key, _, value = item.partition("=")
        SETTINGS[key] = yaml.safe_load(value)
    if args.step_error:
        found = step_error(args.step_error, args.run)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(found, f, indent=2)
        return
    if args.sides:
        found = sides(args.sides)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(found, f, indent=2)
        return
    if args.compare:
        found = compare_grids(*args.compare)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(found, f, indent=2)
        return
    if args.kinks:
        found = kinks(args.kinks, [int(x) for x in args.dims.split(",")])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(found, f, indent=2, default=float)
        return
    exp = get("chistikov2023-fig1")
    config = exp.resolve()
    per_column = len(config.grid["data.scheme"]) * len(config.grid["init_scale"]) * config.trials
    if args.no_sample:
        if not args.measured:
            parser.error("--no-sample needs --measured DIR")
        found = measured(args.measured)
        proj = project_measured(found, per_column, args.workers)
        for d, col in sorted(found.items()):
            print(f"measured d = {d:5d}: {col['runs']:3d} of {per_column} runs, {col['task_s'] / 3600:.3f} core-hours "
                  f"inside tasks, longest run {col['max_run_s']:.0f} s, evaluations per run median "
                  f"{np.median(col['evals']):.0f} (max {np.max(col['evals']):.0f}); column projected "
                  f"{proj['column_core_s'][d] / 3600:.3f} core-hours")
        missing = sorted(set(config.grid["data.d"]) - set(found))
        print(f"projection from the finished runs: {proj['core_hours']:.2f} core-hours, on {args.workers} cores "
              f"{proj['wall_h']:.2f} h" + (f" (columns d = {missing} not measured, not counted)" if missing else ""))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"measured": found, "projection": proj}, f, indent=2, default=float)
        return
    lambdas = [4.0 ** int(k) for k in args.lambdas.split(",")]
    print(f"chistikov2023-fig1: {per_column} runs per column; sample: both schemes, lambda = 4^({args.lambdas}), "
          f"trial 0; load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; jax {jax.__version__}", flush=True)
    report: dict = {"load_before": os.getloadavg()[0], "per_column": per_column, "columns": {}}
    for d in [int(x) for x in args.dims.split(",")]:
        col = column(d, lambdas, per_column)
        if args.without_tail:
            col["without_tail"] = without_tail(d, lambdas, col["rows"])
        if args.reference:
            col["reference"] = accuracy(d, lambdas, col["rows"], args.reference)
            if args.without_tail:
                accuracy(d, lambdas, col["without_tail"]["rows"], args.reference, col["reference"]["rows"],
                         "without the tail tolerance")
        report["columns"][d] = col
    total = sum(c["column_core_s"] for c in report["columns"].values())
    longest = max(c["max_run_s"] for c in report["columns"].values())
    compile_s = sum(c["compile_s"] for c in report["columns"].values()) * 2  # each worker compiles each program
    wall = max(total / args.workers, longest) + compile_s
    print(f"projection: {total / 3600:.2f} core-hours for the columns measured; on {args.workers} cores "
          f"{wall / 3600:.2f} h (each worker also compiles every (d, scheme) program once: {compile_s:.0f} s)")
    report["projected_core_hours"] = total / 3600
    report["projected_wall_h"] = wall / 3600
    if args.measured:
        found = measured(args.measured)
        report["measured"] = {}
        for d, col in sorted(found.items()):
            proj = report["columns"].get(d)
            ratio = (f", projected / measured {proj['column_core_s'] * col['runs'] / per_column / col['task_s']:.2f}"
                     if proj else "")
            print(f"measured d = {d:5d}: {col['runs']} runs, {col['task_s'] / 3600:.3f} core-hours inside tasks, "
                  f"evaluations per run median {np.median(col['evals']):.0f} (max {np.max(col['evals']):.0f})"
                  f"{ratio}")
            report["measured"][d] = {"runs": col["runs"], "task_s": col["task_s"],
                                     "median_evals": float(np.median(col["evals"])),
                                     "max_evals": float(np.max(col["evals"]))}
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2, default=float)


if __name__ == "__main__":
    main()
