"""Statistics over the trials of one cell: what a median of k trials, the usual way a paper reports a noisy
quantity, can come out as (Chistikov et al. 2023 report medians of five, S11)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["median_of_k", "quantile_of"]


def median_of_k(values, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact distribution of the median of k trials drawn without replacement from `values` (k odd, at most
    their number N): (the values sorted, the probability that each is the median). The median is the (m+1)-th
    smallest of the k, m = (k - 1) / 2, so the j-th smallest value (1-based) is it with probability
    C(j - 1, m) C(N - j, m) / C(N, k): every draw of k trials counted once, with no resampling noise."""
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if k % 2 == 0 or not 1 <= k <= n:
        raise ValueError(f"k = {k} is not allowed: expected an odd number of trials between 1 and {n}")
    m = (k - 1) // 2
    p = np.array([math.comb(j - 1, m) * math.comb(n - j, m) for j in range(1, n + 1)], dtype=float)
    return x, p / math.comb(n, k)


def quantile_of(x: np.ndarray, p: np.ndarray, q: float) -> float:
    """The q-quantile of a discrete distribution (values x ascending, probabilities p): the smallest value whose
    cumulative probability reaches q."""
    return float(x[min(np.searchsorted(np.cumsum(p), q - 1e-12), x.size - 1)])
