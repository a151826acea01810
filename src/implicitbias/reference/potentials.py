"""Mirror potentials psi of mirror descent (S7) and of the mirror-flow view of diagonal networks (S6).

Mirror descent with a strictly convex, separable potential psi(w) = sum_i phi(w_i) updates
grad psi(w_{k+1}) = grad psi(w_k) - eta grad L(w_k). On the square loss it converges to the Bregman
projection argmin D_psi(w, w0) s.t. Xw = y (Gunasekar et al. 2018, "Characterizing implicit bias in terms
of optimization geometry"), computed by `implicitbias.reference.bregman_projection` through the
convex conjugate psi*. Each potential therefore offers

    value(w) = psi(w),  mirror_map(w) = grad psi(w),  inverse_mirror_map(theta) = grad psi*(theta),
    conjugate(theta) = psi*(theta) (+inf outside its domain),  conjugate_curvature(theta) = diag hess psi*,

all elementwise on 1-D arrays, and the Bregman divergence D_psi(w, w0) = psi(w) - psi(w0) - <grad psi(w0), w - w0>.
A potential is data: a frozen dataclass whose parameters are validated when it is built (ConfigError).
"""

from __future__ import annotations

import abc
import dataclasses
import numbers

import numpy as np

from implicitbias._spec import ConfigError


class MirrorPotential(abc.ABC):
    """A separable strictly convex Legendre potential psi (see the module docstring)."""

    @abc.abstractmethod
    def value(self, w) -> float:
        """psi(w)."""

    @abc.abstractmethod
    def mirror_map(self, w) -> np.ndarray:
        """grad psi(w)."""

    @abc.abstractmethod
    def inverse_mirror_map(self, theta) -> np.ndarray:
        """grad psi*(theta) = (grad psi)^{-1}(theta)."""

    @abc.abstractmethod
    def conjugate(self, theta) -> float:
        """psi*(theta) = sup_w <theta, w> - psi(w); +inf outside the domain of psi*."""

    @abc.abstractmethod
    def conjugate_curvature(self, theta) -> np.ndarray:
        """The diagonal of hess psi*(theta) = d/dtheta grad psi*(theta), elementwise, >= 0."""

    def divergence(self, w, w0) -> float:
        """D_psi(w, w0) = psi(w) - psi(w0) - <grad psi(w0), w - w0> >= 0."""
        w, w0 = _vec(w), _vec(w0)
        return float(self.value(w) - self.value(w0) - self.mirror_map(w0) @ (w - w0))


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _vec(w) -> np.ndarray:
    return np.asarray(w, dtype=np.float64).reshape(-1)


@dataclasses.dataclass(frozen=True)
class LpPotential(MirrorPotential):
    """psi(w) = (1/p) sum_i |w_i|^p with p in (1, 2] (S7); p = 2 is gradient descent.

    Mirror map sign(w)|w|^{p-1}, inverse sign(theta)|theta|^{1/(p-1)}; psi*(theta) = (1/q) sum |theta_i|^q
    with q = p/(p-1) >= 2. Scaling psi by a constant (e.g. sum |w_i|^p without the 1/p) rescales D_psi and
    the step size of mirror descent but not the Bregman projection.
    """

    p: float

    def __post_init__(self):
        if not (_is_real(self.p) and 1.0 < self.p <= 2.0):
            raise ConfigError(
                f"p = {self.p!r} is not allowed: expected a value in (1, 2] (p = 1 is not strictly convex; "
                "p > 2 has a mirror map with zero derivative at 0)"
            )

    @property
    def q(self) -> float:
        """The conjugate exponent p / (p - 1)."""
        return self.p / (self.p - 1.0)

    def value(self, w) -> float:
        return float(np.sum(np.abs(_vec(w)) ** self.p) / self.p)

    def mirror_map(self, w) -> np.ndarray:
        w = _vec(w)
        return np.sign(w) * np.abs(w) ** (self.p - 1.0)

    def inverse_mirror_map(self, theta) -> np.ndarray:
        theta = _vec(theta)
        return np.sign(theta) * np.abs(theta) ** (self.q - 1.0)

    def conjugate(self, theta) -> float:
        with np.errstate(over="ignore"):
            return float(np.sum(np.abs(_vec(theta)) ** self.q) / self.q)

    def conjugate_curvature(self, theta) -> np.ndarray:
        return (self.q - 1.0) * np.abs(_vec(theta)) ** (self.q - 2.0)


