"""Pairwise orthogonal inputs with labels of both signs (Boursier, Pillaud-Vivien, Flammarion 2022; S12)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pydantic

from implicitbias.data.dataset import Dataset, DataSpec, random_orthonormal, signs, streams


class Orthogonal(DataSpec):
    """Pairwise orthogonal inputs of Boursier et al. 2022 (S12): x_i = r_i q_i with q_1..q_n random
    orthonormal vectors in R^d (d >= n, QR of a Gaussian matrix) and norms r_i ~ Unif[norm_min, norm_max].

    Labels y_i = s_i u_i, u_i ~ Unif[label_min, label_max] (bounded away from 0 by default), signs s_i:
    "balanced" (floor(n/2) negative, in random positions), "random" (uniform) or "positive".
    No test set. info: norms.
    """

    name: Literal["orthogonal"] = "orthogonal"
    n: int = pydantic.Field(10, ge=1)
    d: int = pydantic.Field(10, ge=1)
    norm_min: float = pydantic.Field(1.0, gt=0.0)
    norm_max: float = pydantic.Field(1.0, gt=0.0)
    label_min: float = pydantic.Field(0.5, ge=0.0)
    label_max: float = pydantic.Field(1.0, gt=0.0)
    label_signs: Literal["balanced", "random", "positive"] = "balanced"

    @pydantic.model_validator(mode="after")
    def _ranges(self):
        if self.d < self.n:
            raise ValueError(f"d = {self.d} < n = {self.n}: n pairwise orthogonal inputs need d >= n")
        if self.norm_min > self.norm_max:
            raise ValueError(f"norm_min = {self.norm_min} > norm_max = {self.norm_max}: expected min <= max")
        if self.label_min > self.label_max:
            raise ValueError(
                f"label_min = {self.label_min} > label_max = {self.label_max}: expected min <= max"
            )
        return self

    def generate(self, seed: int) -> Dataset:
        r_x, r_y = streams(seed, 2)
        norms = r_x.uniform(self.norm_min, self.norm_max, self.n)
        X = norms[:, None] * random_orthonormal(r_x, self.d, self.n)
        u = r_y.uniform(self.label_min, self.label_max, self.n)
        if self.label_signs == "balanced":
            s = r_y.permutation(np.where(np.arange(self.n) < self.n // 2, -1.0, 1.0))
        elif self.label_signs == "random":
            s = signs(r_y, self.n)
        else:
            s = np.ones(self.n)
        return Dataset(X, s * u, None, None, "regression", {"norms": norms}).validate()
