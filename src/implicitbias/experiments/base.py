"""A named experiment: a config, its quick variant, its figures and its theorem checks."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from typing import Any

from implicitbias.experiments.config import ExperimentConfig, expand, with_overrides


@dataclasses.dataclass(frozen=True)
class Figure:
    """A figure of an experiment: `draw(results) -> matplotlib Figure`, where `results` is the
    experiment's `Results` (cells of engine Datasets plus the resolved config); `name` names its files
    (`figures/NAME.png`), `title` heads the drawn figure and captions it in the report (`render`)."""

    name: str
    title: str
    draw: Callable[[Any], Any]

    @property
    def heading(self) -> str:
        """The words the figure is headed by: its title's first sentence (a catalogued figure's title is its
        whole caption, which the report prints beneath it), or its name when the title is empty."""
        text = " ".join(self.title.split())
        first = re.split(r"(?<=[^.\s][.;])\s+(?=[A-Z(])", text, maxsplit=1)[0] if text else ""
        return first.rstrip(".;") if first != text else text or self.name

    def render(self, results):
        """`draw(results)`, headed by `heading` (wrapped to the figure's width) and laid out so that a plain
        `savefig` keeps the heading clear of the panels and every label inside the figure (`headline`)."""
        from implicitbias.experiments.figures import headline, plain_log_labels  # matplotlib only when drawn

        fig = self.draw(results)
        headline(fig, self.heading)
        plain_log_labels(fig)
        return fig


@dataclasses.dataclass(frozen=True)
class Related:
    """Another experiment whose report this one's links to: its name, the figures of it to link to (by name),
    and a sentence saying what it adds.  The link assumes the default layout (both run into runs/, as
    runs/NAME or runs/NAME-quick); the report also names the command that produces it."""

    experiment: str
    figures: tuple[str, ...] = ()
    text: str = ""


@dataclasses.dataclass(frozen=True)
class Experiment:
    """name, paper and systems identify it; `config` is the full variant at the paper's scale (its
    settings and their source in `settings_source`); `quick` overrides make the <= 60 s variant run in CI.
    `runs(config)` declares its runs (grid, parts and trials expanded once, `expand`);
    `theorems(cell)` lists the Theorem objects checked on a cell (`implicitbias.runs.results.Cell`: runs
    that differ only in init, learning rate, numeric model fields and data seed); `claims` are the paper's
    qualitative claims across cells (e.g. "the drop grows with d"), as `CellsTheorem` objects checked on all
    the cells at once;
    `tables(results, out_dir)` writes extra tables (CSV) next to the figures and returns their paths."""

    name: str
    paper: str
    systems: tuple[str, ...]
    summary: str
    config: ExperimentConfig
    quick: dict[str, Any]
    figures: tuple[Figure, ...] = ()
    theorems: Callable[[Any], list] = lambda cell: []
    settings_source: str = ""
    tables: Callable[[Any, Any], list] | None = None
    claims: tuple = ()
    #: a check of the expanded runs that no single spec can make (the model's dimension against the data's, data
    #: that must be separable): raises ConfigError, before anything trains
    validate_runs: Callable[[list], None] | None = None
    #: other experiments' reports this report links to (`Related`)
    related: tuple[Related, ...] = ()

    def resolve(self, quick: bool = False, overrides: dict[str, Any] | None = None,
                seed: int | None = None) -> ExperimentConfig:
        """The config a run uses: full or quick, then user overrides, then the seed (validated)."""
        # deep copies: an override's nested dicts (e.g. `parts`) must never alias the catalog's
        changes = copy.deepcopy(self.quick) if quick else {}
        changes.update(copy.deepcopy(overrides or {}))
        if seed is not None:
            changes["seed"] = seed
        return with_overrides(self.config, changes) if changes else self.config

    def runs(self, config: ExperimentConfig) -> list:
        """Every run of the experiment under `config`, as `RunSpec`s (checked by `validate_runs`).  Override only
        where the paper's design is not a grid of the config."""
        runs = expand(config)
        if self.validate_runs is not None:
            self.validate_runs(runs)
        return runs
