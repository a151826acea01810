"""Sweeps on Dask with real processes (no mocks): 1 and 2 workers agree bit for bit, a worker or the main
process killed with SIGKILL loses nothing, a truncated run file is retrained, a diverged run is stored as
such while the others go on, two processes can share one directory."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from implicitbias.experiments.config import ExperimentConfig, expand
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.pipeline import load
from implicitbias.runs.spec import RunSpec, group_runs
from implicitbias.storage.store import RunStore
from implicitbias.sweeps import run_sweep
from implicitbias.training.methods import GD, GradientFlow
from implicitbias.training.stopping import Stop

NET = TwoLayer(width=12, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
CONFIG = ExperimentConfig(
    model=NET,
    data=TeacherNeuron(d=3, scheme="centred", n_test=8),
    loss=Loss(name="square"),
    method=GradientFlow(solver="rkc", rtol=1e-6),
    stop=Stop(loss_tol=1e-6, max_time=300.0),
    trials=3,
    checkpoints=8,
    kkt=False,
    grid={"init_scale": [0.5, 0.01]},
)
RUNS = expand(CONFIG)

#: a small slice of chistikov2023-fig1 (8 gradient-flow runs): the command a user types, made small
SMALL_FIG1 = ["chistikov2023-fig1", "--quick", "--no-progress", "--set", "grid.init_scale=[0.25,0.0039]", "trials=2"]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.attrs["key"] == y.attrs["key"]
        assert set(x.data_vars) == set(y.data_vars)
        for name in x.data_vars:
            if x[name].dtype.kind in "fiu":
                np.testing.assert_array_equal(x[name].values, y[name].values, err_msg=name)
            else:
                assert list(x[name].values) == list(y[name].values), name


def _quiet(_):
    pass


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    return run_sweep(RUNS, RunStore(tmp_path_factory.mktemp("inproc")), workers=0, say=_quiet)


def test_runs_are_declared_once_with_identities_and_static_groups():
    assert len(RUNS) == 6 and len({r.key() for r in RUNS}) == 6
    assert {r.trial for r in RUNS} == {0, 1, 2}
    assert len({r.static_key() for r in RUNS}) == 1  # one compiled program for all six
    assert [len(g) for g in group_runs(RUNS)] == [1] * 6  # gradient flow: one member per task
    assert [len(g) for g in group_runs([r.replace(method=GD(lr=0.1)) for r in RUNS])] == [6]
    # a spec round-trips through JSON with its identity; a change of any field changes the identity
    assert RunSpec.from_json(RUNS[0].to_json()).key() == RUNS[0].key()
    assert RUNS[0].validated_replace(init_scale=0.3).key() != RUNS[0].key()


def test_grouped_gradient_flow_members_equal_one_member_per_call(in_process, tmp_path):
    together = run_sweep(RUNS[:2], RunStore(tmp_path), workers=0, say=_quiet, max_flow=2)
    for a, b in zip(in_process.arrays[:2], together.arrays):
        for name in ("loss", "max_angle", "param_norm", "theta.W", "theta.a"):
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-9, atol=1e-12, err_msg=name)


def test_one_and_two_workers_give_bit_identical_results(in_process, tmp_path):
    two = run_sweep(RUNS, RunStore(tmp_path), workers=2, say=_quiet)
    assert two.workers == 2 and two.trained == len(RUNS) and not two.failed
    _assert_same(in_process.arrays, two.arrays)


def test_a_worker_killed_mid_task_loses_nothing(in_process, tmp_path):
    from implicitbias.sweeps.cluster import close, local_client

    client = local_client(2)
    killed = []
    # the workers run without Dask's statistical profiler (it sampled every 10 ms: 18% of a sweep's wall time)
    import dask

    assert set(client.run(lambda: dask.config.get("distributed.worker.profile.enabled")).values()) == {False}
    # ... and with glibc's dynamic mmap threshold (no MALLOC_TRIM_THRESHOLD_ from the nanny; see keep_allocations)
    assert set(client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_")).values()) == {None}
    # ... forked from one server process that imported implicitbias (not each a fresh interpreter importing it
    # again), with one BLAS thread, and with this process's environment as it was when the cluster started
    from implicitbias.sweeps.cluster import FORKSERVER_CONFIG

    if FORKSERVER_CONFIG:
        parents = set(client.run(os.getppid).values())
        assert len(parents) == 1 and os.getpid() not in parents, parents
        assert set(client.run(lambda: os.environ.get("OPENBLAS_NUM_THREADS")).values()) == {"1"}
        assert set(client.run(lambda: os.environ.get("PYTEST_XDIST_WORKER")).values()) == {
            os.environ.get("PYTEST_XDIST_WORKER")}

    def kill_a_busy_worker():
        pids = client.run(os.getpid)
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            busy = [w for w, keys in client.processing().items() if keys]
            if busy:
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(pids[busy[0]])
            time.sleep(0.05)

    thread = threading.Thread(target=kill_a_busy_worker)
    thread.start()
    try:
        out = run_sweep(RUNS, RunStore(tmp_path), client=client, say=_quiet)
    finally:
        thread.join()
        close(client)
    assert killed, "a worker was killed while it held a task"
    assert not out.failed and out.trained == len(RUNS)
    assert len(list((tmp_path / "runs").glob("*.nc"))) == len(RUNS)
    _assert_same(in_process.arrays, out.arrays)


def test_a_truncated_run_file_is_reported_and_retrained(in_process, tmp_path):
    store = RunStore(tmp_path)
    run_sweep(RUNS, store, workers=0, say=_quiet)
    victim = store.run_path(RUNS[2])
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    said = []
    again = run_sweep(RUNS, RunStore(tmp_path, warn=said.append), workers=0, say=said.append)
    assert any(str(victim) in m and "truncated" in m for m in said), said
    assert again.trained == 1 and again.reused == len(RUNS) - 1
    _assert_same(in_process.arrays, again.arrays)


def test_a_diverged_run_is_stored_as_diverged_and_the_others_go_on(tmp_path):
    config = CONFIG.replace(method=GD(lr=0.05), stop=Stop(max_steps=300), trials=1,
                            grid={"method.lr": [0.05, 1e6]})
    runs = expand(config)
    out = run_sweep(runs, RunStore(tmp_path), workers=0, say=_quiet)
    assert [spec.method.lr for spec, _ in out.failed] == [1e6]
    assert "diverged at step" in out.failed[0][1]
    assert str(out.arrays[0]["status_name"].values[0]) != "diverged"
    again = run_sweep(runs, RunStore(tmp_path), workers=0, say=_quiet)
    assert again.reused == 2 and again.trained == 0  # the diverged run is a stored outcome, not retrained


def test_a_changed_config_is_trained_again_and_an_unchanged_one_is_not(tmp_path):
    run_sweep(RUNS[:2], RunStore(tmp_path), workers=0, say=_quiet)
    changed = [r.validated_replace(init_scale=0.3) for r in RUNS[:2]]
    out = run_sweep(changed + RUNS[:2], RunStore(tmp_path), workers=0, say=_quiet)
    assert out.reused == 2 and out.trained == 2


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_survivors():
    """A failed test leaves no sweep (nor its workers) computing on the cores of the rest of the suite."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            for pid in _workers_of(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.kill()
            proc.wait()


