"""Experiments: declarative configs with figures and theorem checks, run by one runner.

`validation` holds the run checks (`validate_runs`) that experiments of more than one paper declare."""

from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig, with_overrides
from implicitbias.experiments.registry import catalog, get

__all__ = ["Experiment", "ExperimentConfig", "Figure", "catalog", "get", "with_overrides"]
