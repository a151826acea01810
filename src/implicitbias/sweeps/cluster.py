"""Where a sweep's tasks run: a Dask distributed client, from a laptop to a SLURM/PBS cluster.

- `local_client(n)`: a `LocalCluster` of n single-threaded worker processes on this machine, each
  pinned to its own core (JAX ignores XLA's thread flags; one pinned single-threaded process per
  core keeps each at its solo speed), with BLAS and XLA limited to one thread, forked from a server process
  that imported implicitbias once (`FORKSERVER_CONFIG`), without importing the user's script again
  (`workers_skip_main`);
- `connect(address)`: a running Dask scheduler (`--scheduler tcp://host:8786`);
- `jobqueue_client(file)`: a SLURM or PBS cluster through dask-jobqueue, from a YAML file:

      kind: slurm          # or pbs
      jobs: 4              # batch jobs to start (each runs `processes` workers)
      cores: 16            # every other key is passed to dask_jobqueue.SLURMCluster / PBSCluster
      processes: 16
      memory: 64GB
      walltime: "04:00:00"
      queue: normal

The same `implicitbias.sweeps.sweep.run_sweep` drives all three.  Everything a user gives is checked before
anything starts (`check_scheduler`, `read_cluster_file`: one-line errors, exit 2); a cluster that gives no worker
within `WORKER_TIMEOUT_S` ends with what is missing (`wait_for_workers`, with the batch queue's state); the
dashboard and a local cluster listen on 127.0.0.1 only (`DASHBOARD_ADDRESS`); `close` turns a failure to shut
down into a warning.
"""

from __future__ import annotations

import ctypes
import inspect
import multiprocessing
import multiprocessing.spawn
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dask
import yaml
from distributed import Client, LocalCluster
from distributed.comm import parse_address
from distributed.comm.addressing import parse_host_port
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import get_mp_context

from implicitbias._spec import ConfigError, ResourceError

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


class PinToCore(WorkerPlugin):
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
        _ignore_sigint()  # also in a worker the nanny restarted after a loss

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

    while True:
        time.sleep(1.0)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass


#: where the Dask dashboard listens unless `--dashboard` asks otherwise: this machine only, on a free port (the
#: dashboard shows and controls the sweep: on every interface anyone on the network could)
DASHBOARD_ADDRESS = "127.0.0.1:0"

#: seconds to wait for a first worker before giving up (`--worker-timeout`): local worker processes start in
#: a few seconds; a batch system's jobs may wait in its queue
WORKER_TIMEOUT_S = {"local": 30.0, "scheduler": 60.0, "batch": 300.0}


def _ignore_sigint() -> None:
    """In a worker: Ctrl-C in a terminal reaches every process of its group; the sweep's main process handles
    it (cancels and shuts the cluster down), so the workers ignore it instead of printing a traceback each."""

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


#: local workers are forked from a server process that has imported what a worker runs (`WORKER_PRELOAD`) once,
#: instead of each spawned process importing it again (~3.8 s of CPU a worker here: jax, xarray, distributed,
#: implicitbias).  The server is started, once per process, by the first local worker, with the environment the
#: nanny sets before it (`SINGLE_THREAD_ENV`, without MALLOC_TRIM_THRESHOLD_), so BLAS and JAX are imported
#: under it; each worker then gets this process's environment as it is when the cluster starts (`local_client`
#: passes it), as a spawned one would.  A worker that the nanny restarts after the cluster is up is spawned.
#: Measured: `python benchmarks/bench_worker_start.py`.
FORKSERVER_CONFIG = ({"distributed.worker.multiprocessing-method": "forkserver"}
                     if "forkserver" in multiprocessing.get_all_start_methods() else {})  # not on Windows
WORKER_PRELOAD = ("distributed", "implicitbias.sweeps.sweep")


def _preload_forkserver() -> None:
    """Name `WORKER_PRELOAD` as the forkserver's imports (after Dask's own choice, which `get_mp_context` makes
    once per process); it takes effect where the server is not running yet.  The main module is not among them
    (see `workers_skip_main`)."""
    context = get_mp_context()
    if dask.config.get("distributed.worker.multiprocessing-method") == "forkserver":
        context.set_forkserver_preload(list(WORKER_PRELOAD))


