"""The notebook session of docs/notebook.md runs as written, on a quick run (so the documentation stays true)."""

import re
from pathlib import Path

import matplotlib
import pytest

from implicitbias.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "notebook.md"


@pytest.mark.xdist_group("chistikov2023-fig1")
def test_the_notebook_session_runs_as_documented(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    text = DOC.read_text()
    command = re.search(r"```bash\n(implicitbias run .*)\n```", text).group(1).split()
    assert main([*command[1:], "--workers", "0", "--no-progress", "--out", str(tmp_path / "runs" / "fig1-quick")]) == 0
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - the documented session itself
    assert namespace["ds"].sizes["run"] == len(namespace["centred"]) > 0
    assert namespace["res"].plot("fig1_max_angle") is not None
    with pytest.raises(KeyError, match="fig1_max_angle"):
        namespace["res"].plot("no_such_figure")
