"""Evaluate an experiment's checks on its results: every theorem of every cell, then the paper's claims across
cells.  Reference solutions are read from and kept in the run directory's memo (`implicitbias.reference.memo`)."""

from __future__ import annotations

from implicitbias.experiments.base import Experiment
from implicitbias.runs.results import Results
from implicitbias.theorems.base import CellsContext, RunContext, Verdict


def evaluate_checks(experiment: Experiment, results: Results) -> list[dict]:
    """The rows of checks.json: each verdict with the label of the cell it was evaluated on ("all cells" for a
    claim across cells).  A claim that needs a cell the results lack is one `not_evaluated` row."""
    out = []
    for cell in results.cells:
        ctx = RunContext.of(cell)
        for theorem in experiment.theorems(cell):
            for verdict in theorem.check(ctx):
                out.append({"cell": cell.label, **verdict.to_dict()})
    ctx = CellsContext(results)
    for claim in experiment.claims:
        try:
            verdicts = claim.check(ctx)
        except (IndexError, KeyError, ValueError) as exc:
            verdicts = [Verdict(claim.title, "prediction", "the paper's claims across cells", None, "", None,
                                "not_evaluated", f"not evaluated: some runs are missing ({type(exc).__name__}: {exc})")]
        out.extend({"cell": "all cells", **v.to_dict()} for v in verdicts)
    return out

