"""Benchmark (c): gradient flow (RKC) against GD with lr 0.01 on S11 through the engine's `train`.

Chistikov et al. 2023's setting: centred teacher-neuron data, d = n = 16, m = 200, balanced init at
lambda = 4^-6, square loss, trained to loss < 1e-9.  Prints gradient evaluations, wall time (second,
compiled call), the time reached, the relative distance of the final parameters and of the predictor
sum_j a_j w_j, and the max angle between active neurons, for GD and for gradient flow.

    python benchmarks/bench_gradient_flow.py [--seeds 0 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import implicitbias  # noqa: F401
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.training import GD, GradientFlow, Stop, train

NET = TwoLayer(width=200, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
SQUARE = Loss(name="square")


def run(method, stop, data, seed):
    kw = dict(stop=stop, seed=seed, init_scale=4.0**-6, checkpoints=8, kkt=False)
    train(NET, data, SQUARE, method, **kw)  # compile (cached for the timed call)
    started = time.perf_counter()
    ds = train(NET, data, SQUARE, method, **kw)
    return ds, time.perf_counter() - started


def summary(ds, wall):
    W, a = ds["theta.W"].values[0], ds["theta.a"].values[0]
    return {
        "grad_evals": int(ds.grad_evals.values[0, -1]), "wall_s": wall, "t": float(ds.time.values[0, -1]),
        "loss": float(ds.loss.values[0, -1]), "status": str(ds.status_name.values[0]),
        "max_angle": float(ds.max_angle.values[0, -1]), "theta": np.concatenate([W.ravel(), a]),
        "predictor": W.T @ a,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for seed in args.seeds:
        data = TeacherNeuron(scheme="centred", d=16).generate(seed)
        gd = summary(*run(GD(lr=0.01), Stop(loss_tol=1e-9, max_steps=20_000_000), data, seed))
        gf = summary(*run(GradientFlow(), Stop(loss_tol=1e-9, max_time=2e5), data, seed))
        rel = lambda u, v: float(np.linalg.norm(u - v) / np.linalg.norm(v))
        row = {"seed": seed, "gd": gd, "gf": gf, "ratio_evals": gd["grad_evals"] / gf["grad_evals"],
               "ratio_wall": gd["wall_s"] / gf["wall_s"], "theta_rel_dist": rel(gf["theta"], gd["theta"]),
               "predictor_rel_dist": rel(gf["predictor"], gd["predictor"])}
        rows.append(row)
        print(f"seed {seed}: data redraws {data.info.get('redraws')}")
        print(f"  {'method':<18}{'grad evals':>12}{'wall s':>9}{'t reached':>11}{'final loss':>12}{'max angle':>11}")
        for name, r in (("GD lr 0.01", gd), ("GF (RKC, default)", gf)):
            print(f"  {name:<18}{r['grad_evals']:>12,}{r['wall_s']:>9.2f}{r['t']:>11.1f}{r['loss']:>12.2e}"
                  f"{r['max_angle']:>11.3g}")
        print(f"  GD/GF gradient evaluations {row['ratio_evals']:.1f}x, wall {row['ratio_wall']:.1f}x; "
              f"||theta_GF - theta_GD|| / ||theta_GD|| = {row['theta_rel_dist']:.2e}, "
              f"predictor sum a_j w_j: {row['predictor_rel_dist']:.2e}")
    if args.json:
        for r in rows:
            for k in ("gd", "gf"):
                r[k] = {kk: vv for kk, vv in r[k].items() if kk not in ("theta", "predictor")}
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
