"""Measured run times of the experiments, and the catalogue that `implicitbias list` prints.

No run time in the catalogue is written by hand: `benchmarks/bench_full_variants.py` runs each variant in its
own process (`implicitbias run NAME [--quick] --out ...`) and records in `runtimes.json` (shipped with the
package) its wall time, the peak memory of its process tree (Dask workers included), the machine's load
average before and during the run, the date, the verdicts of its checks and the steps and gradient
evaluations its runs took. A variant that has not been measured is shown as "not measured yet".

A record (one per experiment and variant, under "measurements"/NAME/"quick"|"full"):

    {"date": "2026-12-03T03:10:00Z", "wall_s": 41.2, "peak_rss_mb": 812.0, "cpu_s": 70.5,
     "load_before": [1-, 5-, 15-minute load], "load_during": {"mean": 2.9, "max": 4.1}, "cpus": 2,
     "exit_code": 0, "predictions": {"holds": 12, "fails": 0, ...},
     "assumptions": {"holds": 20, "fails": 2}, "runs": 16, "steps": 123456,
     "grad_evals": 234567, "command": "implicitbias run ..."}
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import importlib.resources
import json
import math
import os
import tempfile
from pathlib import Path

from implicitbias.experiments.registry import catalog, homes, short_home

#: the file the benchmark writes and the catalogue reads (package data of `implicitbias.experiments`)
RUNTIMES_FILE = "runtimes.json"
VARIANTS = ("quick", "full")
NOT_MEASURED = "not measured yet"


def runtimes_path() -> Path:
    """Where `runtimes.json` lives in this installation (the source tree for an editable install, the
    installed package otherwise)."""
    return Path(str(importlib.resources.files("implicitbias.experiments").joinpath(RUNTIMES_FILE)))


def load_runtimes(path: str | os.PathLike | None = None) -> dict:
    """The measurements, {NAME: {"quick"|"full": record}}; empty when the file is absent. A file that is
    not the benchmark's JSON raises ValueError naming it."""
    path = Path(path) if path is not None else runtimes_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not readable as the run-time file of benchmarks/bench_full_variants.py "
                         f"({type(exc).__name__}: {exc})") from None
    measurements = data.get("measurements") if isinstance(data, dict) else None
    if not isinstance(measurements, dict):
        raise ValueError(f"{path} has no 'measurements' mapping: is it written by benchmarks/bench_full_variants.py?")
    return measurements


def _duration(seconds: float) -> str:
    if seconds < 100:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 6000:
        return f"{seconds / 60:.1f} min ({seconds:.0f} s)"
    return f"{seconds / 3600:.1f} h ({seconds:.0f} s)"


def _memory(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def describe(record: dict | None) -> str:
    """One catalogue phrase for a measurement record: the wall time and the CPU time of the process tree (less
    sensitive to the load), the date and the load at which it was measured, the peak memory and the verdict
    counts; "not measured yet" for None. A run stopped by the benchmark's timeout reads "not finished: stopped
    after ..." (a measured lower bound, never an estimate)."""
    if not record:
        return NOT_MEASURED
    wall, date = record.get("wall_s"), str(record.get("date", "?"))[:10]
    if not isinstance(wall, int | float) or not math.isfinite(wall):
        return NOT_MEASURED
    cpu = record.get("cpu_s")
    cpu = f" (CPU {_duration(cpu)})" if isinstance(cpu, int | float) and math.isfinite(cpu) else ""
    stopped = record.get("timed_out_after_s")
    parts = [f"not finished: stopped after {_duration(wall)}{cpu} on {date}" if stopped
             else f"{_duration(wall)}{cpu} measured {date}"]
    load = record.get("load_during") or {}
    before = record.get("load_before") or []
    if before or load:
        cpus = record.get("cpus")
        parts.append("load " + (f"{before[0]:.1f} before" if before else "?")
                     + (f", {load['mean']:.1f} mean / {load['max']:.1f} max during" if load else "")
                     + (f" on {cpus} cores" if cpus else ""))
    if isinstance(record.get("peak_rss_mb"), int | float):
        parts.append(f"peak memory {_memory(record['peak_rss_mb'])}")
    if "predictions" in record:
        counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(record["predictions"].items()))
        parts.append(f"predictions {counts or 'none'}")
        unmet = (record.get("assumptions") or {}).get("fails", 0)
        if unmet:
            parts.append(f"{unmet} assumptions not met (their predictions outside scope)")
    elif record.get("verdicts"):  # recorded before assumptions and predictions were counted apart
        parts.append("assumptions and predictions together "
                     + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(record["verdicts"].items())))
    if record.get("exit_code", 0) != 0:
        parts.append(f"exit code {record['exit_code']}")
    return "; ".join(parts)


