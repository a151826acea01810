"""Matrix sensing and completion (S8): observations y_i = <A_i, W*> = trace(A_i^T W*), passed to the
models as inputs x_i = vec(A_i) (row-major, matching `MatrixFactorization`, which computes
f(x) = sum(W.reshape(-1) * x)). Gunasekar et al. 2017; Arora et al. 2019; Razin & Cohen 2020."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pydantic

from implicitbias.data.dataset import Dataset, DataSpec, streams


class _LowRank(DataSpec):
    """W* = U V^T (U, V with iid N(0, 1) entries, d x r; U U^T if psd), rescaled to ||W*||_F =
    frobenius_norm, by default sqrt(d) (so that the d x d entries have mean square 1/d)."""

    d: int = pydantic.Field(10, ge=1)
    rank: int = pydantic.Field(2, ge=1)
    psd: bool = False
    frobenius_norm: float | None = pydantic.Field(None, gt=0.0)

    @pydantic.model_validator(mode="after")
    def _rank_le_d(self):
        if self.rank > self.d:
            raise ValueError(f"rank = {self.rank} > d = {self.d}: a d x d matrix has rank at most d")
        return self

    def target(self, rng) -> np.ndarray:
        U = rng.standard_normal((self.d, self.rank))
        W = U @ U.T if self.psd else U @ rng.standard_normal((self.d, self.rank)).T
        norm = self.frobenius_norm if self.frobenius_norm is not None else np.sqrt(self.d)
        return W * (norm / np.linalg.norm(W))


class MatrixSensing(_LowRank):
    """Matrix sensing (S8): n Gaussian measurement matrices A_i (iid N(0, 1) entries), y_i = <A_i, W*>.
    X has rows vec(A_i), shape (n, d*d). Optional n_test further measurements. info: W_star."""

    name: Literal["matrix_sensing"] = "matrix_sensing"
    n: int = pydantic.Field(50, ge=1)
    n_test: int = pydantic.Field(0, ge=0)

    def generate(self, seed: int) -> Dataset:
        r_w, r_train, r_test = streams(seed, 3)
        W = self.target(r_w)
        X = r_train.standard_normal((self.n, self.d * self.d))
        X_test = r_test.standard_normal((self.n_test, self.d * self.d)) if self.n_test else None
        y_test = X_test @ W.reshape(-1) if self.n_test else None
        return Dataset(X, X @ W.reshape(-1), X_test, y_test, "regression", {"W_star": W}).validate()


def _entry_inputs(d: int, flat: np.ndarray) -> np.ndarray:
    """Rows vec(e_p e_q^T) for the row-major flat indices p * d + q."""
    X = np.zeros((flat.size, d * d))
    X[np.arange(flat.size), flat] = 1.0
    return X


class MatrixCompletion(_LowRank):
    """Matrix completion (S8): n distinct entries (p_i, q_i) chosen uniformly at random, A_i = e_p e_q^T,
    y_i = W*_{p q}. X has rows vec(A_i), shape (n, d*d). The test set (n_test) is made of distinct
    *unobserved* entries. info: W_star, observed (n, 2) index pairs, mask (d, d) of observed entries."""

    name: Literal["matrix_completion"] = "matrix_completion"
    n: int = pydantic.Field(50, ge=1)
    n_test: int = pydantic.Field(0, ge=0)

    @pydantic.model_validator(mode="after")
    def _entries(self):
        if self.n + self.n_test > self.d * self.d:
            raise ValueError(
                f"n + n_test = {self.n + self.n_test} > d * d = {self.d * self.d}: "
                "observed and test entries are distinct entries of a d x d matrix"
            )
        return self

    def generate(self, seed: int) -> Dataset:
        r_w, r_entries = streams(seed, 2)
        W = self.target(r_w)
        flat = r_entries.permutation(self.d * self.d)
        train, test = flat[: self.n], flat[self.n : self.n + self.n_test]
        mask = np.zeros(self.d * self.d, dtype=bool)
        mask[train] = True
        X_test = _entry_inputs(self.d, test) if self.n_test else None
        y_test = W.reshape(-1)[test] if self.n_test else None
        info = {
            "W_star": W,
            "observed": np.stack(np.divmod(train, self.d), axis=1),
            "mask": mask.reshape(self.d, self.d),
        }
        X = _entry_inputs(self.d, train)
        return Dataset(X, W.reshape(-1)[train], X_test, y_test, "regression", info).validate()


class RazinCohen(DataSpec):
    """The 2 x 2 completion counterexample of Razin & Cohen 2020 (S8): observed W_12 = 1, W_21 = 1,
    W_22 = 0, W_11 unobserved. Every completion has det W = -W_12 W_21 = -1 (when W_22 = 0), so from
    det W(0) > 0 a depth >= 2 factorisation reaches zero loss only with |W_11| -> infinity.
    The seed is ignored (the data set is fixed). info: observed (0-based index pairs), unobserved."""

    name: Literal["razin_cohen"] = "razin_cohen"

    def generate(self, seed: int) -> Dataset:
        streams(seed, 1)  # checks the seed like every generator
        observed = np.array([[0, 1], [1, 0], [1, 1]])
        X = _entry_inputs(2, observed[:, 0] * 2 + observed[:, 1])
        info = {"observed": observed, "unobserved": np.array([[0, 0]])}
        return Dataset(X, np.array([1.0, 1.0, 0.0]), None, None, "regression", info).validate()
