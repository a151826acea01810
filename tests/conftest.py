import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent compilation cache per test session, shared by the xdist workers and the CLI subprocesses
# the tests start (they inherit the environment): a program that several tests compile with the same
# shapes is compiled once.  The controller (or a run without xdist) creates it; workers inherit the path.
if "PYTEST_XDIST_WORKER" not in os.environ and "IMPLICITBIAS_TEST_CACHE_OWNER" not in os.environ:
    os.environ["IMPLICITBIAS_CACHE_DIR"] = tempfile.mkdtemp(prefix="implicitbias-test-cache-")
    os.environ["IMPLICITBIAS_TEST_CACHE_OWNER"] = str(os.getpid())
    os.environ.setdefault("IMPLICITBIAS_JAX_CACHE", "1")  # IMPLICITBIAS_JAX_CACHE=0 turns it off (a benchmark's)
    # every program, however quick to compile: the suite's processes compile the same small programs
    os.environ.setdefault("IMPLICITBIAS_CACHE_MIN_COMPILE_S", "0")  # benchmarks/bench_test_suite.py sets others
    # the folder of `shared_directory`: what one xdist worker builds, the other reads
    os.environ["IMPLICITBIAS_TEST_SHARED_DIR"] = tempfile.mkdtemp(prefix="implicitbias-test-shared-")

# The suite compiles far more than it runs: its programs are compiled with LLVM's -O1 (XLA's default is -O2).
# `python benchmarks/bench_xla_flags.py`: a small gradient-flow program compiled in 0.98 s against 1.45 s
# with the shipped flags, and 38 compiled gradient-flow runs took 12-15% longer; shipped runs keep XLA's
# level.  Inherited by the subprocesses the tests start.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=1").strip()
# ... and as one LLVM module each, not split into parts compiled on threads of their own: with two xdist
# workers on two cores the parts only queue for the same cores, and each part repeats LLVM's set-up.
# XLA's default is 32 parts.  `python benchmarks/bench_test_suite.py --configs default,split-32 --repeat 1`
# (2026-12-07, idle): the whole suite 413.5 s wall / 742 s CPU with one part, 444.6 s / 797 s with 32.
if "xla_cpu_parallel_codegen_split_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ["XLA_FLAGS"] + " --xla_cpu_parallel_codegen_split_count=1").strip()

import jax  # noqa: E402
import pytest  # noqa: E402

import implicitbias  # noqa: E402,F401  (enables float64)


def pytest_unconfigure(config):
    if os.environ.get("IMPLICITBIAS_TEST_CACHE_OWNER") == str(os.getpid()) and not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ["IMPLICITBIAS_CACHE_DIR"], ignore_errors=True)
        shutil.rmtree(os.environ["IMPLICITBIAS_TEST_SHARED_DIR"], ignore_errors=True)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)


#: test files whose tests start processes or run whole experiments: dispatched first, so that under xdist the
#: long units do not start last and leave the other worker idle at the end
_LONG_FIRST = ("test_sweep.py", "test_slurm.py", "test_cli.py")


#: module fixtures left ungrouped: test_faults' runs probe a full disk and a batch cluster, and after those
#: probes a netCDF4/HDF5 read in the same worker crashed (2 of 3 tries) when its fixtures were grouped onto one
_UNGROUPED = ("tests/test_faults.py",)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup`, tests that use a module-scoped fixture of their own module (and have no group of
    their own) go to one worker, so the fixture (often a trained experiment) is computed once, not on both; and
    the files in `_LONG_FIRST` are dispatched first."""
    for item in items:
        if any(True for _ in item.iter_markers("xdist_group")):
            continue
        module = item.nodeid.split("::")[0]
        shared = sorted(name for name in item.fixturenames
                        for fixture in item._fixtureinfo.name2fixturedefs.get(name, ())
                        if fixture.scope == "module" and fixture.baseid == module)
        if shared and module not in _UNGROUPED:
            item.add_marker(pytest.mark.xdist_group(f"{module}::{shared[0]}"))
    rank = {name: i for i, name in enumerate(_LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(_LONG_FIRST)))  # stable: file order kept otherwise


def pytest_collection_finish(session):
    # Every test module is imported now, and with it jax, diffrax, xarray and matplotlib: hundreds of thousands
    # of long-lived objects that every full collection of Python's gc traversed again while the tests trace and
    # compile, in a process that keeps growing.  Frozen (still freed by reference counting), and generation 0
    # collected every 10 000 allocations instead of 700: over tests/test_training.py, test_rkc.py and
    # test_matrix_experiments.py in one process, gc took 9.4 s (of 101 s CPU) before and 2.8 s after.
    import gc

    gc.freeze()
    gc.set_threshold(10_000, *gc.get_threshold()[1:])
