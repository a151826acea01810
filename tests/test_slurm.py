"""The dask-jobqueue path against a real single-node SLURM (started by `.ci/slurm-single-node.sh`): the same
sweep through `--cluster FILE` gives bit-identical results to one trained in this process."""

import shutil
import subprocess
import sys

import numpy as np
import pytest

from implicitbias.pipeline import load


def _slurm_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:
        # a running controller answers at once; without one sinfo retries for ~9 s, paid at collection
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=3)
    except subprocess.TimeoutExpired:
        return False
    return state.returncode == 0 and any(s in state.stdout for s in ("idle", "mixed"))


SMALL = ["chistikov2023-fig1", "--quick", "--no-progress", "--set", "grid.init_scale=[0.25,0.0039]", "trials=2"]
#: the example plugin's quick variant (examples/quadratic-net, installed by CI): a plugin's experiment runs on SLURM
#: like a catalogued one; one SLURM sweep per CI run covers both (without the plugin: the catalogued one)
PLUGIN = ["li2018-quadratic", "--quick", "--strict", "--no-progress", "--set", "trials=1"]


def _sweep() -> tuple[list[str], int]:
    """The command of the SLURM sweep and its number of runs."""
    try:
        import implicitbias_quadratic  # noqa: F401
    except ImportError:
        return SMALL, 8
    return PLUGIN, 3


@pytest.mark.xdist_group("sweep-cli")
@pytest.mark.skipif(not _slurm_up(), reason="no SLURM node up (CI starts one with .ci/slurm-single-node.sh)")
def test_a_sweep_on_slurm_through_dask_jobqueue_equals_one_in_process(tmp_path):
    cluster = tmp_path / "slurm.yaml"
    cluster.write_text('kind: slurm\njobs: 1\ncores: 2\nprocesses: 2\nmemory: 4GB\nwalltime: "00:20:00"\n'
                       f"log_directory: {tmp_path / 'logs'}\n")
    from implicitbias.cli import main

    # the sweep on SLURM as a user starts it (a process of its own); the reference in this process
    out = tmp_path / "slurm"
    command, runs = _sweep()
    proc = subprocess.run([sys.executable, "-m", "implicitbias.cli", "run", *command, "--out", str(out), "--cluster",
                           str(cluster)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert main(["run", *command, "--out", str(tmp_path / "here"), "--workers", "0"]) == 0
    a, b = load(out), load(tmp_path / "here")
    assert [r.key() for r in a.runs] == [r.key() for r in b.runs] and len(a.runs) == runs
    for x, y in zip(a.arrays, b.arrays):
        for name in x.data_vars:
            if x[name].dtype.kind == "f":
                np.testing.assert_array_equal(x[name].values, y[name].values, err_msg=name)
