"""The results store of a sweep: one file per finished run, written the moment it finishes.

    DIR/runs/<key>.nc     one run (`implicitbias.runs.execute.train_group` output), named by its identity
    DIR/data/<key>.nc     one data set (training and test arrays, generator info), stored once per seed
    DIR/failed/<key>.json a run whose task raised: its spec and the error (removed when the run is stored)

Every write goes to a uniquely named temporary file that is renamed into place, so a file under
its final name is always complete: a sweep killed at any moment (SIGKILL included) leaves only
finished runs and stray temporaries, and two processes writing the same run (the same content)
cannot corrupt it.  A file that cannot be read, or whose identity does not match its name, is
reported, moved aside (`*.corrupt`) and its run trained again.  The temporaries a killed write left are
removed by `clean_temporaries` when the next command takes the directory (under its lock).

A run whose task raised an exception (not a lost worker: that task is moved to another worker) is not
retried within the sweep, since the same code on the same values raises again; it is recorded with its
error, reported, and trained again by the next command (the code or the machine may have changed).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import xarray as xr

from implicitbias.data import Dataset
from implicitbias.runs.spec import RESULTS_FORMAT, RunSpec
from implicitbias.storage.datasets import data_from_xarray, data_to_xarray
from implicitbias.storage.files import TMP_SUFFIX, atomic_file, load, save, write_netcdf


class RunStore:
    """Finished runs and their data sets under one directory."""

    def __init__(self, root: str | os.PathLike, warn: Callable[[str], None] = print):
        self.root = Path(root)
        self.warn = warn

    def run_path(self, spec: RunSpec) -> Path:
        """Where the run is stored: DIR/runs/<key>.nc."""
        return self.root / "runs" / f"{spec.key()}.nc"

    def data_path(self, spec: RunSpec) -> Path:
        """Where the run's data set is stored: DIR/data/<data key>.nc."""
        return self.root / "data" / f"{spec.data_key()}.nc"

    # -- runs ---------------------------------------------------------------------------------------
    def load_run(self, spec: RunSpec) -> xr.Dataset | None:
        """The stored run, or None when it is absent, unreadable or not this run (reported)."""
        path = self.run_path(spec)
        if not path.exists():
            return None
        try:
            ds = load(path)
            if ds.attrs.get("key") != spec.key() or int(ds.attrs.get("format", -1)) != RESULTS_FORMAT:
                raise ValueError(f"it holds run {ds.attrs.get('key')!r} (format {ds.attrs.get('format')})")
            if "status" not in ds or ds.sizes.get("run") != 1:
                raise ValueError("it has no status or not exactly one run")
        except Exception as exc:  # noqa: BLE001 - any unreadable file is retrained, never trusted
            self.warn(f"warning: {path} is unreadable or truncated ({type(exc).__name__}: {exc}); "
                      "moved aside and training the run again")
            path.replace(path.with_suffix(".corrupt"))
            return None
        return ds

    def save_run(self, ds: xr.Dataset) -> Path:
        """Store one run (a `train_group` Dataset, its spec in the attribute `spec`), superseding a recorded
        failure of it."""
        spec = RunSpec.from_json(ds.attrs["spec"])
        path = save(ds, self.run_path(spec))
        self.failure_path(spec).unlink(missing_ok=True)  # an earlier failure of this run is superseded
        return path

    def adopt(self, specs: Sequence[RunSpec], sources: Sequence[str | os.PathLike]) -> int:
        """Copy into this store, from the run directories `sources`, every stored run that is one of `specs`'s
        computation (`RunSpec.compute_key`: equal but for the labels part and trial) and is not stored here yet,
        with its data set; returns how many were copied.  The copy carries this store's spec (label and identity):
        its arrays are what training the spec would give.  A source that is not a run directory raises
        FileNotFoundError; an unreadable file in it is skipped."""
        wanted: dict[str, list[RunSpec]] = {}
        for spec in specs:
            if not self.done(spec):
                wanted.setdefault(spec.compute_key(), []).append(spec)
        copied = 0
        for source in sources:
            root = Path(source)
            if not (root / "runs").is_dir():
                raise FileNotFoundError(f"reuse: {root} is not a run directory (no runs/ folder in it)")
            if root.resolve() == self.root.resolve():
                continue
            for path in sorted((root / "runs").glob("*.nc")):
                if not wanted:
                    return copied
                try:
                    ds = load(path)
                    theirs = RunSpec.from_json(ds.attrs["spec"])
                except Exception:  # noqa: BLE001 - an unreadable source file is not ours to judge: skipped
                    continue
                data = root / "data" / f"{theirs.data_key()}.nc"
                ours = wanted.get(theirs.compute_key(), [])
                if not ours or ds.attrs.get("key") != theirs.key() or not data.exists():
                    continue
                for spec in {s.key(): s for s in ours}.values():
                    if not self.data_path(spec).exists():
                        atomic_file(lambda tmp, src=data: shutil.copyfile(src, tmp), self.data_path(spec))
                    self.save_run(ds.assign_attrs(spec=spec.to_json(), key=spec.key()))
                    copied += 1
                del wanted[theirs.compute_key()]
        return copied

    def done(self, spec: RunSpec) -> bool:
        """Whether the run's file exists (not whether it is readable: see `load_run`)."""
        return self.run_path(spec).exists()

    # -- runs whose task raised -----------------------------------------------------------------------
    def failure_path(self, spec: RunSpec) -> Path:
        """Where the failure of the run's task is recorded: DIR/failed/<key>.json."""
        return self.root / "failed" / f"{spec.key()}.json"

    def save_failure(self, spec: RunSpec, error: str) -> Path:
        """Record that `spec`'s task raised `error` (JSON: key, label, spec, error, time)."""
        record = {"key": spec.key(), "label": spec.label(), "error": error, "spec": json.loads(spec.to_json()),
                  "time": datetime.datetime.now().isoformat(timespec="seconds")}
        text = json.dumps(record, indent=1)
        return atomic_file(lambda tmp: tmp.write_text(text, encoding="utf-8"), self.failure_path(spec))

    def failures(self) -> dict[str, dict]:
        """The recorded failures by run key (unreadable records are skipped: they only inform)."""
        out = {}
        for path in sorted((self.root / "failed").glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                out[str(record["key"])] = record
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    # -- leftovers of killed writes -------------------------------------------------------------------
    def clean_temporaries(self) -> list[Path]:
        """Remove the temporary files (`.NAME.PID.XXXX.tmp`) that writes killed mid-way left in the directory,
        its runs/, data/, failed/ and figures/.  Call it only while holding the directory's lock: a temporary
        of a running writer would otherwise go too."""
        removed = []
        for folder in (self.root, *(self.root / sub for sub in ("runs", "data", "failed", "figures"))):
            for path in folder.glob(f".*{TMP_SUFFIX}") if folder.is_dir() else ():
                try:
                    path.unlink()
                    removed.append(path)
                except OSError:
                    pass
        return removed

    # -- data sets ------------------------------------------------------------------------------------
    def save_data(self, spec: RunSpec, data: Dataset) -> Path:
        """Store the run's data set, unless it is stored already (one file per generator spec and seed)."""
        path = self.data_path(spec)
        if not path.exists():
            atomic_file(lambda tmp: write_netcdf(data_to_xarray(data, spec), tmp), path)
        return path

    def load_data(self, spec: RunSpec) -> Dataset | None:
        """The stored data set of the run, or None when it is absent or unreadable (reported, moved aside)."""
        path = self.data_path(spec)
        if not path.exists():
            return None
        try:
            return data_from_xarray(load(path))
        except Exception as exc:  # noqa: BLE001
            self.warn(f"warning: {path} is unreadable ({type(exc).__name__}: {exc}); drawing the data again")
            path.replace(path.with_suffix(".corrupt"))
            return None

