"""The catalogue's run times come from measurements (runtimes.json), never from hand-written strings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import implicitbias.experiments as experiments
from implicitbias.experiments import Experiment, catalog
from implicitbias.experiments.runtimes import (
    NOT_MEASURED,
    catalogue_lines,
    describe,
    load_runtimes,
    record_measurement,
    runtime,
    runtimes_path,
)

RECORD = {"date": "2026-12-03T03:00:00Z", "wall_s": 1913.4, "peak_rss_mb": 2300.0, "cpu_s": 3000.0,
          "load_before": [1.5, 1.2, 1.0], "load_during": {"mean": 2.6, "max": 4.1}, "cpus": 2, "exit_code": 0,
          "predictions": {"holds": 7, "fails": 1},
          "assumptions": {"holds": 3, "fails": 2}, "runs": 12, "steps": 100, "grad_evals": 400}


def test_no_hand_written_run_times_in_the_experiments():
    assert not {f.name for f in dataclasses.fields(Experiment)} & {"runtime_quick", "runtime_full"}
    for path in Path(experiments.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert "runtime_quick" not in text and "runtime_full" not in text, path.name


def test_a_measurement_is_shown_with_its_date_load_and_memory(tmp_path):
    path = tmp_path / "runtimes.json"
    assert load_runtimes(path) == {}
    record_measurement("arora2019-deep-completion", "full", RECORD, path)
    record_measurement("arora2019-deep-completion", "quick", dict(RECORD, wall_s=9.0), path)
    measured = load_runtimes(path)
    assert set(measured["arora2019-deep-completion"]) == {"quick", "full"}
    line = runtime("arora2019-deep-completion", "full", measured)
    assert "31.9 min (1913 s) (CPU 50.0 min (3000 s)) measured 2026-12-03" in line and "1.5 before" in line and "4.1 max" in line
    assert "peak memory 2.2 GB" in line and "predictions 1 fails, 7 holds; 2 assumptions not met" in line
    assert runtime("arora2019-deep-completion", "quick", measured).startswith("9.0 s (CPU 50.0 min (3000 s))")
    # another experiment, or the other variant, without a record: never a guessed number
    assert runtime("li2021-incremental", "full", measured) == NOT_MEASURED
    assert describe(None) == NOT_MEASURED and describe({"date": "x"}) == NOT_MEASURED
    stopped = describe(dict(RECORD, timed_out_after_s=1800.0, exit_code=-9))
    assert stopped.startswith("not finished: stopped after 31.9 min (1913 s)") and "exit code -9" in stopped


def test_catalogue_lines_name_every_experiment(tmp_path):
    exps = list(catalog().values())
    first = sorted(e.name for e in exps)[0]
    lines = catalogue_lines(exps, {first: {"full": RECORD}})
    # issue 42.6: a header, one line per experiment sorted by name, a closing line; every line within 100 columns
    assert len(lines) == len(exps) + 2 and all(len(line) <= 100 for line in lines), max(map(len, lines))
    names = [line.split()[0] for line in lines[1:-1]]
    assert names == sorted(e.name for e in exps)
    # the measured full variant of the first shows its wall time (1913 s); every other time is a dash, never a guess
    assert lines[1].split()[-1] == "min" and "31.9" in lines[1] and lines[1].split()[-3] == "—"
    assert sum(line.count("—") for line in lines[2:-1]) == 2 * (len(exps) - 1)


def test_bad_runtime_files_and_variants_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json is not readable"):
        load_runtimes(bad)
    bad.write_text(json.dumps({"other": 1}))
    with pytest.raises(ValueError, match="no 'measurements' mapping"):
        load_runtimes(bad)
    with pytest.raises(ValueError, match="variant='medium' is not allowed"):
        runtime("x", "medium", {})


def test_the_shipped_file_is_found_and_readable():
    """runtimes.json is package data of implicitbias.experiments (pyproject.toml) and parses."""
    path = runtimes_path()
    assert path.name == "runtimes.json" and path.parent.name == "experiments"
    if path.is_file():
        for name, variants in load_runtimes(path).items():
            assert name in catalog() and set(variants) <= {"quick", "full"}
