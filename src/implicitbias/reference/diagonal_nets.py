"""Diagonal linear networks in the regression regime (S6; Woodworth et al. 2020, "Kernel and rich regimes
in overparametrized models"): the implicit regulariser Q_alpha^D, its mirror potential, and its minimiser.

Model w = u^D - v^D (elementwise), gradient flow on (u, v) from u = v = alpha 1 on a loss L(w) with
gradient g = grad L(w) (for the square loss of this project, L = ||Xw - y||^2 / (2n), g = X^T r / n).

Depth 2. du/dt = -2 u o g and dv/dt = 2 v o g give u = alpha e^{-2G}, v = alpha e^{2G} with
G(t) = int_0^t g, so w = alpha^2 (e^{-4G} - e^{4G}) = 2 alpha^2 sinh(-4G), i.e.

    grad psi(w(t)) = arcsinh(w / (2 alpha^2)) = -4 G(t),    d/dt grad psi(w) = -4 grad L(w):

mirror flow with the hyperbolic entropy psi_beta, beta = 2 alpha^2 (HyperbolicPotential), at rate c = 4.
Since -G(t) stays in the row space of X, a zero-loss limit is the Bregman projection of w(0) = 0,
argmin D_psi(w, 0) s.t. Xw = y, and D_psi(w, 0) = alpha^2 sum q(w_i / alpha^2) = Q_alpha(w) with
q(z) = 2 - sqrt(4 + z^2) + z arcsinh(z / 2) (Woodworth et al. 2020, Theorem 1).

Depth D >= 3. d/dt u^{2-D} = (2-D) u^{1-D} du/dt = D(D-2) g, so u^{2-D} = alpha^{2-D} + D(D-2) G and
v^{2-D} = alpha^{2-D} - D(D-2) G. With theta = -D(D-2) alpha^{D-2} G and k = D/(D-2),

    w = alpha^D h_D(theta),   h_D(theta) = (1 - theta)^{-k} - (1 + theta)^{-k},   theta in (-1, 1),

so grad psi(w) = h_D^{-1}(w / alpha^D) and d/dt grad psi(w) = -D(D-2) alpha^{D-2} grad L(w): mirror flow
with the potential psi_D (DeepDiagonalPotential) whose conjugate is explicit,

    psi*(theta) = alpha^D sum_i H_D(theta_i),  H_D(t) = int_0^t h_D = (D-2)/2 [(1-t)^{-2/(D-2)} + (1+t)^{-2/(D-2)} - 2],

and the zero-loss limit is argmin Q_alpha^D(w) s.t. Xw = y with Q_alpha^D(w) = D_psi(w, 0) = psi_D(w) =
alpha^D sum q_D(w_i / alpha^D), q_D = int_0^z h_D^{-1} (Woodworth et al. 2020, Sec. 5). This module derives
it from the flow above and the tests check it against an integrated gradient flow.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from implicitbias._spec import ConfigError
from implicitbias.reference.bregman import BregmanProjection, bregman_projection
from implicitbias.reference.potentials import HyperbolicPotential, MirrorPotential, _vec


def _check_alpha_depth(alpha, depth, min_depth=2):
    if not (isinstance(alpha, numbers.Real) and not isinstance(alpha, bool) and np.isfinite(alpha) and alpha > 0):
        raise ConfigError(f"alpha = {alpha!r} is not allowed: expected a finite initialisation scale > 0")
    if not (isinstance(depth, numbers.Integral) and not isinstance(depth, bool) and depth >= min_depth):
        raise ConfigError(f"depth = {depth!r} is not allowed: expected an integer >= {min_depth}")


@dataclasses.dataclass(frozen=True)
class DeepDiagonalPotential(MirrorPotential):
    """The mirror potential psi_D of the depth-D diagonal network u^D - v^D from u = v = alpha 1, D >= 3
    (module docstring): grad psi*(theta) = alpha^D h_D(theta) on theta in (-1, 1), psi(0) = 0, and
    psi(w) = Q_alpha^D(w). grad psi(w) = h_D^{-1}(w / alpha^D) is computed by bisection plus Newton polish.

    Float64 limit: a coordinate with |w_i| >> alpha^D has 1 - |theta_i| ~ (|w_i| / alpha^D)^(-(D-2)/D), and an
    absolute rounding error eps in theta_i becomes a relative error ~ k eps / (1 - |theta_i|) in w_i. The dual
    solver converges (to ~1e-9 relative) only while 1 - |theta_i| >~ 1e-7; with ||w|| ~ 1 and n = 20, d = 60 that
    was alpha >= 1e-5 for D = 3, alpha >= 1e-3 for D = 4 and alpha >= 1e-2 for D = 5. Below, `bregman_projection`
    raises ReferenceSolverError rather than return a less accurate answer.
    """

    alpha: float
    depth: int

    def __post_init__(self):
        _check_alpha_depth(self.alpha, self.depth, min_depth=3)

    @property
    def _k(self) -> float:
        return self.depth / (self.depth - 2.0)

    @property
    def _scale(self) -> float:
        return float(self.alpha) ** self.depth

    def _logs(self, theta):
        """(-k log(1 - theta), -k log(1 + theta)) for |theta| < 1, nan outside."""
        theta = _vec(theta)
        inside = np.abs(theta) < 1.0
        t = np.where(inside, theta, 0.0)
        a, b = -self._k * np.log1p(-t), -self._k * np.log1p(t)
        return np.where(inside, a, np.nan), np.where(inside, b, np.nan)

    def inverse_mirror_map(self, theta) -> np.ndarray:
        a, b = self._logs(theta)
        with np.errstate(over="ignore"):
            return self._scale * np.exp(b) * np.expm1(a - b)  # (1-theta)^-k - (1+theta)^-k, no cancellation

    def conjugate_curvature(self, theta) -> np.ndarray:
        theta = _vec(theta)
        a, b = self._logs(theta)
        with np.errstate(over="ignore"):
            return self._scale * self._k * (np.exp(a) / (1.0 - theta) + np.exp(b) / (1.0 + theta))

    def conjugate(self, theta) -> float:
        theta = _vec(theta)
        if np.any(np.abs(theta) >= 1.0):
            return np.inf
        m = 2.0 / (self.depth - 2.0)
        with np.errstate(over="ignore"):
            H = np.expm1(-m * np.log1p(-theta)) + np.expm1(-m * np.log1p(theta))
        return float(self._scale * (self.depth - 2.0) / 2.0 * np.sum(H))

    def mirror_map(self, w) -> np.ndarray:
        w = _vec(w)
        z = np.abs(w) / self._scale
        lo = np.zeros_like(z)
        hi = 1.0 - 0.5 * (z + 1.0) ** (-1.0 / self._k)  # h_D(hi) >= 2^k (z + 1) - 1 >= z
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            below = self.inverse_mirror_map(mid) / self._scale < z
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        theta = 0.5 * (lo + hi)
        for _ in range(3):  # Newton polish of h_D(theta) = z: bisection leaves a relative error at tiny theta
            step = (self.inverse_mirror_map(theta) - z * self._scale) / self.conjugate_curvature(theta)
            theta = np.clip(theta - step, 0.0, np.nextafter(1.0, 0.0))
        return np.sign(w) * theta

    def value(self, w) -> float:
        """psi(w) = <w, theta> - psi*(theta) at theta = grad psi(w) (Legendre), = Q_alpha^D(w)."""
        w = _vec(w)
        theta = self.mirror_map(w)
        return float(w @ theta - self.conjugate(theta))


def diagonal_net_potential(alpha: float, depth: int = 2) -> MirrorPotential:
    """The mirror potential of gradient flow on w = u^D - v^D from u = v = alpha 1 (module docstring):
    HyperbolicPotential(beta = 2 alpha^2) for D = 2, DeepDiagonalPotential(alpha, D) for D >= 3.
    D_psi(w, 0) = Q_alpha^D(w)."""
    _check_alpha_depth(alpha, depth)
    if depth == 2:
        return HyperbolicPotential(beta=2.0 * float(alpha) ** 2)
    return DeepDiagonalPotential(alpha=float(alpha), depth=int(depth))


def diagonal_net_time_scale(alpha: float, depth: int = 2) -> float:
    """c with d/dt grad psi(w(t)) = -c grad L(w(t)) along gradient flow on (u, v), for the potential of
    `diagonal_net_potential`: c = 4 for D = 2 (psi = hyperbolic entropy with beta = 2 alpha^2) and
    c = D (D - 2) alpha^(D - 2) for D >= 3. Mirror flow at unit rate, run for time c t, is the same path."""
    _check_alpha_depth(alpha, depth)
    return 4.0 if depth == 2 else depth * (depth - 2.0) * float(alpha) ** (depth - 2)


def q_alpha(w, alpha: float, depth: int = 2) -> float:
    """Q_alpha^D(w) = D_psi(w, 0) (Woodworth et al. 2020): for D = 2, alpha^2 sum q(w_i / alpha^2) with
    q(z) = 2 - sqrt(4 + z^2) + z arcsinh(z / 2); for D >= 3, alpha^D sum q_D(w_i / alpha^D), q_D = int h_D^{-1}."""
    return diagonal_net_potential(alpha, depth).divergence(w, np.zeros_like(_vec(w)))


def q_alpha_interpolator(
    X, y, alpha: float, depth: int = 2, *, tol: float = 1e-13, max_rounding_error: float = 1e-7
) -> BregmanProjection:
    """argmin Q_alpha^D(w) s.t. Xw = y: the limit of gradient flow on the square loss for the diagonal network
    w = u^D - v^D from u = v = alpha 1, when it reaches zero loss (Woodworth et al. 2020, Theorem 1 for D = 2
    and Sec. 5 for D >= 3; S6). The Bregman projection of 0 for `diagonal_net_potential(alpha, depth)`,
    solved on the dual (`bregman_projection`), where w = 2 alpha^2 sinh(X^T nu) for D = 2 and
    alpha^D h_D(X^T nu) for D >= 3. alpha -> 0: the min-l1 interpolator; alpha -> infinity: min-l2.
    Raises ConfigError for alpha <= 0 or depth < 2, and ReferenceSolverError when, for D >= 3, alpha is too
    small to reach max_rounding_error in float64 (see DeepDiagonalPotential).
    """
    return bregman_projection(
        X, y, None, diagonal_net_potential(alpha, depth), tol=tol, max_rounding_error=max_rounding_error
    )
