"""The linear rule sign f(x; W) = sign <W^T a, x> of a two-layer network with a fixed outer layer a (Frei et al.
2023, Theorem 3.2 (4), and the noisy 2-XOR experiment of their Sec. 5), read at finite time.

- `sampled_disagreement`: the fraction of random inputs on which sign f(x; W) != sign <W^T a, x>, drawn exactly in
  the span of the neurons (any d);
- `input_distribution`: the inputs to draw (the data's own distribution where its generator says, else isotropic);
- `initial_W`, `linear_rule_disagreement`: the trained W against the untrained W(0) of one run on the same inputs;
- `linear_rule_verdict`: the verdict, trained count k against the untrained count k0, k <= k0 - 2 sqrt(k0).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from implicitbias.models.activations import activation
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import over_runs
from implicitbias.theorems.two_layer_common import leaky_slope, outer_signs, stored_W, two_layer


def sampled_disagreement(model, gamma: float, Ws, a, centres, noise: float, n: int, seed: int,
                         chunk: int = 25_000) -> list[float]:
    """For each W of `Ws` (m x d), the fraction of n random inputs where sign f(x; W) != sign <W^T a, x>, all W
    on the same inputs x = c + noise xi, c uniform over the rows of `centres` (k x d), xi ~ N(0, I_d).

    f(x; W) = a^T phi(W x) and <W^T a, x> = a^T (W x) depend on x only through W x, so the inputs are drawn in
    the span of the neurons: with P = [W_1; W_2; ...] (stacked rows), P x = P c + noise P xi and
    P xi ~ N(0, P P^T), drawn as V sqrt(Lambda) g from the eigendecomposition P P^T = V Lambda V^T, g ~ N(0, I).
    This is exact, costs O(n (k m)^2) whatever d, and so allows n = 10^5 inputs at d = 40000."""
    Ws = [np.asarray(W, np.float64) for W in Ws]
    a = np.asarray(a, np.float64)
    P = np.concatenate(Ws, axis=0)
    lam, V = np.linalg.eigh(P @ P.T)
    root = V * np.sqrt(np.clip(lam, 0.0, None))[None, :]
    shift = np.asarray(centres, np.float64) @ P.T  # (k, total rows)
    rng = np.random.default_rng(seed)
    wrong = np.zeros(len(Ws))
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        proj = shift[rng.integers(0, shift.shape[0], size)] + noise * rng.standard_normal((size, P.shape[0])) @ root.T
        row = 0
        for k, W in enumerate(Ws):
            pre = proj[:, row : row + W.shape[0]]
            row += W.shape[0]
            f = np.asarray(activation(model.activation, pre, gamma)) @ a
            wrong[k] += np.sum(np.sign(f) != np.sign(pre @ a))
    return [float(w / n) for w in wrong]


def initial_W(run, r: int) -> np.ndarray | None:
    """W(0) of run r, rebuilt from its init seed and scale (the model's own init)."""
    model, spec, ds = two_layer(run, r), run.runs[r], run.data[r]
    if model is None:
        return None
    return np.asarray(model.init(jax.random.PRNGKey(spec.seed), ds.d, spec.init_scale)[0]["W"], np.float64)


def input_distribution(ds, distribution: str = "data") -> tuple[np.ndarray, float, str]:
    """(centres, noise, description) of the inputs x = c + noise xi for `sampled_disagreement`.
    "data": the generator's own distribution where its info gives it (noisy 2-XOR: c in {+-mu_1, +-mu_2},
    GMM: c in {+-mu}, noise 1), else as "isotropic"; "isotropic": N(0, s^2 I_d), s^2 = mean ||x_i||^2 / d."""
    info = ds.info or {}
    if distribution == "data" and "mu1" in info and "mu2" in info:
        mu1, mu2 = np.asarray(info["mu1"]), np.asarray(info["mu2"])
        return np.stack([mu1, -mu1, mu2, -mu2]), 1.0, "the 2-XOR distribution x = z + xi, z ~ Unif{+-mu_1, +-mu_2}"
    if distribution == "data" and "mu" in info:
        mu = np.asarray(info["mu"])
        return np.stack([mu, -mu]), 1.0, "the mixture x = +-mu + xi"
    s = math.sqrt(float(np.mean(np.sum(ds.X**2, axis=1))) / ds.d)
    return np.zeros((1, ds.d)), s, "N(0, s^2 I_d), s^2 = mean ||x_i||^2 / d"


def linear_rule_disagreement(run, r: int, n: int, seed: int, distribution: str = "data") -> tuple[float, float]:
    """(trained, untrained) fraction of n inputs of `input_distribution` where sign f(x; W) != sign <W^T a, x>,
    for the stored final W and W(0) of run r, on the same inputs; (nan, nan) without a stored W."""
    W, a, g, model = stored_W(run, r), outer_signs(run, r), leaky_slope(run, r), two_layer(run, r)
    W0 = initial_W(run, r)
    if W is None or a is None or model is None or g is None or W0 is None:
        return math.nan, math.nan
    centres, noise, _ = input_distribution(run.data[r], distribution)
    trained, untrained = sampled_disagreement(model, g, [W, W0], a, centres, noise, n, seed)
    return trained, untrained


def linear_rule_verdict(theorem: str, statement: str, trained, base, n_in, *, where: str, labels) -> Verdict:
    """sign f(x; W) = sign <W^T a, x> read at finite time: the fraction of inputs where the trained network
    disagrees with its linear part (`trained`, per run) against the untrained W(0)'s on the same inputs (`base`),
    out of `n_in` inputs. At gamma near 1 an untrained network is nearly linear already, so agreement alone says
    little. The limit has no disagreement; read at finite time the count k must be below the untrained count k0
    by more than k0's binomial (Poisson) noise, k <= k0 - 2 sqrt(k0). With k0 < 4 that bound is negative and
    no count can pass: too few inputs (or an untrained network too close to linear) to tell, not_evaluated
    with the reason. It can fail: a trained network no more linear than at init has k ~ k0 > k0 - 2 sqrt(k0)."""
    trained, base, n_in = (np.asarray(v, np.float64) for v in (trained, base, n_in))
    k0 = base * n_in
    bound = (k0 - 2.0 * np.sqrt(k0)) / n_in
    notes = [f"untrained W(0) disagrees on {b:.4g} ({int(round(k))} of {int(n)}): bound k0 - 2 sqrt(k0)"
             if np.isfinite(k) else "no stored W" for b, k, n in zip(base, k0, n_in)]
    v = over_runs(theorem, "prediction", statement, trained, "<=", bound, where=where, labels=labels,
                  run_notes=notes)
    few = np.isfinite(k0) & (k0 < 4.0)
    if np.any(few) and v.outcome in ("holds", "fails"):
        v = dataclasses.replace(v, outcome="not_evaluated", note=v.note + (
            "; too few inputs to tell: the untrained network disagrees on fewer than 4 of them, so the bound "
            "k0 - 2 sqrt(k0) is below 0 and no count could pass"))
    return v
