"""The typed, validated configuration of an experiment.

An experiment trains a grid of runs.  `grid` maps a field path to a list of values; the runs are
the Cartesian product of the axes (times `trials`, each trial with fresh data and init):

- *batch axes* (`seed`, `init_scale`, `method.lr`, numeric `model.<field>`) vary inside one
  compiled, vmapped call;
- every other axis (`data.d`, `model.width`, `method.kind`, ...) makes a separate *cell*, one
  compiled call each.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any, Literal

import pydantic

from implicitbias._spec import ConfigError, Spec
from implicitbias.data import AnyData
from implicitbias.losses import Loss
from implicitbias.models import AnyModel
from implicitbias.training.methods import AnyMethod
from implicitbias.training.stopping import Stop

BATCH_KEYS = ("seed", "init_scale", "method.lr")


class ExperimentConfig(Spec):
    """Everything needed to rerun an experiment (written to `config.yaml`)."""

    model: AnyModel
    data: AnyData
    loss: Loss = Loss()
    method: AnyMethod
    stop: Stop = Stop()
    checkpoints: int | list[float] = 30
    seed: int = pydantic.Field(0, ge=0)
    init_scale: float = pydantic.Field(1.0, ge=0.0)
    trials: int = pydantic.Field(1, ge=1)
    #: the trials of a cell in one batched call (True) or one call each (False); None: batched for
    #: GD/SGD (fixed steps: members advance in lockstep at no cost), one call each for gradient flow
    #: (adaptive steps: a batch advances at the pace of its slowest member)
    batch_trials: bool | None = None
    grid: dict[str, list[Any]] = pydantic.Field(default_factory=dict)
    reference: Literal["none", "svm"] = "none"
    kkt: bool = True
    keep_trajectory: bool = False
    options: dict[str, Any] = pydantic.Field(default_factory=dict)
    parts: dict[str, dict[str, Any]] = pydantic.Field(default_factory=dict)

    @pydantic.model_validator(mode="after")
    def _grid_axes_exist(self):
        for key, values in self.grid.items():
            if not isinstance(values, list) or not values:
                raise ValueError(f"grid.{key} must be a non-empty list of values")
            if key in ("seed", "init_scale"):
                continue
            head, _, field = key.partition(".")
            if head not in ("model", "data", "method", "loss", "stop") or not field:
                raise ValueError(
                    f"grid.{key} is not a field: expected seed, init_scale or model.*, data.*, method.*, loss.*, "
                    "stop.*"
                )
        return self

    # -- grid ------------------------------------------------------------------------------------
    def is_batch_axis(self, key: str) -> bool:
        if key in BATCH_KEYS:
            return key != "method.lr" or hasattr(self.method, "lr")
        if key.startswith("model."):
            field = key.split(".", 1)[1]
            return isinstance(getattr(self.model, field, None), float)
        return False

    def part(self, name: str) -> ExperimentConfig:
        """The config of one named part (e.g. one panel of a figure): the base with its overrides."""
        if name not in self.parts:
            raise ConfigError(f"part = {name!r} is not allowed: expected one of {list(self.parts)}")
        return with_overrides(self.replace(parts={}), self.parts[name])

    def cells(self) -> list[dict[str, Any]]:
        """The separate compiled calls: one dict of (non-batch axis -> value) per cell; with parts,
        each cell also names its part."""
        if self.parts:
            return [{"part": name, **cell} for name in self.parts for cell in self.part(name).cells()]
        axes = [(k, v) for k, v in self.grid.items() if not self.is_batch_axis(k)]
        return [dict(zip([k for k, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])]

    def trials_batched(self) -> bool:
        return (not self.method.is_flow) if self.batch_trials is None else self.batch_trials

    def batch_runs(self) -> list[dict[str, Any]]:
        """The runs of one cell: the product of the batch axes."""
        axes = [(k, v) for k, v in self.grid.items() if self.is_batch_axis(k)]
        return [dict(zip([k for k, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])]

    def for_cell(self, cell: dict[str, Any]) -> ExperimentConfig:
        """This config with one cell's values substituted (validated)."""
        cell = dict(cell)
        base = self.part(cell.pop("part")) if "part" in cell else self
        return with_overrides(base, cell)


def set_path(tree: dict, path: str, value: Any) -> None:
    keys = path.split(".")
    node = tree
    for k in keys[:-1]:
        if not isinstance(node.get(k), dict):
            raise ConfigError(f"{path} = {value!r} is not allowed: {'.'.join(keys[:-1])} is not a section")
        node = node[k]
    node[keys[-1]] = value


def with_overrides(config: ExperimentConfig, overrides: dict[str, Any]) -> ExperimentConfig:
    """A validated copy with dotted-path overrides applied (`model.width` = 10, `data.name` = ...).

    Overrides of a field that a part also sets are applied to that part too, so a user's `--set`
    wins over the experiment's per-part settings.  `kind`/`name` switches are applied first."""
    tree = config.model_dump()
    order = sorted(overrides, key=lambda p: not p.endswith((".kind", ".name")))
    for path in order:
        value = copy.deepcopy(overrides[path])
        if path.startswith("grid.") and path != "grid.":
            # one grid axis, e.g. grid.data.d=[4,16,64] (axis names contain dots themselves)
            axis = path[len("grid."):]
            targets = [tree.setdefault("grid", {})]
            targets += [p["grid"] for p in tree.get("parts", {}).values() if isinstance(p.get("grid"), dict)]
            if not any(axis in t for t in targets):
                raise ConfigError(f"{path} is not allowed: this experiment has no grid axis {axis!r}; "
                                  "`implicitbias describe NAME` shows the grid")
            for t in targets:
                if axis in t:
                    t[axis] = value
            continue
        for part in tree.get("parts", {}).values():
            if path in part:
                part[path] = value
        if path == "data.name" and value != tree["data"].get("name"):
            tree["data"] = {"name": value}  # a different generator: start from its defaults
        elif path == "model.kind" and value != tree["model"].get("kind"):
            tree["model"] = {"kind": value}
        elif path == "method.kind" and value != tree["method"].get("kind"):
            tree["method"] = {"kind": value}
        else:
            set_path(tree, path, value)
    return ExperimentConfig(**tree)
