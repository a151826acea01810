"""Fault injection, table-driven as scikit-learn's common checks are.

`BAD_INPUTS`: every option of every subcommand, every type of config field and hostile files, each given a
value a new user could type; every row must exit 2 within 10 s, with no traceback, a message that names the
input, and nothing written.  The command runs in this process (`main(argv)`), as a fresh interpreter per row
would cost ~3 s of imports each.

Fault probes: a disk that fills up (`ulimit -f`), a batch cluster and a scheduler that never give a worker, a
close that times out, a task that raises (not retried, recorded), a directory lock whose holder is killed.
Each asserts that every finished run is kept and that the resumed results equal an uninterrupted run.  The
kill -9 probes (of a worker and of the main process) and Ctrl-C sent to the whole process group live in
tests/test_sweep.py, beside the other multi-process sweep tests whose helpers they share.
"""

import contextlib
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from _shared import shared_directory
from implicitbias.cli import main
from implicitbias.pipeline import load

#: the cheapest sweep of processes and resumption: 4 gradient-flow runs of chistikov2023-fig1 (2 data sets)
SMALL = ["chistikov2023-fig1", "--quick", "--no-progress", "--set", "grid.init_scale=[0.25,0.0039]", "trials=1"]


def _cli(argv: list[str]) -> tuple[int, str]:
    """`implicitbias ARGV` in this process: (exit code, stdout + stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's refusals
            code = exc.code
    return code, out.getvalue() + err.getvalue()


# -- hostile files ---------------------------------------------------------------------------------------------
def _results_file(path: Path) -> Path:
    """A real results.nc (synthetic arrays of two runs of a real experiment), written by `save_results`."""
    import xarray as xr

    from implicitbias.experiments.registry import get
    from implicitbias.runs.execute import dataset_of
    from implicitbias.runs.results import Results
    from implicitbias.storage.stacked import save_results

    exp = get("linear-regression-implicit-bias")
    specs = exp.runs(exp.resolve(quick=True))[:2]
    arrays = []
    for i, spec in enumerate(specs):
        ds = xr.Dataset({"loss": (("run", "checkpoint"), np.full((1, 3), 0.5 + i)),
                         "status": (("run",), np.asarray([1], dtype=np.int32))}, coords={"run": [0]})
        ds.attrs = {"spec": spec.to_json(), "key": spec.key()}
        arrays.append(ds)
    results = Results(exp.name, exp.resolve(quick=True), list(specs), arrays, {s.data_key(): dataset_of(s) for s in specs},
                      [])
    path.mkdir(parents=True)
    return save_results(results, path / "results.nc")


def _damage(file: Path, node: str, attribute: str, text: str) -> None:
    import netCDF4

    with netCDF4.Dataset(file, "r+") as root:
        group = root
        for name in filter(None, node.split("/")):
            group = group.groups[name]
        group.setncattr(attribute, text)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile")
    cluster = "kind: slurm\ncores: 1\nmemory: 1GB\n"
    texts = {
        "cluster_yaml": "kind: slurm\ncores: [2\n",
        "cluster_list": "- kind\n- slurm\n",
        "cluster_key": cluster + "bogus_key: 1\n",
        "cluster_kind": "kind: kubernetes\n",
        "cluster_jobs": cluster + "jobs: 0\n",
        "cluster_memory": "kind: slurm\ncores: 1\nmemory: lots\n",
        "cluster_cores": "kind: slurm\ncores: abc\nmemory: 1GB\n",
        "cluster_ok": cluster,
        "cluster_options": cluster + "scheduler_options: 3\n",
        "plain": "just a text file\n",
    }
    out = {"root": str(root), "missing": str(root / "missing"), "dir": str(root)}
    for name, text in texts.items():
        (root / f"{name}.yaml").write_text(text)
        out[name] = str(root / f"{name}.yaml")
    (root / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    out["cluster_binary"] = str(root / "binary.yaml")
    garbage = root / "garbage"
    garbage.mkdir()
    (garbage / "results.nc").write_bytes(b"\x89HDF\r\n\x1a\n" + os.urandom(2000))
    out["garbage"] = str(garbage)
    good = _results_file(root / "good")
    for name, node, attribute, text in [("bad_yaml", "/", "config", "model: {width: [1,\n"),
                                        ("bad_config", "/", "config", "- not\n- a mapping\n"),
                                        ("bad_json", "/", "checks", "[{'not': json"),
                                        ("bad_runs", "/runs/s0000", "run_attrs", "[{\"spec\": 3"),
                                        ("bad_spec", "/runs/s0000", "run_attrs", json.dumps([{"spec": "{}"}] * 2))]:
        (root / name).mkdir()
        shutil.copy(good, root / name / "results.nc")
        _damage(root / name / "results.nc", node, attribute, text)
        out[name] = str(root / name)
    for name, text in [("partial_yaml", "model: {width: [1,\n"), ("partial_list", "- not\n- a mapping\n"),
                       ("partial_field", "experiment: chistikov2023-fig1\nquick: true\ntrials: -1\n")]:
        (root / name).mkdir()
        (root / name / "config.yaml").write_text(text)
        out[name] = str(root / name)
    truncated = root / "truncated"
    truncated.mkdir()
    (truncated / "results.nc").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    out["truncated"] = str(truncated)
    return out


KKT = "run frei2023-kkt --quick --out {out}"
#: (command with {placeholders}, what the message must name).  {out} is a directory that must stay unwritten.
BAD_INPUTS = [
    # list
    ("list --bogus", "--bogus"),
    # describe: name, --quick, --set
    ("describe no-such-experiment", "no-such-experiment"),
    ("describe frei2023-kkt --quick=yes", "--quick"),
    ("describe frei2023-kkt --set model.width=-3", "model.width"),
    ("describe frei2023-kkt --set 'model.width=[1,'", "model.width"),
    ("describe frei2023-kkt --set no_field=1", "no_field"),
    # run: every option
    ("run no-such-experiment --out {out}", "no-such-experiment"),
    ("run --out {out}", "name"),
    (KKT + " --quick=1", "--quick"),
    ("run frei2023-kkt --quick --out {plain}", "--out"),
    ("run frei2023-kkt --quick --out {plain}/sub", "--out"),
    ("run frei2023-kkt --quick --out /proc/implicitbias-nowhere/out", "--out"),
    ("run frei2023-kkt --quick --out /tmp/" + "a" * 300 + "/out", "--out"),  # a name longer than the file system's
    ("report /tmp/" + "a" * 300, "File name too long"),
    (KKT + " --set model.width", "model.width"),
    (KKT + " --set =3", "--set"),
    (KKT + " --set 'method.lr=[0.1'", "method.lr"),
    (KKT + " --set 'model.width={{a: 1'", "model.width"),
    (KKT + " --seed x", "--seed"),
    (KKT + " --seed -1", "seed"),
    (KKT + " --seed 1e20", "--seed"),
    (KKT + " --seed 100000000000000000000", "seed"),
    (KKT + " --strict=yes", "--strict"),
    (KKT + " --workers -1", "--workers"),
    (KKT + " --workers 1000", "--workers"),
    (KKT + " --workers two", "--workers"),
    (KKT + " --scheduler 'not a url'", "not a url"),
    (KKT + " --scheduler http://localhost:8786", "http://localhost:8786"),
    (KKT + " --scheduler tcp://somehost", "tcp://somehost"),
    (KKT + " --scheduler tcp://127.0.0.1:1", "tcp://127.0.0.1:1"),
    (KKT + " --scheduler tcp://127.0.0.1:1 --cluster {cluster_ok}", "--scheduler"),
    (KKT + " --scheduler tcp://127.0.0.1:1 --workers 1", "--workers"),
    (KKT + " --cluster {missing}", "missing"),
    (KKT + " --cluster {dir}", "directory"),
    (KKT + " --cluster {cluster_yaml}", "cluster_yaml"),
    (KKT + " --cluster {cluster_list}", "cluster_list"),
    (KKT + " --cluster {cluster_binary}", "binary"),
    (KKT + " --cluster {cluster_key}", "bogus_key"),
    (KKT + " --cluster {cluster_kind}", "kubernetes"),
    (KKT + " --cluster {cluster_jobs}", "cluster.jobs"),
    (KKT + " --cluster {cluster_memory}", "lots"),
    (KKT + " --cluster {cluster_cores}", "cluster_cores"),
    (KKT + " --cluster {cluster_options}", "scheduler_options"),
    (KKT + " --no-progress=1", "--no-progress"),
    (KKT + " --verbose=1", "--verbose"),
    (KKT + " --worker-timeout 0", "--worker-timeout"),
    (KKT + " --worker-timeout -5", "--worker-timeout"),
    (KKT + " --worker-timeout nan", "--worker-timeout"),
    (KKT + " --worker-timeout inf", "--worker-timeout"),
    (KKT + " --worker-timeout soon", "--worker-timeout"),
    (KKT + " --dashboard what", "--dashboard"),
    (KKT + " --dashboard 10.9.9.9:8787", "--dashboard"),
    (KKT + " --dashboard 127.0.0.1:99999", "--dashboard"),
    (KKT + " --reuse {missing}", "--reuse"),
    (KKT + " --reuse {plain}", "--reuse"),
    (KKT + " --reuse", "--reuse"),
    (KKT + " --set 'parts=[nope]'", "parts"),
    (KKT + " --bogus", "--bogus"),
    # every type of config field
    (KKT + " --set model.width=-3", "model.width"),  # int, out of range
    (KKT + " --set model.width=abc", "model.width"),  # int, not a number
    (KKT + " --set model.width=2.5", "model.width"),  # int, a fraction
    (KKT + " --set model.width=100000000000000000000000", "model.width"),  # int, beyond int64
    (KKT + " --set method.lr=inf", "method.lr"),  # float, infinite
    (KKT + " --set method.lr=.nan", "method.lr"),  # float, not a number
    (KKT + " --set method.lr=1e400", "method.lr"),  # float, overflows to inf
    (KKT + " --set method.lr=0", "method.lr"),  # step size, not positive
    (KKT + " --set method.lr=-1", "method.lr"),
    (KKT + " --set method.lr=fast", "method.lr"),
    (KKT + " --set init_scale=-1", "init_scale"),
    (KKT + " --set init_scale=1e308", "init_scale"),  # finite, but the first forward pass overflows
    (KKT + " --set kkt=maybe", "kkt"),  # bool
    (KKT + " --set reference=foo", "reference"),  # literal
    (KKT + " --set model.kind=transformer", "transformer"),  # tagged union
    (KKT + " --set method.kind=adam", "adam"),
    (KKT + " --set data.name=no_such_data", "no_such_data"),
    (KKT + " --set 'checkpoints=[1, .inf]'", "checkpoints"),  # list of floats
    (KKT + " --set checkpoints=-1", "checkpoints"),
    (KKT + " --set checkpoints=1000000000", "checkpoints"),  # counted before a grid is built
    (KKT + " --set model=3", "model"),  # a value for a section
    (KKT + " --set stop.max_steps=0", "stop.max_steps"),  # nested section
    (KKT + " --set stop.max_steps=100000000000000000000", "stop.max_steps"),
    (KKT + " --set stop.loss_tol=-1", "stop.loss_tol"),
    (KKT + " --set seed=-3", "seed"),  # seeds: the generators' range
    (KKT + " --set seed=9223372036854775807 trials=2", "seed"),
    (KKT + " --set trials=0", "trials"),
    (KKT + " --set trials=10000000000", "trials"),
    (KKT + " --set trials=60000", "trials"),  # two parts: 120 000 runs, counted, not expanded
    (KKT + " --set data.d=0", "data.d"),
    (KKT + " --set model.widht=3", "model.widht"),  # unknown fields and sections
    (KKT + " --set foo.bar=1", "foo.bar"),
    (KKT + " --set grid.no_axis=[1]", "no_axis"),
    (KKT + " --set model.width=2000000", "too large"),  # the memory budget
    (KKT + " --set data.n=1000000000", "data.n"),
    ("run frei2023-kkt --quick --out {out} --set loss.name=square", "loss.name"),  # a loss that does not fit the data
    # report: directory, hostile results files
    ("report {missing}", "missing"),
    ("report {plain}", "plain"),
    ("report {garbage}", "results.nc"),
    ("report {truncated}", "results.nc"),
    ("report {bad_yaml}", "damaged"),
    ("report {bad_config}", "damaged"),
    ("report {bad_json}", "damaged"),
    ("report {bad_runs}", "damaged"),
    ("report {bad_spec}", "damaged"),
    ("report {root}/good --verbose=2", "--verbose"),
    ("report {root}/good --strict=yes", "--strict"),
    ("report --partial {missing}", "missing"),  # a run that has not finished: its config.yaml and runs/
    ("report --partial {garbage}", "config.yaml does not exist"),
    ("report --partial {partial_yaml}", "damaged"),
    ("report --partial {partial_list}", "damaged"),
    ("report --partial {partial_field}", "trials"),
    ("report --partial {plain}", "plain"),
    ("report", "dir"),
    # index
    ("index {plain}", "plain"),
    ("index {missing}", "missing"),
    ("index", "dir"),
]


def _listing(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")} if root.exists() else {}


@pytest.mark.parametrize("command, names", BAD_INPUTS, ids=[c for c, _ in BAD_INPUTS])
def test_bad_input_exits_2_at_once_naming_it_and_writes_nothing(command, names, files, tmp_path):
    out = tmp_path / "out"
    argv = shlex.split(command.format(out=out, **files))
    before = _listing(Path(files["root"]))
    started = time.perf_counter()
    code, text = _cli(argv)
    elapsed = time.perf_counter() - started
    assert code == 2, text
    assert "Traceback" not in text, text
    assert names.format(**files) in text, text
    assert elapsed < 10, f"{elapsed:.1f} s"
    assert not out.exists(), "something was written before the input was refused"
    assert _listing(Path(files["root"])) == before, "a hostile file's directory was written to"


def test_a_platform_jax_cannot_use_exits_2_naming_it(tmp_path):
    """An environment error a fresh process meets (JAX's backends are initialised once per process)."""
    env = {**os.environ, "JAX_PLATFORMS": "no_such_platform"}
    proc = subprocess.run([sys.executable, "-m", "implicitbias.cli", "run", "frei2023-kkt", "--quick", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "JAX_PLATFORMS='no_such_platform'" in proc.stderr and not (tmp_path / "out").exists()


def test_the_table_covers_every_option_of_every_subcommand():
    from implicitbias.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        rows = " ".join(c for c, _ in BAD_INPUTS if c.split()[0] == name)
        assert rows, f"no row for the subcommand {name}"
        for action in command._actions:
            if action.option_strings and "--help" not in action.option_strings:
                assert any(o in rows for o in action.option_strings), (name, action.option_strings)


# -- fault probes ----------------------------------------------------------------------------------------------
def _train_reference(out: Path) -> None:
    code, text = _cli(["run", *SMALL, "--workers", "0", "--out", str(out)])
    assert code == 0, text


@pytest.fixture(scope="module")
def reference() -> Path:
    """SMALL trained uninterrupted (in a test process, once per session: the tests of this module run on both
    workers, see `_UNGROUPED` in conftest.py): what every probe's resumed run must equal.  Read, never written."""
    return shared_directory("test_faults-reference", _train_reference)


def _finished(reference: Path, out: Path, keep: int) -> dict[str, bytes]:
    """`out` as a sweep killed after `keep` runs leaves it: those runs and their data sets stored (returned:
    the run files' contents)."""
    names = sorted(p.name for p in (reference / "runs").glob("*.nc"))[:keep]
    for sub, chosen in (("runs", names), ("data", [p.name for p in (reference / "data").glob("*.nc")])):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for name in chosen:
            shutil.copy(reference / sub / name, out / sub / name)
    return _stored(out)


def _stored(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (out / "runs").glob("*.nc")}


def _assert_resumed_equals(reference: Path, out: Path, kept: dict[str, bytes]) -> None:
    """The runs stored before the fault are still there, unchanged, and the results equal the reference's."""
    for name, content in kept.items():
        assert (out / "runs" / name).read_bytes() == content, name
    a, b = load(reference), load(out)
    assert [r.key() for r in a.runs] == [r.key() for r in b.runs]
    for x, y in zip(a.arrays, b.arrays):
        assert set(x.data_vars) == set(y.data_vars)
        for name in x.data_vars:
            if x[name].dtype.kind in "fiu":
                np.testing.assert_array_equal(x[name].values, y[name].values, err_msg=name)
    assert a.checks == b.checks


def test_a_full_disk_is_named_with_its_path_and_the_rerun_completes(reference, tmp_path):
    # ulimit -f 90 kB: every run file (~49 kB) and data set fits, results.nc (~120 kB) does not.  NetCDF says
    # only "HDF error"; the message must say what is full and where.
    out = tmp_path / "run"
    command = shlex.join([sys.executable, "-m", "implicitbias.cli", "run", *SMALL, "--workers", "0", "--out", str(out)])
    proc = subprocess.run(["bash", "-c", f"ulimit -f 88 && exec {command}"],  # 88 blocks of 1 KiB
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "ulimit -f" in proc.stderr and str(out / "results.nc") in proc.stderr, \
        proc.stderr
    kept = _stored(out)
    assert len(kept) == 4 and not list(out.rglob("*.tmp"))
    code, text = _cli(["run", *SMALL, "--workers", "0", "--out", str(out)])
    assert code == 0 and "4 of 4 runs already in" in text, text
    _assert_resumed_equals(reference, out, kept)


def _fake_slurm(bin_dir: Path) -> None:
    """sbatch that queues a job that never starts, squeue that shows it pending, scancel that cancels it."""
    bin_dir.mkdir()
    for name, body in {"sbatch": 'echo "Submitted batch job 4242"',
                       "squeue": 'echo "4242 dask-worker PENDING (Resources)"', "scancel": "exit 0"}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)


def test_a_batch_cluster_that_never_gives_workers_ends_with_exit_2_and_the_queue(reference, tmp_path, monkeypatch):
    _fake_slurm(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    cluster = tmp_path / "slurm.yaml"
    cluster.write_text(f"kind: slurm\ncores: 1\nprocesses: 1\nmemory: 1GB\nlog_directory: {tmp_path / 'logs'}\n")
    out = tmp_path / "run"
    kept = _finished(reference, out, 2)
    started = time.perf_counter()
    code, text = _cli(["run", *SMALL, "--out", str(out), "--cluster", str(cluster), "--worker-timeout", "2"])
    assert code == 2 and "Traceback" not in text, text
    assert "gave no worker within 2 s" in text and "PENDING (Resources)" in text, text
    assert time.perf_counter() - started < 30
    assert "2 of 4 runs already in" in text
    code, text = _cli(["run", *SMALL, "--workers", "0", "--out", str(out)])
    assert code == 0 and "2 of 4 runs already in" in text, text
    _assert_resumed_equals(reference, out, kept)


def test_a_scheduler_without_workers_ends_with_exit_2(tmp_path):
    from distributed import LocalCluster

    # a scheduler on this machine that has no worker and gets none
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0") as empty:
        code, text = _cli(["run", *SMALL, "--out", str(tmp_path / "run"), "--scheduler", empty.scheduler_address,
                           "--worker-timeout", "1"])
    assert code == 2 and "Traceback" not in text, text
    assert "gave no worker within 1 s" in text and empty.scheduler_address in text, text


def test_a_close_that_times_out_is_a_warning_after_the_results_are_written(reference, tmp_path, monkeypatch):
    from distributed import LocalCluster

    out = tmp_path / "run"
    kept = _finished(reference, out, 3)
    written_before_close = []
    original = LocalCluster.close

    listening = []

    def close_times_out(self, *args, **kwargs):
        written_before_close.append(all((out / f).exists() for f in ("results.nc", "report.html", "checks.json")))
        # every port the sweep's processes listen on (scheduler, dashboard, workers, nannies), while all are up
        me = psutil.Process()
        for process in [me, *me.children(recursive=True)]:
            listening.extend(c.laddr.ip for c in process.net_connections("tcp") if c.status == psutil.CONN_LISTEN)
        original(self, *args, **kwargs)
        raise TimeoutError("the cluster did not close in time (injected)")

    monkeypatch.setattr(LocalCluster, "close", close_times_out)
    code, text = _cli(["run", *SMALL, "--workers", "1", "--out", str(out)])
    assert code == 0, text
    assert written_before_close == [True]
    # the dashboard and the cluster listen on this machine only (a dashboard on every interface lets anyone on
    # the network see and control the sweep)
    assert len(listening) >= 3 and set(listening) == {"127.0.0.1"}, listening
    assert "warning: the Dask cluster did not close cleanly" in text and "Traceback" not in text, text
    _assert_resumed_equals(reference, out, kept)


def test_a_task_that_raises_is_not_retried_and_is_recorded_with_its_error(tmp_path):
    """A worker's task that raises (here: every call of train_group in the worker, patched there) is tried once,
    its runs recorded in DIR/failed/ with the error; the next sweep trains them and clears the records."""
    from implicitbias.experiments.config import ExperimentConfig, expand
    from implicitbias.losses import Loss
    from implicitbias.models import TwoLayer
    from implicitbias.papers.chistikov2023.data import TeacherNeuron
    from implicitbias.storage.store import RunStore
    from implicitbias.sweeps import run_sweep
    from implicitbias.sweeps.cluster import close, local_client
    from implicitbias.training.methods import GD
    from implicitbias.training.stopping import Stop

    runs = expand(ExperimentConfig(model=TwoLayer(width=4), data=TeacherNeuron(d=3, n_test=4), loss=Loss(name="square"),
                                   method=GD(lr=0.05),
                                   stop=Stop(max_steps=50), checkpoints=4, kkt=False, trials=2))
    attempts = tmp_path / "attempts"

    def break_train_group():
        import implicitbias.runs.execute as execute

        def raises(specs, progress=False):
            with open(attempts, "a") as f:
                f.write(f"{len(specs)}\n")
            raise ValueError("injected: the same error on every attempt")

        execute.train_group = raises

    client = local_client(1, dashboard=False)
    try:
        client.run(break_train_group)
        store = RunStore(tmp_path / "store")
        said = []
        out = run_sweep(runs, store, client=client, say=said.append)
    finally:
        close(client)
    assert attempts.read_text().split() == ["2"], "one task of 2 runs, tried once"
    assert len(out.failed) == 2 and all("injected" in m for _, m in out.failed)
    records = store.failures()
    assert sorted(records) == sorted(r.key() for r in runs) and all("injected" in r["error"] for r in records.values())
    assert "error" in (tmp_path / "store" / "log.txt").read_text()
    said = []
    again = run_sweep(runs, RunStore(tmp_path / "store"), workers=0, say=said.append)
    assert any("2 runs failed in an earlier attempt" in m for m in said), said
    assert not again.failed and again.trained == 2 and not store.failures()
    fresh = run_sweep(runs, RunStore(tmp_path / "fresh"), workers=0, say=said.append)
    for x, y in zip(fresh.arrays, again.arrays):
        np.testing.assert_array_equal(x["loss"].values, y["loss"].values)


def test_the_cli_says_where_runs_that_raised_are_recorded(tmp_path, monkeypatch):
    import implicitbias.runs.execute as execute

    def raises(specs, progress=False):
        raise RuntimeError("injected")

    monkeypatch.setattr(execute, "train_group", raises)
    code, text = _cli(["run", *SMALL, "--workers", "0", "--out", str(tmp_path)])
    assert code == 3 and "Traceback" not in text, text
    assert f"recorded with their errors in {tmp_path}/failed/" in text, text
    assert len(list((tmp_path / "failed").glob("*.json"))) == 4


def test_the_directory_lock_waits_for_a_live_holder_and_ignores_a_killed_one(tmp_path):
    from implicitbias.storage.lock import directory_lock

    # a holder killed with SIGKILL: the kernel dropped its lock, the next command goes on at once
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | "
                               "os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)",
                               str(tmp_path / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
    finally:
        holder.kill()
        holder.wait()
    said = []
    started = time.perf_counter()
    with directory_lock(tmp_path, say=said.append):
        assert not said and time.perf_counter() - started < 1
        # a live holder (this process): a second command says who holds which directory, and waits
        entered = threading.Event()

        def second():
            with directory_lock(tmp_path, say=said.append, poll_s=0.05):
                entered.set()

        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.3)
        assert not entered.is_set()
        assert len(said) == 1 and str(tmp_path) in said[0] and f"pid {os.getpid()}" in said[0], said
    thread.join(5)
    assert entered.is_set()


def test_a_partial_report_shows_the_finished_runs_and_the_resumed_run_the_whole(reference, tmp_path):
    kept = _finished(reference, tmp_path, 2)  # 2 of SMALL's 4 runs, as a killed sweep leaves them
    shutil.copy(reference / "config.yaml", tmp_path / "config.yaml")
    code, text = _cli(["report", str(tmp_path)])  # no results.nc: the plain report refuses, naming the file
    assert code == 2 and "results.nc does not exist" in text, text
    code, text = _cli(["report", "--partial", str(tmp_path)])
    assert code == 0, text
    assert "2 of 4 runs finished" in text
    assert "2 of 4 runs finished" in (tmp_path / "report.html").read_text(encoding="utf-8")
    (tmp_path / "report.html").unlink()
    code, text = _cli(["report", str(tmp_path)])  # a plain report of those results keeps saying so
    assert code == 0, text
    assert "2 of 4 runs finished" in (tmp_path / "report.html").read_text(encoding="utf-8")
    part, whole = load(tmp_path), load(reference)
    assert part.partial.startswith("2 of 4 runs finished") and not whole.partial
    assert "partial: 2 of 4 runs finished, 2 runs" in repr(part) and "partial" not in repr(whole)
    assert len(part.runs) == 2
    for spec, ds in zip(part.runs, part.arrays):
        same = whole.arrays[[r.key() for r in whole.runs].index(spec.key())]
        np.testing.assert_array_equal(ds["max_angle"].values, same["max_angle"].values)
    code, text = _cli(["run", *SMALL, "--workers", "0", "--out", str(tmp_path)])  # resumes: the whole results
    assert code == 0, text
    _assert_resumed_equals(reference, tmp_path, kept)
    assert not load(tmp_path).partial  # the resumed run's results are whole
    assert "2 of 4 runs finished" not in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_a_partial_report_of_a_directory_without_runs_names_what_is_missing(reference, tmp_path):
    shutil.copy(reference / "config.yaml", tmp_path / "config.yaml")
    code, text = _cli(["report", "--partial", str(tmp_path)])
    assert code == 2 and "holds none of the 4 runs" in text, text
    code, text = _cli(["report", "--partial", str(tmp_path / "absent")])
    assert code == 2 and "does not exist" in text, text
