"""`report.html`: one self-contained page per experiment run.

Figures are embedded as base64 PNG data URIs and the style sheet is inline, so the page has no
external reference (no CSS, scripts, fonts or images to fetch) and can be mailed or archived alone.
The page shows the experiment and its paper, how it was run, the theorem checks (assumptions and
predictions apart, verdicts coloured), the figures with captions and the full resolved config.
"""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import yaml

OUTCOMES = ("holds", "fails", "outside_scope", "not_evaluated")
KINDS = ("assumption", "prediction")
_COLUMNS = ("cell", "theorem", "statement", "measured", "relation", "bound", "verdict", "note")

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 0 auto; max-width: 1100px; padding: 1.5rem; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { font-size: 1.25rem; margin-top: 2rem;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; } h3 { font-size: 1.05rem; }
.paper { color: #555; margin-top: 0; } .summary { font-size: 1.02rem; }
nav a { margin-right: 1rem; }
dl.info { display: grid; grid-template-columns: max-content auto; gap: 0.25rem 1rem; }
dl.info dt { font-weight: 600; } dl.info dd { margin: 0; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.85rem; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 0.8rem; overflow-x: auto; }
table.checks { border-collapse: collapse; width: 100%; font-size: 0.88rem; }
table.checks th, table.checks td { border: 1px solid #e1e4e8; padding: 0.3rem 0.5rem; text-align: left;
                                   vertical-align: top; }
table.checks th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { font-weight: 600; border-radius: 3px; padding: 0.05rem 0.4rem; white-space: nowrap; }
.v-holds { background: #d8f3dc; color: #1b5e20; } .v-fails { background: #fde2e1; color: #b71c1c; }
.v-outside_scope { background: #fff1cc; color: #8a5a00; }
.v-not_evaluated { background: #ececec; color: #555; } .v-other { background: #ececec; color: #333; }
.tally { font-size: 1rem; } figure { margin: 1.5rem 0; } figure img { max-width: 100%; height: auto;
         border: 1px solid #eee; } figcaption { color: #333; font-size: 0.92rem; margin-top: 0.3rem; }
"""


def write_report(out_dir: str | os.PathLike, *, title: str, experiment: str, summary: str,
                 config: Mapping[str, Any], figures: Sequence[tuple[str, str, str | os.PathLike]],
                 checks: Sequence[Mapping[str, Any]], run_info: Mapping[str, Any], paper: str = "") -> Path:
    """Write `out_dir/report.html` and return its path.

    `figures` are `(name, caption, png_path)`; `checks` are verdict dicts (`Verdict.to_dict()` plus
    `cell`); `run_info` is shown as given (e.g. method, wall time, quick or full, the command to rerun).
    """
    out = Path(out_dir) / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    body = "\n".join([
        f"<h1>{escape(title)}</h1>",
        f'<p class="paper">{escape(paper)}</p>' if paper else "",
        f'<p class="summary">{escape(summary)}</p>',
        '<nav><a href="#run">Run</a><a href="#checks">Checks</a><a href="#figures">Figures</a>'
        '<a href="#config">Configuration</a></nav>',
        _run_section(experiment, run_info),
        _checks_section(checks),
        _figures_section(figures),
        '<h2 id="config">Resolved configuration</h2>',
        f"<pre>{escape(yaml.safe_dump(_plain(config), sort_keys=False, allow_unicode=True))}</pre>",
    ])
    page = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return out


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


# -- sections ----------------------------------------------------------------------------------------
def _run_section(experiment: str, run_info: Mapping[str, Any]) -> str:
    rows = [("experiment", experiment), *run_info.items()]
    items = []
    for key, value in rows:
        text = f"<code>{escape(str(value))}</code>" if key == "command" else escape(_value(key, value))
        name = str(key).removesuffix("_s") if isinstance(value, float) else str(key)
        items.append(f"<dt>{escape(name.replace('_', ' '))}</dt><dd>{text}</dd>")
    return '<h2 id="run">Run</h2>\n<dl class="info">\n' + "\n".join(items) + "\n</dl>"


def _checks_section(checks: Sequence[Mapping[str, Any]]) -> str:
    parts = ['<h2 id="checks">Theorem checks</h2>']
    if not checks:
        return parts[0] + "\n<p>This experiment declares no theorem checks.</p>"
    parts.append(f'<p class="tally"><strong>{escape(tally_line(checks))}</strong></p>')
    kinds = list(KINDS) + sorted({str(c.get("kind")) for c in checks} - set(KINDS))
    for kind in kinds:
        rows = [c for c in checks if str(c.get("kind")) == kind]
        if rows:
            parts.append(f"<h3>{escape(kind.capitalize())}s</h3>")
            parts.append(_checks_table(rows))
    return "\n".join(parts)


def _checks_table(rows: Sequence[Mapping[str, Any]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = []
    for c in rows:
        outcome = str(c.get("outcome", ""))
        cls = f"v-{outcome}" if outcome in OUTCOMES else "v-other"
        cells = [
            f"<td>{escape(str(c.get('cell', '')))}</td>",
            f"<td>{escape(str(c.get('theorem', '')))}</td>",
            f"<td>{escape(str(c.get('statement', '')))}</td>",
            f'<td class="num">{escape(_number(c.get("measured")))}</td>',
            f"<td>{escape(str(c.get('relation', '')))}</td>",
            f'<td class="num">{escape(_number(c.get("bound")))}</td>',
            f'<td><span class="verdict {cls}">{escape(outcome.replace("_", " "))}</span></td>',
            f"<td>{escape(str(c.get('note', '') or ''))}</td>",
        ]
        body.append(f'<tr title="{escape(str(c.get("line", "")))}">' + "".join(cells) + "</tr>")
    return f'<table class="checks">\n<thead><tr>{head}</tr></thead>\n<tbody>\n' + "\n".join(body) + \
        "\n</tbody>\n</table>"


def _figures_section(figures: Sequence[tuple[str, str, str | os.PathLike]]) -> str:
    parts = ['<h2 id="figures">Figures</h2>']
    if not figures:
        parts.append("<p>This experiment declares no figures.</p>")
    for k, (name, caption, png) in enumerate(figures, start=1):
        data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
        parts.append(
            f'<figure id="fig-{escape(name)}">\n'
            f'<img src="data:image/png;base64,{data}" alt="{escape(caption or name)}">\n'
            f"<figcaption><strong>Figure {k}</strong> ({escape(name)}). {escape(caption)}</figcaption>\n"
            "</figure>")
    return "\n".join(parts)


# -- values ------------------------------------------------------------------------------------------
def _number(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool | str):
        return str(v)
    v = float(v)
    return f"{v:.4g}" if math.isfinite(v) else "n/a"


def _value(key: str, v) -> str:
    if isinstance(v, float | np.floating) and not isinstance(v, bool):
        return f"{float(v):.3g} s" if key.endswith("_s") else f"{float(v):.4g}"
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
