"""A training problem as pure functions: the risk of a model on data, and per-member setup.

A *member* of a batch is one run; it owns a PRNG key, an init scale, a learning rate and
optionally overrides of the model's numeric fields (for instance `model.gamma`).  Everything in
this module is traced inside one vmapped, jitted call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from implicitbias.losses import Loss
from implicitbias.models.base import Model


@dataclass(frozen=True)
class Problem:
    """The static part of a run: model, loss and the names of model fields overridden per member
    (their values are in `hp["model"]`, one per member)."""

    model: Model
    loss: Loss
    model_overrides: tuple[str, ...] = ()

    def member_model(self, hp: dict[str, Any]) -> Model:
        """The model of one member: its traced fields replaced by the member's values in `hp["model"]`."""
        if not self.model_overrides:
            return self.model
        return self.model.replace(**{k: hp["model"][k] for k in self.model_overrides})

    def risk(self, hp, theta, const, X, y):
        """The empirical risk of one member on (X, y)."""
        model = self.member_model(hp)
        return self.loss.risk(model.predict(theta, const, X), y)

    def log_risk(self, hp, theta, const, X, y):
        """log of the empirical risk of one member, computed without underflow (see `Loss.log_risk`)."""
        model = self.member_model(hp)
        return self.loss.log_risk(model.predict(theta, const, X), y)

    def init(self, hp, d: int):
        """(theta, const) of one member at its init seed and scale, for inputs of dimension d."""
        return self.member_model(hp).init(jax.random.PRNGKey(hp["seed"]), d, hp["init_scale"])


def tree_where(cond, a, b):
    """Elementwise select between two pytrees of the same structure."""
    return jax.tree_util.tree_map(lambda u, v: jnp.where(cond, u, v), a, b)


def tree_norm(tree):
    """The Euclidean norm of all leaves of a pytree together."""
    return jnp.sqrt(sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(tree)))
