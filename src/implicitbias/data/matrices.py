"""Matrix sensing and completion (S8): observations y_i = <A_i, W*> = trace(A_i^T W*), passed to the
models as inputs x_i = vec(A_i) (row-major, matching `MatrixFactorization`, which computes
f(x) = sum(W.reshape(-1) * x)). Gunasekar et al. 2017; Arora et al. 2019; Razin & Cohen 2020."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pydantic

from implicitbias.data.dataset import Dataset, DataSpec, random_orthonormal, streams


class _LowRank(DataSpec):
    """W* = U V^T (U, V with iid N(0, 1) entries, d x r; U U^T if psd), rescaled to ||W*||_F =
    frobenius_norm, by default sqrt(d) (so that the d x d entries have mean square 1/d).
    singular_values (one per rank, > 0): W* = U diag(s) V^T with Haar-random orthonormal U, V (U diag(s) U^T
    if psd) instead, not rescaled; well separated values make the incremental learning of Li et al. 2021
    visible."""

    d: int = pydantic.Field(10, ge=1)
    rank: int = pydantic.Field(2, ge=1)
    psd: bool = False
    frobenius_norm: float | None = pydantic.Field(None, gt=0.0)
    singular_values: tuple[pydantic.PositiveFloat, ...] | None = None

    @pydantic.model_validator(mode="after")
    def _rank_le_d(self):
        if self.rank > self.d:
            raise ValueError(f"rank = {self.rank} > d = {self.d}: a d x d matrix has rank at most d")
        if self.singular_values is not None:
            if len(self.singular_values) != self.rank:
                raise ValueError(f"singular_values = {list(self.singular_values)} is not allowed: expected one "
                                 f"value per rank ({self.rank})")
            if self.frobenius_norm is not None:
                raise ValueError("frobenius_norm and singular_values are not allowed together: singular_values "
                                 "fixes the norm")
        return self

    def target(self, rng) -> np.ndarray:
        if self.singular_values is not None:
            U = random_orthonormal(rng, self.d, self.rank).T
            V = U if self.psd else random_orthonormal(rng, self.d, self.rank).T
            return (U * np.asarray(self.singular_values)) @ V.T
        U = rng.standard_normal((self.d, self.rank))
        W = U @ U.T if self.psd else U @ rng.standard_normal((self.d, self.rank)).T
        norm = self.frobenius_norm if self.frobenius_norm is not None else np.sqrt(self.d)
        return W * (norm / np.linalg.norm(W))


class MatrixSensing(_LowRank):
    """Matrix sensing (S8): n measurement matrices A_i, y_i = <A_i, W*>. X has rows vec(A_i), shape
    (n, d*d). Optional n_test further measurements. info: W_star (and basis, for commuting measurements).

    measurements = gaussian: A_i with iid N(0, 1) entries.
    measurements = commuting: A_i = Q diag(a_i) Q^T with a fixed Haar-random orthogonal Q and a_i ~ N(0, I_d):
    symmetric and simultaneously diagonalisable, the case in which Gunasekar et al. 2017 (Theorem 1) prove
    that gradient flow from alpha -> 0 minimises the nuclear norm. W* then commutes with every A_i:
    W* = Q diag(lambda) Q^T with `rank` nonzero eigenvalues at random positions (|N(0, 1)| if psd, else
    N(0, 1); or the given singular_values, with random signs unless psd), rescaled like the Gaussian case.
    """

    name: Literal["matrix_sensing"] = "matrix_sensing"
    n: int = pydantic.Field(50, ge=1)
    n_test: int = pydantic.Field(0, ge=0)
    measurements: Literal["gaussian", "commuting"] = "gaussian"

    def _commuting(self, r_w, r_train, r_test):
        Q = random_orthonormal(r_w, self.d, self.d).T
        lam = np.zeros(self.d)
        where = r_w.permutation(self.d)[: self.rank]
        if self.singular_values is not None:
            values = np.asarray(self.singular_values)
            lam[where] = values if self.psd else values * np.where(r_w.random(self.rank) < 0.5, -1.0, 1.0)
        else:
            g = r_w.standard_normal(self.rank)
            lam[where] = np.abs(g) if self.psd else g
            norm = self.frobenius_norm if self.frobenius_norm is not None else np.sqrt(self.d)
            lam *= norm / np.linalg.norm(lam)
        W = (Q * lam) @ Q.T

        def draw(rng, k):
            a = rng.standard_normal((k, self.d))
            return np.einsum("ik,nk,jk->nij", Q, a, Q).reshape(k, -1)

        X = draw(r_train, self.n)
        X_test = draw(r_test, self.n_test) if self.n_test else None
        return W, X, X_test, {"basis": Q}

    def generate(self, seed: int) -> Dataset:
        r_w, r_train, r_test = streams(seed, 3)
        if self.measurements == "commuting":
            W, X, X_test, extra = self._commuting(r_w, r_train, r_test)
        else:
            W, extra = self.target(r_w), {}
            X = r_train.standard_normal((self.n, self.d * self.d))
            X_test = r_test.standard_normal((self.n_test, self.d * self.d)) if self.n_test else None
        y_test = X_test @ W.reshape(-1) if self.n_test else None
        return Dataset(X, X @ W.reshape(-1), X_test, y_test, "regression", {"W_star": W, **extra}).validate()


def _entry_inputs(d: int, flat: np.ndarray) -> np.ndarray:
    """Rows vec(e_p e_q^T) for the row-major flat indices p * d + q."""
    X = np.zeros((flat.size, d * d))
    X[np.arange(flat.size), flat] = 1.0
    return X


def _entry_pairs(d: int, flat: np.ndarray) -> np.ndarray:
    """Rows (p, q) (as floats) for the row-major flat indices p * d + q."""
    return np.stack(np.divmod(flat, d), axis=1).astype(np.float64)


class MatrixCompletion(_LowRank):
    """Matrix completion (S8): n distinct entries (p_i, q_i) chosen uniformly at random, A_i = e_p e_q^T,
    y_i = W*_{p q}. X has rows vec(A_i), shape (n, d*d). The test set (n_test) is made of distinct
    *unobserved* entries. info: W_star, observed (n, 2) index pairs, mask (d, d) of observed entries.

    observed: the observed positions (0-based (row, column) pairs) instead of a random draw; n is then their
    number (whatever n says). Refused before anything trains: an empty list, an index outside the d x d matrix,
    a repeated entry.
    encoding: dense (rows vec(e_p e_q^T), for `MatrixFactorization(inputs="dense")`) or entries (rows (p, q) as
    floats, shape (n, 2), for `MatrixFactorization(inputs="entries")`: no n x d^2 one-hot matrix)."""

    name: Literal["matrix_completion"] = "matrix_completion"
    n: int = pydantic.Field(50, ge=1)
    n_test: int = pydantic.Field(0, ge=0)
    observed: tuple[tuple[int, int], ...] | None = None
    encoding: Literal["dense", "entries"] = "dense"

    @pydantic.model_validator(mode="before")
    @classmethod
    def _n_from_observed(cls, data):
        if isinstance(data, dict) and data.get("observed") is not None:
            try:
                data = {**data, "n": len(data["observed"])}
            except TypeError:
                pass  # not a list: the field validation names it
        return data

    @pydantic.field_validator("observed")
    @classmethod
    def _observed_nonempty(cls, value):
        if value is not None and len(value) == 0:
            raise ValueError("observed = [] is not allowed: expected at least one observed entry (p, q)")
        return value

    @pydantic.model_validator(mode="after")
    def _entries(self):
        if self.observed is not None:
            for k, (p, q) in enumerate(self.observed):
                if not (0 <= p < self.d and 0 <= q < self.d):
                    raise ValueError(f"observed[{k}] = ({p}, {q}) is not allowed: expected 0-based indices in "
                                     f"[0, {self.d - 1}] (the matrix is {self.d} x {self.d})")
            if len(set(self.observed)) != len(self.observed):
                raise ValueError("observed is not allowed to repeat an entry: expected distinct (p, q) pairs")
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
        if self.observed is not None:
            train = np.array([p * self.d + q for p, q in self.observed])
            flat = np.concatenate([train, flat[~np.isin(flat, train)]])
        train, test = flat[: self.n], flat[self.n : self.n + self.n_test]
        mask = np.zeros(self.d * self.d, dtype=bool)
        mask[train] = True
        encode = _entry_inputs if self.encoding == "dense" else _entry_pairs
        X_test = encode(self.d, test) if self.n_test else None
        y_test = W.reshape(-1)[test] if self.n_test else None
        info = {
            "W_star": W,
            "observed": np.stack(np.divmod(train, self.d), axis=1),
            "mask": mask.reshape(self.d, self.d),
        }
        X = encode(self.d, train)
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
