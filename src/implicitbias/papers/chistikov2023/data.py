"""Regression data for one-hidden-layer ReLU networks: a teacher neuron with correlated inputs
(Chistikov, Englert, Lazic 2023; S11) and two opposite teachers (their appendix I)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pydantic

from implicitbias._spec import ConfigError
from implicitbias.data.dataset import Dataset, DataSpec, random_orthonormal, streams

#: the largest allowed angle between v* and a training point, and the default: the paper's redraw rule (pi/2)
MAX_DATA_ANGLE = math.pi / 2


def _relu(z):
    return np.maximum(z, 0.0)


def _gaussian_test(rng, n_test, d, teacher):
    """Chistikov et al.'s test set: n_test inputs from N(0, I_d), labelled by `teacher(X)`."""
    if not n_test:
        return None, None
    X = rng.standard_normal((n_test, d))
    return X, teacher(X)


class TeacherNeuron(DataSpec):
    """Teacher-neuron data of Chistikov et al. 2023 (Sec. 8, "Experiments"; S11), n = d training points.

    centred: mu ~ Unif(S^{d-1}), x_1..x_d ~ N(mu, (rho/d) I_d) with rho = 1, v* = mu.
    uncentred: rho = sqrt(2) - 1 and one extra point x_0 ~ N(mu, (rho/d) I_d) is sampled, v* = x_0/||x_0||.
    Our reading of the paper: x_0 only defines the teacher and is *not* a training point, so n = d in
    both schemes; this is what makes "the angles between v* and the x_i concentrate around pi/4" true
    (centred: cos ~ 1/sqrt(1 + rho) = 1/sqrt(2); uncentred: cos ~ 1/(1 + rho) = 1/sqrt(2)), and it is
    what the paper's Sec. 7 (X square and invertible) assumes.
    include_x0 = true adds x_0 as the first training point (n = d + 1) for the other reading.
    rho: overrides the scheme's default. Redraw rule: if an angle between v* and a training point reaches
    max_data_angle (default pi/2, the paper's experiments: any <v*, x_i> <= 0) the whole data set (mu, x_0 and
    the x_i) is redrawn, at most max_redraws times. max_data_angle = pi/4 gives the data Theorem 7 assumes
    (every angle below pi/4); a draw then succeeds with probability roughly 2^-d, so it needs a larger
    max_redraws for d beyond ~8. Allowed: 0 < max_data_angle <= pi/2. At the default the field is left out of
    the spec's dump, so the identity of data sets drawn before the field existed is unchanged.
    Labels y_i = [<v*, x_i>]_+; test set: n_test (64) inputs from N(0, I_d) with teacher labels.
    info: v_star, mu, x0 (uncentred only), rho, redraws.
    """

    name: Literal["teacher_neuron"] = "teacher_neuron"
    scheme: Literal["centred", "uncentred"] = "centred"
    d: int = pydantic.Field(16, ge=1)
    rho: float | None = pydantic.Field(None, gt=0.0)
    include_x0: bool = False
    n_test: int = pydantic.Field(64, ge=0)
    max_redraws: int = pydantic.Field(10_000, ge=0)
    max_data_angle: float = pydantic.Field(MAX_DATA_ANGLE, gt=0.0, le=MAX_DATA_ANGLE, allow_inf_nan=False)

    @pydantic.model_serializer(mode="wrap")
    def _default_angle_left_out(self, handler):
        # runs and data sets are identified by a hash of their spec's dump: the default angle stays out of it
        dump = handler(self)
        if self.max_data_angle == MAX_DATA_ANGLE:
            dump.pop("max_data_angle", None)
        return dump

    @pydantic.model_validator(mode="after")
    def _x0_only_uncentred(self):
        if self.include_x0 and self.scheme != "uncentred":
            raise ValueError("include_x0 = true needs scheme = 'uncentred' (only that scheme samples x_0)")
        return self

    @property
    def rho_value(self) -> float:
        if self.rho is not None:
            return float(self.rho)
        return 1.0 if self.scheme == "centred" else math.sqrt(2.0) - 1.0

    def _draw_once(self, rng):
        d, s = self.d, math.sqrt(self.rho_value / self.d)
        mu = random_orthonormal(rng, d, 1)[0]
        X = mu + s * rng.standard_normal((d, d))
        if self.scheme == "centred":
            return mu, X, mu, None
        x0 = mu + s * rng.standard_normal(d)
        v = x0 / np.linalg.norm(x0)
        return mu, (np.vstack([x0, X]) if self.include_x0 else X), v, x0

    def _accepted(self, X, v) -> bool:
        """Every angle between v* and a row of X below max_data_angle (at pi/2: every <v*, x_i> > 0, as
        before the field existed, bit for bit)."""
        if self.max_data_angle == MAX_DATA_ANGLE:
            return bool(np.all(X @ v > 0))
        return bool(np.all(X @ v > math.cos(self.max_data_angle) * np.linalg.norm(X, axis=1)))

    def generate(self, seed: int) -> Dataset:
        r_data, r_test = streams(seed, 2)
        redraws = 0
        while True:
            mu, X, v, x0 = self._draw_once(r_data)
            if self._accepted(X, v):
                break
            redraws += 1
            if redraws > self.max_redraws:
                raise ConfigError(
                    f"TeacherNeuron: no draw with every angle between v* and x_i below max_data_angle = "
                    f"{self.max_data_angle:.6g} in max_redraws = {self.max_redraws} redraws (d = {self.d}, rho = "
                    f"{self.rho_value}): increase max_redraws, lower rho or raise max_data_angle"
                )
        teacher = lambda Z: _relu(Z @ v)
        X_test, y_test = _gaussian_test(r_test, self.n_test, self.d, teacher)
        info = {"v_star": v, "mu": mu, "rho": self.rho_value, "redraws": redraws}
        if x0 is not None:
            info["x0"] = x0
        return Dataset(X, teacher(X), X_test, y_test, "regression", info).validate()


