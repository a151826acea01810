"""Where a sweep's tasks run: a Dask distributed client, from a laptop to a SLURM/PBS cluster.

- `local_client(n)`: a `LocalCluster` of n single-threaded worker processes on this machine, each
  pinned to its own core (JAX ignores XLA's thread flags; one pinned single-threaded process per
  core keeps each at its solo speed), with BLAS and XLA limited to one thread;
- `connect(address)`: a running Dask scheduler (`--scheduler tcp://host:8786`);
- `jobqueue_client(file)`: a SLURM or PBS cluster through dask-jobqueue, from a YAML file:

      kind: slurm          # or pbs
      jobs: 4              # batch jobs to start (each runs `processes` workers)
      cores: 16            # every other key is passed to dask_jobqueue.SLURMCluster / PBSCluster
      processes: 16
      memory: 64GB
      walltime: "04:00:00"
      queue: normal

The same `implicitbias.sweeps.sweep.run_sweep` drives all three.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from implicitbias._spec import ConfigError

#: environment of every worker process: one thread for BLAS and OpenMP (XLA's CPU backend ignores
#: its thread flags: local workers are pinned to one core instead), and Dask's statistical profiler off:
#: it samples the task thread's stack every 10 ms, and with two pinned workers on this 2-core machine it
#: cost 18% of the wall time of 80 gradient-flow runs (40.1 s -> 32.8 s, `benchmarks/bench_sweep.py
#: --limit 80 --workers 2`); the dashboard then has no profile page, everything else stays
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
}


#: the scheduler's config, where the scheduler runs in this process (a LocalCluster or a dask-jobqueue
#: cluster): each worker holds the task after the one it runs (worker-saturation 2 on single-threaded
#: workers), so it can start the next run without waiting for a scheduler round trip.  Work stealing still
#: moves queued tasks to an idle worker.  Measured on 160 runs of ~0.3 s with 2 workers (3 interleaved
#: repeats): idle share 0.95% against 0.98% with Dask's default 1.1, median wall 33.4 s against 36.5 s,
#: a difference within this machine's run-to-run noise; kept because it cannot add a gap.
SCHEDULER_CONFIG = {"distributed.scheduler.worker-saturation": 2.0}


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def _plugin_base():
    from distributed.diagnostics.plugin import WorkerPlugin

    return WorkerPlugin


class PinToCore(_plugin_base()):
    """A Dask worker plugin: pins worker i of a `LocalCluster` to core i (mod the usable cores), and
    ends the worker if the process that started the sweep is gone (killed with SIGKILL, say), so no
    orphaned worker keeps computing."""

    name = "implicitbias-pin-to-core"

    def __init__(self, cores: list[int], parent: int):
        self.cores = cores
        self.parent = parent

    def setup(self, worker):
        try:
            index = int(worker.name)
        except (TypeError, ValueError):
            index = 0
        os.environ[PIN_ENV] = str(self.cores[index % len(self.cores)])
        pin_threads()
        import threading

        threading.Thread(target=_exit_with_parent, args=(self.parent,), daemon=True).start()

    def teardown(self, worker):
        pass


#: the core a local worker is pinned to (set in the worker by `PinToCore`)
PIN_ENV = "IMPLICITBIAS_WORKER_CORE"


#: glibc's mallopt parameters (malloc.h) and the values `keep_allocations` sets: the largest
#: threshold glibc's dynamic adjustment would reach on a 64-bit machine, and twice that for trimming
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024


def keep_allocations() -> bool:
    """Undo, in this worker process, the allocator setting Dask's nanny starts workers with.

    Dask's default `distributed.nanny.pre-spawn-environ` sets MALLOC_TRIM_THRESHOLD_=65536 (to hand freed
    memory back to the OS early).  Any such variable switches off glibc's dynamic mmap threshold, so
    every buffer above 128 KiB is mmapped on allocation and unmapped on free, and XLA's CPU kernels then
    page-fault on fresh memory in every solver step: a third of a worker's CPU time went to the kernel
    (26.5 s system time against 43 s user over 80 gradient-flow runs).  `local_client` starts its workers
    without the variable; workers of another scheduler or of dask-jobqueue get glibc's larger thresholds
    back here with `mallopt`.  Returns whether it changed anything (False off glibc or without the variable)."""
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) and libc.mallopt(M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        return False
    return bool(ok)


def pin_threads() -> None:
    """Pin every thread of this process to the worker's core.  `sched_setaffinity(0, ...)` moves only the
    calling thread; XLA's and Dask's threads exist already, and a task runs in another thread, so every
    thread listed in /proc/self/task is moved (threads created later inherit their creator's set)."""
    core = os.environ.get(PIN_ENV)
    if core is None or not hasattr(os, "sched_setaffinity"):
        return
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else [0]:
        try:
            os.sched_setaffinity(int(tid), {int(core)})
        except OSError:
            pass  # a thread that ended meanwhile


def _exit_with_parent(parent: int) -> None:
    import time

    while True:
        time.sleep(1.0)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass


def local_client(n_workers: int, *, dashboard: bool = True):
    """A client of a fresh LocalCluster of `n_workers` single-threaded, pinned processes."""
    import dask
    from distributed import Client, LocalCluster

    cores = usable_cores()
    # the config the nannies hand over; their pre-spawn environment without MALLOC_TRIM_THRESHOLD_
    # (see `keep_allocations`)
    with dask.config.set({"distributed.worker.profile.enabled": False,
                          "distributed.nanny.pre-spawn-environ": dict(SINGLE_THREAD_ENV), **SCHEDULER_CONFIG}):
        cluster = LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, env=dict(SINGLE_THREAD_ENV),
            dashboard_address=":0" if dashboard and _has_bokeh() else "", silence_logs=40,
        )
    client = Client(cluster)
    client.register_plugin(PinToCore(cores, os.getpid()))
    return client


