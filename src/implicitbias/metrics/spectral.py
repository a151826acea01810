"""Spectral quantities of a weight matrix (SCIENCE.md, section 0, "Quantities measured along training").

Every function takes one matrix W of shape (m, d), is pure JAX, and works under `jit` and `vmap`.
Ranks are computed from the singular values sigma_1 >= sigma_2 >= ... >= 0.  Quantities whose definition
divides by sigma_1 or by sum_k sigma_k are *defined as 0 for the zero matrix* (the rank of 0 is 0),
so that a run that collapses to W = 0 records numbers, not NaN.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def singular_values(W) -> jnp.ndarray:
    """The singular values of W in non-increasing order, shape (min(m, d),)."""
    return jnp.linalg.svd(jnp.asarray(W), compute_uv=False)


def spectral_norm(W) -> jnp.ndarray:
    """||W||_2 = sigma_1(W)."""
    return singular_values(W)[0]


def frobenius_norm(W) -> jnp.ndarray:
    """||W||_F = sqrt(sum_jk W_jk^2) (computed from the entries, not from the singular values)."""
    W = jnp.asarray(W)
    return jnp.sqrt(jnp.sum(W * W))


def nuclear_norm(W) -> jnp.ndarray:
    """||W||_* = sum_k sigma_k(W); S11 predicts ||W||_* -> ||v*|| = 1 as the init scale -> 0."""
    return jnp.sum(singular_values(W))


def _safe_divide(num, den):
    """num / den where den > 0, else 0 (the zero-matrix convention of this module)."""
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0)


def stable_rank(W) -> jnp.ndarray:
    """srank(W) = ||W||_F^2 / ||W||_2^2 = sum_k sigma_k^2 / sigma_1^2, in [1, rank W]; 0 for W = 0.

    The stable rank of Frei et al. 2023 (their Theorem 3.2 bounds it by a constant for the network of S1).
    """
    s = singular_values(W)
    return _safe_divide(jnp.sum(s * s), s[0] * s[0])


def numerical_rank(W, tol=1e-6) -> jnp.ndarray:
    """#{k : sigma_k > tol * sigma_1}, an integer array; 0 for W = 0."""
    s = singular_values(W)
    return jnp.sum(s > tol * s[0])


def effective_rank(W) -> jnp.ndarray:
    """exp(H(p)) with p_k = sigma_k / sum_l sigma_l and H(p) = -sum_k p_k log p_k (0 log 0 = 0).

    Roy & Vetterli 2007, "The effective rank: a measure of effective dimensionality", Definition 1.
    It lies in [1, rank W] for W != 0; we define it as 0 for W = 0.
    """
    s = singular_values(W)
    p = _safe_divide(s, jnp.sum(s))
    plogp = jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0)
    return jnp.where(s[0] > 0, jnp.exp(-jnp.sum(plogp)), 0.0)


def singular_value_ratio(W, k: int) -> jnp.ndarray:
    """sigma_k / sigma_1 with k counted from 1 (k = 3 gives sigma_3 / sigma_1, the "rank <= 2" check).

    `k` must be a Python int.  sigma_k is 0 when k > min(m, d), and the ratio is 0 for W = 0.
    """
    if k < 1:
        raise ValueError(f"k = {k} is not allowed: singular values are counted from k = 1")
    s = singular_values(W)
    if k > s.shape[0]:
        return jnp.zeros((), s.dtype)
    return _safe_divide(s[k - 1], s[0])


def spectral_summary(s) -> dict:
    """Every recorded spectral metric from singular values `s` (NumPy, shape (..., k), non-increasing along the
    last axis, as `np.linalg.svd(W, compute_uv=False)` returns them for a stack of matrices W): frobenius,
    spectral, nuclear, stable_rank, numerical_rank (tol 1e-6), effective_rank, sigma2_ratio, sigma3_ratio.
    The same definitions and zero-matrix conventions as the JAX functions above, on the host."""
    s = np.asarray(s, dtype=float)
    top = s[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.sum(s, axis=-1)
        p = np.where(total[..., None] > 0, s / np.where(total > 0, total, 1.0)[..., None], 0.0)
        plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    safe = np.where(top > 0, top, 1.0)
    sq = np.sum(s * s, axis=-1)
    out = {
        "frobenius": np.sqrt(sq),
        "spectral": top,
        "nuclear": total,
        "stable_rank": np.where(top > 0, sq / (safe * safe), 0.0),
        "numerical_rank": np.sum(s > 1e-6 * top[..., None], axis=-1),
        "effective_rank": np.where(top > 0, np.exp(-np.sum(plogp, axis=-1)), 0.0),
    }
    for k in (2, 3):
        out[f"sigma{k}_ratio"] = s[..., k - 1] / safe if s.shape[-1] >= k else np.zeros_like(top)
    return out
