"""Data: one `Dataset` container, one generator spec per distribution of SCIENCE.md, and the
near-orthogonality statistics of the data conditions (S1, S3).

Every generator is a frozen `Spec` with a `name` discriminator and `generate(seed) -> Dataset`;
`AnyData` validates a config dict into the right one, `make_dataset(spec, seed)` draws it.
"""

from typing import Annotated, Any, Union

import pydantic

from implicitbias import plugins
from implicitbias._spec import ConfigError
from implicitbias.data.arrays import Arrays
from implicitbias.data.cifar import Cifar10
from implicitbias.data.classification import (
    GaussianMixture,
    KnownSVM2D,
    MulticlassSeparable,
    NearlyOrthogonal,
    NoisyXor,
    Separable,
)
from implicitbias.data.dataset import Dataset, DataSpec
from implicitbias.data.matrices import MatrixCompletion, MatrixSensing, RazinCohen
from implicitbias.data.real import Digits
from implicitbias.data.regression import SparseRegression
from implicitbias.data.stats import NearOrthogonality, near_orthogonality

#: every installed generator class, by its `name`: the entry-point group `implicitbias.data` (implicitbias's own
#: and those of plugin packages; see `implicitbias.plugins`)
GENERATORS: dict[str, type[DataSpec]] = {cls.model_fields["name"].default: cls
                                         for cls in plugins.classes("data", DataSpec)}
#: the type of a config's `data`: any installed generator spec, chosen by its `name`
AnyData = Annotated[Union[tuple(GENERATORS.values())], pydantic.Field(discriminator="name")]  # noqa: UP007


def data_spec(config: DataSpec | dict[str, Any]) -> DataSpec:
    """A generator spec from a spec or a config dict with a `name` key; errors raise ConfigError."""
    if isinstance(config, DataSpec):
        return config
    if not isinstance(config, dict) or config.get("name") not in GENERATORS:
        name = config.get("name") if isinstance(config, dict) else config
        raise ConfigError(
            f"data.name = {name!r} is not allowed: expected one of {plugins.describe_tags(list(GENERATORS))}"
        )
    fields = {k: v for k, v in config.items() if k != "name"}
    return GENERATORS[config["name"]](**fields)


def make_dataset(spec: DataSpec | dict[str, Any], seed: int) -> Dataset:
    """Draw the data set described by `spec` (a generator spec or its config dict) from `seed`."""
    return data_spec(spec).generate(seed)


__all__ = [
    "AnyData",
    "Arrays",
    "Cifar10",
    "DataSpec",
    "Dataset",
    "GENERATORS",
    "Digits",
    "GaussianMixture",
    "KnownSVM2D",
    "MatrixCompletion",
    "MatrixSensing",
    "MulticlassSeparable",
    "NearOrthogonality",
    "NearlyOrthogonal",
    "NoisyXor",
    "RazinCohen",
    "Separable",
    "SparseRegression",
    "data_spec",
    "make_dataset",
    "near_orthogonality",
]
