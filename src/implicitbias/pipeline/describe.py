"""`implicitbias describe`: what an experiment shows and its measured run time, its resolved config, its runs and
compiled calls, its cells, the declared checks of its theorems (with their thresholds and sources) and its figures,
without training."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from implicitbias.experiments.base import Experiment
from implicitbias.experiments.runtimes import runtime
from implicitbias.experiments.variants import describe_quick
from implicitbias.runs.results import Cell, cell_indices, name_cells
from implicitbias.runs.spec import group_runs


def describe(experiment: Experiment, *, quick: bool = False, overrides: Mapping[str, Any] | None = None) -> str:
    """The text `implicitbias describe NAME` prints."""
    config = experiment.resolve(quick=quick, overrides=dict(overrides or {}))
    runs = experiment.runs(config)
    variant = "quick" if quick else "full"
    lines = [f"# {experiment.name} ({variant} variant): {experiment.paper}",
             f"# {experiment.summary}", f"# settings (full variant): {experiment.settings_source}",
             f"# run time of this variant: {runtime(experiment.name, variant)}", "",
             yaml.safe_dump(config.model_dump(), sort_keys=False)]
    if quick:  # generated from the two resolved configs, never from the settings text
        lines.insert(3, f"# {describe_quick(experiment)}")
    lines.append(f"# {len(runs)} runs in {len(group_runs(runs))} compiled calls (tasks of a sweep)")
    cells = [Cell([runs[i] for i in idx], None, [], idx) for idx in cell_indices(runs)]
    name_cells(cells)
    lines.append(f"# {len(cells)} cells (runs checked together):")
    lines += [f"  {cell.label}: {len(cell.runs)} runs, {cell.trials} trials" for cell in cells]
    lines.append("# theorem checks per cell:")
    seen: set[str] = set()
    theorems = [t for cell in cells for t in experiment.theorems(cell)] + list(experiment.claims)
    for theorem in theorems:
        line = f"  {theorem.title}: {theorem.model_dump()}"
        if line in seen:
            continue
        seen.add(line)
        lines.append(line)
        for d in type(theorem).declarations():
            row = d.row(theorem)
            threshold = f" [{row['threshold']}]" if row["threshold"] else ""
            lines.append(f"    {d.kind}: {d.statement}{threshold} ({d.source})")
    lines.append("# figures:")
    lines += [f"  figures/{fig.name}.png|pdf: {fig.title}" for fig in experiment.figures]
    return "\n".join(lines)
