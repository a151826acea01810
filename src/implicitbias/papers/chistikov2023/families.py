"""The two example families of Chistikov, Englert & Lazic 2023 (appendix G; SCIENCE.md S11) with a known
sign of their measurement M (Sec. 7: M < 0 iff the balanced rank-1 interpolators are the minimum-norm ones).

m_negative (M < 0 for every d > 1): x_i = (1 - (d-1)(1-xi)/d) e_i + ((1-xi)/d) sum_{k != i} e_k,
    v* = (1, ..., 1)/sqrt(d). Every <v*, x_i> = 1/sqrt(d); xi -> 0 squeezes the points onto v*'s direction,
    xi = 1 gives the orthonormal basis. The angles between v* and the x_i are below pi/4 (the paper's
    Theorem 7) when xi <= sqrt(2 (sqrt2 - 1)/(d - 1)); the default xi is half that bound.
m_positive (M > 0 for every d > 2): x_1 = b e_1, x_2 = b e_1 - sqrt(b) e_2 + e_3,
    x_3 = b e_1 + sqrt(b) e_2 + e_3, x_i = b e_1 + e_i (4 <= i <= d), b >= 11, v* = (4/5) e_1 + (3/5) e_3.

The training set is deterministic (n = d points, labels y_i = [<v*, x_i>]_+); the seed only draws the test
set, n_test inputs from N(0, I_d) with teacher labels (as Chistikov et al.'s experiments).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pydantic

from implicitbias.data.dataset import Dataset, DataSpec, streams


def xi_bound(d: int) -> float:
    """sqrt(2 (sqrt2 - 1)/(d - 1)): the largest xi of the m_negative family with every angle between v*
    and the x_i at most pi/4 (Chistikov et al. 2023, appendix G)."""
    return math.sqrt(2.0 * (math.sqrt(2.0) - 1.0) / (d - 1))


class ChistikovFamily(DataSpec):
    """A data set of one of Chistikov et al.'s two families with known sign of M (module docstring).

    family: m_negative | m_positive; d: dimension = number of points (m_negative: d >= 2; m_positive: d >= 3);
    xi: m_negative's parameter in (0, 1] (default: half of `xi_bound(d)`); b: m_positive's parameter (>= 11,
    default 11); n_test: N(0, I_d) test inputs. info: v_star, family, xi or b, M_sign (-1 or +1, the paper's).
    """

    name: Literal["chistikov_family"] = "chistikov_family"
    family: Literal["m_negative", "m_positive"] = "m_negative"
    d: int = pydantic.Field(4, ge=2)
    xi: float | None = pydantic.Field(None, gt=0.0, le=1.0)
    b: float = pydantic.Field(11.0, ge=11.0)
    n_test: int = pydantic.Field(64, ge=0)

    @pydantic.model_validator(mode="after")
    def _dimension(self):
        if self.family == "m_positive" and self.d < 3:
            raise ValueError(f"family = 'm_positive' needs d >= 3 (it uses e_3), got d = {self.d}")
        return self

    @property
    def xi_value(self) -> float:
        return float(self.xi) if self.xi is not None else 0.5 * xi_bound(self.d)

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """(X, v*): the d points as the rows of X, and the unit teacher."""
        d = self.d
        if self.family == "m_negative":
            xi = self.xi_value
            X = np.full((d, d), (1.0 - xi) / d)
            np.fill_diagonal(X, 1.0 - (d - 1) * (1.0 - xi) / d)
            return X, np.ones(d) / math.sqrt(d)
        b = self.b
        X = np.zeros((d, d))
        X[:, 0] = b
        X[1, 1], X[1, 2] = -math.sqrt(b), 1.0
        X[2, 1], X[2, 2] = math.sqrt(b), 1.0
        for i in range(3, d):
            X[i, i] = 1.0
        v = np.zeros(d)
        v[0], v[2] = 0.8, 0.6
        return X, v

    def generate(self, seed: int) -> Dataset:
        (r_test,) = streams(seed, 1)
        X, v = self.points()
        teacher = lambda Z: np.maximum(Z @ v, 0.0)
        X_test = r_test.standard_normal((self.n_test, self.d)) if self.n_test else None
        y_test = teacher(X_test) if self.n_test else None
        info = {"v_star": v, "family": self.family, "M_sign": -1 if self.family == "m_negative" else 1}
        info.update({"xi": self.xi_value} if self.family == "m_negative" else {"b": self.b})
        return Dataset(X, teacher(X), X_test, y_test, "regression", info).validate()
