"""`train`: the one entry point. Methods are interchangeable; a batch of runs is one compiled call.

    ds = train(TwoLayer(width=20), data, Loss(name="logistic"), GD(lr=0.1),
               stop=Stop(max_steps=10_000), batch={"init_scale": [1e-3, 1e-2, 1e-1]})

returns an `xarray.Dataset` with every metric over (run, checkpoint), the final parameters of
every run and the configuration in its attributes (see `implicitbias.training.dataset`).

`train_runs(runs, data)` trains a group of run specs that share a static part (`RunSpec.static_key`) in one
call: the batch of per-member values is read from the specs' own fields (`training.batch.Batch.of`).
"""

from __future__ import annotations

import functools
import gc
import threading
import time as _time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.losses import Loss
from implicitbias.models.base import Model
from implicitbias.training.batch import Batch, Run
from implicitbias.training.dataset import to_dataset
from implicitbias.training.methods import GD, Method
from implicitbias.training.problem import Problem
from implicitbias.training.recorder import Recorder
from implicitbias.training.stopping import Status, Stop, failure_message
from implicitbias.training.validation import validate_inputs


@functools.lru_cache(maxsize=64)
def _compiled(problem: Problem, method: Method, stop: Stop, n: int, data_axis: int | None, recorder: Recorder,
              ref_axis: int | None = None):
    """Vmapped, jitted (init, advance, record) for one problem; cached so repeated runs reuse it.  The
    method builds its own stepping (`Method.stepper`)."""
    init_carry, advance = method.stepper(problem, stop, n)
    d_ax = data_axis

    def init_member(hp, X, y, theta0):
        theta, const = problem.init(hp, X.shape[-1])
        if theta0 is not None:
            theta = theta0
        return init_carry(hp, theta, const, X, y), const

    def record(hp, theta, *args):
        # metrics in float64 whatever the method's dtype (a float32 run's parameters are exact in float64)
        return recorder.record(hp, _float64(theta), *args)

    init = _one_or_many(init_member, (0, d_ax, d_ax, None))
    adv = _one_or_many(advance, (0, None, 0, 0, d_ax, d_ax))
    rec = _one_or_many(record, (0, 0, 0, d_ax, d_ax, d_ax, d_ax, ref_axis))
    return init, adv, rec


def _one_or_many(fn, in_axes: tuple):
    """`jit(vmap(fn, in_axes))`, except that a batch of one member (the size of the first argument's
    leading axis) calls a jitted unbatched `fn` on the member (its batch axis indexed away, and put back on
    the outputs).  Under vmap every `while_loop` of an adaptive solver carries batched predicates and selects
    over its whole state: for the one-member tasks a CPU sweep runs, RKC's `advance` on a small two-layer net
    compiled in 2.0 s instead of 2.4 s (measured A/B here).
    The member computes the same steps either way (results agree up to rounding)."""
    many = jax.jit(jax.vmap(fn, in_axes=in_axes))

    def member(*args):
        args = [a if ax is None or a is None else jax.tree_util.tree_map(lambda leaf: leaf[0], a)
                for a, ax in zip(args, in_axes)]
        return jax.tree_util.tree_map(lambda leaf: leaf[None], fn(*args))

    member.__name__ = member.__qualname__ = fn.__name__  # the name XLA's logs and dumps show
    one = jax.jit(member)

    def pick(args):
        size = jax.tree_util.tree_leaves(args[0])[0].shape[0]
        return one if size == 1 else many

    def call(*args):
        return pick(args)(*args)

    call.lower = lambda *args: pick(args).lower(*args)  # noqa: E731  (args may be jax.ShapeDtypeStruct)
    call.eval_shape = lambda *args: pick(args).eval_shape(*args)  # noqa: E731
    return call


