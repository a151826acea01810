"""Where the sliding flow's gradient evaluations go on one member of `chistikov2023-fig1`, and what the step-size
controller's coefficients change (issue 40).

One member (d, scheme, lambda, trial 0 of the grid) is trained with `method.kinks=slide` once per controller
configuration, each in a fresh process (jax keeps a compiled program per function, so a second configuration in
the same process would rerun the first one's), one after the other.  Every attempted RKC step and every accepted
step's end-of-step handling is reported to the host through `jax.debug.callback` (the solver and `_Kinks.handle` are
wrapped for the length of the call; nothing in the package changes).  Per configuration it prints:

- the evaluations (as the run records them), the steps, the rejected steps and the evaluations they wasted;
- per window of time: steps, rejections, evaluations, mean stages per step, median accepted step size and the mean
  number of pairs (neuron j, point k) whose pre-activation changed sign over an accepted step;
- the crossings in all: how many distinct pairs crossed, how many crossed again, how many of the crossing pairs were
  held on their kink after the step (the sliding QP kept them) and how many rejections came right after an
  accepted step that changed the held set;
- the final max angles (literal, off the kinks) and the evaluations as a ratio to the first configuration (the
  baseline, measured in the same run; below 1: fewer).

The configurations are diffrax `PIDController` coefficients given to the sliding flow's controller
(`implicitbias.training.sliding.PID_COEFFICIENTS` is what ships): `i` = (pcoeff 0, icoeff 1), diffrax's default
integral controller; `pi43` = (0.4, 0.3), `pi33` = (0.3, 0.3), `pi24` = (0.2, 0.4), the PI controllers diffrax's
documentation lists for error estimates that do not vary smoothly.

    python benchmarks/bench_sliding_events.py                                  # the issue's probe, ~4 min
    python benchmarks/bench_sliding_events.py --configs i,pi43 --d 1024       # ~20 min
    python benchmarks/bench_sliding_events.py --lam 0.0009765625 --configs shipped
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import glob
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

import numpy as np

CONFIGS = {
    "i": {"pcoeff": 0.0, "icoeff": 1.0},
    "pi43": {"pcoeff": 0.4, "icoeff": 0.3},
    "pi33": {"pcoeff": 0.3, "icoeff": 0.3},
    "pi24": {"pcoeff": 0.2, "icoeff": 0.4},
    "shipped": None,  # the package's own coefficients, unpatched
}

WINDOWS = [(0, 10), (10, 100), (100, 1e3), (1e3, 1e4), (1e4, 3e4), (3e4, 1e5), (1e5, np.inf)]


@contextlib.contextmanager
def instrumented(coefficients):
    """Wrap RKC2.step and _Kinks.handle of the sliding flow with host callbacks; yields the log they fill."""
    import jax
    import jax.numpy as jnp

    from implicitbias.training import sliding

    log = {"step": [], "handle": []}
    saved = sliding.RKC2, sliding._Kinks.handle, sliding.PID_COEFFICIENTS

    class Logged(sliding.RKC2):
        def step(self, terms, t0, t1, y0, args, st, made_jump):
            out = super().step(terms, t0, t1, y0, args, st, made_jump)
            st1 = out[3]
            crossed = jnp.sum((jnp.sign(st1["value"]["Z"]) != jnp.sign(st["value"]["Z"])) & ~args["mask"])
            jax.debug.callback(lambda *v: log["step"].append([float(x) for x in v]), t0, t1, st1["stages"],
                               st1["num_vf_evals"] - st["num_vf_evals"], crossed)
            return out

    handle = saved[1]

    def logged_handle(self, theta, args, Z0, end):
        out = handle(self, theta, args, Z0, end)
        crossed = (jnp.sign(end["Z"]) != jnp.sign(Z0)) & ~args["mask"]
        (idx,) = jnp.nonzero(crossed.ravel(), size=4 * self.P, fill_value=-1)
        held = out[1]["mask"].ravel()[jnp.maximum(idx, 0)] & (idx >= 0)
        jax.debug.callback(lambda i, h, c: log["handle"].append((i[i >= 0].tolist(), h[i >= 0].tolist(), bool(c))),
                           idx, held, out[2])
        return out

    sliding.RKC2, sliding._Kinks.handle = Logged, logged_handle
    if coefficients is not None:
        sliding.PID_COEFFICIENTS = coefficients
    try:
        yield log
    finally:
        sliding.RKC2, sliding._Kinks.handle, sliding.PID_COEFFICIENTS = saved


def train_member(args, coefficients):
    import xarray as xr

    from implicitbias.cli import main

    with tempfile.TemporaryDirectory() as out, instrumented(coefficients) as log:
        started = time.perf_counter()
        code = main(["run", "chistikov2023-fig1", "--workers", "0", "--no-progress", "--out", out, "--set",
                     f"grid.data.d=[{args.d}]", f"grid.data.scheme=[{args.scheme}]", f"grid.init_scale=[{args.lam}]",
                     "trials=1", "method.kinks=slide", *args.set])
        seconds = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"the run exited with {code}")
        with xr.open_dataset(glob.glob(f"{out}/runs/*.nc")[0]) as ds:
            final = {k: float(ds[k].values[..., -1].item()) for k in ("grad_evals", "step", "max_angle",
                                                                      "kink_max_angle")}
    return log, final, seconds


def summarise(name, log, final, seconds, baseline):
    st = np.array(log["step"])
    t0, t1, stages, evals, crossed = st.T
    accepted = np.r_[t0[1:] == t1[:-1], True]  # a rejected step is retried from the same t0
    h = t1 - t0
    changed = np.array([c for _, _, c in log["handle"]])
    # a step whose last accepted predecessor changed the held set
    before = np.r_[0, np.cumsum(accepted)[:-1]]  # accepted steps before each step
    after_change = (before > 0) & changed[np.maximum(before - 1, 0)]
    print(f"\n{name}: {int(final['grad_evals'])} evaluations ({final['grad_evals'] / baseline:.3f}x the first), "
          f"{len(st)} steps, {(~accepted).sum()} rejected ({evals[~accepted].sum():.0f} evaluations), {seconds:.1f} s "
          f"with compiling; max angle {final['max_angle']:.6f}, off the kinks {final['kink_max_angle']:.6f}")
    print("  window of t        steps  rejected  evaluations  stages  median h  crossings/accepted step")
    for lo, hi in WINDOWS:
        sel = (t0 >= lo) & (t0 < hi)
        if sel.any():
            print(f"  [{lo:>7g}, {hi:>7g})  {sel.sum():5d}  {(sel & ~accepted).sum():8d}  {evals[sel].sum():11.0f}  "
                  f"{stages[sel].mean():6.1f}  {np.median(h[sel & accepted]) if (sel & accepted).any() else 0:8.3g}"
                  f"  {crossed[sel & accepted].mean() if (sel & accepted).any() else 0:.1f}")
    seen = collections.Counter()
    held = 0
    for idx, kept, _ in log["handle"]:
        seen.update(idx)
        held += sum(kept)
    total = sum(seen.values())
    after, other = (~accepted & after_change).sum(), (~accepted & ~after_change).sum()
    print(f"  crossings over accepted steps {crossed[accepted].sum():.0f}; of those listed (at most 4 x "
          f"kink_candidates per step) {total}: distinct pairs {len(seen)}, crossing again {total - len(seen)}, held on "
          f"their kink after the step {held}")
    print(f"  rejections right after an accepted step that changed the held set: {after} of {(~accepted).sum()} (rate "
          f"{after / max(after_change.sum(), 1):.2f} after a change, {other / max((~after_change).sum(), 1):.2f} "
          "otherwise)")
    return {"config": name, "seconds": seconds, **final, "steps": len(st), "rejected": int((~accepted).sum())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--scheme", default="uncentred", choices=["centred", "uncentred"])
    parser.add_argument("--lam", default="0.25", help="init_scale (lambda), default 4^-1")
    parser.add_argument("--configs", default="i,pi43,pi33,pi24",
                        help="comma-separated, the first is the baseline; from: " + ", ".join(CONFIGS))
    parser.add_argument("--set", nargs="*", default=[], help="more --set overrides for the run")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--one", choices=list(CONFIGS), help=argparse.SUPPRESS)  # one configuration, in a child
    parser.add_argument("--one-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; allowed: {', '.join(CONFIGS)}")
    if args.one:
        log, final, seconds = train_member(args, CONFIGS[args.one])
        with open(args.one_out, "wb") as f:
            pickle.dump((log, final, seconds), f)
        return
    rows, baseline = [], None
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "member.pkl")
            child = subprocess.run([sys.executable, __file__, "--one", name, "--one-out", out, "--d", str(args.d),
                                    "--scheme", args.scheme, "--lam", args.lam, "--set", *args.set],
                                   capture_output=True, text=True)
            if child.returncode != 0:
                raise SystemExit(f"{name}: the run failed (exit {child.returncode}):\n{child.stderr[-3000:]}")
            with open(out, "rb") as f:
                log, final, seconds = pickle.load(f)
        baseline = baseline or final["grad_evals"]
        rows.append(summarise(name, log, final, seconds, baseline))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
