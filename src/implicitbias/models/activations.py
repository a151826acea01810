"""Activation functions of the two-layer networks and the single neuron.

At the kink z = 0 every activation uses its left derivative (ReLU'(0) = 0, leaky ReLU'(0) = gamma):
this fixed element of the subdifferential is what autodiff returns, and what the KKT residual of
S10 uses.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

#: the activations a two-layer network or a neuron may use (`activation(name)` gives the function)
ACTIVATIONS = ("relu", "leaky_relu", "smooth_leaky_relu", "identity")

#: activations phi with phi(c z) = c phi(z) for c > 0
POSITIVELY_HOMOGENEOUS = frozenset({"relu", "leaky_relu", "identity"})


def activation(name: str, z, gamma=1.0):
    """phi(z) for the named activation; `gamma` is the leaky slope (ignored by relu and identity)."""
    if name == "relu":
        return jnp.where(z > 0, z, jnp.zeros_like(z))
    if name == "leaky_relu":
        return jnp.where(z > 0, z, gamma * z)
    if name == "smooth_leaky_relu":
        # Frei et al. 2023, Sec. 4: phi(z) = gamma z + (1 - gamma) log((1 + e^z) / 2), phi(0) = 0, 1/4-smooth.
        return gamma * z + (1.0 - gamma) * (jax.nn.softplus(z) - jnp.log(2.0))
    if name == "identity":
        return z
    raise ValueError(f"activation = {name!r} is not allowed: expected one of {ACTIVATIONS}")
