"""The `Dataset` every generator returns, and the `DataSpec` base class of the generators.

A generator is a frozen, validated `Spec` with a `name` discriminator; `generate(seed)` draws a data
set from `np.random.default_rng(seed)` only (nothing global), so the same seed gives identical arrays.
Independent streams for the pieces of a draw (a mean direction, the training set, the test set) come
from `rng.spawn`, so that changing `n_test` never changes the training set.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Literal

import numpy as np

from implicitbias._spec import ConfigError, Spec

Task = Literal["classification", "regression", "multiclass"]


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """Training (and optional test) data.

    X: (n, d) float64 inputs, rows x_i.  y: (n,) float64 labels, in {-1, +1} when task is
    "classification", real when "regression", class indices 0..k-1 when "multiclass".
    Integer and float32 arrays are converted to float64 when the Dataset is built.
    X_test, y_test: a held-out set or None.
    info: generator-specific extras (the mean mu, a teacher v*, the true sparse w*, W* of matrix
    sensing, the number of redraws, ...), documented by each generator.
    """

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    task: Task = "classification"
    info: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        # Integer and float16/32 arrays (a researcher's PyTorch tensors, pixel counts) hold exact float64 values:
        # they become float64 here, so that `train` runs on those values whatever the input type (a float32
        # method casts from there, exactly).  Anything else (bool, complex, strings) is left for `validate`
        # to refuse by name.
        for name in ("X", "y", "X_test", "y_test"):
            a = getattr(self, name)
            if a is not None and _real(np.asarray(a).dtype):
                object.__setattr__(self, name, np.asarray(a, dtype=np.float64))

    @property
    def n(self) -> int:
        return int(np.shape(self.X)[0])

    @property
    def d(self) -> int:
        return int(np.shape(self.X)[1])

    @property
    def has_test(self) -> bool:
        return self.X_test is not None

    def validate(self) -> Dataset:
        """Raise `ConfigError` (before any compute) for empty data, wrong shapes, non-finite entries,
        or classification labels outside {-1, +1}. Returns the data set, for chaining."""
        if self.task not in ("classification", "regression", "multiclass"):
            raise ConfigError(
                f"data.task = {self.task!r} is not allowed: expected one of 'classification', 'regression', "
                "'multiclass'"
            )
        _check_pair("X", "y", self.X, self.y, self.task)
        if (self.X_test is None) != (self.y_test is None):
            raise ConfigError(
                "data.X_test and data.y_test must both be given or both be None "
                f"(got X_test {_kind(self.X_test)}, y_test {_kind(self.y_test)})"
            )
        if self.X_test is not None:
            _check_pair("X_test", "y_test", self.X_test, self.y_test, self.task)
            if self.X_test.shape[1:] != self.X.shape[1:]:
                raise ConfigError(
                    f"data.X_test has shape {self.X_test.shape}: "
                    f"expected {self.X.shape[1]} columns like data.X"
                )
        return self


def _real(dtype: np.dtype) -> bool:
    """Real numbers: integers and floats (not bool, not complex)."""
    return np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)


def _kind(a) -> str:
    return "None" if a is None else f"an array of shape {np.shape(a)}"


def _check_pair(xname: str, yname: str, X, y, task: str) -> None:
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ConfigError(f"data.{xname} has shape {X.shape}: expected a 2-D array (n, d)")
    if y.ndim != 1:
        raise ConfigError(f"data.{yname} has shape {y.shape}: expected a 1-D array (n,)")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ConfigError(f"data.{xname} has shape {X.shape}: expected at least one point and one feature")
    if X.shape[0] != y.shape[0]:
        raise ConfigError(
            f"data.{xname} has {X.shape[0]} rows but data.{yname} has {y.shape[0]} labels: "
            "expected one label per row"
        )
    for name, a in ((xname, X), (yname, y)):
        if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
            raise ConfigError(f"data.{name} has dtype {a.dtype}: expected real numbers")
        bad = ~np.isfinite(a)
        if bad.any():
            first = np.argwhere(bad)[0]
            where = f"row {first[0]}, column {first[1]}" if a.ndim == 2 else f"index {first[0]}"
            raise ConfigError(
                f"data.{name} contains {int(bad.sum())} non-finite entries (first at {where}): "
                f"value {a[tuple(first)]!r} is not allowed: expected finite numbers"
            )
    if task == "multiclass":
        wrong = (y < 0) | (y != np.round(y))
        if wrong.any():
            i = int(np.argmax(wrong))
            raise ConfigError(
                f"data.{yname} contains {int(wrong.sum())} labels that are not class indices "
                f"(first at index {i}: {y[i]!r}): multiclass data expects integer labels 0..k-1"
            )
    if task == "classification":
        wrong = (y != 1) & (y != -1)
        if wrong.any():
            i = int(np.argmax(wrong))
            raise ConfigError(
                f"data.{yname} contains {int(wrong.sum())} labels outside {{-1, +1}} "
                f"(first at index {i}: {y[i]!r}): classification expects labels -1 or +1"
            )


class DataSpec(Spec, abc.ABC):
    """A data generator: a frozen spec whose `generate(seed)` returns a validated `Dataset`."""

    @abc.abstractmethod
    def generate(self, seed: int) -> Dataset:
        """Draw the data set from `np.random.default_rng(seed)`."""


def streams(seed: int, k: int) -> list[np.random.Generator]:
    """k independent generators spawned from `np.random.default_rng(seed)` (the seed is checked)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed = {seed!r} is not allowed: expected an integer >= 0")
    return np.random.default_rng(int(seed)).spawn(k)


def random_orthonormal(rng: np.random.Generator, d: int, k: int) -> np.ndarray:
    """k orthonormal vectors in R^d (rows of a (k, d) array), Haar-distributed (QR with sign fix)."""
    Q, R = np.linalg.qr(rng.standard_normal((d, k)))
    return (Q * np.sign(np.where(np.diag(R) == 0, 1.0, np.diag(R)))).T


def signs(rng: np.random.Generator, n: int) -> np.ndarray:
    """n labels uniform in {-1, +1} (float64)."""
    return np.where(rng.random(n) < 0.5, -1.0, 1.0)
