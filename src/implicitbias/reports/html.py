"""`report.html`: one self-contained page per experiment run, read top to bottom.

1. A headline: the title, the paper, what the experiment shows, and the verdict counts (assumptions
   and predictions apart), compact enough that the first figure is visible without scrolling on a
   1280 x 800 screen (figures are at most 60 % of the viewport high).
2. The figures with their captions, each with links to the CSV tables behind it.
3. The theorem checks, one expandable line per theorem with its counts; inside, assumptions and
   predictions apart, checks whose code raised (outcome "error") first, then failures.
4. The run, the full resolved configuration and the command to rerun.

Figures are embedded as base64 PNG data URIs and the style sheet is inline, so the page needs nothing
from outside itself; the only links to other files are the CSV tables, as paths relative to the page.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from implicitbias.reports.page import (
    KINDS,
    OUTCOMES,
    counts_html,
    duration,
    href,
    html_page,
    number,
    tally,
    tally_line,
    verdict_badge,
    write_atomic,
)

__all__ = ["KINDS", "OUTCOMES", "tally", "tally_line", "write_report"]

PathLike = str | os.PathLike
#: `(name, caption, png_path)` or `(name, caption, png_path, csv_paths)`
FigureEntry = tuple[str, str, PathLike] | tuple[str, str, PathLike, PathLike | Sequence[PathLike]]

_COLUMNS = ("cell", "statement", "measured", "relation", "bound", "verdict", "note")
#: rows in this order inside a theorem: failures first
_ORDER = {"error": -1, "fails": 0, "outside_scope": 1, "not_evaluated": 2, "holds": 3}
#: the outcome of a check whose code raised (`implicitbias.pipeline.checks.ERROR`): its note says what and where
ERROR = "error"
#: run_info keys shown in the headline's one-line summary of the run
_META = ("variant", "partial", "method", "started", "wall_time_s")

_CSS = """
header.headline { margin-bottom: 0.6rem; } header.headline p { margin: 0.15rem 0; }
.paper { color: #555; } .summary, .related { font-size: 0.95rem; } .verdicts { margin-top: 0.35rem !important; }
.verdicts .counts { margin-right: 1.2rem; } .meta { font-size: 0.85rem; color: #555; }
.meta a { margin-left: 0.7rem; }
figure { margin: 0 0 1.5rem; }
figure img { display: block; max-width: 100%; max-height: 60vh; width: auto; height: auto; border: 1px solid #eee; }
figcaption { color: #333; font-size: 0.9rem; margin-top: 0.25rem; } figcaption a { margin-left: 0.4rem; }
details.theorem { border: 1px solid #e1e4e8; border-radius: 4px; margin: 0.4rem 0; padding: 0.3rem 0.6rem; }
details.theorem > summary { cursor: pointer; line-height: 1.8; }
details.theorem > summary .name { font-weight: 600; margin-right: 0.6rem; white-space: nowrap; }
details.theorem > summary .counts { display: inline-block; margin-left: 0.8rem; font-size: 0.9rem; }
dl.info { display: grid; grid-template-columns: max-content auto; gap: 0.25rem 1rem; }
dl.info dt { font-weight: 600; } dl.info dd { margin: 0; }
.verdict.v-error { background: #b71c1c; color: #fff; }
"""


def write_report(out_dir: PathLike, *, title: str, experiment: str, summary: str, config: Mapping[str, Any],
                 figures: Sequence[FigureEntry], checks: Sequence[Mapping[str, Any]], run_info: Mapping[str, Any],
                 paper: str = "", tables: Sequence[tuple[str, PathLike] | PathLike] = (),
                 related: Sequence[Mapping[str, Any]] = ()) -> Path:
    """Write `out_dir/report.html` and return its path.

    `figures` are `(name, caption, png_path)` or `(name, caption, png_path, csv_paths)`, the CSV tables
    behind that figure (one path or several); `tables` are further CSV tables, `(label, path)` or a
    bare path.  Table paths become links relative to `out_dir` (a relative path is read from `out_dir`,
    then from the working directory) and must exist.  `checks` are verdict dicts (`Verdict.to_dict()`
    plus `cell`).  `run_info` is shown as given (e.g. variant, method, started, wall_time_s); its
    `command` is shown last, as the command to rerun.  `related` are links to other experiments' reports under
    the summary, dicts with `experiment`, `href` (relative to `out_dir`, not required to exist), `text`,
    `figures` ((name, href) pairs), `command` (what writes it) and `exists`.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    body = "\n".join([
        _headline(title, experiment, summary, paper, checks, run_info, related),
        _figures_section(figures, tables, out_dir),
        _checks_section(checks),
        _config_section(experiment, config, run_info),
    ])
    return write_atomic(out_dir / "report.html", html_page(title, body, _CSS))


# -- sections ----------------------------------------------------------------------------------------
def _headline(title: str, experiment: str, summary: str, paper: str, checks: Sequence[Mapping[str, Any]],
              run_info: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> str:
    source = paper or (experiment if experiment != title else "")
    counts = tally(checks)
    verdicts = " ".join(counts_html(counts[kind], f"{kind.capitalize()}s") for kind in KINDS)
    meta = [_meta_item(key, run_info[key]) for key in _META if run_info.get(key) not in (None, "")]
    meta_text = " · ".join(escape(m) for m in meta)
    links = ('<a href="#checks">checks</a><a href="#config">configuration</a><a href="#rerun">rerun</a>'
             if "command" in run_info else '<a href="#checks">checks</a><a href="#config">configuration</a>')
    return "\n".join([
        '<header class="headline" id="headline">',
        f"<h1>{escape(title)}</h1>",
        f'<p class="paper">{escape(source)}</p>' if source else "",
        f'<p class="summary">{escape(summary)}</p>' if summary else "",
        *(_related_line(r) for r in related),
        f'<p class="verdicts">{verdicts}</p>' if checks else '<p class="verdicts muted">No theorem checks.</p>',
        f'<p class="meta">{meta_text}{links}</p>',
        "</header>",
    ])


def _related_line(rel: Mapping[str, Any]) -> str:
    figures = ", ".join(f'<a href="{escape(h)}">{escape(name)}</a>' for name, h in rel.get("figures", ()))
    where = "" if rel.get("exists") else " (not next to this report when it was written)"
    return (f'<p class="related">See also <a href="{escape(rel["href"])}">{escape(rel["experiment"])}</a>'
            f"{' (figure ' + figures + ')' if figures else ''}{': ' + escape(rel['text']) if rel.get('text') else ''}"
            f". Written by <code>{escape(rel['command'])}</code>{where}.</p>")


def _meta_item(key: str, value: Any) -> str:
    if key == "variant":
        return f"{value} variant"
    if key == "wall_time_s":
        return f"wall time {duration(value)}"
    if key == "started":
        return f"started {str(value).replace('T', ' ')[:16]}"
    return f"{key} {value}"


def _figures_section(figures: Sequence[FigureEntry], tables: Sequence, out_dir: Path) -> str:
    parts = ['<section id="figures">']
    if not figures:
        parts.append('<p class="muted">This experiment declares no figures.</p>')
    for k, entry in enumerate(figures, start=1):
        name, caption, png, *rest = entry
        csvs = _as_paths(rest[0]) if rest else []
        data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
        links = "".join(f'<a href="{escape(href(p, out_dir))}">{escape(Path(p).name)}</a>' for p in csvs)
        parts.append(
            f'<figure id="fig-{escape(name)}">\n'
            f'<img src="data:image/png;base64,{data}" alt="{escape(caption or name)}">\n'
            f"<figcaption><strong>Figure {k}</strong> ({escape(name)}). {escape(caption)}"
            f"{' Data:' + links if links else ''}</figcaption>\n</figure>")
    if tables:
        items = []
        for entry in tables:
            label, path = entry if isinstance(entry, tuple) else (Path(entry).name, entry)
            items.append(f'<li><a href="{escape(href(path, out_dir))}">{escape(str(label))}</a></li>')
        parts.append('<h3 id="tables">Tables</h3>\n<ul class="tables">' + "".join(items) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def _as_paths(csvs) -> list:
    return [csvs] if isinstance(csvs, str | os.PathLike) else list(csvs or [])


def _checks_section(checks: Sequence[Mapping[str, Any]]) -> str:
    parts = ['<section id="checks">\n<h2>Theorem checks</h2>']
    if not checks:
        return parts[0] + "\n<p>This experiment declares no theorem checks.</p>\n</section>"
    parts.append(f'<p class="muted">{escape(tally_line(checks))}. Open a theorem for its rows.</p>')
    by_theorem: dict[str, list[Mapping[str, Any]]] = {}
    for c in checks:
        by_theorem.setdefault(str(c.get("theorem", "")), []).append(c)
    for theorem, rows in by_theorem.items():
        parts.append(_theorem_details(theorem, rows))
    parts.append("</section>")
    return "\n".join(parts)


def _theorem_details(theorem: str, rows: Sequence[Mapping[str, Any]]) -> str:
    counts = tally(rows)
    cells = len({str(c.get("cell", "")) for c in rows})
    failing = any(str(c.get("outcome")) in ("fails", ERROR) for c in rows)
    head = (f'<span class="name">{escape(theorem or "(unnamed theorem)")}</span>'
            + (f'<span class="muted">{cells} cells</span>' if cells > 1 else "")
            + "".join(counts_html(counts[kind], f"{kind}s") for kind in counts))
    inner = []
    for kind in counts:
        of_kind = sorted((c for c in rows if str(c.get("kind")) == kind),
                         key=lambda c: _ORDER.get(str(c.get("outcome")), len(_ORDER)))
        if of_kind:
            inner.append(f"<h3>{escape(kind.capitalize())}s</h3>\n{_checks_table(of_kind)}")
    return (f'<details class="theorem"{" open" if failing else ""}>\n<summary>{head}</summary>\n'
            + "\n".join(inner) + "\n</details>")


def _checks_table(rows: Sequence[Mapping[str, Any]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = []
    for c in rows:
        cells = [
            f"<td>{escape(str(c.get('cell', '')))}</td>",
            f"<td>{escape(str(c.get('statement', '')))}</td>",
            f'<td class="num">{escape(number(c.get("measured")))}</td>',
            f"<td>{escape(str(c.get('relation', '')))}</td>",
            f'<td class="num">{escape(number(c.get("bound")))}</td>',
            f"<td>{_badge(str(c.get('outcome', '')))}</td>",
            f"<td>{escape(str(c.get('note', '') or ''))}</td>",
        ]
        body.append(f'<tr title="{escape(str(c.get("line", "")))}">' + "".join(cells) + "</tr>")
    return ('<table class="checks">\n<thead><tr>' + head + "</tr></thead>\n<tbody>\n" + "\n".join(body)
            + "\n</tbody>\n</table>")


def _badge(outcome: str) -> str:
    """The verdict badge of a row; a raised check's in a colour of its own (not a theorem's outcome)."""
    return '<span class="verdict v-error">error</span>' if outcome == ERROR else verdict_badge(outcome)


def _config_section(experiment: str, config: Mapping[str, Any], run_info: Mapping[str, Any]) -> str:
    items = []
    for key, value in [("experiment", experiment), *run_info.items()]:
        if key == "command":
            continue
        name = str(key).removesuffix("_s")
        items.append(f"<dt>{escape(name.replace('_', ' '))}</dt><dd>{escape(_value(key, value))}</dd>")
    parts = ['<section id="config">\n<h2>Run and configuration</h2>', '<dl class="info">\n' + "\n".join(items) + "\n</dl>",
             "<h3>Resolved configuration</h3>",
             f"<pre>{escape(yaml.safe_dump(_plain(config), sort_keys=False, allow_unicode=True))}</pre>", "</section>"]
    if "command" in run_info:
        parts += ['<section id="rerun">\n<h2>Rerun</h2>', f"<pre><code>{escape(str(run_info['command']))}</code></pre>",
                  "</section>"]
    return "\n".join(parts)


# -- values ------------------------------------------------------------------------------------------
def _value(key: str, v) -> str:
    if key.endswith("_s"):
        return duration(v)
    if isinstance(v, float | np.floating) and not isinstance(v, bool):
        return f"{float(v):.4g}"
    return str(v)


def _plain(obj):
    """Config values as plain YAML-able Python objects."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    return str(obj)
