"""Binary classification data of S1-S4: Gaussian mixture, noisy 2-XOR, plain nearly orthogonal data
(Frei, Vardi, Bartlett, Srebro, Hu 2023, Sec. 4.3 / 3.3) and linearly separable data with a known margin
(Soudry et al. 2018)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pydantic

from implicitbias._spec import ConfigError
from implicitbias.data.dataset import Dataset, DataSpec, random_orthonormal, signs, streams


class _MeanNorm(DataSpec):
    """Shared fields of the mixtures: ||mu|| = mean_norm if given, else d ** mean_norm_exponent."""

    n: int = pydantic.Field(100, ge=1)
    d: int = pydantic.Field(1000, ge=1)
    mean_norm_exponent: float = pydantic.Field(0.26, ge=0.0, lt=1.0)
    mean_norm: float | None = pydantic.Field(None, ge=0.0)
    direction: Literal["random", "axis"] = "random"
    n_test: int = pydantic.Field(1000, ge=0)

    @property
    def norm(self) -> float:
        return float(self.mean_norm if self.mean_norm is not None else self.d**self.mean_norm_exponent)

    def means(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """k orthogonal means of norm `norm` as rows: e_1..e_k (axis) or a random orthonormal frame."""
        if self.direction == "axis":
            U = np.eye(k, self.d)
        else:
            U = random_orthonormal(rng, self.d, k)
        return self.norm * U


class GaussianMixture(_MeanNorm):
    """Gaussian mixture of Frei et al. 2023 (Sec. 4.3; S1, S2): y ~ Unif{+-1}, x = y mu + xi, xi ~ N(0, I_d).

    ||mu|| = d ** mean_norm_exponent (beta = 0.26 by default; the paper's range is beta in (0, 1/2)) unless
    mean_norm is given. direction: "random" draws mu/||mu|| uniformly on the sphere, "axis" takes e_1.
    label_noise p in [0, 1/2): each *training* label is flipped with probability p after x is drawn from
    the clean label; test labels are clean, so sign<mu, x> stays the Bayes-optimal rule to compare with.
    info: mu, flipped (indices of the flipped training labels).
    """

    name: Literal["gmm"] = "gmm"
    label_noise: float = pydantic.Field(0.0, ge=0.0, lt=0.5)

    def _draw(self, rng, mu, n):
        y = signs(rng, n)
        return y[:, None] * mu[None, :] + rng.standard_normal((n, self.d)), y

    def generate(self, seed: int) -> Dataset:
        r_mu, r_train, r_noise, r_test = streams(seed, 4)
        mu = self.means(r_mu, 1)[0]
        X, y = self._draw(r_train, mu, self.n)
        flip = r_noise.random(self.n) < self.label_noise
        y = np.where(flip, -y, y)
        X_test, y_test = self._draw(r_test, mu, self.n_test) if self.n_test else (None, None)
        info = {"mu": mu, "flipped": np.flatnonzero(flip)}
        return Dataset(X, y, X_test, y_test, "classification", info).validate()


class NoisyXor(_MeanNorm):
    """Noisy 2-XOR of Frei et al. 2023 (Sec. 3.3; S1): x = z + xi, z ~ Unif{+-mu_1, +-mu_2},
    mu_1 orthogonal to mu_2, ||mu_1|| = ||mu_2||, xi ~ N(0, I_d), y = sign(|<mu_1, x>| - |<mu_2, x>|).

    Default ||mu_k|| = d ** 0.26: the paper needs ||mu|| = Theta(d^beta) with beta < 1/2 and
    d >> n^(1/(1-2 beta)) v n^2 for the training points to be nearly orthogonal (Theorem 3.2), since
    ||x_i||^2 ~ d + ||mu||^2 while |<x_i, x_j>| ~ ||mu||^2 + sqrt(d). Since y(-x) = y(x) and the
    distribution is symmetric, every linear classifier without bias, x -> sign<w, x>, has exactly 50%
    test error. info: mu1, mu2.
    """

    name: Literal["xor"] = "xor"

    def _draw(self, rng, M, n):
        z = M[rng.integers(0, 2, n)] * signs(rng, n)[:, None]
        X = z + rng.standard_normal((n, self.d))
        y = np.where(np.abs(X @ M[0]) >= np.abs(X @ M[1]), 1.0, -1.0)
        return X, y

    @pydantic.model_validator(mode="after")
    def _two_dims(self):
        if self.d < 2:
            raise ValueError(f"d = {self.d}: the 2-XOR needs two orthogonal means, so d >= 2")
        return self

    def generate(self, seed: int) -> Dataset:
        r_mu, r_train, r_test = streams(seed, 3)
        M = self.means(r_mu, 2)
        X, y = self._draw(r_train, M, self.n)
        X_test, y_test = self._draw(r_test, M, self.n_test) if self.n_test else (None, None)
        return Dataset(X, y, X_test, y_test, "classification", {"mu1": M[0], "mu2": M[1]}).validate()


class NearlyOrthogonal(DataSpec):
    """Plain nearly orthogonal data of Frei et al. 2023 (Lemma 3.3; S1): x_i ~ N(0, I_d), arbitrary
    (here uniform random) labels; the Theorem 3.2 condition holds w.h.p. once d >> n^2.

    scale: "none" keeps N(0, I_d); "unit" divides by sqrt(d) so that E||x||^2 = 1. The optional test set
    (n_test, default 0) has independent random labels: test accuracy is chance by construction.
    """

    name: Literal["nearly_orthogonal"] = "nearly_orthogonal"
    n: int = pydantic.Field(10, ge=1)
    d: int = pydantic.Field(1000, ge=1)
    scale: Literal["none", "unit"] = "none"
    n_test: int = pydantic.Field(0, ge=0)

    def _draw(self, rng, n):
        c = 1.0 if self.scale == "none" else self.d**-0.5
        return c * rng.standard_normal((n, self.d)), signs(rng, n)

    def generate(self, seed: int) -> Dataset:
        r_train, r_test = streams(seed, 2)
        X, y = self._draw(r_train, self.n)
        X_test, y_test = self._draw(r_test, self.n_test) if self.n_test else (None, None)
        return Dataset(X, y, X_test, y_test, "classification", {}).validate()


class Separable(DataSpec):
    """Linearly separable data with a known margin, for Soudry et al. 2018 (S4).

    w* is a uniformly random unit vector, or with `sparsity` = k a k-sparse teacher with entries +-1/sqrt(k)
    (random signs) on a uniformly random support (Gunasekar et al. 2018, S6: the l1 and l2 max-margin
    directions then differ clearly); x ~ N(0, I_d) and y = sign<w*, x> (0 counts as +1); then
    method "shift" moves each point along w*: x <- x + y * margin * w*, so y<w*, x> >= margin, and
    method "condition" draws x from N(0, I_d) conditioned on |<w*, x>| >= margin (exactly: the component
    along w* is replaced by a sign-preserving draw from the standard normal truncated to [margin, inf)).
    info: w_star, margin = min_i y_i <w*, x_i> (the margin of w* on the data, >= the requested margin,
    and a lower bound on the hard-margin SVM margin).
    """

    name: Literal["separable"] = "separable"
    n: int = pydantic.Field(50, ge=1)
    d: int = pydantic.Field(2, ge=1)
    margin: float = pydantic.Field(0.1, gt=0.0)
    method: Literal["shift", "condition"] = "shift"
    n_test: int = pydantic.Field(0, ge=0)
    sparsity: int | None = pydantic.Field(None, ge=1)

    @pydantic.model_validator(mode="after")
    def _sparsity_fits(self):
        if self.sparsity is not None and self.sparsity > self.d:
            raise ValueError(f"sparsity = {self.sparsity} > d = {self.d}: the teacher has at most d nonzero entries")
        return self

    def _teacher(self, rng) -> np.ndarray:
        if self.sparsity is None:
            return random_orthonormal(rng, self.d, 1)[0]
        w = np.zeros(self.d)
        w[rng.choice(self.d, self.sparsity, replace=False)] = signs(rng, self.sparsity) / np.sqrt(self.sparsity)
        return w

    def _draw(self, rng, w, n):
        X = rng.standard_normal((n, self.d))
        t = X @ w
        if self.method == "condition":
            import scipy.stats  # deferred on purpose: ~0.3 s to import, and only this draw uses it

            tail = scipy.stats.truncnorm(self.margin, np.inf).rvs(size=n, random_state=rng)
            X = X + (np.where(t >= 0, 1.0, -1.0) * tail - t)[:, None] * w[None, :]
        y = np.where(X @ w >= 0, 1.0, -1.0)
        if self.method == "shift":
            X = X + (y * self.margin)[:, None] * w[None, :]
        return X, y

    def generate(self, seed: int) -> Dataset:
        r_w, r_train, r_test = streams(seed, 3)
        w = self._teacher(r_w)
        X, y = self._draw(r_train, w, self.n)
        X_test, y_test = self._draw(r_test, w, self.n_test) if self.n_test else (None, None)
        info = {"w_star": w, "margin": float(np.min(y * (X @ w)))}
        return Dataset(X, y, X_test, y_test, "classification", info).validate()


class KnownSVM2D(DataSpec):
    """A small 2-D separable set whose hard-margin SVM is known in closed form, for the picture of Soudry et al.
    2018, Figure 1 (S4).

    With the unit vectors u = (cos angle, sin angle) and v = (-sin angle, cos angle), write each point through
    its margin vector z_i = y_i x_i. Two support vectors, z_0 = margin u + a v (label +1) and
    z_1 = margin u - b v (label -1), with a, b ~ Unif[spread / 4, spread]; the other n - 2 points have
    z_i = (margin + g_i) u + t_i v with g_i ~ Unif[clearance, clearance + spread] and t_i ~ Unif[-spread, spread],
    and random labels (x_i = y_i z_i). Then every <u, z_i> >= margin, with equality exactly at z_0 and z_1, and
    u / margin = alpha_0 z_0 + alpha_1 z_1 with alpha_0 = b / (margin^2 (a + b)) > 0, alpha_1 = a / (margin^2 (a + b))
    > 0: the KKT conditions of argmin ||w|| s.t. y_i <w, x_i> >= 1 hold at w_svm = u / margin, with unique, strictly
    positive multipliers (the non-degenerate case of Soudry et al.'s Theorem 3).
    info: w_svm (the SVM, scaled so that min_i y_i <w, x_i> = 1), margin (its geometric margin), support ([0, 1]),
    alphas (the dual variables, zero off the support).
    """

    name: Literal["svm_2d"] = "svm_2d"
    n: int = pydantic.Field(16, ge=2)
    margin: float = pydantic.Field(0.5, gt=0.0)
    angle: float = pydantic.Field(0.5, ge=-np.pi, le=np.pi)
    spread: float = pydantic.Field(2.0, gt=0.0)
    clearance: float = pydantic.Field(0.25, gt=0.0)

    def generate(self, seed: int) -> Dataset:
        (rng,) = streams(seed, 1)
        u = np.array([np.cos(self.angle), np.sin(self.angle)])
        v = np.array([-u[1], u[0]])
        a, b = rng.uniform(self.spread / 4, self.spread, size=2)
        gap = np.concatenate([[0.0, 0.0], rng.uniform(self.clearance, self.clearance + self.spread, self.n - 2)])
        side = np.concatenate([[a, -b], rng.uniform(-self.spread, self.spread, self.n - 2)])
        y = np.concatenate([[1.0, -1.0], signs(rng, self.n - 2)])
        Z = (self.margin + gap)[:, None] * u[None, :] + side[:, None] * v[None, :]
        X = y[:, None] * Z
        alphas = np.zeros(self.n)
        alphas[:2] = np.array([b, a]) / (self.margin**2 * (a + b))
        info = {"w_svm": u / self.margin, "margin": float(self.margin), "support": np.array([0, 1]), "alphas": alphas}
        return Dataset(X, y, None, None, "classification", info).validate()


class MulticlassSeparable(DataSpec):
    """k-class data separable by a linear teacher with a margin, for the multiclass case of Soudry et al. 2018
    (Sec. 4.3; S4): the limit of GD on the cross-entropy is the multiclass SVM.

    The teacher W* has k rows w*_c of norm 1 (orthonormal when k <= d, else Gaussian rows normalised); x ~ N(0, I_d)
    is kept when its score gap (W* x)_y - max_{c != y} (W* x)_c >= margin, with y = argmax_c (W* x)_c (rejection
    sampling, at most 1000 rounds). Labels are class indices 0..k-1 (task "multiclass").
    info: W_star, margin = the smallest score gap of W* on the data (>= the requested margin).
    """

    name: Literal["multiclass_separable"] = "multiclass_separable"
    n: int = pydantic.Field(30, ge=1)
    d: int = pydantic.Field(2, ge=1)
    classes: int = pydantic.Field(3, ge=2)
    margin: float = pydantic.Field(0.3, gt=0.0)
    n_test: int = pydantic.Field(0, ge=0)

    def _draw(self, rng, W, n):
        X, y = np.zeros((0, self.d)), np.zeros(0)
        for _ in range(1000):
            Z = rng.standard_normal((4 * n, self.d))
            S = Z @ W.T
            top = np.sort(S, axis=1)
            keep = top[:, -1] - top[:, -2] >= self.margin
            X = np.vstack([X, Z[keep]])
            y = np.concatenate([y, np.argmax(S[keep], axis=1).astype(float)])
            if X.shape[0] >= n:
                return X[:n], y[:n]
        raise ConfigError(f"data.margin = {self.margin!r} is not allowed: too few N(0, I) points have a score gap "
                          f">= margin under a teacher with {self.classes} unit rows; expected a smaller margin")

    def generate(self, seed: int) -> Dataset:
        r_w, r_train, r_test = streams(seed, 3)
        if self.classes <= self.d:
            W = random_orthonormal(r_w, self.d, self.classes)
        else:
            W = r_w.standard_normal((self.classes, self.d))
            W /= np.linalg.norm(W, axis=1, keepdims=True)
        X, y = self._draw(r_train, W, self.n)
        X_test, y_test = self._draw(r_test, W, self.n_test) if self.n_test else (None, None)
        S = X @ W.T
        gaps = S[np.arange(self.n), y.astype(int)][:, None] - S
        gaps[np.arange(self.n), y.astype(int)] = np.inf
        info = {"W_star": W, "margin": float(gaps.min())}
        return Dataset(X, y, X_test, y_test, "multiclass", info).validate()
