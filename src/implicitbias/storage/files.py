"""Files on disk: every write is atomic, interrupt-safe and says when the disk is full.

- `atomic_file(write, path)`: `write` fills a uniquely named temporary beside `path` (suffix `TMP_SUFFIX`),
  which is then renamed into place, so a reader sees the old file or the new one, never half of one;
- `deferred_interrupt()`: a Ctrl-C during a write is raised once the write is done;
- `DiskFull`: the error of a write that ran out of space (or into `ulimit -f`);
- `write_netcdf(obj, path)`, `save(ds, path)` and `load(path)`: one `xarray.Dataset` (or DataTree) in NetCDF4,
  values, dtypes and attributes unchanged.

Dask is imported inside `write_netcdf` and `load` on purpose: it is heavy, and only needed when a file is
written or read (its scheduler is set to the synchronous one around each call).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import signal
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import xarray as xr

from implicitbias._spec import ResourceError

#: the suffix of `atomic_file`'s temporary files (a file still carrying it was left by a killed write)
TMP_SUFFIX = ".tmp"


class DiskFull(ResourceError):
    """A write failed because the file system is full or the file size limit (`ulimit -f`) was reached."""


def write_netcdf(obj, path: str | os.PathLike) -> None:
    """`obj.to_netcdf(path)` (a Dataset or a DataTree) with this process's own file locks.  With a Dask
    distributed client active, xarray would otherwise take a distributed lock through the scheduler
    for every variable it writes (a round trip each: ~0.3 s a run file instead of ~10 ms)."""
    import dask  # deferred on purpose: heavy, and needed only while a file is written

    with dask.config.set(scheduler="synchronous"):
        obj.to_netcdf(path, engine="netcdf4")


def atomic_file(write: Callable[[Path], None], path: Path) -> Path:
    """Call `write(tmp)` on a fresh temporary name beside `path` (unique per process and call, so two
    processes writing the same file never share one), then rename it to `path`: a reader sees the old file
    or the new one, never half of one.  A Ctrl-C that arrives meanwhile is held back until the file is in
    place (see `deferred_interrupt`).  The temporary name ends in .tmp: `write` must not infer the format
    from the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
    with deferred_interrupt():
        try:
            write(tmp)
            os.replace(tmp, path)
        except Exception as exc:
            reason = _no_space(tmp, exc)
            if reason is None:
                raise
            raise DiskFull(f"no space to write {path}: {reason}; free some space (or give another --out) and rerun the "
                           "same command: every run stored so far is kept") from None
        finally:
            if tmp.exists():
                tmp.unlink()
    return path


def _no_space(tmp: Path, exc: BaseException) -> str | None:
    """Why a failed write failed, when it is space: NetCDF/HDF5 reports a full disk only as "HDF error", so the
    file system and the file size limit are asked directly.  None when space is not the cause."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the file system is full ({exc.strerror})"
    size = tmp.stat().st_size if tmp.exists() else 0
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if (isinstance(exc, OSError) and exc.errno == errno.EFBIG) or (soft != resource.RLIM_INFINITY and size >= soft - (1 << 16)):
        return f"the file size limit of this process (ulimit -f) is {soft} bytes, reached by the file"
    try:
        free = shutil.disk_usage(tmp.parent).free
    except OSError:
        return None
    if free < max(1 << 20, size // 10):
        return f"the file system holding {tmp.parent} is full ({free} bytes free)"
    return None


@contextlib.contextmanager
def deferred_interrupt():
    """Hold SIGINT back for the duration of the block and raise KeyboardInterrupt after it.

    A KeyboardInterrupt raised inside xarray's `to_netcdf`, between the acquisition of its file lock and
    the `try` that releases it, leaves the lock held; the `finally` that closes the file then waits for it
    forever (seen: a sweep interrupted while storing a run hung instead of exiting).  A file write takes
    milliseconds, so the interrupt is only delayed.  Outside the main thread (where signal handlers cannot
    be set) the block runs unprotected."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
    elif caught and previous == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


def save(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write to NetCDF4 atomically (a uniquely named temporary file renamed into place), with Ctrl-C held
    back until the file is in place (`atomic_file`)."""
    return atomic_file(lambda tmp: write_netcdf(ds, tmp), Path(path))


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a result written by `save`; values, dtypes and attributes round-trip unchanged."""
    import dask  # deferred on purpose: heavy, and needed only while a file is read

    with dask.config.set(scheduler="synchronous"), xr.open_dataset(path, engine="netcdf4") as ds:
        out = ds.load()
    for name in ("status_name", "message"):
        if name in out:
            out[name] = out[name].astype(object)
    return out