class TwoTeachers(DataSpec):
    """Two opposite teacher neurons, Chistikov et al. 2023 appendix I (S11).

    Our reading of "a second teacher pointing opposite to the first (norms 1 and 3), d = 16 with d points
    per teacher": mu ~ Unif(S^{d-1}); teachers v_1 = norms[0] mu, v_2 = -norms[1] mu; the points of
    teacher k are drawn around its direction like the centred scheme, x ~ N(v_k/||v_k||, (rho/d) I_d),
    n_per_teacher of them (default d), teacher 1's first. Labels
    y = outer_signs[0] [<v_1, x>]_+ + outer_signs[1] [<v_2, x>]_+, so each teacher labels its own class
    (Sec. 9: "each ... has an arbitrary sign, labels one of the two classes"). A point at an angle
    >= pi/2 from its own teacher triggers a redraw of everything. Test set: n_test inputs from N(0, I_d).
    info: teachers (2, d), mu, cluster (teacher index of each point), redraws.
    """

    name: Literal["two_teachers"] = "two_teachers"
    d: int = pydantic.Field(16, ge=1)
    norms: tuple[pydantic.PositiveFloat, pydantic.PositiveFloat] = (1.0, 3.0)
    outer_signs: tuple[Literal[-1, 1], Literal[-1, 1]] = (1, 1)
    n_per_teacher: int | None = pydantic.Field(None, ge=1)
    rho: float = pydantic.Field(1.0, gt=0.0)
    n_test: int = pydantic.Field(64, ge=0)
    max_redraws: int = pydantic.Field(10_000, ge=0)

    def generate(self, seed: int) -> Dataset:
        r_data, r_test = streams(seed, 2)
        k = self.n_per_teacher or self.d
        cluster = np.repeat([0, 1], k)
        redraws = 0
        while True:
            mu = random_orthonormal(r_data, self.d, 1)[0]
            U = np.stack([mu, -mu])
            X = U[cluster] + math.sqrt(self.rho / self.d) * r_data.standard_normal((2 * k, self.d))
            if np.all(np.sum(X * U[cluster], axis=1) > 0):
                break
            redraws += 1
            if redraws > self.max_redraws:
                raise ConfigError(
                    f"TwoTeachers: no draw with every point within pi/2 of its teacher in "
                    f"max_redraws = {self.max_redraws} redraws (d = {self.d}, rho = {self.rho})"
                )
        V = np.asarray(self.norms)[:, None] * U
        a = np.asarray(self.outer_signs, dtype=float)
        teacher = lambda Z: _relu(Z @ V.T) @ a
        X_test, y_test = _gaussian_test(r_test, self.n_test, self.d, teacher)
        info = {"teachers": V, "mu": mu, "cluster": cluster, "redraws": redraws}
        return Dataset(X, teacher(X), X_test, y_test, "regression", info).validate()