#: `python -m implicitbias.cli` with Ctrl-C raising KeyboardInterrupt, as in a terminal, even where this test
#: process inherited SIGINT ignored (pytest started with `&` from a non-interactive shell), which its
#: children would inherit
_CLI = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('implicitbias.cli', run_name='__main__', alter_sys=True)")


def _cli(out: Path, *extra: str, trials: int = 2) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [*SMALL_FIG1[:-1], f"trials={trials}"]
    # a session of its own: a Ctrl-C can be sent to its whole process group, as a terminal does
    proc = subprocess.Popen([sys.executable, "-c", _CLI, "run", *command, "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    _STARTED.append(proc)
    return proc


def _workers_of(pid: int) -> list[int]:
    """Every process under `pid`: its children and theirs (local workers are forked from a forkserver child)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        direct = [int(p) for p in children.read_text().split()] if children.exists() else []
    except OSError:  # gone meanwhile
        return []
    return direct + [w for child in direct for w in _workers_of(child)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def _stop_after(proc: subprocess.Popen, runs_dir: Path, at_least: int, sig: int, group: bool = False) -> list[int]:
    """Send `sig` to the sweep's main process (with `group`, to its whole process group, as Ctrl-C in a terminal
    does) once `at_least` runs are stored; returns its worker pids."""
    deadline = time.time() + 240
    workers: list[int] = []
    while time.time() < deadline and len(list(runs_dir.glob("*.nc"))) < at_least and proc.poll() is None:
        workers = _workers_of(proc.pid) or workers
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be stopped"
    workers = _workers_of(proc.pid) or workers
    if group:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)
    return workers


def _gone(pids: list[int], seconds: float = 30) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline and any(_alive(w) for w in pids):
        time.sleep(0.2)
    return not any(_alive(w) for w in pids)


@pytest.mark.xdist_group("sweep-cli")
def test_kill_9_then_rerun_ends_with_the_same_results(tmp_path, capsys):
    # 16 runs: with the programs already compiled (the session's compile cache) a run takes well under a second
    # on the one worker, and the sweep must still be running when the signal arrives after 2.  The uninterrupted
    # reference and the rerun run in this process (the same command, through `main`); only the killed sweep
    # needs a process of its own.
    from implicitbias.cli import main

    trials, total = 4, 16
    command = ["run", *SMALL_FIG1[:-1], f"trials={trials}", "--workers", "0"]
    assert main([*command, "--out", str(tmp_path / "ref")]) == 0
    runs_dir = tmp_path / "run" / "runs"
    # kill -9 of the main process: its worker notices and ends itself (no orphan computing on)
    proc = _cli(tmp_path / "run", "--workers", "1", trials=trials)
    workers = _stop_after(proc, runs_dir, 2, signal.SIGKILL)
    proc.wait()
    kept = len(list(runs_dir.glob("*.nc")))
    assert 2 <= kept < total
    assert _gone(workers), workers
    # a write the kill cut short leaves a temporary file: planted here, so that its cleaning is checked every time
    (runs_dir / ".abc.nc.12345.0badc0de.tmp").write_bytes(b"half a file")
    # the same command again: takes the directory's lock (the killed holder's lock went with it), removes the
    # temporaries, loads what finished, trains the rest, same results as never interrupted
    capsys.readouterr()
    assert main([*command, "--out", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert f"{kept} of {total} runs already in" in captured.out + captured.err
    assert "waiting" not in captured.err and "temporary files" in captured.err
    assert not list((tmp_path / "run").rglob("*.tmp"))
    a, b = load(tmp_path / "ref"), load(tmp_path / "run")
    assert [r.key() for r in a.runs] == [r.key() for r in b.runs]
    _assert_same(a.arrays, b.arrays)
    assert a.checks == b.checks


@pytest.mark.xdist_group("sweep-cli")
def test_ctrl_c_shuts_down_keeps_finished_runs_and_exits_130(tmp_path):
    # 80 runs, the signal after 3 are stored: the sweep is still training when it arrives even with every
    # program in the session's compile cache (a run then takes ~0.1 s; with 24 runs the whole sweep sometimes
    # ended between two polls and the signal reached the figure-writing phase instead)
    # Ctrl-C as a terminal sends it, to every process of the group (the workers included): one line, no traceback
    runs_dir, total = tmp_path / "run" / "runs", 80
    proc = _cli(tmp_path / "run", "--workers", "1", trials=total // 4)
    workers = _stop_after(proc, runs_dir, 3, signal.SIGINT, group=True)
    text = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130 and "rerun the same command to resume" in text, text
    assert "Traceback" not in text and text.count("interrupted") == 1, text
    assert _gone(workers), workers
    assert 3 <= len(list(runs_dir.glob("*.nc"))) < total


@pytest.mark.xdist_group("sweep-cli")
def test_two_processes_on_one_directory_do_not_corrupt_it(tmp_path):
    # the directory's lock: the second command waits for the first, then loads every run (nothing trained twice)
    first, second = _cli(tmp_path, "--workers", "0"), _cli(tmp_path, "--workers", "0")
    assert first.wait(timeout=240) == 0, first.stdout.read()
    assert second.wait(timeout=240) == 0
    texts = [first.stdout.read(), second.stdout.read()]
    assert sum("8 of 8 runs already in" in t for t in texts) == 1, texts
    results = load(tmp_path)
    assert len(results.runs) == 8 and not results.failed
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob("*.corrupt"))


_FAULTS = """
import resource
import numpy as np
from implicitbias.sweeps.cluster import keep_allocations


def faults():
    np.ones(1 << 17).sum()  # warm up
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(200):
        np.ones(1 << 17).sum()  # 1 MiB allocated and freed: mmapped each time under a fixed 128 KiB threshold
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


plain = faults()
changed = keep_allocations()
print(plain, changed, faults())
"""


def test_workers_under_a_dask_nanny_keep_their_allocations():
    """Dask's nanny sets MALLOC_TRIM_THRESHOLD_, which fixes glibc's mmap threshold at 128 KiB: every
    1 MiB buffer is then mapped and page-faulted afresh (256 faults).  `keep_allocations` (called by every
    task) restores large thresholds; counted in page faults, not time, in one process under the variable,
    before and after the call."""
    env = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536")
    out = subprocess.run([sys.executable, "-c", _FAULTS], env=env, capture_output=True, text=True, check=True)
    plain, changed, kept = out.stdout.split()
    assert changed == "True"
    assert int(plain) >= 200 * 200, out.stdout  # the negative control: >= 200 of the 256 pages each time
    assert int(kept) < 2000, out.stdout  # reused from the heap: no fresh pages


def test_a_ctrl_c_that_lands_in_a_finaliser_is_not_lost_while_the_sweep_waits():
    """A SIGINT delivered while a `__del__` runs (a Dask future released in the wait loop) used to raise
    KeyboardInterrupt there, where Python prints "Exception ignored" and drops it: the sweep went on to its end.
    Inside `_interrupt_at_poll` it is kept for the loop's next poll."""
    import gc

    from implicitbias.sweeps.sweep import _interrupt_at_poll

    class Finalised:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)

    unraisable = []
    previous_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    # Python's own handler, as in a terminal (a process started in the background by a non-interactive shell, or
    # some xdist setups, inherit SIGINT ignored, and then `_interrupt_at_poll` rightly changes nothing)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _interrupt_at_poll() as interrupted:
            Finalised()  # dropped at once: __del__ runs, the signal arrives inside it
            gc.collect()
            assert interrupted() and not unraisable
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
        # the control: under Python's own handler the same KeyboardInterrupt is dropped in the finaliser
        Finalised()
        gc.collect()
        assert [type(u.exc_value) for u in unraisable] == [KeyboardInterrupt]
    finally:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, inherited)