def _init_while_compiling(init, advance, record, target, hp, X, y, theta0, record_data):
    """`init(hp, X, y, theta0)`, while `advance` and `record` compile for their first calls in two threads.

    XLA compiles with the GIL released, so the three programs of a first run compile side by side instead of
    one after the other.  Tracing and lowering hold the GIL: they run here, in the main thread, the longest
    compile (advance) first, with the shapes from `init.eval_shape`; only `.compile()` runs in the threads.
    jax keeps what `.lower(...).compile()` made, so the calls that follow find it compiled.  An error while
    compiling in a thread is dropped here: the same call in the main thread raises it again, where it belongs."""
    carry_s, const_s = init.eval_shape(hp, X, y, theta0)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="implicitbias-compile") as pool:
        jobs = [pool.submit(advance.lower(carry_s, target, hp, const_s, X, y).compile)]
        jobs.append(pool.submit(record.lower(hp, carry_s["theta"], const_s, *record_data).compile))
        carry, const = init(hp, X, y, theta0)
        for job in jobs:
            job.exception()  # waits
    return carry, const


def _float64(tree):
    """The floating-point leaves of a pytree as float64."""
    return jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)


def default_loss(data) -> Loss:
    """The logistic loss for a classification data set, the square loss otherwise."""
    return Loss(name="logistic" if data.task == "classification" else "square")


def train(
    model: Model,
    data,
    loss: Loss | None = None,
    method=None,
    *,
    stop: Stop | None = None,
    seed: int = 0,
    init_scale: float = 1.0,
    batch: Batch | Mapping[str, Sequence[Any]] | None = None,
    theta0=None,
    checkpoints: int | Sequence[float] = 30,
    reference: np.ndarray | None = None,
    kkt: bool = True,
    keep_trajectory: bool = False,
    progress: bool = False,
    config: Mapping[str, Any] | None = None,
    compact: bool = True,
):
    """Train one run or a batch of runs and return their results as an `xarray.Dataset`.

    model, loss, method, stop: specs (see `implicitbias.models`, `.losses`, `.training.methods`).
    data: a `Dataset`, or a sequence of same-shaped Datasets, one per member of the batch.
    batch: batched hyper-parameters, zipped: keys `seed`, `init_scale`, the method's traced fields (`lr` of
        the discrete methods) and `model.<field>` for the model's traced fields (`Model.traced_fields`); every
        list has one entry per run.  Or a `Batch` (then `seed` and `init_scale` are not read).
    theta0: explicit initial parameters (the same for every run), overriding the model's init.
    checkpoints: number of log-spaced checkpoints, or the list of steps (times for gradient flow).
    reference: a vector (or one per run, shape (runs, d)) against which the model's linear predictor
        is compared (e.g. the SVM direction).
    keep_trajectory: also store the parameters at every checkpoint (`trajectory.theta.<name>`), so
        every recorded metric can be recomputed; final parameters are always stored.
    kkt: record the KKT residual of S10 for homogeneous classification models.
    compact: advance only the members still running. Adaptive methods (gradient flow): in groups of similar pace
        (batches of 2^k, each size compiled once), since a vmapped adaptive solver advances at the pace of its
        slowest member and computes every member at every step. Fixed-step methods: once at most half of the
        batch still runs (members that converged or diverged have stopped), the running ones alone, as one
        batch of 2^k (a vmapped loop computes every member until the last one stops).
    """
    entered = _time.perf_counter()
    loss = loss or default_loss(data if not isinstance(data, Sequence) else data[0])
    method = method or GD()
    stop = stop or Stop()
    datasets = list(data) if isinstance(data, Sequence) else [data]
    validate_inputs(model, datasets, loss, method, stop)
    if not isinstance(batch, Batch):
        batch = Batch.from_lists(model, method, seed, init_scale, batch, n_data=len(datasets))
    elif len(datasets) not in (1, batch.size):
        raise ConfigError(f"{len(datasets)} data sets for a batch of {batch.size} runs: give one, or one per run")
    hp, overrides = batch.hp(), batch.model_overrides
    grid = method.checkpoint_grid(checkpoints, stop)
    batched = len(datasets) > 1
    stack = (lambda a: jnp.asarray(np.stack(a))) if batched else (lambda a: jnp.asarray(a[0]))
    X, y = stack([ds.X for ds in datasets]), stack([ds.y for ds in datasets])
    has_test = datasets[0].X_test is not None
    Xt = stack([ds.X_test for ds in datasets]) if has_test else X
    yt = stack([ds.y_test for ds in datasets]) if has_test else y
    problem = Problem(model, loss, overrides)
    recorder = Recorder(problem, loss.is_classification, has_test, reference is not None)
    ref = jnp.asarray(reference) if reference is not None else jnp.zeros(())
    ref_axis = 0 if ref.ndim == 2 else None
    pause = _GcPause()  # until the first checkpoint: importing, tracing and compiling make objects, not garbage
    try:
        init, advance, record = _compiled(problem, method, stop, X.shape[-2], 0 if batched else None, recorder,
                                          ref_axis)
        hp_j = jax.tree_util.tree_map(jnp.asarray, hp)

        started = _time.perf_counter()
        carry, const = _init_while_compiling(init, advance, record, grid[0], hp_j, X, y, theta0, (X, y, Xt, yt, ref))
        rows, kkt_rows, ticks, trajectory = [], [], [], []
        first_checkpoint = None  # seconds from entering train to the first recorded checkpoint (compiles included)
        bar = _progress_bar(len(grid), progress)
        active = _Active(hp_j, const, X, y, batched, enabled=compact,
                         adaptive=method.is_adaptive)
        for target in grid:
            carry = active.advance(advance, carry, target)
            rows.append(recorder.host(jax.device_get(record(hp_j, carry["theta"], const, X, y, Xt, yt, ref))))
            rows[-1] = {**rows[-1], **method.clock_readings(carry, hp)}
            kkt_rows.append(recorder.kkt_host(batch, carry["theta"], const, X, y) if kkt else {})
            ticks.append(target)
            if first_checkpoint is None:
                first_checkpoint = _time.perf_counter() - entered
                pause.end()
            if keep_trajectory:
                trajectory.append(jax.device_get(carry["theta"]))
            bar.update(1)
            if not np.any(np.asarray(carry["status"]) == Status.RUNNING):
                break
    finally:
        pause.end()
    bar.close()
    wall = _time.perf_counter() - started

    carry = jax.device_get(carry)
    status = np.asarray(carry["status"]).copy()
    status[status == Status.RUNNING] = Status.BUDGET
    lr = hp.get("lr")
    fail_time = np.asarray(method.failure_time(carry, hp), dtype=float)
    messages = [
        failure_message(Status(int(s)), int(fs), float(t), float(lo), float(lr[i]) if lr is not None else None)
        for i, (s, fs, t, lo) in enumerate(zip(status, carry["fail_step"], fail_time, carry["loss"]))
    ]
    return to_dataset(
        rows=rows, kkt_rows=kkt_rows, ticks=np.asarray(ticks), hp=hp, status=status, messages=messages,
        carry=carry, const=jax.device_get(const), method=method, wall_time=wall, trajectory=trajectory,
        first_checkpoint=first_checkpoint,
        config=config or {"model": model.model_dump(), "loss": loss.model_dump(),
                          "method": method.model_dump(), "stop": stop.model_dump()},
    )


