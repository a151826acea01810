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
3. solve the non-negative least-squares problem lambda* = argmin_{lambda >= 0} ||theta_tilde - G lambda||
   on the host with SciPy (after a QR reduction of G to an n x n problem, then a least-squares polish on the
   support of lambda*), and evaluate the residual explicitly in parameter space;
4. report the stationarity residual eps = ||theta_tilde - G lambda*|| / ||theta_tilde|| and the
   complementarity residual delta = sum_i lambda*_i (q_tilde_i - 1).  Both are invariant under
   theta -> c theta, c > 0, and both tend to 0 along gradient flow.

Subgradient convention at kinks.  Where a pre-activation is exactly 0, f is not differentiable and the KKT
conditions use a Clarke subgradient.  We use the element that autodiff returns for the activations of
`implicitbias.models.activations`: the left derivative, ReLU'(0) = 0 and leaky ReLU'(0) = gamma.  A KKT point
certified with another element of the subdifferential may therefore show a positive residual here; along
training exact zeros are non-generic.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
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


@functools.partial(jax.jit, static_argnames=("f", "degree"))
def kkt_system(f, theta, X, y, degree: int, args=()):
    """The JAX half of `kkt_residual`: (theta_tilde_flat (P,), G (P, n), q_tilde (n,), min_i q_i), where
    q_tilde_i = y_i f(x_i; theta_tilde) is evaluated at the rescaled parameters (min_i q_tilde_i = 1 when f
    is homogeneous of degree `degree`).

    `f(theta, x, *args)` is the model output on one input; `f` and `degree` are static, so pass the same
    function object at every checkpoint to reuse the compiled code.  G[:, i] = y_i grad f(x_i; theta_tilde),
    with the autodiff subgradient convention of the module docstring.  If min_i q_i <= 0 the outputs are
    meaningless (the caller checks min_i q_i).
    """
    y = jnp.asarray(y, dtype=float)
    q = y * jax.vmap(lambda x: f(theta, x, *args))(X)
    qmin = jnp.min(q)
    safe = jnp.where(qmin > 0, qmin, 1.0)
    theta_tilde = jax.tree_util.tree_map(lambda p: p * safe ** (-1.0 / degree), theta)

    def column(x, yi):
        return yi * ravel_pytree(jax.grad(f)(theta_tilde, x, *args))[0]

    G = jax.vmap(column)(X, y).T
    q_tilde = y * jax.vmap(lambda x: f(theta_tilde, x, *args))(X)
    return ravel_pytree(theta_tilde)[0], G, q_tilde, qmin


def nonnegative_least_squares(G, t) -> np.ndarray:
    """argmin_{lambda >= 0} ||t - G lambda||_2 for G of shape (P, n), t of shape (P,), on the host.

    For P > n the problem is reduced with a thin QR factorisation G = QR to min ||Q^T t - R lambda||
    (same minimiser), solved by `scipy.optimize.nnls`; the solution is then polished by an unconstrained
    least-squares solve on its support, kept if it stays positive there.
    """
    G = np.asarray(G, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    P, n = G.shape
    if P > n:
        Q, R = scipy.linalg.qr(G, mode="economic")
        A, b = R, Q.T @ t
    else:
        A, b = G, t
    lam, _ = scipy.optimize.nnls(A, b, maxiter=max(100, 10 * n))
    support = lam > 0
    if support.any():
        polished, *_ = np.linalg.lstsq(G[:, support], t, rcond=None)
        if np.all(polished > 0):
            candidate = np.zeros_like(lam)
            candidate[support] = polished
            if np.linalg.norm(t - G @ candidate) <= np.linalg.norm(t - G @ lam):
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
    t, G, q_tilde, qmin = jax.device_get(kkt_system(f, theta, X, y, degree, args))
    t, G, q_tilde = (np.asarray(a, dtype=np.float64) for a in (t, G, q_tilde))
    qmin, n = float(qmin), q_tilde.shape[0]
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
    lam = nonnegative_least_squares(G, t)
    eps = np.linalg.norm(t - G @ lam) / np.linalg.norm(t)
    delta = float(lam @ (q_tilde - 1.0))
    return KKTResidual(stationarity=float(eps), complementarity=delta, multipliers=lam, min_margin=qmin)
