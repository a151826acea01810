"""Gradient descent and its variants of SCIENCE.md section 0, as optax transformations:

- GD: theta_{k+1} = theta_k - lr grad L(theta_k)                          (`optax.sgd`);
- SGD: the same on a batch of `batch_size` points, drawn without replacement each epoch from the run's seed;
- normalised GD: theta_{k+1} = theta_k - lr grad L(theta_k) / L(theta_k)
  (`scale_by_inverse_loss` chained with `optax.sgd`; fast margin maximisation, Nacson et al. 2019).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import jax
import optax
import pydantic

from implicitbias._spec import ConfigError
from implicitbias.training.methods.base import DiscreteMethod


class GD(DiscreteMethod):
    """Gradient descent theta_{k+1} = theta_k - lr grad L(theta_k)."""

    kind: Literal["gd"] = "gd"

    def optimizer(self, hp):
        return optax.sgd(hp["lr"])


class SGD(DiscreteMethod):
    """SGD on batches of `batch_size` drawn without replacement each epoch, from the run's seed."""

    kind: Literal["sgd"] = "sgd"
    batch_size: int = pydantic.Field(32, ge=1)
    stochastic: ClassVar[bool] = True

    def optimizer(self, hp):
        return optax.sgd(hp["lr"])

    def minibatch(self, hp, step, X, y):
        """Batch step % (n // batch_size) of the permutation of epoch step // (n // batch_size)."""
        n = X.shape[0]
        n_batches = n // self.batch_size
        epoch, b = step // n_batches, step % n_batches
        key = jax.random.fold_in(jax.random.PRNGKey(hp["seed"]), 1_000_003 + epoch)
        perm = jax.random.permutation(key, n)
        idx = jax.lax.dynamic_slice(perm, (b * self.batch_size,), (self.batch_size,))
        return X[idx], y[idx]

    def check_data(self, n: int) -> None:
        if self.batch_size > n:
            raise ConfigError(f"method.batch_size = {self.batch_size} is not allowed: expected at most n = {n}")


def scale_by_inverse_loss() -> optax.GradientTransformationExtraArgs:
    """Divide the gradient by the loss of the step, passed as the extra argument `value` (as in optax)."""

    def update(updates, state, params=None, *, value, **extra):
        return jax.tree_util.tree_map(lambda u: u / value, updates), state

    return optax.GradientTransformationExtraArgs(lambda params: optax.EmptyState(), update)


class NormalizedGD(DiscreteMethod):
    """Normalised GD theta_{k+1} = theta_k - lr grad L(theta_k) / L(theta_k) (fast margin maximisation)."""

    kind: Literal["normalized_gd"] = "normalized_gd"

    def optimizer(self, hp):
        return optax.chain(scale_by_inverse_loss(), optax.sgd(hp["lr"]))


__all__ = ["GD", "SGD", "NormalizedGD", "scale_by_inverse_loss"]
