"""What the report and the index pages share: verdict counts, the house style sheet, links, writing.

Both pages are static HTML with an inline style sheet.  Links between files are relative paths
(URL-quoted, forward slashes), so a directory of runs can be moved, archived or served as it is.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from implicitbias.storage.files import atomic_file

OUTCOMES = ("holds", "fails", "outside_scope", "not_evaluated")
KINDS = ("assumption", "prediction")

BASE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 0 auto; max-width: 1100px; padding: 0.8rem 1.5rem 2rem; color: #1d1d1f; line-height: 1.4; }
h1 { font-size: 1.45rem; margin: 0 0 0.15rem; } h2 { font-size: 1.2rem; margin-top: 2rem;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; } h3 { font-size: 1rem; margin: 0.8rem 0 0.3rem; }
a { color: #0b57d0; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.85rem; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 0.8rem; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; width: 100%; font-size: 0.88rem; }
th, td { border: 1px solid #e1e4e8; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { font-weight: 600; border-radius: 3px; padding: 0.05rem 0.4rem; white-space: nowrap; }
.v-holds { background: #d8f3dc; color: #1b5e20; } .v-fails { background: #fde2e1; color: #b71c1c; }
.v-outside_scope { background: #fff1cc; color: #8a5a00; }
.v-not_evaluated { background: #ececec; color: #555; } .v-other { background: #ececec; color: #333; }
.counts { white-space: nowrap; } .counts .kind { color: #555; margin-right: 0.3rem; }
.muted { color: #666; }
"""


def tally(checks: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Counts of each outcome per kind: `{"assumption": {"holds": n, ...}, "prediction": {...}}`."""
    counts = {kind: dict.fromkeys(OUTCOMES, 0) for kind in KINDS}
    for c in checks:
        per_kind = counts.setdefault(str(c.get("kind")), dict.fromkeys(OUTCOMES, 0))
        per_kind[str(c.get("outcome"))] = per_kind.get(str(c.get("outcome")), 0) + 1
    return counts


def tally_line(checks: Sequence[Mapping[str, Any]]) -> str:
    """E.g. '3 assumptions hold / 1 fails; 5 predictions hold / 0 fail / 2 outside scope'."""
    parts = []
    for kind, counts in tally(checks).items():
        holds, fails = counts["holds"], counts["fails"]
        words = [f"{holds} {kind}{'s hold' if holds != 1 else ' holds'}", f"{fails} fail{'s' * (fails == 1)}"]
        rest = {o: n for o, n in counts.items() if o not in ("holds", "fails") and n}
        words += [f"{n} {o.replace('_', ' ')}" for o, n in rest.items()]
        parts.append(" / ".join(words))
    return "; ".join(parts)


def verdict_class(outcome: str) -> str:
    return f"v-{outcome}" if outcome in OUTCOMES else "v-other"


def verdict_badge(outcome: str, text: str | None = None) -> str:
    """A coloured `<span>` for one outcome (its text defaults to the outcome in words)."""
    label = outcome.replace("_", " ") if text is None else text
    return f'<span class="verdict {verdict_class(outcome)}">{escape(label)}</span>'


def counts_html(counts: Mapping[str, int], kind: str | None = None) -> str:
    """'holds' and 'fails' always, the other outcomes where they occur, as coloured badges.

    `kind` (e.g. "Predictions") labels the group; an empty `counts` gives an empty string.
    """
    if not sum(counts.values()):
        return ""
    shown = [(o, n) for o, n in counts.items() if n or o in ("holds", "fails")]
    badges = " ".join(verdict_badge(o, f"{n} {o.replace('_', ' ')}") for o, n in shown)
    label = f'<span class="kind">{escape(kind)}</span>' if kind else ""
    return f'<span class="counts">{label}{badges}</span>'


def href(path: str | os.PathLike, base_dir: str | os.PathLike) -> str:
    """The relative link from a page in `base_dir` to the existing file `path`.

    A relative `path` is read from `base_dir` first, then from the working directory.
    """
    p, base = Path(path), Path(base_dir).resolve()
    candidates = [p] if p.is_absolute() else [base / p, Path.cwd() / p]
    target = next((c for c in candidates if c.exists()), None)
    if target is None:
        raise FileNotFoundError(f"cannot link {str(path)!r} from {base}: no such file (a relative path is read "
                                "from the report's directory, then from the working directory)")
    return quote(Path(os.path.relpath(target.resolve(), base)).as_posix())


def duration(seconds: Any) -> str:
    """A wall time in seconds ('12.3 s', '4.2 min', '1.5 h'), the text as given if it is not a number."""
    try:
        s = float(seconds)
    except (TypeError, ValueError):
        return str(seconds)
    if not math.isfinite(s):
        return "—"
    if s < 120:
        return f"{s:.3g} s"
    return f"{s / 60:.3g} min" if s < 7200 else f"{s / 3600:.3g} h"


def number(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool | str):
        return str(v)
    v = float(v)
    return f"{v:.4g}" if math.isfinite(v) else "n/a"


def html_page(title: str, body: str, css: str = "") -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{BASE_CSS}{css}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def write_atomic(path: Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file of its own (`storage.files.atomic_file`), so a
    reader never sees half a page and two processes writing the same page do not collide."""
    return atomic_file(lambda tmp: tmp.write_text(text, encoding="utf-8"), path)
