"""One sweep at a time in an output directory: `DIR/.lock`, held with `fcntl.flock` for the life of the command.

    with directory_lock(DIR, say=print):   # a second process waits here, told who holds the directory
        ...

The kernel drops a `flock` lock when the process holding it ends, however it ends (SIGKILL included), so a
lock can never go stale: a second command waits only while the first one is alive.  The file holds the
holder's pid, host and start time, for the message the waiting process prints; the lock itself is the
kernel's.  Locks of a network file system may not be shared between hosts (NFS without lockd): two hosts
writing one directory stay safe, only slower (every file is written atomically, see `RunStore`).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

LOCK_NAME = ".lock"


def holder(directory: Path) -> str:
    """Who holds the directory, as written by the holder ('pid 123 on host, since ...'), or '' when unknown."""
    try:
        return (directory / LOCK_NAME).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


@contextlib.contextmanager
def directory_lock(directory: str | os.PathLike, say: Callable[[str], None] = print, *,
                   poll_s: float = 0.5) -> Iterator[None]:
    """Hold `DIR/.lock` for the block; when another process holds it, say so once (naming the directory and
    the holder) and wait until it is released.  Where file locks are not supported, the block runs unlocked."""
    directory = Path(directory)
    path = directory / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting: {directory} is in use by another implicitbias command ({holder(directory) or 'unknown'});"
                " this one goes on when that one ends (Ctrl-C to stop)")
            while True:
                time.sleep(poll_s)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    continue
        except OSError:  # a file system without flock: nothing to hold
            pass
        since = datetime.datetime.now().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {since}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