def train_runs(runs: Sequence[Run], data, *, reference: np.ndarray | None = None, progress: bool = False):
    """Train a group of runs that share a static part (`RunSpec.static_key`) in one compiled call.

    The runs' static part (model structure, loss, method, stopping rule, checkpoints, what is recorded) is read
    from the first run, the per-member values from every run's typed fields (`Batch.of`).  data: one
    `Dataset` for all, or one per run; reference: as in `train`.  Returns `train`'s Dataset, one run per spec."""
    first = runs[0]
    return train(first.model, data, first.loss, first.method, stop=first.stop, batch=Batch.of(runs),
                 checkpoints=first.checkpoints, reference=reference, kkt=first.kkt,
                 keep_trajectory=first.keep_trajectory, progress=progress)


class _GcPause:
    """Python's cyclic garbage collector off from construction to `end()` (idempotent), process-wide.

    Tracing and compiling a program allocate hundreds of thousands of objects that live on, and each full
    collection traverses every object of the process (jax, diffrax, xarray ...) again: 0.5 s of the 3.9 s a
    first gradient-flow run took to its first checkpoint (`gc.callbacks`, chistikov2023-fig1 quick).  Reference
    counting still frees everything acyclic.  Pauses nest across threads (a Dask worker trains in several): the
    collector comes back when the last one ends, and only if it was on before the first."""

    _lock = threading.Lock()
    _open = 0
    _was_enabled = False

    def __init__(self):
        with _GcPause._lock:
            if _GcPause._open == 0:
                _GcPause._was_enabled = gc.isenabled()
                gc.disable()
            _GcPause._open += 1
        self._ended = False

    def end(self) -> None:
        with _GcPause._lock:
            if self._ended:
                return
            self._ended = True
            _GcPause._open -= 1
            if _GcPause._open == 0 and _GcPause._was_enabled:
                gc.enable()


