"""`_shared.shared_directory`, the folder one test process builds and the others read: built once, built again
after a build that raised, and a wait for another builder that ends, naming what it waited for."""

import fcntl
import re
import threading

import pytest

import _shared


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("IMPLICITBIAS_TEST_SHARED_DIR", str(tmp_path))
    return tmp_path


def test_the_folder_is_built_once_and_read_by_every_later_call(root):
    builds = []

    def build(folder):
        builds.append(folder)
        (folder / "result.txt").write_text("trained")

    first = _shared.shared_directory("run", build)
    again = _shared.shared_directory("run", build)
    assert first == again == root / "run" and len(builds) == 1
    assert (again / "result.txt").read_text() == "trained"


def test_a_build_that_raised_is_built_again_from_an_empty_folder(root):
    def broken(folder):
        (folder / "half.txt").write_text("half")
        raise RuntimeError("the training failed")

    with pytest.raises(RuntimeError, match="the training failed"):
        _shared.shared_directory("run", broken)
    seen = []
    folder = _shared.shared_directory("run", lambda f: seen.append(sorted(p.name for p in f.iterdir())))
    assert seen == [[]] and folder == root / "run"  # the half-written file of the failed build is gone


def test_a_second_caller_waits_for_the_builder_and_reads_its_folder(root):
    started, release, builds = threading.Event(), threading.Event(), []

    def slow(folder):
        builds.append("slow")
        started.set()
        release.wait(10)
        (folder / "result.txt").write_text("trained")

    builder = threading.Thread(target=_shared.shared_directory, args=("run", slow))
    builder.start()
    assert started.wait(10)
    threading.Timer(0.3, release.set).start()
    folder = _shared.shared_directory("run", lambda f: builds.append("second"))  # waits on the lock
    builder.join(10)
    assert builds == ["slow"] and (folder / "result.txt").read_text() == "trained"


def test_a_wait_for_a_builder_that_never_ends_fails_naming_the_folder(root, monkeypatch):
    monkeypatch.setattr(_shared, "SHARED_WAIT_S", 0.3)
    with open(root / "run.lock", "w") as held:  # another process building, for ever
        fcntl.flock(held, fcntl.LOCK_EX)
        expected = re.escape(f"waited 0.3 s for another test process to build {root / 'run'}")
        with pytest.raises(pytest.fail.Exception, match=expected):
            _shared.shared_directory("run", lambda folder: None)
