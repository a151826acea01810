"""results.nc stacks the runs of one layout into one node (writing a group per run took time quadratic in the
number of runs); loading gives back every run's arrays exactly: values, dtypes, dimensions, coordinates,
attributes and its own number of checkpoints."""

import os
import resource
import signal

import numpy as np
import pytest
import xarray as xr

from implicitbias.experiments.registry import get
from implicitbias.runs.execute import dataset_of
from implicitbias.runs.results import Results
from implicitbias.runs.spec import RESULTS_FORMAT
from implicitbias.storage.files import DiskFull, atomic_file, save
from implicitbias.storage.stacked import load_results, save_results
from implicitbias.storage.store import RunStore


def _run_arrays(spec, n_checkpoints: int, width: int, seed: int) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    ds = xr.Dataset(
        {
            "loss": (("run", "checkpoint"), rng.random((1, n_checkpoints))),
            "step": (("run", "checkpoint"), np.arange(n_checkpoints, dtype=np.int64)[None] * 10),
            "n_active": (("run", "checkpoint"), rng.integers(0, 5, (1, n_checkpoints)).astype(np.int32)),
            "theta.W": (("run", "theta.W_0", "theta.W_1"), rng.normal(size=(1, width, 3))),
            "status": (("run",), np.asarray([1], dtype=np.int32)),
            "status_name": (("run",), np.array(["converged"], dtype=object)),
            "message": (("run",), np.array([""], dtype=object)),
        },
        coords={"run": [0], "checkpoint": np.arange(n_checkpoints),
                "target": ("checkpoint", np.linspace(0.0, 1.0, n_checkpoints))},
    )
    ds.attrs = {"spec": spec.to_json(), "key": spec.key(), "wall_time_s": 0.5 + seed, "group_size": 1}
    return ds


def test_stacked_results_round_trip_exactly(tmp_path):
    exp = get("linear-regression-implicit-bias")
    specs = exp.runs(exp.resolve(quick=True))[:5]
    # two layouts (widths 4 and 6) and different numbers of checkpoints within each
    arrays = [_run_arrays(s, n, w, i) for i, (s, n, w) in enumerate(zip(specs, [3, 7, 5, 7, 2], [4, 6, 4, 6, 4]))]
    datasets = {s.data_key(): dataset_of(s) for s in specs}
    results = Results(exp.name, {"name": exp.name}, list(specs), arrays, datasets, [{"outcome": "holds"}])
    save_results(results, tmp_path / "results.nc")
    back = load_results(tmp_path / "results.nc")
    assert [s.key() for s in back.runs] == [s.key() for s in specs]
    for before, after in zip(arrays, back.arrays):
        xr.testing.assert_identical(before, after)
        assert {k: v.dtype for k, v in before.variables.items()} == {k: v.dtype for k, v in after.variables.items()}
        assert set(before.coords) == set(after.coords)
    assert sorted(back.datasets) == sorted(datasets)
    for key, data in datasets.items():
        np.testing.assert_array_equal(back.datasets[key].X, data.X)
    assert back.checks == [{"outcome": "holds"}]
    with xr.open_datatree(tmp_path / "results.nc", engine="netcdf4") as tree:
        assert len(tree["runs"].children) == 2  # one node per layout, not one per run


def test_ctrl_c_during_a_store_write_is_raised_after_the_file_is_complete(tmp_path):
    # regression: a KeyboardInterrupt inside xarray's to_netcdf could leave its file lock held and hang the sweep
    ds = xr.Dataset({"x": ("i", np.arange(5.0))})
    reached = []

    def write(tmp):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the write
        ds.to_netcdf(tmp)
        reached.append(True)

    # Ctrl-C as in a terminal, even where pytest inherited SIGINT ignored (started with `&` from a script)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            atomic_file(write, tmp_path / "a.nc")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert reached, "the write ran to its end"
    with xr.open_dataset(tmp_path / "a.nc") as back:
        np.testing.assert_array_equal(back["x"].values, ds["x"].values)
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_write_past_the_file_size_limit_names_the_file_and_leaves_no_temporary(tmp_path):
    # NetCDF reports a full disk or `ulimit -f` only as "HDF error"; atomic_file names the file and the cause
    ds = xr.Dataset({"x": ("i", np.random.default_rng(0).random(40_000))})  # ~320 kB
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
    try:
        with pytest.raises(DiskFull, match="ulimit -f") as caught:
            save(ds, tmp_path / "big.nc")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(tmp_path / "big.nc") in str(caught.value)
    assert not list(tmp_path.iterdir())  # neither the file nor its temporary
    save(ds, tmp_path / "big.nc")  # the negative control: without the limit the same write succeeds
    assert (tmp_path / "big.nc").exists()


def test_failures_are_recorded_until_the_run_is_stored_and_temporaries_are_cleaned(tmp_path):
    exp = get("linear-regression-implicit-bias")
    spec = exp.runs(exp.resolve(quick=True))[0]
    store = RunStore(tmp_path)
    store.save_failure(spec, "ValueError: injected")
    assert store.failures()[spec.key()]["error"] == "ValueError: injected"
    (tmp_path / "runs").mkdir(exist_ok=True)
    stray = tmp_path / "runs" / f".{spec.key()}.nc.999.abcdef12.tmp"
    stray.write_bytes(b"half")
    kept = tmp_path / "runs" / "notes.txt"
    kept.write_text("not a temporary")
    assert store.clean_temporaries() == [stray] and kept.exists()
    store.save_run(_run_arrays(spec, 3, 2, 0).assign_attrs(format=RESULTS_FORMAT))
    assert store.failures() == {}  # the stored run supersedes its failure