def local_client(n_workers: int, *, dashboard: bool = True, dashboard_address: str = DASHBOARD_ADDRESS):
    """A client of a fresh LocalCluster of `n_workers` single-threaded, pinned processes.  Its scheduler, workers
    and dashboard listen on 127.0.0.1 only (`dashboard_address` may ask otherwise)."""


    cores = usable_cores()
    release = workers_skip_main()  # held until `close`: a worker the nanny restarts later skips it too
    # the config the nannies hand over; their pre-spawn environment without MALLOC_TRIM_THRESHOLD_
    # (see `keep_allocations`).  The worker processes are started with SIGINT ignored (they inherit it through
    # exec): a Ctrl-C in the terminal is the main process's to handle (see `_ignore_sigint`)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
    try:
        with dask.config.set({"distributed.worker.profile.enabled": False,
                              "distributed.nanny.pre-spawn-environ": dict(SINGLE_THREAD_ENV), **SCHEDULER_CONFIG,
                              **FORKSERVER_CONFIG}):
            _preload_forkserver()
            cluster = LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, env={**os.environ, **SINGLE_THREAD_ENV},
                host="127.0.0.1", dashboard_address=dashboard_address if dashboard and _has_bokeh() else "",
                silence_logs=50,  # CRITICAL only: a failed task is reported by the sweep, with its runs
            )
    except (OSError, RuntimeError, TimeoutError) as exc:
        release()
        raise ResourceError(f"the local Dask cluster of {n_workers} workers did not start ({exc}); --workers 0 trains "
                            "in this process without Dask") from None
    except BaseException:
        release()
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    client = Client(cluster)
    client.implicitbias_release = release
    client.register_plugin(PinToCore(cores, os.getpid()))
    return client


#: the name Dask's nanny gives the worker processes it starts (`distributed.nanny.WorkerProcess.start`)
DASK_WORKER_PROCESS = "Dask Worker process (from Nanny)"

_skip_main_lock = threading.Lock()
_skip_main_holders = 0
#: `multiprocessing.spawn.get_preparation_data` as it was before `workers_skip_main` stood in for it
_preparation_data = None


def workers_skip_main() -> Callable[[], None]:
    """Start Dask's worker processes, from now until the returned function is called, without importing the
    main module again; returns that function (calling it twice does nothing).

    A spawned process (Dask's default, and the only safe start with JAX's threads) runs the parent's main
    script again as `__mp_main__` when `multiprocessing.spawn.get_preparation_data` names it, so that objects
    pickled by reference to `__main__` can be found.  A script with `implicitbias.run(...)` at its top level,
    without `if __name__ == "__main__":`, then ran the whole experiment again in every worker, each waiting
    forever on the run directory the script itself held.  Dask needs no such import: a task or plugin defined in
    the script travels by value (Dask pickles anything that names `__main__` with cloudpickle), and modules next to
    the script are still found (the workers get the parent's `sys.path`).  So only for Dask's worker processes
    the two entries that ask for the import (`init_main_from_path`, `init_main_from_name`) are left out, and the
    main module itself is left as it is (its `__file__` hidden even for a moment could fail code that reads it
    meanwhile).  The function is restored when the last holder releases it."""
    global _skip_main_holders, _preparation_data
    with _skip_main_lock:
        if _preparation_data is None:  # not in place yet (else: in place, or wrapped by someone since)
            _preparation_data = multiprocessing.spawn.get_preparation_data
            multiprocessing.spawn.get_preparation_data = _preparation_without_main
        _skip_main_holders += 1
    held = [True]

    def release() -> None:
        global _skip_main_holders, _preparation_data
        with _skip_main_lock:
            if not held:
                return
            held.clear()
            _skip_main_holders -= 1
            if _skip_main_holders == 0 and multiprocessing.spawn.get_preparation_data is _preparation_without_main:
                multiprocessing.spawn.get_preparation_data, _preparation_data = _preparation_data, None
    return release


def _preparation_without_main(name):
    """`multiprocessing.spawn.get_preparation_data`, less the import of the main module for Dask's workers while
    `workers_skip_main` is held; with no holder (left in place because another wrapper sits on it) it changes
    nothing."""
    data = _preparation_data(name)
    if name == DASK_WORKER_PROCESS and _skip_main_holders:
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
    return data


def _main_thread() -> bool:

    return threading.current_thread() is threading.main_thread()


SCHEDULER_SCHEMES = ("tcp", "tls")


