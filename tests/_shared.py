"""`shared_directory`: a folder that one test process of the session builds and every other one reads.

Under `pytest -n 2` a module fixture is computed in each worker that runs a test of the module; tests that only
read what the fixture made (a trained run, say) can share one build through the session's scratch folder
(`IMPLICITBIAS_TEST_SHARED_DIR`, made by tests/conftest.py and removed at the session's end)."""

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

#: the longest `shared_directory` waits for another worker's build before it fails the test
SHARED_WAIT_S = 600.0


def shared_directory(name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, built once per test session (`build(folder)`), by whichever process of the session
    asks first (an xdist worker, or the one process without xdist); every later call, in any worker, returns it
    as built.  A module fixture computed on both workers (a trained run that several tests read) is computed
    once this way.  Callers read the folder and never write into it (tests copy what they change).

    A build that raised leaves no folder behind: the next call builds again (and raises its own error).  A call
    that finds another process building waits for it (on its lock), at most `SHARED_WAIT_S`, then fails naming
    the folder it waited for."""
    root = Path(os.environ["IMPLICITBIAS_TEST_SHARED_DIR"])
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        deadline = time.monotonic() + SHARED_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"waited {SHARED_WAIT_S:g} s for another test process to build {folder}")
                time.sleep(0.1)
        try:
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)  # a build that raised half-way
                folder.mkdir()
                build(folder)
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder
