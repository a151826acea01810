"""Models: one abstraction (`Model`), every architecture of SCIENCE.md as a configuration of it."""

from typing import Annotated

import pydantic

from implicitbias.models.activations import ACTIVATIONS, activation
from implicitbias.models.base import Model
from implicitbias.models.linear import DeepLinear, DiagonalLinear, Linear, MulticlassLinear, SingleNeuron
from implicitbias.models.matrix_factorization import MatrixFactorization
from implicitbias.models.two_layer import TwoLayer

AnyModel = Annotated[
    TwoLayer | Linear | DeepLinear | DiagonalLinear | SingleNeuron | MatrixFactorization | MulticlassLinear,
    pydantic.Field(discriminator="kind"),
]

__all__ = [
    "ACTIVATIONS",
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
