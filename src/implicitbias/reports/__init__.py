"""Reports: figures (matplotlib, Agg), the self-contained `report.html`, and a headless-browser check.

plotting: `new_figure`, `save_figure`, `metric_curves`, `final_vs` and the house style.
html: `write_report` writes `report.html` (figures embedded, checks tabled, config in full).
browser: `render_check` opens a report in headless Chromium and reports which images rendered.
"""

from implicitbias.reports.browser import BrowserError, find_chromium, render_check, screenshot
from implicitbias.reports.html import tally, tally_line, write_report
from implicitbias.reports.plotting import (
    final_values,
    final_vs,
    metric_curves,
    metric_label,
    new_figure,
    save_figure,
)

__all__ = [
    "BrowserError",
    "final_values",
    "final_vs",
    "find_chromium",
    "metric_curves",
    "metric_label",
    "new_figure",
    "render_check",
    "save_figure",
    "screenshot",
    "tally",
    "tally_line",
    "write_report",
]
