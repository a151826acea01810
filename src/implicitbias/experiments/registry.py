"""The catalog of named experiments: every module of `implicitbias.experiments` that defines a list
`EXPERIMENTS` contributes its experiments (a new paper's module needs no registration elsewhere)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from implicitbias._spec import ConfigError
from implicitbias.experiments.base import Experiment


def catalog() -> dict[str, Experiment]:
    """Every catalogued experiment by name."""
    experiments: list[Experiment] = []
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        module = importlib.import_module(f"implicitbias.experiments.{info.name}")
        experiments += list(getattr(module, "EXPERIMENTS", []))
    return {e.name: e for e in experiments}


def get(name: str) -> Experiment:
    """The catalogued experiment of this name (refused with the list of names)."""
    experiments = catalog()
    if name not in experiments:
        raise ConfigError(f"experiment {name!r} is not known: expected one of {', '.join(experiments)} "
                          "(`implicitbias list` shows them)")
    return experiments[name]
