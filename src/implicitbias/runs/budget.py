"""Memory a sweep needs, estimated before anything is drawn or compiled, and refused when it cannot fit.

For every compiled call (a group of runs, `group_runs`): the parameters of each member (their shapes
from `jax.eval_shape` of the model's init: nothing is allocated) times the working copies the method
keeps (iterate, gradient, previous iterate and optimiser state for discrete methods; the stages of the
adaptive solver for gradient flow), the hidden activations of a forward pass over the data, the data
sets (training and test inputs), and the recorded trajectory when `keep_trajectory` is set.  The
largest call must fit in the memory available to one worker.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence

import jax

from implicitbias._spec import ConfigError
from implicitbias.runs.spec import RunSpec, group_runs

#: working copies of the parameters per member: discrete methods (theta, gradient, previous theta,
#: optimiser state), gradient flow (RKC/Runge-Kutta stages, error estimate, previous state)
COPIES = {"discrete": 5, "flow": 12}
BYTES = 8  # float64
#: data generators whose inputs are vectorised d x d matrices
MATRIX_DATA = ("matrix_sensing", "matrix_completion")


@dataclasses.dataclass(frozen=True)
class Estimate:
    params: int  # parameters of one member
    data_bytes: int
    bytes: int  # the whole call
    members: int
    field: str  # the field that dominates


def input_size(spec: RunSpec) -> tuple[int | None, int]:
    """(input dimension, number of training + test points), from the data spec's fields."""
    data = spec.data
    d = getattr(data, "d", None)
    if d is not None and data.name in MATRIX_DATA:
        d = d * d
    if d is None:
        d = {"digits": 64, "cifar10": 3072}.get(data.name)
    n = int(getattr(data, "n", 0) or 0) + int(getattr(data, "n_test", 0) or 0)
    return d, n


def parameter_count(spec: RunSpec, d: int) -> int:

    shapes = jax.eval_shape(lambda key: spec.model.init(key, d, 1.0), jax.random.PRNGKey(0))
    return int(sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(shapes)))


def estimate(group: Sequence[RunSpec]) -> Estimate | None:
    spec = group[0]
    d, n = input_size(spec)
    if d is None:
        return None
    params = parameter_count(spec, d)
    members = len(group)
    copies = COPIES["flow" if spec.method.is_adaptive else "discrete"]
    if spec.keep_trajectory and isinstance(spec.checkpoints, int):
        copies += spec.checkpoints
    elif spec.keep_trajectory:
        copies += len(spec.checkpoints)
    hidden = max(params // max(d, 1), 1)  # units fed by the inputs (width of the first layer)
    per_member = BYTES * (copies * params + n * hidden)
    datasets = len({r.data_key() for r in group})
    data_bytes = BYTES * datasets * n * (d + 1)
    width = "model.width" if "width" in type(spec.model).model_fields else "model"
    field = width if members * copies * params >= datasets * n * d else ("data.d" if hasattr(spec.data, "d") else "data.n")
    return Estimate(params, data_bytes, members * per_member + data_bytes, members, field)


def available_bytes() -> int:
    """Memory available on this machine now (MemAvailable), or 8 GiB where /proc/meminfo is absent."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def check_fits(runs: Sequence[RunSpec], workers: int | None) -> None:
    """Raise ConfigError when the largest compiled call of the sweep cannot fit in one worker's share of
    this machine's memory (workers None: one per usable core; 0: everything in this process; at most one
    worker per usable core is counted)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    # local workers are one per core at most (the command line refuses more): a larger count would only
    # shrink each worker's share and blame the model's size for it
    n_workers = cores if workers is None else min(max(workers, 1), cores)
    share = available_bytes() // n_workers
    worst = None
    for group in group_runs(runs):
        e = estimate(group)
        if e is not None and (worst is None or e.bytes > worst.bytes):
            worst = e
    if worst is not None and worst.bytes > 0.8 * share:
        if worst.data_bytes > 0.5 * share:  # the data alone cannot fit: the data size is what to change
            worst = dataclasses.replace(worst, field=_data_field(runs[0]))
        raise ConfigError(
            f"{worst.field} is too large for this machine: one compiled call of {worst.members} run(s) needs about "
            f"{_gib(worst.bytes)} ({worst.params:,} parameters per run, {_gib(worst.data_bytes)} of data), more "
            f"than the {_gib(share)} available to each worker here; reduce {worst.field} (or run on a larger "
            "machine with --scheduler or --cluster)")


def _data_field(spec: RunSpec) -> str:
    """The data field that makes the data large: the number of points or the dimension, whichever is larger."""
    d, n = input_size(spec)
    if not hasattr(spec.data, "d") or (hasattr(spec.data, "n") and n >= (d or 0)):
        return "data.n" if getattr(spec.data, "n_test", 0) in (0, None) else "data.n (with data.n_test)"
    return "data.d"


def _gib(b: float) -> str:
    return f"{b / (1 << 30):.3g} GiB" if b >= 1 << 27 else f"{b / (1 << 20):.3g} MiB"
