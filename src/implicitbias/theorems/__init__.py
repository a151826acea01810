"""Theorems as objects: assumptions checked on the data, predictions checked on a run."""

from implicitbias.theorems.base import RunContext, Theorem, Verdict, compare

__all__ = ["RunContext", "Theorem", "Verdict", "compare"]
