"""The one memo of reference solutions: each is solved once per data set and parameters, and kept.

A reference solution (the max-margin SVM, an LP or QP, the minimum nuclear norm completion, Chistikov et al.'s
M, the minimum-norm interpolator, Woodworth et al.'s Q_alpha, ...) depends only on a data set and the
reference's own parameters.  `memoized(name, data_key, params, solve)` returns `solve()`'s value, solving it only
the first time for that key:

- in this process, it is kept in memory (the most recent `MAX_IN_MEMORY` values);
- inside `memo_directory(DIR)` (which `implicitbias.run` opens on the run directory), it is also written to
  `DIR/references/<name>-<key>.pkl`, beside the data sets, so that `implicitbias report DIR` and a resumed
  sweep read it instead of solving it again.

The key is a hash of `name`, the data set's key (`RunSpec.data_key()`, or a hash of the arrays for data that
has no spec), the parameters (JSON) and `MEMO_FORMAT`, bumped when what a reference means changes.  Files are
written to a temporary name and renamed, so a killed process never leaves half a file; a file that cannot be
read is solved again and rewritten.  `solves()` counts the solves of this process (a test reads it to show that
a report solves nothing).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

#: bump when a reference's definition changes: older files are then solved again
MEMO_FORMAT = 1
#: values kept in memory per process
MAX_IN_MEMORY = 512

_directory: contextvars.ContextVar[Path | None] = contextvars.ContextVar("implicitbias_memo_directory", default=None)
_memory: collections.OrderedDict[str, Any] = collections.OrderedDict()
_solves = collections.Counter()


@contextlib.contextmanager
def memo_directory(path: str | os.PathLike | None) -> Iterator[Path | None]:
    """Within this block, reference solutions are also kept in `path/references/` (None: in memory only)."""
    folder = None if path is None else Path(path) / "references"
    token = _directory.set(folder)
    try:
        yield folder
    finally:
        _directory.reset(token)


def array_key(*arrays) -> str:
    """A data key for arrays that have no spec: a hash of their dtypes, shapes and bytes."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:20]


def memo_key(name: str, data_key: str, params: dict[str, Any] | None = None) -> str:
    """The identity of one reference solution."""
    text = json.dumps({"format": MEMO_FORMAT, "name": name, "data": data_key, "params": params or {}},
                      sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def memoized(name: str, data_key: str, params: dict[str, Any] | None, solve: Callable[[], T]) -> T:
    """`solve()`, computed once per (name, data set, params): from memory, then from the run directory's
    `references/` (inside `memo_directory`), else solved and kept in both."""
    key = memo_key(name, data_key, params)
    if key in _memory:
        _memory.move_to_end(key)
        return _memory[key]
    folder = _directory.get()
    path = None if folder is None else folder / f"{name}-{key}.pkl"
    value = _read(path) if path is not None else _MISSING
    if value is _MISSING:
        value = solve()
        _solves[name] += 1
        if path is not None:
            _write(path, value)
    _memory[key] = value
    while len(_memory) > MAX_IN_MEMORY:
        _memory.popitem(last=False)
    return value


def solves() -> dict[str, int]:
    """How many references of each name this process has solved (not read from memory or a file)."""
    return dict(_solves)


def clear_memory() -> None:
    """Forget the values kept in memory (files stay): the next call reads or solves again."""
    _memory.clear()


_MISSING = object()


def _read(path: Path):
    try:
        with path.open("rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return _MISSING
    except Exception:  # noqa: BLE001 - a damaged or foreign file is solved again and rewritten
        return _MISSING


def _write(path: Path, value) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        # a full or read-only disk costs a later solve, never the run
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
