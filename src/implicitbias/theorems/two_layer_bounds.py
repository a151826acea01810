"""Finite-time readings of the asymptotic claims about two-layer ReLU networks on the square loss
(Chistikov et al. 2023, S11; Boursier et al. 2022, S12), computed from a run's final parameters.

N(x) = sum_j a_j [<w_j, x>]_+, L = (1/2n) ||r||^2 with r = N(X) - y.

- `linearised_rate`: near an interpolator the flow is linear in the residual, dr/dt = -(1/n) K r with
  K = J J^T the Gram matrix of the Jacobian J = dN(X)/dtheta. Then d/dt log L = -2 r^T K r / (n ||r||^2)
  lies in [-2 lambda_max(K)/n, -2 lambda_min(K)/n] at every instant, and the average decay rate between two
  checkpoints does too: "the loss converges to 0 exponentially" becomes "the late decay rate of log L is
  2 lambda_min(K)/n" (the slowest mode dominates the late residual), with K at the final parameters.
- `loss_rate_verdict`: that prediction, read against the nearest wrong rate, 0 (a loss that is not
  converging exponentially: a plateau, or a power law, whose rate p/t -> 0): the measured rate over the last
  stretch of the run, divided by 2 lambda_min(K)/n, must be at least 1/2, the midpoint between the two.
  The last stretch is the last two checkpoints whose loss the integrator resolves: an error-controlled
  gradient-flow solver moves theta by up to about rtol ||theta|| per step beyond the flow, which moves the
  residual by up to sqrt(lambda_max(K)) rtol ||theta||; below the loss L_floor = (that)^2 / 2n the decay
  it records is the solver's, not the flow's (GD has no such floor: its steps are the method).
- `rank_one_bounds`: how far ||theta||^2 and ||W||_* may be from their rank-1 limits 2||v*|| and
  sqrt(||v*||) at a finite loss and a finite alignment, if the network is the rank-1 limit's bundle of
  neurons along v* (derivation in its docstring).
"""

from __future__ import annotations

import math

import numpy as np

from implicitbias.metrics.neurons import WEIGHT_REL
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import over_runs
from implicitbias.training.methods import GradientFlow


