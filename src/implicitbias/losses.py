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


def _other_classes(scores, label):
    """m = log sum_{c != y} e^{s_c - s_y}: minus the softened multiclass margin (shape (...))."""
    idx = jnp.asarray(label).astype(jnp.int32)[..., None]
    picked = jnp.take_along_axis(scores, idx, axis=-1)
    own = jnp.arange(scores.shape[-1]) == idx
    return jax.scipy.special.logsumexp(jnp.where(own, -jnp.inf, scores - picked), axis=-1)


def cross_entropy(scores, label):
    """Multiclass cross-entropy l(s, y) = log sum_c e^{s_c} - s_y (Soudry et al. 2018, Sec. 4.3), from scores s of
    shape (..., k) and integer-valued labels y in 0..k-1 of shape (...), as softplus(m) with
    m = log sum_{c != y} e^{s_c - s_y}: exact (no cancellation) and finite at score gaps of +-1e3."""
    return jax.nn.softplus(_other_classes(scores, label))


def log_cross_entropy(scores, label):
    """log l(s, y) of the cross-entropy, finite for every margin: log softplus(m) = log_logistic(-m)."""
    return log_logistic(-_other_classes(scores, label))


def square(pred, y):
    """l(f, y) = (f - y)^2 / 2."""
    return 0.5 * (pred - y) ** 2


class Loss(Spec):
    """A loss: `logistic`, `exponential` (classification, labels in {-1, +1}), `cross_entropy` (multiclass, labels
    in 0..k-1, the model returns k scores) or `square` (regression)."""

    name: Literal["logistic", "exponential", "square", "cross_entropy"] = "logistic"

    @property
    def is_classification(self) -> bool:
        return self.name != "square"

    @property
    def task(self) -> str:
        """The task of the data this loss is for: classification, multiclass or regression."""
        return {"square": "regression", "cross_entropy": "multiclass"}.get(self.name, "classification")

    def per_example(self, pred, y):
        if self.name == "cross_entropy":
            return cross_entropy(pred, y)
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
        if self.name == "cross_entropy":
            return jax.scipy.special.logsumexp(log_cross_entropy(pred, y)) - jnp.log(n)
        return jnp.log(self.risk(pred, y))

    @property
    def value_at_zero(self) -> float:
        """l(0): the Lyu-Li threshold is L < l(0)/n."""
        return {"logistic": float(jnp.log(2.0)), "exponential": 1.0}.get(self.name, float("nan"))