@dataclasses.dataclass(frozen=True)
class HyperbolicPotential(MirrorPotential):
    """The hyperbolic entropy psi_beta(w) = sum_i (w_i arcsinh(w_i / beta) - sqrt(w_i^2 + beta^2)), beta > 0
    (S7; Ghai, Hazan & Singer 2020). Mirror map arcsinh(w / beta), inverse beta sinh(theta),
    psi*(theta) = beta sum cosh(theta_i). With beta = 2 alpha^2 it is the mirror-flow potential of the
    depth-2 diagonal network u o u - v o v from u = v = alpha 1, and D_psi(w, 0) = Q_alpha(w) (S6; see
    `implicitbias.reference.diagonal_nets`).

    Numerics: beta sinh(theta) and beta cosh(theta) are evaluated as exp(|theta| + log beta) / 2 (1 -+ ...)
    for |theta| > 20, so that tiny beta (small alpha) does not overflow where beta sinh(theta) is moderate.
    """

    beta: float

    def __post_init__(self):
        if not (_is_real(self.beta) and np.isfinite(self.beta) and self.beta > 0):
            raise ConfigError(f"beta = {self.beta!r} is not allowed: expected a finite scale > 0")

    def value(self, w) -> float:
        w = _vec(w)
        return float(np.sum(w * self.mirror_map(w) - np.hypot(w, self.beta)))

    def mirror_map(self, w) -> np.ndarray:
        w = _vec(w)
        with np.errstate(over="ignore"):
            z = w / self.beta
            big = ~np.isfinite(z) | (np.abs(z) > 1e150)
            safe = np.where(big, 0.0, z)
            # arcsinh(z) = sign(z) (log 2|z| + O(1/z^2)) for |z| > 1e150, with log|z| = log|w| - log beta
            far = np.sign(w) * (np.log(2.0) + np.log(np.where(big, np.abs(w), 1.0)) - np.log(self.beta))
        return np.where(big, far, np.arcsinh(safe))

    def _exp_parts(self, theta, parts: str = "sc"):
        """(beta sinh(theta), beta cosh(theta)) without overflow of cosh where beta cosh is finite.  `parts`:
        "s" or "c" computes only that one (the other is None) where every |theta| <= 20, the same values; the
        mirror flow of `woodworth2020` evaluates the inverse map ~10^5 times a check."""
        theta = _vec(theta)
        a = np.abs(theta)
        small = a <= 20.0
        if small.all():  # the same values as the general branch below, without its far-tail arithmetic
            return (self.beta * np.sinh(theta) if "s" in parts else None,
                    self.beta * np.cosh(theta) if "c" in parts else None)
        ts = np.where(small, theta, 0.0)
        with np.errstate(over="ignore"):
            half = np.exp(np.where(small, 0.0, a) + np.log(self.beta) - np.log(2.0))
        tail = np.exp(-2.0 * np.where(small, 0.0, a))
        sinh = np.where(small, self.beta * np.sinh(ts), np.sign(theta) * half * (1.0 - tail))
        cosh = np.where(small, self.beta * np.cosh(ts), half * (1.0 + tail))
        return sinh, cosh

    def inverse_mirror_map(self, theta) -> np.ndarray:
        return self._exp_parts(theta, "s")[0]

    def conjugate(self, theta) -> float:
        return float(np.sum(self._exp_parts(theta, "c")[1]))

    def conjugate_curvature(self, theta) -> np.ndarray:
        return self._exp_parts(theta, "c")[1]

    def divergence(self, w, w0) -> float:
        """D_psi(w, w0) = sum w (arcsinh(w/beta) - arcsinh(w0/beta)) - (sqrt(w^2 + beta^2) - sqrt(w0^2 + beta^2)),
        the difference of square roots written as (w^2 - w0^2) / (sqrt(.) + sqrt(.)) against cancellation."""
        w, w0 = _vec(w), _vec(w0)
        roots = (w - w0) * (w + w0) / (np.hypot(w, self.beta) + np.hypot(w0, self.beta))
        return float(np.sum(w * (self.mirror_map(w) - self.mirror_map(w0)) - roots))
