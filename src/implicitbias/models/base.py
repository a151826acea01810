"""The model abstraction.

A model is a frozen, validated `Spec` whose fields describe the architecture.  Its parameters are
a pytree `theta` (the trained parameters) plus a pytree `const` of fixed arrays (for instance the
fixed outer layer of Frei's network); both come from `init(key, d, scale)`.  `apply(theta, const, x)`
evaluates the network on one unbatched input, `predict` maps it over the rows of X with `vmap`.

A model class declares in `traced_fields` its numeric fields that may differ between the members of one
compiled call (a leaky slope, the noise of an initialisation): runs that differ only in them (and in the run's
own traced values: seed, init scale, the method's `traced_fields`) share one vmapped program, in which each
member's value replaces the field through `model.replace(...)` as a traced array.  Every other field (a width,
a depth, an activation) fixes the program.  The declaration is the only list of them: `RunSpec.static_key`,
the batch of a compiled call (`implicitbias.training.batch.Batch`) and `recompute` read it.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import jax

from implicitbias._spec import Spec


class Model(Spec, abc.ABC):
    """Abstract model: see the module docstring."""

    #: float fields whose values may differ between the members of one compiled call (traced, not static)
    traced_fields: ClassVar[tuple[str, ...]] = ()

    def traced_values(self) -> dict[str, float]:
        """The values of the traced fields of this spec."""
        return {name: getattr(self, name) for name in self.traced_fields}

    @abc.abstractmethod
    def init(self, key, d: int, scale):
        """(theta, const) for inputs of dimension d at init scale `scale`."""

    @abc.abstractmethod
    def apply(self, theta, const, x):
        """The scalar output f(x; theta) on one input x of shape (d,) (or the model's input shape)."""

    @property
    def homogeneity(self) -> int | None:
        """L_h with f(x; c theta) = c^L_h f(x; theta) for c > 0, or None if not homogeneous."""
        return None

    def weight_matrices(self, theta, const) -> dict:
        """Named weight matrices whose spectral quantities (stable rank, norms) are recorded."""
        return {}

    def linear_predictor(self, theta, const):
        """A vector z with f(x) compared against <z, x> (end-to-end predictor), or None."""
        return None

    def predict(self, theta, const, X):
        return jax.vmap(lambda x: self.apply(theta, const, x))(X)
