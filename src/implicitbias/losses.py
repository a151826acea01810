"""Losses of SCIENCE.md section 0, evaluated stably.

Classification losses are functions of the margin q = y f(x); the square loss is a function of
(f(x), y) with the 1/2 convention L = (1/(2n)) sum (f - y)^2.  `Loss.per_example(pred, y)` is
what the empirical risk averages.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from implicitbias._spec import Spec


def logistic(q):
    """l(q) = log(1 + exp(-q)), as softplus(-q): finite and exact at |q| = 1e3 in float32 and float64."""
    return jax.nn.softplus(-q)


def exponential(q):
    """l(q) = exp(-q). Exact where exp(-q) is representable (q > -709 in float64, q > -88 in float32);
    beyond that the true value overflows every float type and the trainer reports divergence."""
    return jnp.exp(-q)


def log_logistic(q):
    """log l(q) for the logistic loss, finite for every q: log softplus(-q), and -q + log1p(-e^{-q}/2)
    (its expansion, exact to float64 precision) where softplus(-q) would underflow."""
    big = q > 30.0
    safe = jnp.where(big, 0.0, q)
    return jnp.where(big, -q + jnp.log1p(-0.5 * jnp.exp(-jnp.where(big, q, 30.0))),
                     jnp.log(jax.nn.softplus(-safe)))


def square(pred, y):
    """l(f, y) = (f - y)^2 / 2."""
    return 0.5 * (pred - y) ** 2


class Loss(Spec):
    """A loss: `logistic`, `exponential` (classification, labels in {-1, +1}) or `square` (regression)."""

    name: Literal["logistic", "exponential", "square"] = "logistic"

    @property
    def is_classification(self) -> bool:
        return self.name != "square"

    def per_example(self, pred, y):
        if self.name == "logistic":
            return logistic(y * pred)
        if self.name == "exponential":
            return exponential(y * pred)
        return square(pred, y)

    def risk(self, pred, y):
        """Empirical risk: the mean of `per_example` over the examples."""
        return jnp.mean(self.per_example(pred, y))

    def log_risk(self, pred, y):
        """log L, computed without underflow (logsumexp of the per-example log-losses) for the
        classification losses, so that gradient flow in the loss-rescaled clock stays finite at
        margins where L itself is below the float64 range."""
        n = jnp.shape(y)[0]
        if self.name == "logistic":
            return jax.scipy.special.logsumexp(log_logistic(y * pred)) - jnp.log(n)
        if self.name == "exponential":
            return jax.scipy.special.logsumexp(-y * pred) - jnp.log(n)
        return jnp.log(self.risk(pred, y))

    @property
    def value_at_zero(self) -> float:
        """l(0): the Lyu-Li threshold is L < l(0)/n."""
        return {"logistic": float(jnp.log(2.0)), "exponential": 1.0, "square": float("nan")}[self.name]
