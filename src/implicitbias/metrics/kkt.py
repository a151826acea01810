"""The KKT residual of the parameter-space margin problem.

SCIENCE.md S10; Lyu & Li 2020, Ji & Telgarsky 2020.

For an L_h-homogeneous model, gradient flow on the logistic or exponential loss converges in direction to a
KKT point of

    minimise 1/2 ||theta||^2   subject to   y_i f(x_i; theta) >= 1  for all i

(Lyu & Li 2020, Theorem 4.4).  Its KKT conditions at theta are: feasibility q_i = y_i f(x_i; theta) >= 1,
stationarity theta = sum_i lambda_i y_i grad_theta f(x_i; theta) with lambda >= 0, and complementarity
lambda_i (q_i - 1) = 0.  `kkt_residual` measures how far a theta with all q_i > 0 is from satisfying them:

1. rescale theta_tilde = theta / (min_i q_i)^{1/L_h}, so that min_i y_i f(x_i; theta_tilde) = 1
   (feasible, with the smallest margin active);
2. form the columns g_i = y_i grad_theta f(x_i; theta_tilde) (flattened) of G, in JAX (`kkt_system`);
3. reduce the non-negative least-squares problem lambda* = argmin_{lambda >= 0} ||theta_tilde - G lambda||
   with a thin QR factorisation of G, in JAX (so only n x n numbers leave the accelerator), and solve it on
   the host with SciPy, polished by a least-squares solve on the support of lambda*;
4. report the stationarity residual eps = ||theta_tilde - G lambda*|| / ||theta_tilde|| and the
   complementarity residual delta = sum_i lambda*_i (q_tilde_i - 1).  Both are invariant under
   theta -> c theta, c > 0, and both tend to 0 along gradient flow.

Subgradient convention at kinks.  Where a pre-activation is exactly 0, f is not differentiable and the KKT
conditions use a Clarke subgradient.  We use the element that autodiff returns for the activations of
`implicitbias.models.activations`: the left derivative, ReLU'(0) = 0 and leaky ReLU'(0) = gamma.  A KKT point
certified with another element of the subdifferential may therefore show a positive residual here; along
training exact zeros are non-generic.

Non-unique multipliers.  If the columns of G are linearly dependent (more points than parameters, or
degenerate data), lambda* is not unique and delta depends on which minimiser NNLS returns; eps does not.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

#: how far min_i y_i f(x_i; theta_tilde) may be from 1 before the degree is reported as wrong
_DEGREE_CHECK_RTOL = 1e-6


@dataclasses.dataclass(frozen=True)
class KKTResidual:
    """Result of `kkt_residual`.

    stationarity: eps = min_{lambda >= 0} ||theta_tilde - G lambda|| / ||theta_tilde||.
    complementarity: delta = sum_i lambda*_i (q_tilde_i - 1) >= 0.
    multipliers: lambda*, shape (n,).
    min_margin: min_i y_i f(x_i; theta) at the theta passed in (before rescaling).
    valid: False when some margin is <= 0 (or not finite), or when the rescaled smallest margin is not 1
        (f is not homogeneous of the given degree); then eps, delta and lambda* are nan.
    message: why the result is not valid and what to do ("" when valid).
    """

    stationarity: float
    complementarity: float
    multipliers: np.ndarray
    min_margin: float
    valid: bool = True
    message: str = ""


class KKTSystem(NamedTuple):
    """The NNLS problem of S10 reduced to k = min(P, n) rows, from a thin QR factorisation G = Q R.

    Since ||theta_tilde - G lambda||^2 = ||b - R lambda||^2 + perp^2 with b = Q^T theta_tilde and
    perp = ||theta_tilde - Q b|| (the part of theta_tilde outside the span of the gradients, formed explicitly
    so that small residuals are not lost to cancellation), the host only needs these small arrays.
    """

    R: jnp.ndarray  # (k, n)
    b: jnp.ndarray  # (k,)
    perp: jnp.ndarray  # ||theta_tilde - Q Q^T theta_tilde||
    theta_norm: jnp.ndarray  # ||theta_tilde||
    q_tilde: jnp.ndarray  # (n,) margins y_i f(x_i; theta_tilde)
    min_margin: jnp.ndarray  # min_i y_i f(x_i; theta) before rescaling


@functools.partial(jax.jit, static_argnames=("f", "degree"))
def kkt_system(f, theta, X, y, degree: int, args=()) -> KKTSystem:
    """The JAX half of `kkt_residual`: rescale theta, form G (P x n) with columns
    G[:, i] = y_i grad_theta f(x_i; theta_tilde) (autodiff, with the subgradient convention of the module
    docstring) and reduce the NNLS problem to the small `KKTSystem`, on the accelerator.

    `f(theta, x, *args)` is the model output on one input; `f` and `degree` are static, so pass the same
    function object at every checkpoint to reuse the compiled code.  q_tilde is evaluated at theta_tilde
    (its minimum is 1 when f is homogeneous of degree `degree`).  If min_i q_i <= 0 the outputs other than
    `min_margin` are meaningless (the caller checks it).
    """
    y = jnp.asarray(y, dtype=float)
    q = y * jax.vmap(lambda x: f(theta, x, *args))(X)
    qmin = jnp.min(q)
    safe = jnp.where(qmin > 0, qmin, 1.0)
    theta_tilde = jax.tree_util.tree_map(lambda p: p * safe ** (-1.0 / degree), theta)
    t = ravel_pytree(theta_tilde)[0]

    def column(x, yi):
        return yi * ravel_pytree(jax.grad(f)(theta_tilde, x, *args))[0]

    G = jax.vmap(column)(X, y).T
    Q, R = jnp.linalg.qr(G, mode="reduced")
    b = Q.T @ t
    q_tilde = y * jax.vmap(lambda x: f(theta_tilde, x, *args))(X)
    return KKTSystem(R, b, jnp.linalg.norm(t - Q @ b), jnp.linalg.norm(t), q_tilde, qmin)


def nonnegative_least_squares(A, b) -> np.ndarray:
    """argmin_{lambda >= 0} ||b - A lambda||_2 on the host, for a small A (k x n) and b (k,).

    Solved by `scipy.optimize.nnls` (Lawson-Hanson active set), then polished by an unconstrained
    least-squares solve on the support of the solution, kept if it stays positive and does not increase
    the residual.
    """
    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    lam, _ = scipy.optimize.nnls(A, b, maxiter=max(100, 10 * A.shape[1]))
    support = lam > 0
    if support.any():
        polished, *_ = np.linalg.lstsq(A[:, support], b, rcond=None)
        if np.all(polished > 0):
            candidate = np.zeros_like(lam)
            candidate[support] = polished
            if np.linalg.norm(b - A @ candidate) <= np.linalg.norm(b - A @ lam):
                lam = candidate
    return lam


def _invalid(n: int, qmin: float, message: str) -> KKTResidual:
    nan = float("nan")
    return KKTResidual(nan, nan, np.full(n, np.nan), qmin, valid=False, message=message)


def kkt_residual(f, theta, X, y, degree: int, args=()) -> KKTResidual:
    """The KKT residual (eps, delta, lambda*) of S10 at theta; see the module docstring.

    f: `f(theta, x, *args) -> scalar`, the model on one input, L_h-homogeneous in theta (a pytree).
    X: inputs, shape (n, ...); y: labels in {-1, +1}, shape (n,); degree: L_h (a positive int);
    args: extra arguments of f, traced (e.g. the fixed arrays `const` of a model).
    Requires every margin q_i = y_i f(x_i; theta) > 0; otherwise returns a `KKTResidual` with valid=False
    and nan residuals.  Called at checkpoints: the JAX part (`kkt_system`) is jitted, the NNLS runs on host.
    """
    if not isinstance(degree, int) or degree < 1:
        raise ValueError(
            f"degree = {degree!r} is not allowed: the KKT residual needs a positively homogeneous model "
            "with integer degree L_h >= 1 (Model.homogeneity is None for non-homogeneous models)"
        )
    system = KKTSystem(
        *(np.asarray(a, dtype=np.float64) for a in jax.device_get(kkt_system(f, theta, X, y, degree, args)))
    )
    q_tilde = system.q_tilde
    qmin, n = float(system.min_margin), q_tilde.shape[0]
    if not (np.isfinite(qmin) and qmin > 0):
        return _invalid(
            n,
            qmin,
            f"min_i y_i f(x_i) = {qmin:.3g} <= 0: the KKT residual is defined only once every training point "
            "is classified correctly; train longer (or check the labels) before measuring it",
        )
    if not abs(q_tilde.min() - 1.0) <= _DEGREE_CHECK_RTOL:
        return _invalid(
            n,
            qmin,
            f"after rescaling by (min_i q_i)^(-1/{degree}) the smallest margin is {q_tilde.min():.12g}, "
            f"not 1: f is not homogeneous of degree {degree} in theta; pass degree = Model.homogeneity",
        )
    lam = nonnegative_least_squares(system.R, system.b)
    eps = np.hypot(system.perp, np.linalg.norm(system.b - system.R @ lam)) / system.theta_norm
    delta = float(lam @ (q_tilde - 1.0))
    return KKTResidual(stationarity=float(eps), complementarity=delta, multipliers=lam, min_margin=qmin)