def check_scheduler(address: str, probe_s: float = 3.0) -> str:
    """Refuse, within seconds, an address that is not a Dask scheduler's (`tcp://host:port`) or where nothing
    listens; returns the address."""

    expected = "expected the address of a running Dask scheduler, e.g. tcp://host:8786"
    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--scheduler {address!r} is not allowed ({exc}): {expected}") from None
    if scheme not in SCHEDULER_SCHEMES or not host or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"--scheduler {address!r} is not allowed: {expected} (schemes {', '.join(SCHEDULER_SCHEMES)}, "
                          "a host and a port 1-65535)")
    reason = _probe(host, port, probe_s)
    if reason is not None:
        raise ResourceError(f"--scheduler {address!r} is not reachable ({reason} within {probe_s:g} s): {expected}")
    return address


def _probe(host: str, port: int, seconds: float) -> str | None:
    """Why nothing answers at host:port (None: something accepts connections), in at most ~`seconds` (name
    resolution included, in a thread that is left behind if it hangs)."""

    answer: list[str | None] = []

    def attempt():
        try:
            socket.create_connection((host, port), timeout=seconds).close()
            answer.append(None)
        except OSError as exc:
            answer.append(exc.strerror or type(exc).__name__)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(seconds + 0.5)
    return answer[0] if answer else "no answer"


def connect(address: str, timeout_s: float = 5.0):
    """A client of the running Dask scheduler at `address`, or a ResourceError within about `timeout_s` + 3 s:
    the address is checked first (`check_scheduler`), and whatever goes wrong in the handshake (something else
    listening there, a scheduler of another version) is reported as such."""

    check_scheduler(address)
    try:
        return Client(address, timeout=f"{timeout_s}s")
    except Exception as exc:  # noqa: BLE001 - a server that is not a Dask scheduler can fail the handshake anyhow
        detail = " ".join(str(exc).split())[:200]
        raise ResourceError(f"--scheduler {address!r} did not answer as a Dask scheduler within {timeout_s:g} s "
                            f"({type(exc).__name__}: {detail}): expected the address of a running Dask scheduler, "
                            "e.g. tcp://host:8786") from None


JOBQUEUE_KINDS = ("slurm", "pbs")
#: the command each kind submits jobs with, which must exist on this machine
SUBMIT_COMMANDS = {"slurm": "sbatch", "pbs": "qsub"}
#: the command that shows each kind's queue, for the message when no worker came
QUEUE_COMMANDS = {"slurm": ["squeue", "--me", "-h", "-o", "%i %j %T %R"], "pbs": ["qstat", "-u", os.environ.get("USER", "")]}
#: keys of dask-jobqueue's cluster (not of its jobs)
CLUSTER_KEYS = ("n_workers", "silence_logs", "name", "dashboard_address", "host", "scheduler_options", "interface",
                "protocol", "security", "shared_temp_directory", "config_name")