def final_parameters(results, r: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(W, a) of run r at its final checkpoint (a trained outer layer `theta.a` or a fixed `const.a`)."""
    if "theta.W" not in results.data_vars:
        return None
    for name in ("theta.a", "const.a"):
        if name in results.data_vars:
            W = np.asarray(results["theta.W"].values[r], dtype=np.float64)
            return W, np.asarray(results[name].values[r], dtype=np.float64).reshape(-1)
    return None


def linearised_rate(W, a, X) -> tuple[float, float]:
    """(2 lambda_min(K)/n, 2 lambda_max(K)/n): the slowest and fastest decay rates of L under the flow
    linearised at (W, a), K = J J^T, J = dN(X)/d(a, W) (both layers trained; the kink at 0 taken as
    inactive).

    K is formed without J (n x m(d + 1): 1.7 GB at n = d = 1024, m = 200): the rows of J for point i are
    [relu(<w_j, x_i>)]_j and [a_j 1(<w_j, x_i> > 0) x_i]_j, so K = R R^T + ((D a^2) D^T) * (X X^T) with
    R = relu(X W^T), D = 1(X W^T > 0) and * the entrywise product: O(n^2 (m + d)) instead of O(n^2 m d)."""
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    n = X.shape[0]
    pre = X @ W.T
    relu = np.maximum(pre, 0.0)
    active = (pre > 0).astype(np.float64)
    K = relu @ relu.T + ((active * a**2) @ active.T) * (X @ X.T)
    ev = np.linalg.eigvalsh(K)
    return 2.0 * float(ev[0]) / n, 2.0 * float(ev[-1]) / n


def last_decay_rate(time, loss, floor: float = 0.0) -> tuple[float, str]:
    """The late decay rate -d log L/dt of one run that the integrator resolves, and a description.

    With a the last distinct checkpoint (t > 0) whose loss is above `floor`: the faster of the stretch
    (a - 1, a), the last one resolved at both ends, and the stretch (a, a + 1) that crosses the floor, its
    end clipped up to 4 floor (the recorded residual is within sqrt(floor) of the flow's, so the flow's loss
    there is at most (sqrt(L) + sqrt(floor))^2 <= 4 max(L, floor)): both under-estimate the flow's rate.
    nan when no stretch exists."""
    t = np.asarray(time, dtype=np.float64).ravel()
    L = np.asarray(loss, dtype=np.float64).ravel()
    keep = np.isfinite(t) & np.isfinite(L) & (L > 0) & (t > 0)
    t, L = t[keep], L[keep]
    fresh = np.r_[True, np.diff(t) > 0] if t.size else np.zeros(0, bool)
    t, L = t[fresh], L[fresh]
    above = np.flatnonzero(L > floor)
    if above.size == 0 or t.size < 2:
        return math.nan, f"fewer than two checkpoints with t > 0, or none with L above the floor {floor:.3g}"
    a = int(above[-1])
    best, what = -math.inf, ""
    if a >= 1:
        best = -(math.log(L[a]) - math.log(L[a - 1])) / (t[a] - t[a - 1])
        what = f"L {L[a - 1]:.3g} -> {L[a]:.3g} over t {t[a - 1]:.4g} -> {t[a]:.4g}"
    if a + 1 < t.size:
        end = max(L[a + 1], 4.0 * floor)
        rate = -(math.log(end) - math.log(L[a])) / (t[a + 1] - t[a])
        if rate > best:
            best, what = rate, f"L {L[a]:.3g} -> {L[a + 1]:.3g} (taken as {end:.3g}) over t {t[a]:.4g} -> {t[a + 1]:.4g}"
    return best, what


def loss_rate_verdict(theorem: str, run, keep: np.ndarray, labels) -> Verdict:
    """"loss -> 0 exponentially at the linearised rate", on the runs with `keep` (see the module docstring):
    measured (late decay rate of log L) / (2 lambda_min(K)/n) >= 1/2, worst run."""
    res = run.results
    statement = ("loss -> 0 exponentially at the linearised flow's rate: late decay rate of log L / "
                 "(2 lambda_min(K)/n), K = J J^T at the final parameters (competitor: rate 0)")
    if "time" not in res.data_vars or "loss" not in res.data_vars or not np.any(keep):
        why = "no run to evaluate" if not np.any(keep) else "the loss curve (time, loss) is not recorded"
        return over_runs(theorem, "prediction", statement, None, ">=", 0.5, note=why)
    ratio, notes = np.full(run.n_runs, np.nan), [""] * run.n_runs
    for r in np.flatnonzero(keep):
        params = final_parameters(res, r)
        if params is None:
            notes[r] = "no final parameters recorded"
            continue
        X = run.data[r].X
        lo, hi = linearised_rate(*params, X)
        method = run.runs[r].method
        rtol = float(method.max_rtol) if isinstance(method, GradientFlow) else 0.0
        theta = math.sqrt(float(np.sum(params[0] ** 2) + np.sum(params[1] ** 2)))
        floor = (math.sqrt(hi * X.shape[0] / 2.0) * rtol * theta) ** 2 / (2 * X.shape[0])
        rate, what = last_decay_rate(res["time"].values[r], res["loss"].values[r], floor)
        ratio[r] = rate / lo if lo > 0 else math.nan
        notes[r] = (f"rate {rate:.4g}, linearised [{lo:.4g}, {hi:.4g}] (2 lambda_min(K)/n, 2 lambda_max(K)/n); "
                    f"{what} (solver floor L {floor:.2g}); final loss {res['loss'].values[r][-1]:.3g}")
    idx = np.flatnonzero(keep)
    return over_runs(theorem, "prediction", statement, ratio[idx], ">=", 0.5, where="over the last stretch",
                     labels=[labels[i] for i in idx], run_notes=[notes[i] for i in idx],
                     note="bound 1/2: the midpoint between the linearised rate and the rate 0 of a loss that does "
                          "not converge exponentially")


def rank_one_bounds(W, a, X, y, v_star, loss: float, rel: float = WEIGHT_REL) -> dict:
    """Finite-time bounds on the relative gaps |||theta||^2 / (2 s) - 1| and |||W||_* / sqrt(s) - 1|,
    s = ||v*||, of a network whose neurons that carry weight form one bundle along v* (Theorem 7's limit).

    With the bundle B (active neurons with |a_j| ||w_j|| >= rel x sum_k |a_k| ||w_k||, each within the angle
    phi of v*: at finite loss the bundle is off v* by about the residual, at finite lambda its neurons spread),
    the rest R, c_B = sum_B |a_j| ||w_j||, c_R likewise, the imbalances
    beta = sum_j (|a_j| - ||w_j||)^2 and beta_B = sum_B ||w_j|| | ||w_j|| - |a_j| | (0 when balanced),
    kappa = ||X||_2 s / ||y|| and rho = sqrt(L / L_0) = ||r|| / ||y|| (L_0 = ||y||^2 / 2n):
    N(X) = c_B [X v*/s]_+ + E with ||E|| <= ||X||_2 (c_B phi + c_R), and ||N(X)|| = ||y|| +- ||r||, so
      e := |c_B / s - 1| <= rho + kappa (c_B phi + c_R) / s;
    ||theta||^2 / 2 = c_B + c_R + beta / 2, so
      |||theta||^2 / (2 s) - 1| <= e + c_R / s + beta / (2 s);
    ||W_B||_F^2 = c_B +- beta_B, ||W_B||_F cos phi <= ||W_B||_* <= ||W_B||_F (1 + sqrt(d - 1) sin phi),
    ||W_B||_* <= ||W||_* <= ||W_B||_* + sum_R ||w_j|| and |sqrt(x) - 1| <= |x - 1|, so
      |||W||_* / sqrt(s) - 1| <= e + beta_B / s + sqrt(d - 1) phi ||W_B||_F / sqrt(s) + sum_R ||w_j|| / sqrt(s).
    phi -> 0 as lambda -> 0 and L -> 0, and rho -> 0 as L -> 0 (Theorem 7), so both bounds -> 0; at finite
    time they are what the rank-1 limit allows. Given the measured phi and rho they follow from the triangle
    inequality: what they check is that the network is one bundle along v* at the teacher's scale (a second
    direction carrying weight, or a bundle at the wrong scale, breaks them); the independent content of
    Theorem 7, the alignment itself, is checked by the angle rate."""
    W = np.asarray(W, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    s = float(np.linalg.norm(v_star))
    norms = np.linalg.norm(W, axis=1)
    weight = np.abs(a) * norms
    bundle = np.any(X @ W.T > 0, axis=0) & (weight >= rel * weight.sum()) & (norms > 0)
    units = W[bundle] / norms[bundle, None]
    v = np.asarray(v_star, dtype=np.float64) / s
    to_v = 2.0 * np.arctan2(np.linalg.norm(units - v, axis=1), np.linalg.norm(units + v, axis=1))
    phi = float(to_v.max(initial=0.0))
    c_b, c_r = float(weight[bundle].sum()), float(weight[~bundle].sum())
    beta = float(np.sum((np.abs(a) - norms) ** 2))
    beta_b = float(np.sum(norms[bundle] * np.abs(norms[bundle] - np.abs(a[bundle]))))
    y_norm = float(np.linalg.norm(y))
    kappa = float(np.linalg.norm(X, 2)) * s / y_norm
    rho = math.sqrt(max(loss, 0.0) / (y_norm**2 / (2 * X.shape[0])))
    e = rho + kappa * (c_b * phi + c_r) / s
    f_b = math.sqrt(float(np.sum(norms[bundle] ** 2)))
    d = X.shape[1]
    return {
        "theta": e + c_r / s + beta / (2 * s),
        "nuclear": e + beta_b / s + math.sqrt(max(d - 1, 1)) * phi * f_b / math.sqrt(s)
        + float(norms[~bundle].sum()) / math.sqrt(s),
        "note": f"rho = sqrt(L/L_0) = {rho:.3g}, bundle within {phi:.3g} rad of v*, kappa = {kappa:.3g}, "
                f"c_B = {c_b:.6g}, c_R = {c_r:.3g}, imbalances {beta:.3g}, {beta_b:.3g}",
    }
