"""docs/notebook.md runs as written: a notebook defines a new experiment in a cell, runs it on two worker
processes with `implicitbias.run`, reads its checks and report, reports it again and explores the results; a new
process reports it again from its kept definition, solving no reference."""

import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "notebook.md"


@pytest.mark.xdist_group("notebook")
def test_the_notebook_session_runs_as_documented(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}  # a notebook's cells run in __main__
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 4
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - the documented session itself
    out = tmp_path / "runs" / "my-deep-linear"
    for name in ("config.yaml", "results.nc", "checks.json", "report.html", "experiment.pkl",
                 "figures/distance_to_svm.png"):
        assert (out / name).exists(), name
    results = namespace["results"]
    assert results.checks and results.checks == json.loads((out / "checks.json").read_text())
    assert {c["outcome"] for c in results.checks if c["kind"] == "assumption"} == {"holds"}
    assert len(repr(results)) < 200 and "my-deep-linear" in repr(results)
    labels = {c["cell"] for c in results.checks}
    assert len(labels) == 2, labels  # depth 2 and depth 3: two cells with labels that tell them apart
    assert namespace["ds"].sizes["run"] == len(namespace["deep"]) == 2
    with pytest.raises(KeyError, match="distance_to_svm"):
        namespace["res"].plot("no_such_figure")
    # a later session (a new process): the kept definition (experiment.pkl) is found, and every reference comes
    # from the run directory's memo (the SVMs: solved while the run was checked, none solved again)
    assert list((out / "references").glob("*.pkl"))
    code = ("import sys, implicitbias; from implicitbias.reference import memo; "
            "r = implicitbias.report(sys.argv[1]); print(len(r.checks), sum(memo.solves().values()))")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    n_checks, solved = proc.stdout.split()
    assert int(n_checks) == len(results.checks) and int(solved) == 0