def read_cluster_file(path: str | os.PathLike) -> tuple[str, int, dict]:
    """(kind, jobs, the keys for dask-jobqueue) of a `--cluster` file, checked before anything starts: the file
    is a YAML mapping, kind and jobs are allowed, every other key is one of dask-jobqueue's and its job script
    can be written with them, and the batch system's submit command exists here."""
    file = Path(path)
    name = f"--cluster {str(file)!r}"
    if not file.is_file():
        what = "it is a directory" if file.is_dir() else "it is not a regular file" if file.exists() else \
            "the file does not exist"
        raise ConfigError(f"{name} is not allowed: {what}; expected a YAML file with keys kind, jobs, cores, memory, ...")
    try:
        spec = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise ConfigError(f"{name} is not readable YAML ({type(exc).__name__}: {detail}): expected a YAML mapping with "
                          "keys kind, jobs, cores, memory, ...") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{name}: expected a YAML mapping with keys kind, jobs, cores, memory, ...")
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind not in JOBQUEUE_KINDS:
        raise ConfigError(f"cluster.kind = {kind!r} (in {file}) is not allowed: expected one of {JOBQUEUE_KINDS}")
    jobs = spec.pop("jobs", 1)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= 100_000:
        raise ConfigError(f"cluster.jobs = {jobs!r} (in {file}) is not allowed: expected an integer from 1 to 100000")

    import dask_jobqueue

    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[kind]
    job_keys = set()
    for klass in cls.job_cls.__mro__:
        if "__init__" in vars(klass):
            job_keys |= {name for name, p in inspect.signature(klass.__init__).parameters.items()
                         if name not in ("self", "scheduler", "name") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    allowed = sorted((job_keys | set(CLUSTER_KEYS)) - {"config_name"})
    for key in spec:
        if key not in allowed:
            raise ConfigError(f"cluster.{key} (in {file}) is not allowed: no such key; expected kind, jobs or one of "
                              f"dask-jobqueue's {', '.join(allowed)}")
    if not isinstance(spec.get("scheduler_options", {}) or {}, dict):
        raise ConfigError(f"cluster.scheduler_options = {spec['scheduler_options']!r} (in {file}) is not allowed: expected "
                          "a mapping of Dask scheduler options, e.g. {dashboard_address: '127.0.0.1:8787'}")
    job = {k: v for k, v in spec.items() if k in job_keys}
    try:
        cls.job_cls(scheduler="tcp://127.0.0.1:8786", name="check", **job).job_script()
    except Exception as exc:  # noqa: BLE001 - dask-jobqueue's own checks of the values, whatever they raise
        detail = " ".join(str(exc).split())[:200]
        raise ConfigError(f"{name} is not allowed: dask-jobqueue cannot write a {kind} job from it ({type(exc).__name__}: "
                          f"{detail})") from None
    submit = SUBMIT_COMMANDS[kind]
    if shutil.which(submit) is None:
        raise ResourceError(f"{name} (kind: {kind}) needs {submit}, which is not found on this machine's PATH: run on a "
                            f"{kind.upper()} login node, or use --scheduler or local workers")
    return kind, jobs, spec


def jobqueue_client(path: str | os.PathLike, *, dashboard_address: str = DASHBOARD_ADDRESS):
    """A client of a dask-jobqueue cluster described by a YAML file (see the module docstring).  Its dashboard
    listens on 127.0.0.1 unless the file (scheduler_options) or `dashboard_address` says otherwise."""
    kind, jobs, spec = read_cluster_file(path)
    import dask_jobqueue

    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[kind]
    prologue = [f"export {k}='{v}'" for k, v in SINGLE_THREAD_ENV.items()]
    spec.setdefault("job_script_prologue", prologue)
    options = dict(spec.pop("scheduler_options", None) or {})
    options.setdefault("dashboard_address", spec.pop("dashboard_address", dashboard_address))
    try:
        with dask.config.set(SCHEDULER_CONFIG):
            cluster = cls(**spec, scheduler_options=options)
    except Exception as exc:  # noqa: BLE001 - dask-jobqueue's and the scheduler's own refusals, whatever they raise
        detail = " ".join(str(exc).split())[:200]
        raise ResourceError(f"--cluster {path}: the cluster did not start ({type(exc).__name__}: {detail}; the keys other "
                            "than kind and jobs are dask-jobqueue's)") from None
    cluster.scale(jobs=jobs)
    client = Client(cluster)
    client.implicitbias_kind = kind
    return client


def wait_for_workers(client, timeout_s: float, what: str) -> None:
    """Wait until the client has a worker; after `timeout_s`, raise ResourceError saying what is missing (for a
    batch system, the state of its queue)."""
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except TimeoutError:
        raise ResourceError(f"{what} gave no worker within {timeout_s:g} s (--worker-timeout){queue_state(client)}; "
                            "the finished runs are kept, rerun the same command to resume") from None


def queue_state(client) -> str:
    """What the batch system says about its queue (for a jobqueue client), as text to append to a message."""

    kind = getattr(client, "implicitbias_kind", None)
    if kind is None:
        return ""
    command = QUEUE_COMMANDS[kind]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=5)
        lines = (out.stdout or out.stderr).strip().splitlines()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"; `{' '.join(command)}` gave no answer ({type(exc).__name__})"
    shown = "; ".join(lines[:5]) + (f"; ... {len(lines) - 5} more" if len(lines) > 5 else "")
    return f"; the queue (`{' '.join(command)}`): {shown or 'no job of yours'}"


def close(client, timeout_s: float = 20.0, warn=None) -> None:
    """Close a client and, if it started one, its cluster.  With `warn`, a failure to close (a timeout, say) is
    reported through it instead of raised: by then every result is written, and the workers of a local cluster
    end by themselves when this process does (`PinToCore`)."""
    cluster = getattr(client, "cluster", None)
    try:
        try:
            client.close(timeout=timeout_s)
        finally:
            try:
                if cluster is not None:
                    cluster.close(timeout=timeout_s)
            finally:
                getattr(client, "implicitbias_release", lambda: None)()  # `workers_skip_main` of `local_client`
    except Exception as exc:  # noqa: BLE001
        if warn is None:
            raise
        warn(f"warning: the Dask cluster did not close cleanly ({type(exc).__name__}: {exc}); the results are "
             "written, and its workers end when this process does")


def _has_bokeh() -> bool:
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return False
    return True
