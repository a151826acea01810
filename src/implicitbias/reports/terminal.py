"""What a run prints when it finishes: the verdicts in a screenful, the details on request.

By default `summarize` gives about twenty lines whatever the number of cells: one line per theorem
with its prediction counts, then the predictions that failed or fell outside scope (the first few,
by statement and cell), then where the report and the results are.  A check whose code raised (outcome
"error", `implicitbias.pipeline.checks`) is counted beside its theorem's predictions and listed first.
`verbose=True` lists every row, assumptions and predictions apart, before that summary.  ANSI colours
only with `color=True` (the caller passes `sys.stdout.isatty()`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from implicitbias.reports.page import KINDS, OUTCOMES

__all__ = ["summarize"]

#: failing or outside-scope predictions listed by default before "... and K more"
MAX_LISTED = 8
_STYLE = {"holds": "32", "fails": "1;31", "outside_scope": "33", "not_evaluated": "2", "error": "1;35", "bold": "1",
          "dim": "2"}
#: the outcome of a check whose code raised (`implicitbias.pipeline.checks.ERROR`): a defect of the check, whatever
#: its kind, so it is counted and listed with the predictions
ERROR = "error"
#: a line is a list of (text, style) pieces; style is a key of _STYLE or ""
Piece = tuple[str, str]


def summarize(checks: Sequence[Mapping[str, Any]], *, paths: Mapping[str, str] | None = None, verbose: bool = False,
              color: bool = False, width: int = 80) -> str:
    """The verdicts of a run as text for the terminal (no trailing newline).

    `checks` are verdict dicts (keys theorem, cell, kind, statement, outcome, line, ...); `paths`
    maps a label to a path shown last (e.g. {"report": ..., "results": ...}).  Lines of the default
    summary are cut to `width` characters; `verbose` rows and the paths are not cut.
    """
    lines: list[list[Piece]] = []
    if verbose:
        lines += _every_row(checks)
    lines += _per_theorem(checks, width)
    if not verbose:
        lines = [_cut(pieces, width) for pieces in lines + _flagged(checks, width)]
    if paths:  # never cut: they are there to be copied
        pad = max(len(label) for label in paths) + 1
        lines += [[(f"{label + ':':<{pad}} ", "dim"), (str(path), "")] for label, path in paths.items()]
    return "\n".join(_render(pieces, color) for pieces in lines)


def _per_theorem(checks: Sequence[Mapping[str, Any]], width: int) -> list[list[Piece]]:
    if not checks:
        return [[("no theorem checks", "dim")]]
    by_theorem: dict[str, list[Mapping[str, Any]]] = {}
    for c in checks:
        by_theorem.setdefault(str(c.get("theorem", "")), []).append(c)
    lines: list[list[Piece]] = [[("predictions per theorem:", "bold")]]
    for theorem, rows in by_theorem.items():
        cells = len({str(c.get("cell", "")) for c in rows})
        rest: list[Piece] = [(f" ({cells} cells): " if cells > 1 else ": ", "")]
        rest += _counts([c for c in rows if c.get("kind") == "prediction" or c.get("outcome") == ERROR]) \
            or [("no predictions", "dim")]
        failed_assumptions = sum(1 for c in rows if c.get("kind") == "assumption" and c.get("outcome") == "fails")
        if failed_assumptions and not any(c.get("outcome") == "outside_scope" for c in rows):  # else implied
            rest += [("; ", ""), (f"{failed_assumptions} assumption{'s' * (failed_assumptions > 1)} "
                                  f"fail{'s' * (failed_assumptions == 1)}", "fails")]
        room = max(width - 2 - sum(len(text) for text, _ in rest), 16)  # the counts matter more than the name
        lines.append([("  " + _shorten(theorem or "(unnamed)", room), "bold"), *rest])
    return lines


def _counts(rows: Sequence[Mapping[str, Any]]) -> list[Piece]:
    """E.g. '12 holds · 1 fails · 2 outside scope' (outcomes that occur, in the usual order)."""
    counts = {o: sum(1 for c in rows if c.get("outcome") == o) for o in OUTCOMES}
    others = sorted({str(c.get("outcome")) for c in rows} - set(OUTCOMES))
    counts |= {o: sum(1 for c in rows if str(c.get("outcome")) == o) for o in others}
    pieces: list[Piece] = []
    for outcome, n in counts.items():
        if n:
            pieces += [(" · ", "")] if pieces else []
            pieces.append((f"{n} {outcome.replace('_', ' ')}", outcome if outcome in _STYLE else ""))
    return pieces


def _flagged(checks: Sequence[Mapping[str, Any]], width: int) -> list[list[Piece]]:
    """The checks that raised, the predictions that failed, then those outside scope, by statement and cell; at
    most MAX_LISTED."""
    flagged = [c for c in checks if c.get("outcome") == ERROR]
    flagged += [c for o in ("fails", "outside_scope") for c in checks
                if c.get("kind") == "prediction" and c.get("outcome") == o]
    if not flagged:
        any_prediction = any(c.get("kind") == "prediction" for c in checks)
        return [[("no prediction fails or falls outside scope", "holds")]] if any_prediction else []
    head = "failed, or outside scope (an assumption is not met):"
    lines: list[list[Piece]] = [[("raised (the check's code), " + head if flagged[0].get("outcome") == ERROR
                                  else head, "bold")]]
    for c in flagged[:MAX_LISTED]:
        outcome = str(c.get("outcome"))
        tag = f"  {outcome.replace('_', ' '):<14}"
        cell = f"  [{c.get('cell')}]" if c.get("cell") not in (None, "") else ""
        room = max(width - len(tag) - len(cell), 10)
        lines.append([(tag, outcome), (_shorten(str(c.get("statement", "")), room), ""), (cell, "dim")])
    if len(flagged) > MAX_LISTED:
        lines.append([(f"  ... and {len(flagged) - MAX_LISTED} more; --verbose lists every row", "dim")])
    return lines


def _every_row(checks: Sequence[Mapping[str, Any]]) -> list[list[Piece]]:
    lines: list[list[Piece]] = []
    kinds = list(KINDS) + sorted({str(c.get("kind")) for c in checks} - set(KINDS))
    for kind in kinds:
        rows = [c for c in checks if str(c.get("kind")) == kind]
        if rows:
            lines.append([(f"{kind.capitalize()}s:", "bold")])
            lines += [[(f"  {c.get('theorem', '')} [{c.get('cell', '')}] {c.get('line', '')}", str(c.get("outcome")))]
                      for c in rows]
            lines.append([])
    return lines


# -- text --------------------------------------------------------------------------------------------
def _shorten(text: str, room: int) -> str:
    return text if len(text) <= room else text[:room - 1] + "…"


def _cut(pieces: list[Piece], width: int) -> list[Piece]:
    """The pieces cut so that their text is at most `width` characters, the last one ending in '…'."""
    out, used = [], 0
    for text, style in pieces:
        if used + len(text) > width:
            out.append((text[:max(width - used - 1, 0)] + "…", style))
            break
        out.append((text, style))
        used += len(text)
    return out


def _render(pieces: list[Piece], color: bool) -> str:
    if not color:
        return "".join(text for text, _ in pieces)
    return "".join(f"\x1b[{_STYLE[style]}m{text}\x1b[0m" if style in _STYLE and text else text
                   for text, style in pieces)
