"""What a training method is: a spec that owns its stepping (like a diffrax solver owns `init`/`step`).

`train` never asks which method it holds.  It asks the method for

- `checkpoint_grid(checkpoints, stop)`: the steps (or times) at which a run records;
- `stepper(problem, stop, n)`: the pure pair `(init_carry, advance)` for one member of a batch, which
  `train` vmaps and jits: `init_carry(hp, theta, const, X, y) -> carry` and
  `advance(carry, target, hp, const, X, y) -> carry` (advance to the next checkpoint `target`);
- `clock_readings(carry, hp)`: the host-side step, time and gradient evaluations of every member (the time of
  GD step k is t = lr k, so that discrete and continuous methods share one axis);
- `failure_time(carry, hp)`: the time at which a failed member failed (for its message);
- `check_data(n)`: refuse settings that do not fit the data before anything compiles;
- `dtype`: the floating-point type a step computes in (float64 by default; the discrete methods also take
  float32, with the parameters stored as float32; gradient flow is float64 only);

and it declares `traced_fields` (spec fields that may differ between members of one compiled call;
their per-member values travel in `hp` under the same names) and `is_adaptive` (members move at their
own pace, as with an adaptive ODE solver: `train` regroups the members still running, and sweeps give
each run its own call).  The carry is a dict with at least `theta`, `step`, `fail_step`, `status`, `loss`.

`DiscreteMethod` is the shared part of the fixed-step methods: an optax transformation
(`optimizer(hp)`) stepped by the compiled `lax.while_loop` of `implicitbias.training.discrete`.
A new discrete method declares its optimizer (and, if it samples data, `minibatch`); nothing else
in the package changes.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
import pydantic

from implicitbias._spec import Spec
from implicitbias.training import checkpoints as _checkpoints
from implicitbias.training.discrete import make_discrete


class Method(Spec, abc.ABC):
    """A training method (see the module docstring for the interface `train` relies on)."""

    #: spec fields whose values may differ between the members of one compiled call
    traced_fields: ClassVar[tuple[str, ...]] = ()
    #: members advance at their own pace (adaptive steps): regroup running members, one run per call
    is_adaptive: ClassVar[bool] = False

    #: the floating-point type of the parameters, the data and the arithmetic of a step (float32: PyTorch's
    #: default, in which the papers' own code bases trained); metrics are recorded in float64 either way
    dtype: Literal["float32", "float64"] = "float64"

    @abc.abstractmethod
    def checkpoint_grid(self, checkpoints: int | Sequence[float], stop) -> np.ndarray:
        """The steps (or times) at which a run records, from a count or an explicit list."""

    @abc.abstractmethod
    def stepper(self, problem, stop, n: int):
        """(init_carry, advance) for one member; the caller vmaps and jits them."""

    @abc.abstractmethod
    def clock_readings(self, carry, hp) -> dict[str, np.ndarray]:
        """{"step", "time", "grad_evals"} of every member, as host arrays."""

    def failure_time(self, carry, hp) -> np.ndarray:
        """The time at which each member failed (or now, for members that did not)."""
        return self.clock_readings(carry, hp)["time"]

    def check_model(self, model, loss) -> None:
        """Raise ConfigError, naming the field, for a model or loss the method does not apply to (default: none)."""

    def check_data(self, n: int) -> None:
        """Raise ConfigError for settings that do not fit n training points (default: none)."""

    def traced_values(self) -> dict[str, float]:
        """The values of the traced fields of this spec."""
        return {name: getattr(self, name) for name in self.traced_fields}


class DiscreteMethod(Method):
    """A fixed-step method: theta_{k+1} = theta_k + optimizer update, with t = lr k.

    Subclasses give `optimizer(hp)` (an optax `GradientTransformation`, whose `update` receives the
    loss of the step as the extra argument `value`, as in optax) and may override `minibatch`."""

    traced_fields: ClassVar[tuple[str, ...]] = ("lr",)
    #: the step sees a random part of the data: the loop then never stops on the (batch) loss
    stochastic: ClassVar[bool] = False

    lr: float = pydantic.Field(0.01, gt=0.0, allow_inf_nan=False)  # a finite, positive step size

    @abc.abstractmethod
    def optimizer(self, hp):
        """The optax transformation of one member, with its learning rate hp["lr"] (traced)."""

    def minibatch(self, hp, step, X, y):
        """The data the gradient of step `step` is taken on (default: all of it)."""
        return X, y

    def checkpoint_grid(self, checkpoints, stop) -> np.ndarray:
        return _checkpoints.step_grid(checkpoints, stop.max_steps)

    def stepper(self, problem, stop, n: int):
        return make_discrete(problem, self, stop, n)

    def clock_readings(self, carry, hp) -> dict[str, np.ndarray]:
        step = np.asarray(carry["step"])
        return {"step": step, "time": step * np.asarray(hp["lr"]), "grad_evals": step}

    def failure_time(self, carry, hp) -> np.ndarray:
        return np.asarray(carry["fail_step"]) * np.asarray(hp["lr"])
