"""Evaluate an experiment's checks on its results: every theorem of every cell, then the paper's claims across
cells.  Reference solutions are read from and kept in the run directory's memo (`implicitbias.reference.memo`).

A check whose code raises (a KeyError on a misspelt variable, a shape error in a new prediction) is a defect of
the check, not a verdict on the theorem: it is recorded as its own row, outcome "error", with the exception's
type, message and place, and every other theorem and cell is still evaluated (`implicitbias report DIR` evaluates
them again, without training, once the check is fixed).  The command line exits with its own code for it."""

from __future__ import annotations

import json
import shlex
import traceback
from pathlib import Path

from implicitbias.experiments.base import Experiment
from implicitbias.runs.results import Results
from implicitbias.storage.files import atomic_file
from implicitbias.theorems.base import CellsContext, RunContext, Verdict

#: the outcome of a check whose code raised (beside the theorems' holds / fails / outside_scope / not_evaluated)
ERROR = "error"
#: raised checks named one per line by `raised_lines` before "... and K more"
MAX_RAISED_LINES = 20


def evaluate_checks(experiment: Experiment, results: Results, out: str | Path | None = None) -> list[dict]:
    """The rows of checks.json: each verdict with the label of the cell it was evaluated on ("all cells" for a
    claim across cells).  A claim that needs a cell the results lack is one `not_evaluated` row; a theorem whose
    check raises is one `error` row for that theorem and cell (`raised_row`), and the others are evaluated.

    out: the run directory: its checks.json is removed before the checks are evaluated and written when they are,
    so that a checks.json never outlives the results it was evaluated on."""
    path = None if out is None else Path(out) / "checks.json"
    if path is not None:
        path.unlink(missing_ok=True)
    rows = []
    for cell in results.cells:
        try:
            ctx, theorems = RunContext.of(cell), list(experiment.theorems(cell))
        except Exception as exc:  # noqa: BLE001 - the experiment's own code: recorded, the other cells go on
            rows.append(raised_row(cell.label, None, exc, f"{experiment.name}: the theorems of this cell"))
            continue
        for theorem in theorems:
            try:
                verdicts = theorem.check(ctx)
            except Exception as exc:  # noqa: BLE001 - a check's code, often a researcher's new one: recorded
                rows.append(raised_row(cell.label, theorem, exc))
                continue
            rows.extend({"cell": cell.label, **verdict.to_dict()} for verdict in verdicts)
    ctx = CellsContext(results)
    for claim in experiment.claims:
        try:
            verdicts = claim.check(ctx)
        except (IndexError, KeyError, ValueError) as exc:
            verdicts = [Verdict(claim.title, "prediction", "the paper's claims across cells", None, "", None,
                                "not_evaluated", f"not evaluated: some runs are missing ({type(exc).__name__}: {exc})")]
        except Exception as exc:  # noqa: BLE001 - as for a theorem of one cell
            rows.append(raised_row("all cells", claim, exc))
            continue
        rows.extend({"cell": "all cells", **v.to_dict()} for v in verdicts)
    if path is not None:
        atomic_file(lambda tmp: tmp.write_text(json.dumps(rows, indent=2)), path)
    return rows


def raised_row(cell: str, theorem, exc: Exception, title: str | None = None) -> dict:
    """The checks.json row of a theorem whose check raised `exc` on `cell`: the keys of a verdict's row, outcome
    "error", the declared assumption or prediction in whose code it was raised (found in the traceback; a
    placeholder statement when it was raised outside any), and "error": {type, message, where (file:line of the
    raise), check (the declared method's name)}.  The theorem's other checks on that cell
    are not evaluated: `Theorem.check` evaluates them in one call."""
    declared, module = _declaration_raising(theorem, exc)
    name = title or _title(theorem)
    kind = declared.kind if declared else "prediction"
    statement = declared.statement if declared else "(raised outside its declared assumptions and predictions)"
    frames = traceback.extract_tb(exc.__traceback__)
    # the last line of the check's own module (the line to fix), not xarray's or numpy's deep inside the call
    own = [f for f in frames if f.filename == module] or frames
    where = f"{Path(own[-1].filename).name}:{own[-1].lineno}" if own else "?"
    message = " ".join(str(exc).split())
    message = message if len(message) <= 300 else message[:299] + "…"
    error = {"type": type(exc).__name__, "message": message, "where": where,
             "check": declared.name if declared else ""}
    note = (f"{error['type']}: {message} (raised at {where}); this theorem's other checks on this cell were not "
            "evaluated")
    return {"cell": cell, "theorem": name, "kind": kind, "statement": statement, "measured": None, "relation": "",
            "bound": None, "outcome": ERROR, "note": note, "line": f"[{kind}] {statement}: error ({note})",
            "error": error}


def raised(checks: list[dict]) -> list[dict]:
    """The rows of checks whose code raised (outcome "error")."""
    return [c for c in checks if c.get("outcome") == ERROR]


def raised_lines(checks: list[dict], limit: int = MAX_RAISED_LINES) -> list[str]:
    """One line per raised check, naming the theorem, the assumption or prediction, the cell, the exception and
    where it was raised (the first `limit`, then how many more)."""
    rows = raised(checks)
    lines = []
    for c in rows[:limit]:
        error = c.get("error") or {}
        lines.append(f"error: a check raised on [{c.get('cell')}]: {c.get('theorem')}, {c.get('kind')} "
                     f"{c.get('statement')!r}: {error.get('type', '?')}: {error.get('message', '')} (at "
                     f"{error.get('where', '?')})")
    if len(rows) > limit:
        lines.append(f"error: ... and {len(rows) - limit} more checks raised (outcome 'error' in checks.json)")
    return lines


def _title(theorem) -> str:
    try:
        return str(theorem.title)
    except Exception:  # noqa: BLE001 - the title of a theorem whose code is broken may be broken too
        return type(theorem).__name__


def _declaration_raising(theorem, exc: BaseException) -> tuple:
    """(the declared check (`Declaration`) of `theorem` whose method is on the traceback of `exc`, the outermost
    one: a declared check may call helpers, or `once`; the file of that method), or (None, None)."""
    try:
        declared = {d.name: d for d in type(theorem).declarations()} if theorem is not None else {}
    except Exception:  # noqa: BLE001 - not a Theorem: nothing to name
        return None, None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name in declared and frame.f_locals.get("self") is theorem:
            return declared[frame.f_code.co_name], frame.f_code.co_filename
        tb = tb.tb_next
    return None, None


#: the exit codes `exit_code` gives (the command line's: `implicitbias.cli`)
EXIT_PREDICTION_FAILED, EXIT_CHECK_RAISED = 1, 4


def exit_code(checks: list[dict], strict: bool, out, code: int = 0) -> tuple[str, int]:
    """(the lines to print for the checks whose code raised, or "", the exit code): `code` when it is set (a run
    failed), else 4 when a check raised, else 1 when a prediction failed under `strict`, else 0."""
    lines = raised_lines(checks)
    if lines:
        lines.append(f"fix the check and run `implicitbias report {shlex.quote(str(out))}`: the checks are evaluated "
                     "again, without training")
    failed = any(c.get("kind") == "prediction" and c.get("outcome") == "fails" for c in checks)
    return "\n".join(lines), code or (EXIT_CHECK_RAISED if lines else EXIT_PREDICTION_FAILED if strict and failed else 0)
