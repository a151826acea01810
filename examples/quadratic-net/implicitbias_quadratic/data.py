"""The teacher of a quadratic network: Gaussian inputs labelled by a low-rank PSD quadratic form."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pydantic

from implicitbias.data.dataset import Dataset, DataSpec, streams


class QuadraticTeacher(DataSpec):
    """x_i ~ N(0, I_d) and y_i = x_i^T M* x_i, M* = U U^T with U (d x rank) of iid N(0, 1/d) entries (PSD, rank
    `rank`, trace ~ rank). n_test further points form the test set. info: M_star."""

    name: Literal["quadratic_teacher"] = "quadratic_teacher"
    d: int = pydantic.Field(10, ge=1)
    rank: int = pydantic.Field(2, ge=1)
    n: int = pydantic.Field(40, ge=1)
    n_test: int = pydantic.Field(0, ge=0)

    @pydantic.model_validator(mode="after")
    def _rank_le_d(self):
        if self.rank > self.d:
            raise ValueError(f"rank = {self.rank} > d = {self.d}: a d x d matrix has rank at most d")
        return self

    def generate(self, seed: int) -> Dataset:
        """Draw M*, the training set and the test set from independent streams of `seed`."""
        r_star, r_train, r_test = streams(seed, 3)
        U = r_star.standard_normal((self.d, self.rank)) / np.sqrt(self.d)
        M = U @ U.T
        X, Xt = r_train.standard_normal((self.n, self.d)), r_test.standard_normal((self.n_test, self.d))
        label = lambda A: np.einsum("ni,ij,nj->n", A, M, A)
        test = (Xt, label(Xt)) if self.n_test else (None, None)
        return Dataset(X, label(X), *test, task="regression", info={"M_star": M}).validate()
