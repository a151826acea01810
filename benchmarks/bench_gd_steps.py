"""GD steps per second of the S1 model: the engine against a NumPy loop and a PyTorch eager loop.

The S1 model is Frei et al.'s two-layer network: a trained hidden layer W (m x d), a fixed outer layer
a_j = +-1/sqrt(m), leaky ReLU, logistic loss, float64, full-batch gradient descent.  Three implementations
of the same step are timed on the same data from the same initial parameters:

- engine:  `implicitbias.training.train.train` with `GD`; its compiled loop (a `lax.while_loop` with the
  divergence and convergence checks) is timed by difference, T(checkpoints=[0, K]) - T(checkpoints=[0, k0]),
  after a warm-up call with the same shapes, so compilation, initialisation and the two checkpoint records
  cancel and only the K - k0 extra steps remain;
- numpy:   a per-step Python loop, forward and hand-written backward (two matmuls per step);
- pytorch: a per-step eager autograd loop (`nn.Module`, `loss.backward()`, `optim.SGD`), float64,
  `torch.set_num_threads(2)`: the way papers' code trains.  Skipped with a message if torch is missing
  (install the optional extra: `pip install torch==2.13.0`).

One step costs 4 n d m FLOPs (the forward X W^T and the backward G^T X); the machine's float64 matmul
peak is measured in the same run (NumPy, 2 threads, 2000 x 2000 @ 2000 x 2000, best of several).

    python benchmarks/bench_gd_steps.py [--quick] [--repeats 3] [--json results.json]

Targets: engine >= 3x NumPy and >= 10x PyTorch at the smallest size; >= 0.8x the faster of the two at
the largest size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

SIZES = [(20, 50, 20), (100, 1000, 100), (1000, 2000, 500)]
QUICK_SIZES = [(20, 50, 20), (100, 1000, 100)]
THREADS = 2
GAMMA = 0.5  # leaky ReLU slope
INIT_SCALE = 1e-2  # W_jk ~ N(0, INIT_SCALE^2)


# -- problem -------------------------------------------------------------------------------------------
def make_problem(n: int, d: int, m: int, seed: int = 0):
    """The S1 data (Frei et al.'s Gaussian mixture), model spec and step size for one size."""
    from implicitbias.data import GaussianMixture
    from implicitbias.losses import Loss
    from implicitbias.models.two_layer import TwoLayer
    from implicitbias.training.methods import GD

    data = GaussianMixture(n=n, d=d, n_test=0).generate(seed)
    model = TwoLayer(width=m, activation="leaky_relu", gamma=GAMMA, train_outer=False,
                     outer_scale="inv_sqrt_width", outer_signs="balanced")
    # a step well below 2 / beta (beta <= max ||x||^2 / 4): the loss decreases and stays away from 0
    lr = 0.5 / float(np.max(np.sum(data.X**2, axis=1)))
    return data, model, Loss(name="logistic"), GD(lr=lr)


def engine_train(problem, steps: int, theta0=None):
    """One `train` call recording at steps 0 and `steps`; returns the xarray result."""
    from implicitbias.training.stopping import Stop
    from implicitbias.training.train import train

    data, model, loss, method = problem
    # a fixed Stop (the compiled loop is cached per Stop): max_steps never binds, no loss tolerance
    return train(model, data, loss, method, stop=Stop(max_steps=10**12), init_scale=INIT_SCALE,
                 checkpoints=[0, steps] if steps > 0 else [0], kkt=False, theta0=theta0)


# -- baselines -----------------------------------------------------------------------------------------
def numpy_steps(X, y, a, W, lr: float, steps: int):
    """`steps` GD steps in NumPy: forward, logistic loss, hand-written backward. Returns (W, last loss)."""
    n = X.shape[0]
    loss = np.nan
    for _ in range(steps):
        Z = X @ W.T  # (n, m) pre-activations
        pos = Z > 0
        f = np.where(pos, Z, GAMMA * Z) @ a
        q = y * f
        loss = np.mean(np.logaddexp(0.0, -q))
        r = -y * (0.5 - 0.5 * np.tanh(0.5 * q)) / n  # dL/df_i = -y_i sigmoid(-q_i) / n
        G = np.where(pos, 1.0, GAMMA) * np.outer(r, a)  # dL/dZ
        W = W - lr * (G.T @ X)
    return W, loss


def torch_available() -> tuple[bool, str]:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return False, (f"PyTorch is not importable ({exc}); install the optional extra: "
                       "pip install torch==2.13.0")
    return True, ""


def torch_setup(X, y, a, W, lr: float):
    """An nn.Module with the hidden layer trained and the outer layer a fixed buffer, and its optimiser."""
    import torch

    torch.set_num_threads(THREADS)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.nn.Linear(W.shape[1], W.shape[0], bias=False, dtype=torch.float64)
            with torch.no_grad():
                self.hidden.weight.copy_(torch.from_numpy(W.copy()))
            self.register_buffer("a", torch.from_numpy(a.copy()))

        def forward(self, x):
            return torch.nn.functional.leaky_relu(self.hidden(x), GAMMA) @ self.a

    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    return net, opt, torch.from_numpy(X), torch.from_numpy(y)


def torch_steps(state, steps: int):
    import torch

    net, opt, Xt, yt = state
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.softplus(-yt * net(Xt)).mean()
        loss.backward()
        opt.step()
    return net.hidden.weight.detach().numpy().copy()


# -- timing --------------------------------------------------------------------------------------------
def blas_threads(n: int):
    """A context limiting NumPy's BLAS to n threads (threadpoolctl), or a no-op if it is missing."""
    try:
        import threadpoolctl

        return threadpoolctl.threadpool_limits(n)
    except ImportError:  # pragma: no cover
        import contextlib

        return contextlib.nullcontext()


def matmul_peak(size: int, repeats: int) -> float:
    """Best float64 GFLOP/s of a size x size NumPy matmul on THREADS threads."""
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((size, size)), rng.standard_normal((size, size))
    best = np.inf
    with blas_threads(THREADS):
        A @ B
        for _ in range(repeats):
            t0 = time.perf_counter()
            A @ B
            best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best / 1e9


def pick_steps(time_k, target_s: float, start: int = 1, cap: int = 10**7, least: float = 0.0) -> int:
    """The number of steps whose run takes about target_s, from growing trial runs of `time_k(k)`; a trial
    counts once it takes min(target_s / 8, 0.5 s) and at least `least` seconds."""
    k = start
    while True:
        dt = time_k(k)
        if dt >= max(min(target_s / 8, 0.5), least) or k >= cap:
            return int(min(cap, max(1, round(k * target_s / max(dt, 1e-9)))))
        k *= 4 if dt < target_s / 100 else 2


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Size:
    """The three implementations at one (n, d, m), from the engine's initial parameters."""

    def __init__(self, n: int, d: int, m: int, with_torch: bool):
        self.n, self.d, self.m = n, d, m
        self.problem = make_problem(n, d, m)
        data, _, _, method = self.problem
        self.lr = method.lr
        init = engine_train(self.problem, 0)  # compiles and gives the initial parameters
        self.W0 = np.asarray(init["theta.W"].values[0])
        self.a = np.asarray(init["const.a"].values[0])
        self.X, self.y = np.asarray(data.X, dtype=np.float64), np.asarray(data.y, dtype=np.float64)
        self.with_torch = with_torch
        self.k0 = 1

    # engine: difference of two train calls, so that everything but the extra steps cancels
    def engine_time(self, k: int) -> float:
        return timed(lambda: engine_train(self.problem, self.k0 + k)) - timed(
            lambda: engine_train(self.problem, self.k0))

    def numpy_time(self, k: int) -> float:
        with blas_threads(THREADS):
            return timed(lambda: numpy_steps(self.X, self.y, self.a, self.W0, self.lr, k))

    def torch_time(self, k: int) -> float:
        state = torch_setup(self.X, self.y, self.a, self.W0, self.lr)
        return timed(lambda: torch_steps(state, k))

    def check_agreement(self, steps: int = 5) -> dict:
        """Max relative difference of W after `steps` steps, engine against NumPy and PyTorch."""
        ds = engine_train(self.problem, steps)
        if int(ds["step"].values[0, -1]) != steps:
            raise RuntimeError(f"the engine stopped early at size {(self.n, self.d, self.m)}: "
                               f"{ds['message'].values}")
        W_e = np.asarray(ds["theta.W"].values[0])
        with blas_threads(THREADS):
            W_np, _ = numpy_steps(self.X, self.y, self.a, self.W0, self.lr, steps)
        scale = np.max(np.abs(W_np - self.W0))  # the size of the change made by the steps
        out = {"steps": steps, "engine_vs_numpy": float(np.max(np.abs(W_e - W_np)) / scale)}
        if self.with_torch:
            W_t = torch_steps(torch_setup(self.X, self.y, self.a, self.W0, self.lr), steps)
            out["engine_vs_pytorch"] = float(np.max(np.abs(W_e - W_t)) / scale)
        bad = {k: v for k, v in out.items() if k != "steps" and not v < 1e-8}
        if bad:
            raise RuntimeError(f"implementations disagree at {(self.n, self.d, self.m)}: {bad} (relative to "
                               f"the change of W over {steps} steps)")
        return out


def bench_size(size: Size, repeats: int, target_s: float) -> dict:
    methods = {"engine": size.engine_time, "numpy": size.numpy_time}
    if size.with_torch:
        methods["pytorch"] = size.torch_time
    steps = {"numpy": pick_steps(size.numpy_time, target_s)}
    if size.with_torch:
        steps["pytorch"] = pick_steps(size.torch_time, target_s)
    # the engine's timing is a difference of two train calls that each record two checkpoints: its run is
    # made long against that fixed cost, so that the noise of the cost does not matter
    fixed = statistics.median(timed(lambda: engine_train(size.problem, size.k0)) for _ in range(3))
    trial = lambda k: timed(lambda: engine_train(size.problem, size.k0 + k)) - fixed
    steps["engine"] = pick_steps(trial, max(target_s, 2.0 * fixed), start=max(1, steps["numpy"] // 4),
                                 least=fixed)
    steps = {name: steps[name] for name in methods}
    # the engine's full run must really take its steps (no divergence, no early stop)
    ds = engine_train(size.problem, size.k0 + steps["engine"])
    if int(ds["step"].values[0, -1]) != size.k0 + steps["engine"]:
        raise RuntimeError(f"the engine stopped early: {ds['message'].values}")
    rates: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):  # interleaved, so that a change of load hits every method alike
        for name, fn in methods.items():
            dt = fn(steps[name])
            rates[name].append(steps[name] / dt if dt > 0 else float("nan"))
    flops = 4.0 * size.n * size.d * size.m
    out = {"n": size.n, "d": size.d, "m": size.m, "flops_per_step": flops, "steps": steps}
    for name, r in rates.items():
        ok = [v for v in r if np.isfinite(v)]
        if not ok:
            raise RuntimeError(f"{name} at {(size.n, size.d, size.m)}: no usable timing (too noisy)")
        med = statistics.median(ok)
        out[name] = {"steps_per_s": med, "all_steps_per_s": r, "gflops": med * flops / 1e9}
    return out


# -- report --------------------------------------------------------------------------------------------
def summarize(results: list[dict], peak: float) -> dict:
    for row in results:
        for name in ("engine", "numpy", "pytorch"):
            if name in row:
                row[name]["fraction_of_peak"] = row[name]["gflops"] / peak
        e = row["engine"]["steps_per_s"]
        row["engine_over_numpy"] = e / row["numpy"]["steps_per_s"]
        if "pytorch" in row:
            row["engine_over_pytorch"] = e / row["pytorch"]["steps_per_s"]
            best = max(row["numpy"]["steps_per_s"], row["pytorch"]["steps_per_s"])
            row["engine_over_best_baseline"] = e / best
        else:
            row["engine_over_best_baseline"] = row["engine_over_numpy"]
    first, last = results[0], results[-1]
    small, large = (first["n"], first["d"], first["m"]), (last["n"], last["d"], last["m"])
    targets = {f"engine/numpy >= 3 at {small}": first["engine_over_numpy"] >= 3.0}
    if "engine_over_pytorch" in first:
        targets[f"engine/pytorch >= 10 at {small}"] = first["engine_over_pytorch"] >= 10.0
    targets[f"engine/best baseline >= 0.8 at {large}"] = last["engine_over_best_baseline"] >= 0.8
    return targets


def print_table(results: list[dict], peak: float, targets: dict, note: str) -> None:
    print(f"\nfloat64 matmul peak (NumPy, {THREADS} threads, best of several): {peak:.1f} GFLOP/s")
    head = f"{'(n, d, m)':>18} {'method':>8} {'steps/s':>11} {'us/step':>10} {'GFLOP/s':>9} {'of peak':>8}"
    print(head)
    print("-" * len(head))
    for row in results:
        label = f"({row['n']}, {row['d']}, {row['m']})"
        for name in ("engine", "numpy", "pytorch"):
            if name not in row:
                continue
            r = row[name]
            print(f"{label:>18} {name:>8} {r['steps_per_s']:>11.1f} {1e6 / r['steps_per_s']:>10.1f} "
                  f"{r['gflops']:>9.2f} {100 * r['fraction_of_peak']:>7.1f}%")
            label = ""
    print("\nratios (engine steps/s over the baseline's, same run):")
    print(f"{'(n, d, m)':>18} {'/numpy':>8} {'/pytorch':>9} {'/best':>7}")
    for row in results:
        label = f"({row['n']}, {row['d']}, {row['m']})"
        pt = f"{row['engine_over_pytorch']:>9.2f}" if "engine_over_pytorch" in row else f"{'-':>9}"
        print(f"{label:>18} {row['engine_over_numpy']:>8.2f} {pt} {row['engine_over_best_baseline']:>7.2f}")
    print("\ntargets:")
    for name, ok in targets.items():
        print(f"  {'PASS' if ok else 'MISS'}  {name}")
    if note:
        print(note)


def machine_info() -> dict:
    import jax

    info = {"python": platform.python_version(), "numpy": np.__version__, "jax": jax.__version__,
            "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine()}
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def load_average() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:  # pragma: no cover
        return None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: two smaller sizes, short timings")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per method (median kept)")
    parser.add_argument("--seconds", type=float, default=None, help="target duration of one timed run")
    parser.add_argument("--sizes", type=str, default=None, help="e.g. '20,50,20;100,1000,100'")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch baseline")
    parser.add_argument("--json", type=str, default=None, help="write the results to this JSON file")
    args = parser.parse_args(argv)

    import implicitbias  # noqa: F401  (enables float64 in JAX)

    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = [tuple(int(v) for v in s.split(",")) for s in args.sizes.split(";")]
    repeats = args.repeats or (1 if args.quick else 3)
    target_s = args.seconds or (0.15 if args.quick else 1.0)
    with_torch, why = (False, "skipped by --no-torch") if args.no_torch else torch_available()
    if not with_torch:
        print(f"PyTorch baseline skipped: {why}")

    load_before = load_average()
    peak = matmul_peak(2000, 3 if args.quick else 7)
    results, agreement = [], {}
    for n, d, m in sizes:
        print(f"size (n, d, m) = ({n}, {d}, {m}) ...", flush=True)
        size = Size(n, d, m, with_torch)
        agreement[f"{n},{d},{m}"] = size.check_agreement()
        results.append(bench_size(size, repeats, target_s))
    targets = summarize(results, peak)
    note = ("(quick run: sizes and timings are a smoke test; the targets are set for the full sizes "
            f"{SIZES[0]} and {SIZES[-1]})") if args.quick or args.sizes else ""
    print("\nagreement after 5 steps (max |dW| relative to the change of W):")
    for k, v in agreement.items():
        print(f"  ({k}): " + ", ".join(f"{name} {val:.1e}" for name, val in v.items() if name != "steps"))
    print_table(results, peak, targets, note)
    out = {
        "benchmark": "gd_steps", "quick": bool(args.quick), "repeats": repeats, "target_seconds": target_s,
        "peak_gflops": peak, "threads": THREADS, "pytorch": with_torch, "pytorch_skipped_reason": why or None,
        "results": results, "agreement": agreement, "targets": targets,
        "load_average_before": load_before, "load_average_after": load_average(), "machine": machine_info(),
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
        print(f"results written to {args.json}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
