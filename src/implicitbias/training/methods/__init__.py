"""Training methods, interchangeable in `train` (SCIENCE.md section 0 and S7).

Each method is a spec that owns its stepping (`methods.base.Method`): gradient descent, SGD and
normalised GD are optax transformations stepped in a compiled `lax.while_loop`
(`gradient_descent`, `implicitbias.training.discrete`); mirror descent is one too, with its dual
variable as optimizer state (`mirror`); gradient flow is integrated by diffrax with error control
(`gradient_flow`, `implicitbias.training.flow`).  GD step k and GF time t = lr k share one time axis.

Adding a method: a spec (a `DiscreteMethod` that declares its optax transformation, or a `Method` with its
own `stepper`) registered in the entry-point group `implicitbias.methods` (see `implicitbias.plugins`):
`AnyMethod` is the union of every installed method.
"""

from typing import Annotated, Union

import pydantic

from implicitbias import plugins
from implicitbias.training.methods.base import DiscreteMethod, Method
from implicitbias.training.methods.gradient_descent import GD, SGD, NormalizedGD
from implicitbias.training.methods.gradient_flow import GradientFlow
from implicitbias.training.methods.mirror import (
    AnyPotential,
    HyperbolicEntropy,
    Lp,
    MirrorDescent,
    mirror_descent,
)

#: every installed method class, by its `kind`
METHODS: dict[str, type[Method]] = {cls.model_fields["kind"].default: cls for cls in plugins.classes("methods", Method)}
#: the type of a config's `method`: any installed method spec, chosen by its `kind`
AnyMethod = Annotated[Union[tuple(METHODS.values())], pydantic.Field(discriminator="kind")]  # noqa: UP007

__all__ = [
    "GD",
    "SGD",
    "AnyMethod",
    "AnyPotential",
    "DiscreteMethod",
    "GradientFlow",
    "HyperbolicEntropy",
    "Lp",
    "METHODS",
    "Method",
    "MirrorDescent",
    "NormalizedGD",
    "mirror_descent",
]
