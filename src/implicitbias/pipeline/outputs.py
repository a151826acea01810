"""Write what a run produces: config.yaml, results.nc, figures (PNG and PDF), tables, checks.json, run.json,
report.html, and the index of the runs folder."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import matplotlib.pyplot as plt
import yaml

from implicitbias.experiments.base import Experiment
from implicitbias.experiments.figures import lay_out_once, thin_log_axes
from implicitbias.reports import write_index
from implicitbias.reports.html import write_report
from implicitbias.reports.index import config_head
from implicitbias.runs.results import Results
from implicitbias.storage.files import atomic_file


def write_config(experiment: Experiment, config, quick: bool, out: Path, command: str) -> Path:
    """config.yaml: the resolved config, headed by the command that reruns it."""
    path = Path(out) / "config.yaml"
    path.write_text(f"# {experiment.name} ({'quick' if quick else 'full'}), rerun with: {command}\n"
                    + yaml.safe_dump({"experiment": experiment.name, "quick": bool(quick), **config.model_dump()},
                                     sort_keys=False))
    return path


def write_figures(experiment: Experiment, results: Results, out_dir: Path,
                  warn=print) -> list[tuple[str, str, Path]]:
    """Every declared figure as PNG and PDF under out_dir/figures; a figure that cannot be drawn (e.g. every run
    of its panel diverged) is a warning, and the others are still drawn."""
    fig_dir = Path(out_dir) / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for figure in experiment.figures:
        try:
            fig = figure.render(results)  # headed by its title, laid out at savefig
        except (IndexError, KeyError, ValueError) as exc:
            warn(f"warning: figure {figure.name} not drawn ({type(exc).__name__}: {exc})")
            plt.close("all")
            continue
        thin_log_axes(fig)
        lay_out_once(fig)
        png = fig_dir / f"{figure.name}.png"
        # through temporary files: two processes finishing the same directory never leave half a figure
        atomic_file(lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=120), png)
        atomic_file(lambda tmp, fig=fig: fig.savefig(tmp, format="pdf"), fig_dir / f"{figure.name}.pdf")
        plt.close(fig)
        written.append((figure.name, figure.title, png))
    return written


def related_links(experiment: Experiment, out_dir: Path, quick: bool) -> list[dict]:
    """The links to `experiment.related` reports, as `write_report` takes them: each experiment's report in the
    sibling directory it has in the default layout (runs/NAME, runs/NAME-quick: this directory's name with this
    experiment's name replaced, or NAME[-quick] when this one was written elsewhere), and the command that
    writes it there; `exists`: whether it was there when this report was written."""
    out = []
    for rel in getattr(experiment, "related", ()):
        name = (out_dir.name.replace(experiment.name, rel.experiment, 1) if out_dir.name.startswith(experiment.name)
                else rel.experiment + ("-quick" if quick else ""))
        page = f"../{name}/report.html"
        out.append({"experiment": rel.experiment, "text": rel.text, "href": page,
                    "figures": [(f, f"{page}#fig-{f}") for f in rel.figures],
                    "command": f"implicitbias run {rel.experiment}{' --quick' if quick else ''}",
                    "exists": (Path(out_dir).resolve().parent / name / "report.html").is_file()})
    return out


#: the key of run_info that `implicitbias.report` passes for a rebuilt report: the results file it was rebuilt from
REBUILT_FROM = "rebuilt from"


def run_record(out_dir: str | Path, run_info: dict) -> dict:
    """The run.json `write_outputs` writes (less its "experiment"): `run_info` as given for a run; for a rebuilt
    report (run_info holds REBUILT_FROM, as `implicitbias.report` passes it) everything the run recorded in its
    run.json (variant, method, started, wall time, command: the report's headline and rerun command, the index's
    row), with run_info over it and "rebuilt at" refreshed.  A "partial" mark is kept only when run_info carries
    it; a command missing from both is read from config.yaml's first line."""
    out_dir = Path(out_dir)
    info = dict(run_info)
    if REBUILT_FROM in info:
        recorded = _read_record(out_dir / "run.json")
        if "partial" not in info:
            recorded.pop("partial", None)
        info = {**recorded, **info, "rebuilt at": datetime.datetime.now().isoformat(timespec="seconds")}
    head = config_head(out_dir / "config.yaml")
    info.setdefault("variant", head.get("variant"))
    if head.get("command") and not info.get("command"):
        info["command"] = head["command"]
    return {k: v for k, v in info.items() if v is not None}


def _read_record(path: Path) -> dict:
    """The fields of a run.json (without "experiment"); {} when it is absent or unreadable (it is rewritten)."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in recorded.items() if k != "experiment"} if isinstance(recorded, dict) else {}


def write_outputs(experiment: Experiment, results: Results, out_dir: str | Path, run_info: dict, warn=print) -> Path:
    """checks.json, run.json (`run_record`), figures, tables and the self-contained report.html; returns the
    report's path.  checks.json and run.json come first: a figure or table that raises leaves them current."""
    out_dir = Path(out_dir)
    atomic_file(lambda tmp: tmp.write_text(json.dumps(results.checks, indent=2)), out_dir / "checks.json")
    info = run_record(out_dir, run_info)
    atomic_file(lambda tmp: tmp.write_text(json.dumps({"experiment": experiment.name, **info}, indent=2)),
                out_dir / "run.json")
    figures = write_figures(experiment, results, out_dir, warn)
    tables = experiment.tables(results, out_dir / "figures") if experiment.tables else []
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
        related=related_links(experiment, out_dir, info.get("variant") == "quick"),
    )
    if out_dir.resolve().parent.name == "runs":  # the default layout runs/NAME: keep runs/index.html current
        write_index(out_dir.resolve().parent)
    return report