class _Active:
    """Advances the members of a batch that still run, in groups that move at similar paces.

    A vmapped adaptive solver computes every member at every step until its slowest member is done,
    so one member that needs 10^5 steps makes the whole batch pay for them.  After every chunk the
    running members are sorted by the steps they took in it and split into groups (batches of 2^k,
    so that few shapes are compiled) that minimise sum(group size x steps of its slowest member);
    stopped members are not advanced again.  Each member makes the same computation as in the full
    batch; results agree up to rounding that depends on the batch size.

    A fixed-step method (`adaptive=False`) moves every running member by the same steps, so its running
    members form one group, without dummies; it is formed once at most half of the current batch runs, so
    that a batch is compiled at most log2(size) times and a batch in which every member runs is never
    regrouped."""

    #: fixed cost of one more group (a call, its dummy members), in member-steps
    GROUP_COST = 50

    def __init__(self, hp, const, X, y, batched: bool, enabled: bool, adaptive: bool = True):
        self.args = (hp, const, X, y)
        self.batched = batched
        self.enabled = enabled
        self.adaptive = adaptive
        self.groups = None  # None: the whole batch as one call; else [(members, n_real, args)]

    def advance(self, advance, carry, target):
        before = np.asarray(carry["step"])
        if self.groups is None:
            carry = advance(carry, target, *self.args)
        else:
            for members, n_real, args in self.groups:
                part = advance(_take(carry, members), target, *args)
                carry = _put(carry, members[:n_real], _take(part, np.arange(n_real)))
        if self.enabled and self.adaptive:
            self._regroup(carry, np.asarray(carry["step"]) - before)
        elif self.enabled:
            self._shrink(carry)
        return carry

    def _shrink(self, carry) -> None:
        status = np.asarray(carry["status"])
        running = np.flatnonzero(status == Status.RUNNING)
        size = status.size if self.groups is None else len(self.groups[0][0])  # the batch computed now
        if len(running) == 0 or 2 * len(running) > size:
            return
        self._set_groups([running], pad=False)

    def _regroup(self, carry, steps) -> None:
        status = np.asarray(carry["status"])
        running = np.flatnonzero(status == Status.RUNNING)
        order = running[np.argsort(-steps[running], kind="stable")]
        work = np.maximum(steps[order], 1).astype(float)
        # best[i]: cheapest split of the i slowest members; a group j..i-1 costs 2^ceil(log2(i-j)) * work[j]
        k = len(order)
        best, cut = np.zeros(k + 1), np.zeros(k + 1, dtype=int)
        for i in range(1, k + 1):
            costs = [best[j] + _pow2(i - j) * work[j] + self.GROUP_COST for j in range(i)]
            cut[i] = int(np.argmin(costs))
            best[i] = costs[cut[i]]
        bounds, i = [], k
        while i > 0:
            bounds.append((cut[i], i))
            i = cut[i]
        if len(bounds) == 1 and k == len(status):
            self.groups = None  # everyone runs, at one pace: the whole batch
            return
        self._set_groups([order[j:i] for j, i in reversed(bounds)])

    def _set_groups(self, parts, pad: bool = True) -> None:
        hp, const, X, y = self.args
        self.groups = []
        for real in parts:
            size = _pow2(len(real)) if pad else len(real)
            members = np.concatenate([real, np.repeat(real[-1:], size - len(real))])
            X_g, y_g = (_take(X, members), _take(y, members)) if self.batched else (X, y)
            self.groups.append((members, len(real), (_take(hp, members), _take(const, members), X_g, y_g)))


def _take(tree, index):
    index = jnp.asarray(index)
    return jax.tree_util.tree_map(lambda a: a[index], tree)


def _put(tree, index, part):
    index = jnp.asarray(index)
    return jax.tree_util.tree_map(lambda a, p: a.at[index].set(p), tree, part)


def _pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm  # deferred on purpose: ~0.1 s to import, needed only with a progress bar

    return tqdm(total=total, desc="checkpoints", unit="ckpt", leave=False)
