"""Runs as values: `RunSpec` (what one run is), grouping into compiled calls, and training a group."""

from implicitbias.runs.spec import RESULTS_FORMAT, RunSpec, field_value, group_by, group_runs

__all__ = ["RESULTS_FORMAT", "RunSpec", "field_value", "group_by", "group_runs"]