def runtime(name: str, variant: str, measurements: dict | None = None) -> str:
    """The measured run time of one variant ("quick" or "full") of experiment `name`, as `describe` words it."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not allowed: expected one of {', '.join(VARIANTS)}")
    measurements = load_runtimes() if measurements is None else measurements
    return describe((measurements.get(name) or {}).get(variant))


#: the width of `implicitbias list`: one line per experiment, at most this many characters
CATALOGUE_WIDTH = 100
#: the widest systems column (a plugin may name its systems in words); longer is cut with an ellipsis
_SYSTEMS_WIDTH = 7
#: the width of a short run time ("9.0 s", "31.9 min", ">30min", "12.5 h")
_TIME_WIDTH = 8


def short_runtime(record: dict | None) -> str:
    """The wall time of one measurement record in at most 8 characters, for the catalogue's columns: "16 s",
    "4.2 min", "2.1 h"; ">T" for a run the benchmark stopped after T (a lower bound); "—" not measured."""
    wall = (record or {}).get("wall_s")
    if not isinstance(wall, int | float) or not math.isfinite(wall):
        return "—"
    text = (f"{wall:.1f} s" if wall < 10 else f"{wall:.0f} s" if wall < 100 else f"{wall / 60:.1f} min"
            if wall < 6000 else f"{wall / 3600:.1f} h")
    return (">" + text.replace(" min", "min")) if record.get("timed_out_after_s") else text


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def catalogue_lines(experiments=None, measurements: dict | None = None, width: int = CATALOGUE_WIDTH) -> list[str]:
    """The lines `implicitbias list` prints: a header, one line per experiment sorted by name (name, the package
    that holds it, systems, measured wall time of the quick and the full variant), and a line saying where the
    rest is; every line at most `width` characters (the package and the systems cut with an ellipsis).  The
    package is a built-in paper's own (`implicitbias.papers.NAME`, shown as NAME: the first author and the year
    of the paper it reproduces) or a plugin's.  `implicitbias describe NAME` prints the paper, what it shows and
    the whole measurement (`describe`)."""
    if experiments is None:
        experiments = catalog().values()
    measurements = load_runtimes() if measurements is None else measurements
    where = homes()
    rows = []
    for e in sorted(experiments, key=lambda e: e.name):
        times = [short_runtime((measurements.get(e.name) or {}).get(v)) for v in VARIANTS]
        rows.append((e.name, short_home(where.get(e.name, "?")), _fit(",".join(e.systems), _SYSTEMS_WIDTH), *times))
    head = ("experiment", "package", "systems", "quick", "full")
    name_w = max(len(r[0]) for r in [head, *rows])
    systems_w = max(len(r[2]) for r in [head, *rows])
    package_w = max(min(max(len(r[1]) for r in [head, *rows]), width - name_w - systems_w - 2 * _TIME_WIDTH - 8), 10)
    lines = [f"{n:<{name_w}}  {_fit(k, package_w):<{package_w}}  {s:<{systems_w}}  {q:>{_TIME_WIDTH}}  "
             f"{f:>{_TIME_WIDTH}}".rstrip() for n, k, s, q, f in [head, *rows]]
    lines.append(_fit("wall times as measured (— not yet); `implicitbias describe NAME`: its paper, what it shows, "
                      "runs", width))
    return lines


def record_measurement(name: str, variant: str, record: dict, path: str | os.PathLike | None = None) -> Path:
    """Store one measurement in the run-time file (replacing the earlier one of the same variant), written
    atomically so that a reader never sees half a file."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not allowed: expected one of {', '.join(VARIANTS)}")

    path = Path(path) if path is not None else runtimes_path()
    # two benchmarks (e.g. the quick and the full variants) may finish at once: read-modify-write under a lock
    # (the lock file lives in the temporary folder: nothing untracked appears next to the shipped file)

    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"implicitbias-runtimes-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        measurements = load_runtimes(path)
        measurements.setdefault(name, {})[variant] = record
        data = {"written_by": "benchmarks/bench_full_variants.py",
                "updated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
                "measurements": {k: measurements[k] for k in sorted(measurements)}}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        os.replace(tmp, path)
    return path
