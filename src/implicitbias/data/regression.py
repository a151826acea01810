"""Under-determined sparse linear regression (n < d) for diagonal linear networks (Woodworth et al.
2020; S6) and for the interpolators of gradient and mirror descent (S7)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pydantic

from implicitbias.data.dataset import Dataset, DataSpec, signs, streams


class SparseRegression(DataSpec):
    """Sparse regression of Woodworth et al. 2020 (S6): x_i ~ N(0, I_d) (scale "none") or N(0, I_d / n)
    (scale "inv_sqrt_n", columns of norm ~ 1), a k-sparse w* with a uniformly random support, and
    y = X w* + noise_std * N(0, 1).

    w_star_values: "signs" gives nonzero entries +-1/sqrt(k) with random signs, "gaussian" N(0, 1) entries
    rescaled, both with ||w*|| = 1; "positive" gives 1/sqrt(k). n < d is required (an interpolating
    regime); the optional test set (n_test) is drawn from the same distribution, noiseless.
    info: w_star, support.
    """

    name: Literal["sparse_regression"] = "sparse_regression"
    n: int = pydantic.Field(40, ge=1)
    d: int = pydantic.Field(100, ge=2)
    k: int = pydantic.Field(5, ge=1)
    w_star_values: Literal["signs", "gaussian", "positive"] = "signs"
    scale: Literal["none", "inv_sqrt_n"] = "none"
    noise_std: float = pydantic.Field(0.0, ge=0.0)
    n_test: int = pydantic.Field(0, ge=0)

    @pydantic.model_validator(mode="after")
    def _sizes(self):
        if self.n >= self.d:
            raise ValueError(
                f"n = {self.n} >= d = {self.d}: sparse regression here is under-determined, n < d"
            )
        if self.k > self.d:
            raise ValueError(f"k = {self.k} > d = {self.d}: the support of w* has at most d entries")
        return self

    def _inputs(self, rng, n):
        c = 1.0 if self.scale == "none" else self.n**-0.5
        return c * rng.standard_normal((n, self.d))

    def generate(self, seed: int) -> Dataset:
        r_w, r_train, r_noise, r_test = streams(seed, 4)
        support = np.sort(r_w.choice(self.d, self.k, replace=False))
        if self.w_star_values == "gaussian":
            values = r_w.standard_normal(self.k)
            values /= np.linalg.norm(values)
        elif self.w_star_values == "signs":
            values = signs(r_w, self.k) / np.sqrt(self.k)
        else:
            values = np.full(self.k, 1.0 / np.sqrt(self.k))
        w = np.zeros(self.d)
        w[support] = values
        X = self._inputs(r_train, self.n)
        y = X @ w + self.noise_std * r_noise.standard_normal(self.n)
        X_test = self._inputs(r_test, self.n_test) if self.n_test else None
        y_test = X_test @ w if self.n_test else None
        info = {"w_star": w, "support": support}
        return Dataset(X, y, X_test, y_test, "regression", info).validate()
