"""`index.html`: one page listing every run under a directory, newest first, each linking to its report.

A run directory is any directory holding a `report.html`.  What the index shows comes from files the
run wrote beside it: `run.json` (experiment, variant, started, wall time, command), `checks.json` (the
verdicts, counted as in the report) and `figures/*.png` (the report's first figure as a thumbnail,
linked, not copied).  A run written before `run.json` existed falls back on the first comment line of
its `config.yaml` ("# NAME (quick|full), rerun with: COMMAND"), then on the report's title; whatever
cannot be found shows "—".
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from html import escape, unescape
from pathlib import Path
from typing import Any

from implicitbias.reports.page import KINDS, counts_html, duration, href, html_page, tally, write_atomic

__all__ = ["RunListing", "config_head", "find_runs", "read_run", "write_index"]

DASH = "—"
_CONFIG_HEAD = re.compile(r"#\s*(?P<experiment>\S+)\s*\((?P<variant>quick|full)\)(?:,\s*rerun with:\s*(?P<command>.*))?")
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)
_FIRST_FIGURE = re.compile(r'<figure id="fig-([^"]+)"')

_CSS = """
td.thumb { width: 170px; } td.thumb img { display: block; max-width: 160px; max-height: 100px; border: 1px solid #eee; }
body { max-width: 1400px; } td.when, td.num, td.name a { white-space: nowrap; }
td .counts { display: inline-block; } .path { font-size: 0.8rem; color: #666; }
"""


@dataclass
class RunListing:
    """What the index shows of one run directory."""

    path: Path
    experiment: str = DASH
    variant: str = DASH
    started: str = ""
    wall_time_s: Any = None
    command: str = ""
    checks: list[dict] | None = None
    thumbnail: Path | None = None
    notes: list[str] = field(default_factory=list)


def write_index(root: str | os.PathLike) -> Path:
    """Write `root/index.html` listing every run directory under `root` (recursively); return its path."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    runs = find_runs(root)
    rows = "\n".join(_row(run, root) for run in runs)
    body = "\n".join([
        f"<h1>Runs under {escape(str(root))}</h1>",
        f'<p class="muted">{len(runs)} run{"s" * (len(runs) != 1)}, newest first. '
        "Each links to its report; the verdict counts are those of its checks.json.</p>",
        '<table class="runs">\n<thead><tr><th>figure</th><th>experiment</th><th>variant</th><th>started</th>'
        "<th>wall time</th><th>assumptions</th><th>predictions</th></tr></thead>",
        f"<tbody>\n{rows}\n</tbody>\n</table>" if runs else "</table>\n<p>No run directory (one holding report.html) "
        "was found.</p>",
    ])
    return write_atomic(root / "index.html", html_page(f"Runs under {root}", body, _CSS))


def find_runs(root: str | os.PathLike) -> list[RunListing]:
    """Every directory under `root` (itself included) that holds a `report.html`, newest first."""
    runs = [read_run(report.parent) for report in Path(root).rglob("report.html") if report.is_file()]
    dated = sorted((r for r in runs if r.started), key=lambda r: (r.started, str(r.path)), reverse=True)
    return dated + sorted((r for r in runs if not r.started), key=lambda r: str(r.path))


def read_run(run_dir: Path) -> RunListing:
    """The index's view of one run directory, from run.json (or config.yaml), checks.json and figures/."""
    run = RunListing(path=run_dir)
    info = _read_json(run_dir / "run.json", run)
    if isinstance(info, dict):
        run.experiment = str(info.get("experiment") or DASH)
        run.variant = str(info.get("variant") or DASH)
        run.started = str(info.get("started") or "")
        run.wall_time_s = info.get("wall_time_s")
        run.command = str(info.get("command") or "")
    else:
        _from_config_head(run_dir / "config.yaml", run)
    if run.experiment == DASH:
        run.experiment = _report_title(run_dir / "report.html") or run_dir.name
    checks = _read_json(run_dir / "checks.json", run)
    run.checks = [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else None
    run.thumbnail = _thumbnail(run_dir)
    return run


def _read_json(path: Path, run: RunListing):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        run.notes.append(f"{path.name} unreadable: {exc}")
        return None


def config_head(path: str | os.PathLike) -> dict[str, str]:
    """What the first line of a run's config.yaml says ("# NAME (quick|full), rerun with: COMMAND"): experiment,
    variant and command ({} when the file or the line is not there)."""
    try:
        with Path(path).open(encoding="utf-8") as f:
            first = f.readline().strip()
    except (OSError, UnicodeDecodeError):
        return {}
    match = _CONFIG_HEAD.match(first)
    if not match:
        return {}
    head = {"experiment": match["experiment"], "variant": match["variant"]}
    return head | ({"command": match["command"].strip()} if (match["command"] or "").strip() else {})


def _from_config_head(path: Path, run: RunListing) -> None:
    head = config_head(path)
    if head:
        run.experiment, run.variant = head["experiment"], head["variant"]
        run.command = head.get("command", "")


def _report_title(path: Path) -> str:
    try:
        match = _TITLE.search(path.read_text(encoding="utf-8"))
    except OSError:
        return ""
    return unescape(match.group(1)).strip() if match else ""


def _thumbnail(run_dir: Path) -> Path | None:
    """The PNG of the report's first figure if there is one, else the first PNG in `figures/` by name."""
    figures = run_dir / "figures"
    try:
        match = _FIRST_FIGURE.search((run_dir / "report.html").read_text(encoding="utf-8"))
    except OSError:
        match = None
    if match and (figures / f"{unescape(match.group(1))}.png").is_file():
        return figures / f"{unescape(match.group(1))}.png"
    pngs = sorted(figures.glob("*.png")) if figures.is_dir() else []
    return pngs[0] if pngs else None


# -- one row -----------------------------------------------------------------------------------------
def _row(run: RunListing, root: Path) -> str:
    report = escape(href(run.path / "report.html", root))
    thumb = (f'<a href="{report}"><img src="{escape(href(run.thumbnail, root))}" alt="first figure of '
             f'{escape(run.experiment)}"></a>' if run.thumbnail else DASH)
    where = run.path.relative_to(root).as_posix() if run.path != root else "."
    title = f' title="{escape(run.command)}"' if run.command else ""
    counts = tally(run.checks) if run.checks is not None else None
    verdicts = [(counts_html(counts[kind]) or '<span class="muted">none</span>') if counts else DASH for kind in KINDS]
    notes = f'<div class="path">{escape("; ".join(run.notes))}</div>' if run.notes else ""
    return ("<tr>"
            f'<td class="thumb">{thumb}</td>'
            f'<td class="name"><a href="{report}"{title}>{escape(run.experiment)}</a>'
            f'<div class="path">{escape(where)}</div>{notes}</td>'
            f"<td>{escape(run.variant)}</td>"
            f'<td class="when">{escape(_date(run.started))}</td>'
            f'<td class="num">{escape(duration(run.wall_time_s) if run.wall_time_s is not None else DASH)}</td>'
            + "".join(f"<td>{v}</td>" for v in verdicts) + "</tr>")


def _date(started: str) -> str:
    if not started:
        return DASH
    try:
        return datetime.fromisoformat(started).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return started
