"""What is checked before anything trains or is written: every refusal names the option, the value and what is
allowed, and nothing is written when the input is refused."""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path

import jax
from distributed.comm.addressing import parse_host_port

from implicitbias._spec import ConfigError, ResourceError
from implicitbias.runs.execute import dataset_of
from implicitbias.sweeps import cluster as clusters
from implicitbias.training.validation import validate_inputs


def check_devices() -> None:
    """JAX can compute here: a JAX_PLATFORMS this machine cannot serve (cuda without a GPU, a misspelling) is an
    environment error, reported before anything is written."""
    try:
        jax.devices()
    except Exception as exc:  # noqa: BLE001 - JAX reports an unusable platform as RuntimeError or AssertionError
        platforms = os.environ.get("JAX_PLATFORMS", "")
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ResourceError(f"JAX_PLATFORMS={platforms!r} cannot be used on this machine ({detail}): expected a platform "
                            "it has (unset JAX_PLATFORMS to let JAX choose; a GPU needs `pip install implicitbias[gpu]`)") \
            from None


def output_dir(value: str | os.PathLike) -> Path:
    """The output directory, refused before anything is written when it names a file or cannot be created here."""
    value = os.fspath(value)
    out = Path(value)
    existing = out
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
    except OSError as exc:  # a name too long, a loop of links
        raise ConfigError(f"--out {value!r} is not allowed: {exc.strerror}; expected a directory path") from None
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {value!r} is not allowed: it is a file; expected a directory (created if absent)")
    if not existing.is_dir():
        raise ConfigError(f"--out {value!r} is not allowed: {existing} is a file, not a directory; expected a "
                          "directory path (created if absent)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {value!r} is not allowed: {existing} is not writable by this user; expected a "
                          "directory this user can write")
    return out


def reuse_dirs(values) -> list[Path]:
    """The run directories of `--reuse`, refused before anything is written when one is not a run directory."""
    out = []
    for value in values or ():
        path = Path(os.fspath(value))
        if not (path / "runs").is_dir():
            raise ConfigError(f"--reuse {os.fspath(value)!r} is not allowed: it has no runs/ folder; expected a run "
                              "directory written by `implicitbias run`")
        out.append(path)
    return out


def check_options(config, *, workers: int | None, scheduler: str | None, cluster: str | os.PathLike | None,
                  worker_timeout: float | None, dashboard: str | None) -> None:
    """The execution options, and the data source of the config (e.g. a CIFAR-10 path)."""
    locate = getattr(config.data, "locate", None)
    if callable(locate):
        locate()
    cores = len(clusters.usable_cores())
    if workers is not None and not (isinstance(workers, int) and 0 <= workers <= cores):
        raise ConfigError(f"--workers {workers} is not allowed: expected an integer from 0 to {cores}, the cores "
                          "this process may use (0: in this process; more workers than cores only share them)")
    if worker_timeout is not None and not (math.isfinite(worker_timeout) and worker_timeout > 0):
        raise ConfigError(f"--worker-timeout {worker_timeout} is not allowed: expected a finite number of "
                          "seconds > 0")
    if dashboard is not None:
        check_dashboard(dashboard)
    if scheduler is not None and cluster is not None:
        raise ConfigError("--scheduler and --cluster are not allowed together: give one of them")
    if workers is not None and (scheduler or cluster):
        raise ConfigError(f"--workers {workers} is not allowed with --{'scheduler' if scheduler else 'cluster'}: "
                          "the workers are the scheduler's or the cluster file's (jobs x processes)")
    if cluster is not None:
        clusters.read_cluster_file(os.fspath(cluster))


def check_dashboard(value: str) -> None:
    """Refuse a dashboard address that is not HOST:PORT of this machine, free to listen on."""
    allowed = ("expected HOST:PORT of this machine, e.g. 127.0.0.1:8787 (this machine only, the default on a free "
               "port) or 0.0.0.0:8787 (every interface: anyone on the network can see and control the sweep)")
    try:
        host, port = parse_host_port(value, default_port=0)
    except (ValueError, TypeError):
        host, port = None, None
    if not host or not isinstance(port, int) or not 0 <= port < 65536:
        raise ConfigError(f"--dashboard {value!r} is not allowed: {allowed}")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as exc:
        raise ConfigError(f"--dashboard {value!r} is not allowed: cannot listen there ({exc.strerror or exc}); "
                          f"{allowed}") from None


def check_runs_against_their_data(runs) -> None:
    """What `train` checks of the data (the loss fits its task, labels and shapes, the method's needs), done here
    for the first run of every compiled program (static part), so that no run fails on it later in a worker: one
    data set drawn per program (kept in this process's cache, which an in-process sweep reuses)."""
    seen = set()
    for spec in runs:
        if spec.static_key() in seen:
            continue
        seen.add(spec.static_key())
        where = f"{spec.part + ': ' if spec.part else ''}{spec.label()}"
        try:
            validate_inputs(spec.model, [dataset_of(spec)], spec.loss, spec.method, spec.stop)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (run {where})") from None
