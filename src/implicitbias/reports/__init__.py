"""Reports: figures (matplotlib, Agg), the self-contained `report.html`, an index of runs, the terminal summary.

html: `write_report` writes `report.html` (headline and verdict counts, figures embedded, checks by theorem,
    config in full).
index: `write_index` writes `index.html` listing every run directory under a root.
terminal: `summarize` turns the checks into the few lines a run prints (every row with `verbose`).
browser: `render_check` and `layout_probe` open a page in headless Chromium and report what rendered,
    where it sits in the window and whether its links resolve.
"""

from implicitbias.reports.browser import (
    BrowserError,
    find_chromium,
    layout_probe,
    missing_targets,
    render_check,
    screenshot,
)
from implicitbias.reports.html import write_report
from implicitbias.reports.index import find_runs, write_index
from implicitbias.reports.page import tally, tally_line
from implicitbias.reports.terminal import summarize

__all__ = [
    "BrowserError",
    "find_chromium",
    "find_runs",
    "layout_probe",
    "missing_targets",
    "render_check",
    "screenshot",
    "summarize",
    "tally",
    "tally_line",
    "write_index",
    "write_report",
]
