"""Write what a run produces: figures (PNG and PDF), tables, checks.json and report.html."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import yaml

from implicitbias.experiments.base import Experiment
from implicitbias.experiments.figures import thin_log_axes
from implicitbias.runs.results import Results
from implicitbias.storage.files import atomic_file


def write_figures(experiment: Experiment, results: Results, out_dir: Path,
                  warn=print) -> list[tuple[str, str, Path]]:
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for figure in experiment.figures:
        try:
            fig = figure.draw(results)
        except (IndexError, KeyError, ValueError) as exc:
            # e.g. every run of one panel diverged: the other figures are still drawn
            warn(f"warning: figure {figure.name} not drawn ({type(exc).__name__}: {exc})")
            plt.close("all")
            continue
        fig.suptitle(f"{experiment.paper}: {figure.name}", fontsize=10)
        thin_log_axes(fig)
        fig.tight_layout()
        png = fig_dir / f"{figure.name}.png"
        # through temporary files: two processes finishing the same directory never leave half a figure
        atomic_file(lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=120), png)
        atomic_file(lambda tmp, fig=fig: fig.savefig(tmp, format="pdf"), fig_dir / f"{figure.name}.pdf")
        plt.close(fig)
        written.append((figure.name, figure.title, png))
    return written


def write_outputs(experiment: Experiment, results: Results, out_dir: Path, run_info: dict, warn=print) -> Path:
    """Figures, tables, checks.json and the self-contained report.html; returns the report's path."""
    from implicitbias.reports.html import write_report

    figures = write_figures(experiment, results, out_dir, warn)
    tables = experiment.tables(results, out_dir / "figures") if experiment.tables else []
    atomic_file(lambda tmp: tmp.write_text(json.dumps(results.checks, indent=2)), out_dir / "checks.json")
    info = dict(run_info)
    atomic_file(lambda tmp: tmp.write_text(json.dumps({"experiment": experiment.name, **info}, indent=2)),
                out_dir / "run.json")
    report = write_report(
        out_dir,
        title=experiment.name,
        experiment=experiment.name,
        paper=experiment.paper,
        summary=experiment.summary,
        config=yaml.safe_load(yaml.safe_dump(results.config.model_dump(), sort_keys=False)),
        figures=figures,
        checks=results.checks,
        run_info=info,
        tables=tables,
    )
    if out_dir.resolve().parent.name == "runs":  # the default layout runs/NAME: keep runs/index.html current
        from implicitbias.reports import write_index

        write_index(out_dir.resolve().parent)
    return report
