"""The typed, validated configuration of an experiment, and its expansion into runs.

An experiment declares its runs with a base config, a `grid` (field path -> list of values; the
runs are the Cartesian product of the axes), optional named `parts` (each the base config with its
own overrides and grid, e.g. the two panels of a figure) and `trials` (each trial with fresh data
and init).  `expand(config)` turns this, once, into a list of `RunSpec`s; nothing downstream looks
at the grid again.
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any, Literal

import pydantic

from implicitbias._spec import INT_MAX, ConfigError, Spec
from implicitbias.data import AnyData
from implicitbias.losses import Loss
from implicitbias.models import AnyModel
from implicitbias.runs.spec import INIT_SCALE_MAX, RunSpec, check_checkpoint_count
from implicitbias.training.methods import AnyMethod
from implicitbias.training.stopping import Stop

#: the seeds of trial t of a run with base seed s are s + SEED_STEP * t (data and init alike), so
#: that trials of neighbouring base seeds (--seed 0, --seed 1) never share a draw
SEED_STEP = 1000
#: the most runs one experiment may declare: expanding them takes ~70 us each (100 000 runs: ~7 s), and more
#: would be refused only after a long wait or an exhausted memory
MAX_RUNS = 100_000


class ExperimentConfig(Spec):
    """Everything needed to rerun an experiment (written to `config.yaml`)."""

    model: AnyModel
    data: AnyData
    loss: Loss = Loss()
    method: AnyMethod
    stop: Stop = Stop()
    checkpoints: int | list[float] = 30
    seed: int = pydantic.Field(0, ge=0)
    init_scale: float = pydantic.Field(1.0, ge=0.0, le=INIT_SCALE_MAX)
    trials: int = pydantic.Field(1, ge=1)
    grid: dict[str, list[Any]] = pydantic.Field(default_factory=dict)
    reference: Literal["none", "svm"] = "none"
    kkt: bool = True
    keep_trajectory: bool = False
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

    @pydantic.field_validator("checkpoints")
    @classmethod
    def _checkpoints_count(cls, value):
        return check_checkpoint_count(value)

    @pydantic.model_validator(mode="after")
    def _checkpoints_resolve(self):
        # checkpoints can only fail against the method and the stopping rule: checked here, with the rest
        self.method.checkpoint_grid(self.checkpoints, self.stop)
        return self

    @pydantic.model_validator(mode="after")
    def _seeds_in_range(self):
        # trial t draws with seed + SEED_STEP t: the last trial's seed must still fit the int64 a seed is
        # computed in (jax.random.PRNGKey overflows above 2**63 - 1)
        last = SEED_STEP * (self.trials - 1)
        if self.trials > MAX_RUNS:
            raise ValueError(f"trials = {self.trials} is not allowed: expected at most {MAX_RUNS} (runs of one experiment)")
        seeds = [self.seed] + [v for v in self.grid.get("seed", []) if isinstance(v, int)]
        if max(seeds) + last > INT_MAX:
            raise ValueError(f"seed = {max(seeds)} is not allowed with trials = {self.trials}: expected a seed "
                             f"<= {INT_MAX - last} (trial t uses seed + {SEED_STEP} t, at most {INT_MAX})")
        return self

    def part(self, name: str) -> ExperimentConfig:
        """The config of one named part (e.g. one panel of a figure): the base with its overrides."""
        if name not in self.parts:
            raise ConfigError(f"part = {name!r} is not allowed: expected one of {list(self.parts)}")
        return with_overrides(self.replace(parts={}), self.parts[name])


def run_count(config: ExperimentConfig) -> int:
    """How many runs `expand(config)` gives (parts x grid x trials), without building them."""
    if config.parts:
        return sum(run_count(config.part(name)) for name in config.parts)
    return config.trials * math.prod(len(values) for values in config.grid.values())


def expand(config: ExperimentConfig) -> list[RunSpec]:
    """Every run of an experiment: parts x grid x trials, each a validated `RunSpec`.  A value that
    cannot make a valid run is refused here, before anything trains, naming its grid axis."""
    count = run_count(config)  # counted before anything is built: a mistyped trials=10000000000 is refused at once
    if count > MAX_RUNS:
        raise ConfigError(f"trials = {config.trials} with the grid gives {count:.4g} runs: expected at most {MAX_RUNS} "
                          "runs in one experiment (reduce trials or the grid axes)")
    if config.parts:
        return [run.replace(part=name) for name in config.parts for run in expand(config.part(name))]
    axes = list(config.grid.items())
    runs = []
    for combo in itertools.product(*[values for _, values in axes]):
        where = ", ".join(f"grid.{k} = {v!r}" for (k, _), v in zip(axes, combo))
        try:
            cell = with_overrides(config.replace(grid={}), dict(zip([k for k, _ in axes], combo)))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        for trial in range(config.trials):
            fields = cell.model_dump(include={"model", "data", "loss", "method", "stop", "checkpoints", "init_scale",
                                              "reference", "kkt", "keep_trajectory"})
            try:
                runs.append(RunSpec(**fields, seed=cell.seed + SEED_STEP * trial,
                                    data_seed=config.seed + SEED_STEP * trial, trial=trial))
            except ConfigError as exc:
                raise ConfigError(f"{where or 'config'}: {exc}") from None
    return runs


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
    wins over the experiment's per-part settings.  `kind`/`name` switches are applied first.  `parts` set to a
    list of part names keeps those parts only (`--set 'parts=[flow]'`); set to a mapping, it replaces them."""
    tree = config.model_dump()
    order = sorted(overrides, key=lambda p: not p.endswith((".kind", ".name")))
    for path in order:
        value = copy.deepcopy(overrides[path])
        if path == "parts" and isinstance(value, list):
            unknown = [v for v in value if v not in tree["parts"]]
            if not value or unknown:
                raise ConfigError(f"parts = {value!r} is not allowed: expected a non-empty list of this experiment's "
                                  f"parts, a selection of {list(tree['parts'])}")
            tree["parts"] = {name: tree["parts"][name] for name in value}
            continue
        if path.startswith("grid.") and path != "grid.":
            # one grid axis, e.g. grid.data.d=[4,16,64] (axis names contain dots themselves)
            axis = path[len("grid."):]
            targets = [tree.setdefault("grid", {})]
            targets += [p["grid"] for p in tree.get("parts", {}).values() if isinstance(p.get("grid"), dict)]
            if not isinstance(value, list) or not value:
                raise ConfigError(f"{path} = {value!r} is not allowed: expected a non-empty list of values, e.g. "
                                  f"--set {path}=[0.1,1]")
            having = [t for t in targets if axis in t]
            # a new axis is added to the base grid and to every part's own grid (a part's grid replaces the base's)
            for t in having or targets:
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
