"""Run a list of runs on Dask: each task trains one group of runs (one compiled call), and every run is
stored the moment its task finishes.

    outcome = run_sweep(runs, RunStore(DIR), workers=2)

- runs already in the store are loaded, not trained (an interrupted sweep resumes and loses
  nothing that finished); a stored file that is truncated or corrupt is reported and retrained;
- the split into tasks depends only on the runs (`group_runs`), never on the number of workers, so
  1 worker and 8 workers give bit-identical results;
- a run that diverges is stored as diverged (status, step, message) and reported; a task that raises
  is not retried (the same code on the same values raises again): its runs are recorded in the store with
  the error (`RunStore.save_failure`), reported, and tried again by the next sweep; the rest goes on;
- a worker that dies mid-task has its task retried on another worker by Dask; nothing is written
  twice under different names (a run's file is named by its identity and replaced atomically);
- nothing waits forever: a cluster that gives no worker within `worker_timeout` seconds (or loses every
  worker for that long) ends the sweep with a `ResourceError` saying what is missing; a full disk ends it
  with a `DiskFull` naming the file; what finished is kept either way;
- Ctrl-C cancels what is running, shuts the cluster down and keeps what finished;
- the cluster a sweep starts is closed when the sweep ends, or, inside `cluster_scope()`, when the scope
  ends (after the results are written); a failure to close is a warning.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import xarray as xr
from distributed import LocalCluster, as_completed
from tqdm.auto import tqdm

from implicitbias._spec import ResourceError
from implicitbias.data import Dataset
from implicitbias.reference.memo import memo_directory
from implicitbias.runs import execute
from implicitbias.runs.spec import RunSpec, group_runs
from implicitbias.status import Status
from implicitbias.storage.store import RunStore
from implicitbias.sweeps import cluster as clusters
from implicitbias.sweeps.cluster import keep_allocations, pin_threads


@dataclasses.dataclass
class SweepOutcome:
    """What a sweep produced: every run's arrays (None for a run whose task raised), the data sets by
    data key, and what went wrong."""

    runs: list[RunSpec]
    arrays: list[xr.Dataset | None]
    datasets: dict[str, Dataset]
    reused: int = 0
    trained: int = 0
    errors: dict[str, str] = dataclasses.field(default_factory=dict)  # run key -> exception message
    wall_time_s: float = 0.0
    compute_s: float = 0.0  # seconds spent inside tasks, summed over workers
    workers: int = 0

    @property
    def failed(self) -> list[tuple[RunSpec, str]]:
        """Runs that diverged, whose solver failed, or whose task raised, with their messages."""
        out = []
        for spec, ds in zip(self.runs, self.arrays):
            if ds is None:
                out.append((spec, self.errors.get(spec.key(), "not trained")))
            elif Status(int(ds["status"].values[0])).failed:
                out.append((spec, str(ds["message"].values[0])))
        return out


def train_task(specs: Sequence[RunSpec], root: str | None = None
               ) -> tuple[list[xr.Dataset], dict[str, Dataset], float, bool]:
    """One Dask task: train one group of runs (their `RunSpec`s, as they are); returns per-run Datasets, their
    data sets, seconds, and
    whether it stored them itself.  With `root` (a store directory this worker shares with the sweep, as
    the workers of a LocalCluster do) the worker writes each run's file and data set there, atomically:
    the ~40 ms NetCDF write of a run then runs on the workers in parallel instead of in the sweep's main
    process, which shares the cores with them."""

    pin_threads()  # threads XLA started since the worker came up
    keep_allocations()
    started = time.perf_counter()
    specs = list(specs)
    with memo_directory(root) if root is not None else contextlib.nullcontext():
        arrays = execute.train_group(specs)  # the references it needs (an SVM) come from the run directory's memo
    data = {s.data_key(): execute.dataset_of(s) for s in specs}
    if root is not None:
        _store(RunStore(root), specs, arrays, data)
    return arrays, data, time.perf_counter() - started, root is not None


def _store(store: RunStore, specs: Sequence[RunSpec], arrays: Sequence[xr.Dataset], data: dict[str, Dataset]) -> None:
    for spec, ds in zip(specs, arrays):
        store.save_data(spec, data[spec.data_key()])
        store.save_run(ds)


def run_sweep(runs: Sequence[RunSpec], store: RunStore, *, workers: int | None = None, scheduler: str | None = None,
              cluster: str | None = None, client=None, progress: bool = False, say: Callable[[str], None] = print,
              max_flow: int | None = None, max_discrete: int | None = None, worker_timeout: float | None = None,
              dashboard_address: str | None = None) -> SweepOutcome:
    """Train the runs not yet in `store` and return every run's arrays.

    workers: None picks one single-threaded worker process per usable core (and trains in this
    process when there is a single task); 0 trains in this process; n >= 1 starts n workers.
    scheduler: the address of a running Dask scheduler; cluster: a dask-jobqueue YAML file; client: a
    Dask client of your own (e.g. in a notebook), left open.
    max_flow, max_discrete: the most runs of one task (None: `task_sizes()` of this machine's device).
    worker_timeout: seconds to wait for a first worker, or for one to come back after all were lost (None:
    `cluster.WORKER_TIMEOUT_S` of the kind of cluster); dashboard_address: where the dashboard of a cluster
    started here listens (None: 127.0.0.1 on a free port)."""
    started = time.perf_counter()
    runs = list(runs)
    out = SweepOutcome(runs, [None] * len(runs), {})
    by_key: dict[str, list[int]] = {}
    for i, spec in enumerate(runs):
        by_key.setdefault(spec.key(), []).append(i)
    todo = []
    for idx in by_key.values():
        ds = store.load_run(runs[idx[0]])
        data = store.load_data(runs[idx[0]]) if ds is not None else None
        if ds is None or data is None:
            todo.append(runs[idx[0]])
            continue
        for i in idx:
            out.arrays[i] = ds
        out.datasets[runs[idx[0]].data_key()] = data
        out.reused += len(idx)
    sizes = task_sizes()
    groups = group_runs(todo, max_flow=max_flow or sizes[0], max_discrete=max_discrete or sizes[1])
    log = _Log(store.root / "log.txt")
    bar = _bar(len(runs), out.reused, progress)
    if out.reused:
        say(f"{out.reused} of {len(runs)} runs already in {store.root / 'runs'}: loaded, not trained")
    earlier = store.failures()
    again = sum(1 for spec in todo if spec.key() in earlier)
    if again:
        say(f"{again} runs failed in an earlier attempt (their errors in {store.root / 'failed'}): trying them again")

    def finished(group: list[RunSpec], result) -> None:
        if isinstance(result, ResourceError):
            raise result  # a full disk on a worker: every further run would fail the same way
        if isinstance(result, BaseException):
            message = f"{type(result).__name__}: {result}"
            for spec in group:
                out.errors[spec.key()] = message
                log.line(spec, "error", 0.0, message)
                try:
                    store.save_failure(spec, message)
                except OSError as exc:
                    say(f"warning: the failure of {spec.key()} could not be recorded ({exc})")
        else:
            arrays, data, seconds, stored = result
            out.compute_s += seconds
            if not stored:
                _store(store, group, arrays, data)
            for spec, ds in zip(group, arrays):
                out.datasets[spec.data_key()] = data[spec.data_key()]
                for i in by_key[spec.key()]:
                    out.arrays[i] = ds
                out.trained += len(by_key[spec.key()])
                status = Status(int(ds["status"].values[0]))
                log.line(spec, status.name.lower(), float(ds.attrs.get("wall_time_s", 0.0)), str(ds["message"].values[0]))
        bar.update(sum(len(by_key[s.key()]) for s in group))

    try:
        if groups:
            _execute(groups, finished, workers=workers, scheduler=scheduler, cluster=cluster, client=client, say=say,
                     out=out, root=str(store.root.resolve()), worker_timeout=worker_timeout,
                     dashboard_address=dashboard_address)
    finally:
        bar.close()
        log.close()
    out.wall_time_s = time.perf_counter() - started
    return out


def task_sizes() -> tuple[int, int]:
    """(gradient-flow runs, discrete-method runs) per task.  On a CPU a vmapped adaptive solve costs
    members x the steps of the slowest member, so gradient flow runs one member per task, while fixed-step
    methods share a vmapped call of up to 16: a GD step of S11's network (m = 200) costs a member 1.8 us in a
    batch of 16 at d = 4 (3.4 alone, 2.4 in a batch of 64) and ~10 us in any batch at d = 16
    (`benchmarks/bench_gd_batch.py`), and smaller tasks spread a sweep's slowest members over the workers.
    An accelerator computes a wide batch in about the time of one member, so there tasks are large vmapped
    groups (one worker per device)."""

    return (1, 16) if jax.default_backend() == "cpu" else (64, 1024)


#: the clients a `cluster_scope` will close; None outside a scope (each sweep closes its own)
_SCOPE: contextvars.ContextVar[list | None] = contextvars.ContextVar("implicitbias_cluster_scope", default=None)


@contextlib.contextmanager
def cluster_scope(warn: Callable[[str], None] = print):
    """Clusters that sweeps start inside the block are closed when the block ends, not when their sweep ends:
    the command line writes results.nc, the figures and the report first, so a cluster that fails to shut down
    cannot cost them.  A failure to close is reported through `warn`, never raised."""

    pending: list = []
    token = _SCOPE.set(pending)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        for client in pending:
            clusters.close(client, warn=warn)


def _execute(groups, finished, *, workers, scheduler, cluster, client, say, out: SweepOutcome, root: str,
             worker_timeout: float | None = None, dashboard_address: str | None = None) -> None:
    """Train the groups in this process or on Dask, calling `finished(group, result)` as each ends.  The
    workers of a LocalCluster started here share this machine's files and store their runs under `root`
    themselves; the workers of a scheduler or jobqueue cluster (whose file systems may differ) send them back."""

    own, local, kind = client is None, False, "scheduler"
    address = dashboard_address or clusters.DASHBOARD_ADDRESS
    if client is not None:

        local = isinstance(getattr(client, "cluster", None), LocalCluster)  # workers on this machine
        kind = "local" if local else "scheduler"
    elif scheduler is None and cluster is None:

        # a CPU: one single-threaded worker per core; an accelerator: one worker driving it with wide groups
        auto = len(clusters.usable_cores()) if jax.default_backend() == "cpu" else 1
        n = auto if workers is None else workers
        n = min(n, len(groups))
        if n == 0 or (workers is None and n == 1):
            out.workers = 0
            for group in groups:
                finished(group, _call(train_task, list(group)))
            return
        client = clusters.local_client(n, dashboard_address=address)
        out.workers = n
        local, kind = True, "local"
    elif cluster is not None:
        client = clusters.jobqueue_client(cluster, dashboard_address=address)
        kind = "batch"
    else:
        client = clusters.connect(scheduler)
    timeout = clusters.WORKER_TIMEOUT_S[kind] if worker_timeout is None else worker_timeout
    what = {"local": "the local Dask cluster", "scheduler": f"the Dask scheduler at {scheduler or client.scheduler.address}",
            "batch": f"the cluster of {cluster}"}[kind]
    futures = {}
    try:
        clusters.wait_for_workers(client, timeout, what)
        workers_now = len(client.scheduler_info().get("workers", {}))
        where = f"dashboard {client.dashboard_link}" if _dashboard(client) else f"scheduler {client.scheduler.address}"
        say(f"Dask: {len(groups)} tasks on {workers_now or 'pending'} workers; {where}")
        # no retries: a task that raised raises again (its runs are recorded as failed); a task whose worker was
        # lost is moved to another worker by the scheduler itself (distributed.scheduler.allowed-failures)
        for group in groups:
            future = client.submit(train_task, list(group), root if local else None,
                                   key=f"train-{group[0].key()}-{len(group)}", pure=False)
            futures[future] = group
        _gather(client, futures, finished, timeout, what)
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(list(futures))
        raise
    finally:
        if not out.workers:
            with contextlib.suppress(Exception):
                out.workers = len(client.scheduler_info().get("workers", {}))
        if own:
            scope = _SCOPE.get()
            if scope is not None:
                scope.append(client)
            else:
                clusters.close(client, warn=say)


@contextlib.contextmanager
def _interrupt_at_poll():
    """While the sweep waits on its tasks, a Ctrl-C only sets a flag, which the wait loop turns into a
    KeyboardInterrupt at its next poll (every 20 ms).  Raised by Python's own handler, it could land inside a Dask
    future's `__del__` or a callback, where Python prints "Exception ignored" with a traceback and drops it: the
    sweep then went on to its end (seen once in the test suite, tests/test_sweep.py's Ctrl-C test).  Outside the
    main thread, or under a SIGINT handler other than Python's default, nothing changes.  Yields the function
    that says whether a Ctrl-C came."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield lambda: False
        return
    came: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield lambda: bool(came)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _gather(client, futures: dict, finished, timeout: float, what: str) -> None:
    """Hand each future's result to `finished` as it completes; raise ResourceError when the cluster has had no
    worker for `timeout` seconds while tasks remain (jobs ended, nodes lost) instead of waiting forever.  A Ctrl-C
    is raised at the loop's next poll (`_interrupt_at_poll`)."""
    done = as_completed(list(futures))
    checked, lost_since = time.monotonic(), None
    with _interrupt_at_poll() as interrupted:
        while not done.is_empty():
            if interrupted():
                raise KeyboardInterrupt
            batch = done.next_batch(block=False)
            for future in batch:
                group = futures.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - one failed task never throws away the others
                    result = exc
                finished(group, result)
            if batch:
                continue
            now = time.monotonic()
            if now - checked >= 1.0:
                checked = now
                if client.nthreads():
                    lost_since = None
                elif lost_since is None:
                    lost_since = now
                elif now - lost_since > timeout:
                    raise ResourceError(f"{what} has had no worker for {timeout:g} s (--worker-timeout) with "
                                        f"{len(futures)} tasks left{clusters.queue_state(client)}; the finished runs are "
                                        "kept, rerun the same command to resume")
            time.sleep(0.02)


def _call(fn, *args):
    try:
        return fn(*args)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001
        return exc


def _dashboard(client) -> bool:
    try:
        return bool(client.dashboard_link) and "None" not in client.dashboard_link
    except Exception:  # noqa: BLE001
        return False


class _Log:
    """`DIR/log.txt`: one line per finished run (time, status, seconds, identity, what it is)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def line(self, spec: RunSpec, status: str, seconds: float, message: str = "") -> None:
        now = datetime.datetime.now().isoformat(timespec="seconds")
        extra = f" | {message}" if message else ""
        try:  # the log only informs: a full disk is reported by the run files' writes, which matter
            self.file.write(f"{now} {status:<13} {seconds:8.2f} s  {spec.key()}  {spec.label()}{extra}\n")
            self.file.flush()
        except OSError:
            pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass


def _bar(total: int, done: int, enabled: bool):
    if not enabled:
        return _NoBar()

    return tqdm(total=total, initial=done, desc="runs", unit="run", smoothing=0.05, dynamic_ncols=True)
