"""Which experiment a run directory holds: a catalogued one by its name, or one defined in a notebook.

`implicitbias.run` accepts a catalogued name or an `Experiment` object built in a notebook cell (its own grid
over the catalogued models, data and theorems).  An experiment that is not the catalogue's own object is kept
in the run directory as `experiment.pkl` (cloudpickle: the functions defined in the notebook travel by value),
so that `implicitbias report DIR`, `implicitbias.load(DIR)` and `Results.plot` work on it in a later session.
"""

from __future__ import annotations

import os
from pathlib import Path

import cloudpickle

from implicitbias._spec import ConfigError
from implicitbias.experiments.base import Experiment
from implicitbias.experiments.registry import catalog, get

#: the file that keeps a notebook-defined experiment beside its results
DEFINITION = "experiment.pkl"


def resolve(experiment: str | Experiment) -> Experiment:
    """The `Experiment` named by a catalogued name, or the object itself."""
    if isinstance(experiment, Experiment):
        return experiment
    if isinstance(experiment, str):
        return get(experiment)
    raise ConfigError(f"experiment {experiment!r} is not allowed: expected a catalogued name (`implicitbias list`) "
                      "or an implicitbias.experiments.Experiment")


def is_catalogued(experiment: Experiment) -> bool:
    """The experiment is the catalogue's own object (a rerun by name gives it back)."""
    return catalog().get(experiment.name) is experiment


def keep(experiment: Experiment, out: Path) -> Path | None:
    """Write a notebook-defined experiment to `out/experiment.pkl` (nothing for a catalogued one)."""
    path = Path(out) / DEFINITION
    if is_catalogued(experiment):
        if path.exists():
            path.unlink()
        return None
    tmp = path.with_name(f".{DEFINITION}.{os.getpid()}.tmp")
    tmp.write_bytes(cloudpickle.dumps(experiment))
    os.replace(tmp, path)
    return path


def definition_of(name: str, directory: Path) -> Experiment:
    """The experiment of a run directory: its kept definition, else the catalogue's by name."""
    path = Path(directory) / DEFINITION
    if path.exists():
        try:
            experiment = cloudpickle.loads(path.read_bytes())
        except Exception as exc:  # noqa: BLE001 - any unreadable definition is reported, with what to do
            raise ConfigError(f"{path} cannot be read ({type(exc).__name__}: {exc}): the experiment was defined in "
                              "a notebook whose code changed or is missing; pass it again: "
                              "implicitbias.load(DIR, experiment=...)") from None
        if isinstance(experiment, Experiment):
            return experiment
    experiments = catalog()
    if name not in experiments:
        raise ConfigError(f"experiment {name!r} is not known and {directory} keeps no definition of it "
                          f"({DEFINITION}): pass the Experiment object, implicitbias.load(DIR, experiment=...)")
    return experiments[name]
