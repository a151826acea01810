"""Models: one abstraction (`Model`), every architecture of SCIENCE.md as a configuration of it.

`AnyModel`, the field type of a config's `model`, is the union of every installed model: the entry-point group
`implicitbias.models` (implicitbias's own, and those of plugin packages; see `implicitbias.plugins`)."""

from typing import Annotated, Union

import pydantic

from implicitbias import plugins
from implicitbias.models.activations import ACTIVATIONS, activation
from implicitbias.models.base import Model
from implicitbias.models.linear import DeepLinear, DiagonalLinear, Linear, MulticlassLinear, SingleNeuron
from implicitbias.models.matrix_factorization import MatrixFactorization
from implicitbias.models.two_layer import TwoLayer

#: every installed model class, by its `kind`
MODELS: dict[str, type[Model]] = {cls.model_fields["kind"].default: cls for cls in plugins.classes("models", Model)}
#: the type of a config's `model`: any installed model spec, chosen by its `kind`
AnyModel = Annotated[Union[tuple(MODELS.values())], pydantic.Field(discriminator="kind")]  # noqa: UP007

__all__ = [
    "ACTIVATIONS",
    "MODELS",
    "AnyModel",
    "DeepLinear",
    "DiagonalLinear",
    "Linear",
    "MatrixFactorization",
    "Model",
    "MulticlassLinear",
    "SingleNeuron",
    "TwoLayer",
    "activation",
]
