"""The README's Python snippet saved as a script and run with `python script.py` (issue 42): it finishes with two
local workers, which start without importing the script again, and records what the user waited for; where a
process does import it again (multiprocessing's spawn, as `__mp_main__`), `implicitbias.run` refuses at once in
one line instead of waiting on the run directory the script holds."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from implicitbias.storage.lock import directory_lock

README = Path(__file__).resolve().parents[1] / "README.md"
#: the README's call, as a user saves it (no `if __name__ == "__main__":`)
CALL = 'implicitbias.run("chistikov2023-fig1", quick=True, out="runs/fig1")'
#: made small (2 runs, one per worker) and quiet: the point is the processes, not the training
SMALL = ('implicitbias.run("chistikov2023-fig1", quick=True, out="runs/fig1", workers=2, progress=False, '
         'overrides={"grid.init_scale": [0.25], "trials": 1})')
#: each execution of the script's top level adds a line: its pid and `__name__`
MARK = 'import os\nwith open("executions.txt", "a") as _f:\n    print(os.getpid(), __name__, file=_f)\n'


def _script(tmp_path: Path) -> Path:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    snippet = next((b for b in blocks if CALL in b), None)
    assert snippet is not None, f"README.md has no Python block with {CALL}: this test runs that block as a script"
    path = tmp_path / "script.py"
    path.write_text(MARK + snippet.replace(CALL, SMALL), encoding="utf-8")
    return path


def _python(args: list[str], cwd: Path, timeout: float) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, seconds) of `python ARGS` in its own process group; on a timeout the whole
    group (workers included) is killed and the test fails saying so."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"`python {' '.join(args)}` still running after {timeout:g} s (it hangs):\n{err[-2000:]}")
    return proc.returncode, out, err, time.perf_counter() - started


@pytest.mark.xdist_group("sweep-cli")
def test_the_readme_snippet_as_a_script_finishes_with_two_workers(tmp_path):
    script = _script(tmp_path)
    code, out, err, seconds = _python([script.name], tmp_path, timeout=240)
    assert code == 0, err[-3000:]
    assert "Dask: 2 tasks on 2 workers" in err and "waiting" not in err, err
    # the workers did not run the script again: its top level ran once, in the script's own process
    runs = (tmp_path / "executions.txt").read_text().split("\n")[:-1]
    assert len(runs) == 1 and runs[0].endswith(" __main__"), runs
    # issue 42.7: run.json records what the user waited (start-up, training, checks, figures, report), and the
    # training inside it
    info = json.loads((tmp_path / "runs" / "fig1" / "run.json").read_text())
    assert info["startup_s"] > 0 and info["training_s"] > 0, info
    assert info["startup_s"] + info["training_s"] <= info["wall_time_s"] + 0.1 <= seconds + 0.2, (info, seconds)


@pytest.mark.xdist_group("sweep-cli")
def test_run_refuses_at_once_where_a_spawned_process_imports_the_script(tmp_path):
    # what multiprocessing's spawn does in a child of a script (`spawn.import_main_path`, the script's top level
    # as __mp_main__), while the script holds its run directory: one line, exit 2, no wait on the lock
    script = _script(tmp_path)
    child = "import multiprocessing.spawn, sys; multiprocessing.spawn.import_main_path(sys.argv[1])"
    (tmp_path / "runs" / "fig1").mkdir(parents=True)
    with directory_lock(tmp_path / "runs" / "fig1"):
        code, out, err, _ = _python(["-c", child, script.name], tmp_path, timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "__mp_main__" in lines[0] and 'put the call under `if __name__ == "__main__":` in script.py' in lines[0]
    assert (tmp_path / "executions.txt").read_text().split()[1] == "__mp_main__"
    assert not (tmp_path / "runs" / "fig1" / "config.yaml").exists()


#: prints the start-up `run` would record, and the process's age (from its fork), in a script run as `__main__`
_STARTUP = "from implicitbias.pipeline import api\nprint(api._startup_s(), api._process_age_s())\n"


def test_the_start_up_leaves_out_what_a_shell_ran_before_it_exec_d_python(tmp_path):
    # `bash -c 'pip install ... && implicitbias run ...'` runs its last command in place of the shell: the process
    # started (forked) before the install, and a fresh install's 60 s of pip were printed as the run's start-up
    (tmp_path / "startup.py").write_text(_STARTUP, encoding="utf-8")
    proc = subprocess.run(["bash", "-c", f"sleep 2 && exec {sys.executable} startup.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    startup, age = (float(x) for x in proc.stdout.split())
    assert age >= 2.0  # the negative control: the process's own age counts the shell's sleep
    assert 0.0 < startup <= age - 1.5, (startup, age)  # the interpreter's imports, not the sleep
