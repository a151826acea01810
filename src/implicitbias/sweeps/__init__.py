"""Sweeps: many runs on Dask distributed (a local cluster of every core, a running scheduler, or
SLURM/PBS through dask-jobqueue), stored as they finish and resumed after any interruption."""

from implicitbias.sweeps.sweep import SweepOutcome, run_sweep

__all__ = ["SweepOutcome", "run_sweep"]
