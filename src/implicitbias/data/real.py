"""Real data shipped inside a package: two classes of scikit-learn's digits (8 x 8 images, 1797 in all,
no download), the default stand-in for CIFAR-10 in Frei et al. 2023's Fig. 2 experiment (S2)."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import pydantic

from implicitbias._spec import ConfigError
from implicitbias.data.dataset import Dataset, DataSpec, streams

Digit = Annotated[int, pydantic.Field(ge=0, le=9)]


def preprocess(X: np.ndarray, X_test: np.ndarray | None, how: str):
    """Features already in [0, 1]; "standardise": per-feature mean 0 and variance 1 on the training set
    (constant features only centred); "unit_norm": centre by the training mean, then each row to norm 1;
    "unit_interval": unchanged. Statistics come from the training set only."""
    if how == "unit_interval":
        return X, X_test
    mean = X.mean(axis=0)
    if how == "standardise":
        std = X.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        f = lambda Z: (Z - mean) / std
    else:

        def f(Z):
            Z = Z - mean
            norms = np.linalg.norm(Z, axis=1, keepdims=True)
            return Z / np.where(norms > 0, norms, 1.0)

    return f(X), (None if X_test is None else f(X_test))


class Digits(DataSpec):
    """Two classes of `sklearn.datasets.load_digits`, labels +-1.

    classes: a pair (c_0, c_1) of digits, y = -1 for c_0 and +1 for c_1 (default (0, 1)), or "odd_even"
    (y = +1 for odd digits, -1 for even ones, all 1797 images). Pixels are scaled from {0..16} to [0, 1],
    then `features` ("standardise" default, "unit_norm", "unit_interval"; see `preprocess`).
    The train/test split is a permutation drawn from the seed: round(test_fraction * N) test images;
    n (optional) subsamples the training set. info: digits (original label of each training point).
    """

    name: Literal["digits"] = "digits"
    classes: tuple[Digit, Digit] | Literal["odd_even"] = (0, 1)
    features: Literal["standardise", "unit_norm", "unit_interval"] = "standardise"
    test_fraction: float = pydantic.Field(0.25, ge=0.0, lt=1.0)
    n: int | None = pydantic.Field(None, ge=1)

    @pydantic.model_validator(mode="after")
    def _distinct(self):
        if self.classes != "odd_even" and self.classes[0] == self.classes[1]:
            raise ValueError(f"classes = {self.classes}: expected two different digits")
        return self

    def _select(self):
        from sklearn.datasets import load_digits

        X, digit = load_digits(return_X_y=True)
        if self.classes == "odd_even":
            return X, digit, np.where(digit % 2 == 1, 1.0, -1.0)
        keep = np.isin(digit, self.classes)
        return X[keep], digit[keep], np.where(digit[keep] == self.classes[1], 1.0, -1.0)

    def generate(self, seed: int) -> Dataset:
        (rng,) = streams(seed, 1)
        X, digit, y = self._select()
        X = X / 16.0
        perm = rng.permutation(len(y))
        n_test = int(round(self.test_fraction * len(y)))
        test, train = perm[:n_test], perm[n_test:]
        if self.n is not None:
            if self.n > train.size:
                raise ConfigError(
                    f"Digits.n = {self.n} is not allowed: only {train.size} training images of classes "
                    f"{self.classes} remain after the test split (expected n <= {train.size})"
                )
            train = train[: self.n]
        X_train, X_test = preprocess(X[train], X[test] if n_test else None, self.features)
        y_test = y[test] if n_test else None
        info = {"digits": digit[train], "classes": self.classes}
        return Dataset(X_train, y[train], X_test, y_test, "classification", info).validate()
