"""The catalog of named experiments."""

from __future__ import annotations

from implicitbias._spec import ConfigError
from implicitbias.experiments.base import Experiment


def catalog() -> dict[str, Experiment]:
    from implicitbias.experiments import chistikov2023, frei2023

    experiments = [frei2023.FIG1, frei2023.FIG2, frei2023.KKT, frei2023.XOR, frei2023.KOU]
    experiments += chistikov2023.EXPERIMENTS
    return {e.name: e for e in experiments}


def get(name: str) -> Experiment:
    experiments = catalog()
    if name not in experiments:
        raise ConfigError(f"experiment {name!r} is not known: expected one of {', '.join(experiments)} "
                          "(`implicitbias list` shows them)")
    return experiments[name]