def connect(address: str):
    from distributed import Client

    try:
        return Client(address, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"--scheduler {address!r} is not reachable ({exc}): expected the address of a running "
                          "Dask scheduler, e.g. tcp://host:8786") from None


JOBQUEUE_KINDS = ("slurm", "pbs")


def jobqueue_client(path: str | os.PathLike):
    """A client of a dask-jobqueue cluster described by a YAML file (see the module docstring)."""
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"--cluster {str(file)!r} is not allowed: the file does not exist")
    spec = yaml.safe_load(file.read_text()) or {}
    if not isinstance(spec, dict):
        raise ConfigError(f"--cluster {str(file)!r}: expected a YAML mapping with keys kind, jobs, cores, memory, ...")
    kind = spec.pop("kind", None)
    if kind not in JOBQUEUE_KINDS:
        raise ConfigError(f"cluster.kind = {kind!r} (in {file}) is not allowed: expected one of {JOBQUEUE_KINDS}")
    jobs = spec.pop("jobs", 1)
    if not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"cluster.jobs = {jobs!r} (in {file}) is not allowed: expected an integer >= 1")
    import dask_jobqueue
    from distributed import Client

    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[kind]
    prologue = [f"export {k}='{v}'" for k, v in SINGLE_THREAD_ENV.items()]
    spec.setdefault("job_script_prologue", prologue)
    import dask

    try:
        with dask.config.set(SCHEDULER_CONFIG):
            cluster = cls(**spec)
    except TypeError as exc:
        raise ConfigError(f"--cluster {file}: {exc} (the keys other than kind and jobs are dask-jobqueue's)") from None
    cluster.scale(jobs=jobs)
    return Client(cluster)


def close(client) -> None:
    """Close a client and, if it started one, its cluster."""
    cluster = getattr(client, "cluster", None)
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()


def _has_bokeh() -> bool:
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return False
    return True
