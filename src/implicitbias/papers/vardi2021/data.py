"""Realisable data for a single neuron with n < d (Vardi & Shamir 2021; S9)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pydantic

from implicitbias.data.dataset import Dataset, DataSpec, random_orthonormal, streams


def _relu(z):
    return np.maximum(z, 0.0)


class NeuronTeacher(DataSpec):
    """Realisable data for a single neuron sigma(<w, x>) with n < d (Vardi & Shamir 2021; S9).

    x_i = mu + xi_i with xi_i ~ N(0, I_d) and mu = mean_norm sqrt(d) u (u uniform on the sphere), so that
    <x_i, x_j> ~ mean_norm^2 d for i != j: correlated inputs, which a ReLU neuron grown from a small init along
    sum_i y_i x_i activates together. Teacher w* = teacher_cos u + sqrt(1 - teacher_cos^2) u_perp (unit;
    teacher_cos = 0: <w*, x_i> ~ N(0, 1), about half of the ReLU labels are 0). Labels y_i = sigma(<w*, x_i>)
    with the teacher's activation: relu, or leaky_relu with slope gamma. Test set: n_test more draws.
    info: w_star, mu.
    """

    name: Literal["neuron_teacher"] = "neuron_teacher"
    n: int = pydantic.Field(10, ge=1)
    d: int = pydantic.Field(30, ge=1)
    activation: Literal["relu", "leaky_relu"] = "relu"
    gamma: float = pydantic.Field(0.5, gt=0.0, le=1.0)
    mean_norm: float = pydantic.Field(1.0, ge=0.0)
    teacher_cos: float = pydantic.Field(0.0, ge=-1.0, le=1.0)
    n_test: int = pydantic.Field(0, ge=0)

    def label(self, z):
        return _relu(z) if self.activation == "relu" else np.where(z > 0, z, self.gamma * z)

    def generate(self, seed: int) -> Dataset:
        r_dir, r_train, r_test = streams(seed, 3)
        u, u_perp = random_orthonormal(r_dir, self.d, 2) if self.d >= 2 else (np.ones(1), np.zeros(1))
        mu = self.mean_norm * math.sqrt(self.d) * u
        w_star = self.teacher_cos * u + math.sqrt(1.0 - self.teacher_cos**2) * u_perp
        X = mu + r_train.standard_normal((self.n, self.d))
        X_test = mu + r_test.standard_normal((self.n_test, self.d)) if self.n_test else None
        y_test = self.label(X_test @ w_star) if self.n_test else None
        info = {"w_star": w_star, "mu": mu}
        return Dataset(X, self.label(X @ w_star), X_test, y_test, "regression", info).validate()
