"""`RunSpec`: one training run as a frozen, validated value.

A run is determined by its model, its data (generator spec and seed), loss, method, stopping rule,
init seed and scale, checkpoints and what it records.  Its content hash, together with
`RESULTS_FORMAT`, is its identity: the file a run is stored in is named after it, so a changed
config (or a change of what a run means, which bumps `RESULTS_FORMAT`) never reuses a stale result.

Like an equinox module that separates its static fields from its arrays, a spec splits into a
*static* part (shapes, model structure, method kind, stopping rule, ...) that fixes the compiled
program, and *traced* values that can vary inside one vmapped call.  The traced fields are declared once,
on the spec types: `RunSpec.traced_fields` (init seed and scale, data seed), `Method.traced_fields` (the
learning rate) and `Model.traced_fields` (a leaky slope); `static_key` leaves them out, and the batch of a
compiled call (`implicitbias.training.batch.Batch.of`) reads them.  `group_runs` splits a list of runs into
compiled calls by their static part.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal

import pydantic

from implicitbias._spec import INT_MAX, ConfigError, Spec, refuse
from implicitbias.data import AnyData
from implicitbias.losses import Loss
from implicitbias.models import AnyModel
from implicitbias.training.methods import AnyMethod
from implicitbias.training.stopping import Stop

#: bump when what a stored run means changes (metrics recorded, their definition, the file layout):
#: every stored run of an older format is then retrained instead of loaded
RESULTS_FORMAT = 2
#: the largest initialisation scale: the experiments use at most 100, and at 1e308 the first forward pass
#: overflows float64, after which gradient flow's adaptive solver never advances (a run that hangs)
INIT_SCALE_MAX = 1e6
#: the most checkpoints a run records: every metric is stored over (run, checkpoint), and a mistyped
#: `checkpoints=1000000000` would be refused only after the memory ran out
MAX_CHECKPOINTS = 100_000


def check_checkpoint_count(value):
    """`checkpoints` (a count or a list of steps/times) within MAX_CHECKPOINTS; returns it."""
    n = len(value) if isinstance(value, list) else value
    if isinstance(n, int) and n > MAX_CHECKPOINTS:
        raise refuse(f"at most {MAX_CHECKPOINTS} checkpoints (a count, or a list of steps or times)")
    return value


class RunSpec(Spec):
    """Everything that determines one run, plus two labels (`part`, `trial`) that say where the run
    sits in its experiment.  `seed` seeds the initialisation, `data_seed` the data draw."""

    #: run fields whose values may differ between the members of one compiled call
    traced_fields: ClassVar[tuple[str, ...]] = ("seed", "init_scale", "data_seed")
    #: fields that only say where the run sits in its experiment: they never fix the compiled program
    label_fields: ClassVar[tuple[str, ...]] = ("part", "trial")

    model: AnyModel
    data: AnyData
    data_seed: int = pydantic.Field(0, ge=0, le=INT_MAX)  # the generators' range: int64
    loss: Loss = Loss()
    method: AnyMethod
    stop: Stop = Stop()
    seed: int = pydantic.Field(0, ge=0, le=INT_MAX)  # jax.random.PRNGKey overflows above int64
    init_scale: float = pydantic.Field(1.0, ge=0.0, le=INIT_SCALE_MAX, allow_inf_nan=False)
    checkpoints: int | list[float] = 30
    reference: Literal["none", "svm"] = "none"
    kkt: bool = True
    keep_trajectory: bool = False
    part: str = ""
    trial: int = pydantic.Field(0, ge=0)

    @pydantic.field_validator("checkpoints")
    @classmethod
    def _checkpoints_count(cls, value):
        return check_checkpoint_count(value)

    @pydantic.model_validator(mode="after")
    def _checkpoints_resolve(self):
        # fails here, with the rest of the config, rather than after training started
        self.checkpoint_grid()
        return self

    def checkpoint_grid(self):
        """The steps (or times) at which the run records (`Method.checkpoint_grid`)."""
        return self.method.checkpoint_grid(self.checkpoints, self.stop)

    # -- identity -----------------------------------------------------------------------------------
    def key(self) -> str:
        """The run's identity: a hash of its content and of `RESULTS_FORMAT`.  `method.dtype` enters only when
        it is not the default float64, gradient flow's `tail_rtol` and `tail_below` only when a tail tolerance
        is set, and its `kink_slots` and `kink_candidates` only with kinks = "slide", so runs stored before those
        fields existed keep their identity."""
        dump = self.model_dump(mode="json")
        if dump["method"].get("dtype") == "float64":
            dump["method"].pop("dtype")
        if dump["method"].get("kind") == "gf" and dump["method"].get("tail_rtol") is None:
            dump["method"].pop("tail_rtol", None)
            dump["method"].pop("tail_below", None)
        if dump["method"].get("kind") == "gf" and dump["method"].get("kinks", "cross") == "cross":
            for name in ("kinks", "kink_slots", "kink_candidates"):
                dump["method"].pop(name, None)
        return _digest({"format": RESULTS_FORMAT, **dump})

    def compute_key(self) -> str:
        """The identity of the computation alone: `key` with the label fields (`part`, `trial`) left out.  Two runs
        with equal compute keys train the same program from the same seeds and give the same arrays, whatever
        experiment or part they sit in (`RunStore.adopt` copies one for the other)."""
        return self.model_copy(update={field: type(self).model_fields[field].default
                                       for field in self.label_fields}).key()

    def data_key(self) -> str:
        """The identity of the run's training/test data (generator spec and seed)."""
        return _digest({"data": self.data.model_dump(mode="json"), "seed": self.data_seed})

    def to_json(self) -> str:
        """The spec as JSON (sorted keys), as stored in a run file's attribute `spec`."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """The spec stored by `to_json` (validated again)."""
        return cls(**json.loads(text))

    # -- static / traced ------------------------------------------------------------------------------
    def traced_model_fields(self) -> tuple[str, ...]:
        """The model's traced fields (`Model.traced_fields`): they can differ between members of one compiled
        call."""
        return self.model.traced_fields

    def static_key(self) -> str:
        """What fixes the compiled program: runs with equal static keys can share one vmapped call.  It is the
        spec without its traced fields (its own, the model's and the method's) and its labels."""
        dump = self.model_dump(mode="json")
        for name in (*self.traced_fields, *self.label_fields):
            dump.pop(name)
        for name in self.model.traced_fields:
            dump["model"].pop(name)
        for name in self.method.traced_fields:
            dump["method"].pop(name)
        return _digest(dump)

    def label(self) -> str:
        """A short human-readable name, for logs."""
        head = f"{self.part}: " if self.part else ""
        bits = [f"{self.model.kind}", f"{self.data.name}", f"trial {self.trial}", f"init_scale {self.init_scale:g}"]
        d = getattr(self.data, "d", None)
        if d is not None:
            bits.insert(2, f"d={d}")
        scheme = getattr(self.data, "scheme", None)
        if scheme is not None:
            bits.insert(2, str(scheme))
        bits.append(" ".join([self.method.kind, *(f"{k} {v:g}" for k, v in self.method.traced_values().items())]))
        return head + ", ".join(bits)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


def field_value(spec: RunSpec, path: str) -> Any:
    """The value of a dotted spec field, e.g. `data.d`, `method.kind`, `init_scale`."""
    node: Any = spec
    for part in path.split("."):
        if not hasattr(node, part):
            raise ConfigError(f"{path} is not a run field: expected one of {sorted(RunSpec.model_fields)} "
                              "or a dotted path below model, data, loss, method, stop")
        node = getattr(node, part)
    return node


def group_by(runs: Sequence[RunSpec], *fields: str) -> dict[tuple, list[int]]:
    """Indices of `runs` grouped by the values of the given dotted fields, in first-seen order."""
    out: dict[tuple, list[int]] = {}
    for i, spec in enumerate(runs):
        out.setdefault(tuple(field_value(spec, f) for f in fields), []).append(i)
    return out


def group_runs(runs: Iterable[RunSpec], *, max_flow: int = 1, max_discrete: int = 16) -> list[list[RunSpec]]:
    """Split runs into compiled calls: runs with equal static parts, in chunks of at most `max_flow`
    (gradient flow: an adaptive vmapped solve moves at its slowest member's pace, so on a CPU one
    member per call) or `max_discrete` (fixed-step methods advance in lockstep; the defaults are
    `implicitbias.sweeps.sweep.task_sizes` on a CPU).  The
    split depends only on the runs, never on the number of workers."""
    by_static: dict[str, list[RunSpec]] = {}
    for spec in runs:
        by_static.setdefault(spec.static_key(), []).append(spec)
    groups = []
    for members in by_static.values():
        size = max_flow if members[0].method.is_adaptive else max_discrete
        groups += [members[i:i + size] for i in range(0, len(members), size)]
    return groups
