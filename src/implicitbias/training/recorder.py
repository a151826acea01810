"""What is recorded at every checkpoint (SCIENCE.md section 0, S10, S11).

`Recorder.record` is traced and vmapped over the runs of a batch: it returns a flat dict of scalar
metrics for one run.  `Recorder.kkt_host` adds the KKT residual of S10 (an NNLS on the host) for
homogeneous classification models.  Metric names:

loss, test_loss, accuracy, test_accuracy, param_norm;
for each weight matrix M of the model: M.frobenius, M.spectral, M.nuclear, M.stable_rank,
M.numerical_rank, M.effective_rank, M.sigma2_ratio, M.sigma3_ratio (sigma_k / sigma_1);
classification: min_margin, normalized_margin (min_i q_i / ||theta||^L_h), margin_spread (max q / min q);
(multiclass, k scores per example: q_i = s_{y_i} - max_{c != y_i} s_c, accuracy of argmax);
models with a linear predictor z: z_norm, z_margin (min_i y_i <z, x_i> / ||z||), linear_agreement
(fraction of test inputs with sign f(x) = sign <z, x>), cosine_to_reference, unit_distance_to_reference;
deep linear networks (S5): alignment_W{i+1}_W{i} = |<v_1(W_{i+1}), u_1(W_i)>| for i = 1..depth-1
(`implicitbias.metrics.layer_alignment`; 1 when adjacent layers are aligned);
two-layer networks: n_active, max_angle, mean_angle (radians, between active neurons),
balancedness_max (max_j |a_j^2 - ||w_j||^2|, trained outer layer);
kkt_stationarity, kkt_complementarity (NaN while some margin is <= 0, where the residual is undefined).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from implicitbias import metrics as M
from implicitbias.models.linear import DeepLinear
from implicitbias.models.two_layer import TwoLayer
from implicitbias.training.problem import Problem, tree_norm


@dataclass(frozen=True)
class Recorder:
    problem: Problem
    classification: bool
    has_test: bool
    has_reference: bool

    def record(self, hp, theta, const, X, y, Xt, yt, reference=None) -> dict:
        model = self.problem.member_model(hp)
        loss = self.problem.loss
        pred = model.predict(theta, const, X)
        out = {"loss": loss.risk(pred, y), "param_norm": tree_norm(theta)}
        pred_t = model.predict(theta, const, Xt) if self.has_test else None
        if self.has_test:
            out["test_loss"] = loss.risk(pred_t, yt)
        if self.classification:
            multiclass = pred.ndim == 2  # k scores per example (cross-entropy)
            q = _multiclass_margins(pred, y) if multiclass else M.margins(pred, y)
            out["accuracy"] = jnp.mean(q > 0) if multiclass else M.accuracy(pred, y)
            out["min_margin"] = jnp.min(q)
            out["margin_spread"] = M.margin_spread(q)
            if model.homogeneity is not None:
                out["normalized_margin"] = M.normalized_margin(q, out["param_norm"], model.homogeneity)
            if self.has_test:
                out["test_accuracy"] = (jnp.mean(_multiclass_margins(pred_t, yt) > 0) if multiclass
                                        else M.accuracy(pred_t, yt))
        for name, W in model.weight_matrices(theta, const).items():
            out.update(_spectral(name, W))
        z = model.linear_predictor(theta, const)
        if z is not None and z.shape[-1] == X.shape[-1] and z.ndim == 1:
            out["z_norm"] = jnp.linalg.norm(z)
            if self.classification:
                out["z_margin"] = jnp.min(y * (X @ z)) / jnp.maximum(out["z_norm"], 1e-300)
                Xa = Xt if self.has_test else X
                fa = pred_t if self.has_test else pred
                out["linear_agreement"] = jnp.mean(jnp.sign(fa) == jnp.sign(Xa @ z))
        if isinstance(model, TwoLayer):
            out.update(_neurons(model, theta, const, X))
        if isinstance(model, DeepLinear) and model.depth >= 2:
            out.update(_layer_alignment(theta, model.depth))
        if self.has_reference:
            out.update(self.with_reference(hp, theta, const, reference))
        return out

    def with_reference(self, hp, theta, const, reference) -> dict:
        z = self.problem.member_model(hp).linear_predictor(theta, const)
        return {"cosine_to_reference": M.cosine(z, reference),
                "unit_distance_to_reference": M.unit_distance(z, reference)}

    # -- KKT residual (host) -----------------------------------------------------------------------
    def _f(self, theta, x, const, mparams):
        return self.problem.member_model(mparams).apply(theta, const, x)

    def kkt_host(self, hp, theta, const, X, y) -> dict:
        model = self.problem.model
        if not self.classification or model.homogeneity is None or self.problem.loss.task != "classification":
            return {}
        theta, const = jax.device_get(theta), jax.device_get(const)
        n_runs = len(hp["seed"])
        X, y = np.asarray(X), np.asarray(y)
        stat, comp = np.full(n_runs, np.nan), np.full(n_runs, np.nan)
        for r in range(n_runs):
            take = lambda tree, r=r: jax.tree_util.tree_map(lambda a: a[r], tree)
            mparams = {"model": {k: v[r] for k, v in hp.get("model", {}).items()}}
            Xr, yr = (X[r], y[r]) if X.ndim == 3 else (X, y)
            res = M.kkt_residual(self._f, take(theta), Xr, yr, model.homogeneity, args=(take(const), mparams))
            if res.valid:
                stat[r], comp[r] = res.stationarity, res.complementarity
        return {"kkt_stationarity": stat, "kkt_complementarity": comp}


def _spectral(name: str, W) -> dict:
    s = M.singular_values(W)
    fro = jnp.sqrt(jnp.sum(s**2))
    top = jnp.where(s[0] > 0, s[0], 1.0)
    out = {
        f"{name}.frobenius": fro,
        f"{name}.spectral": s[0],
        f"{name}.nuclear": jnp.sum(s),
        f"{name}.stable_rank": M.stable_rank(W),
        f"{name}.numerical_rank": M.numerical_rank(W),
        f"{name}.effective_rank": M.effective_rank(W),
    }
    for k in (2, 3):
        out[f"{name}.sigma{k}_ratio"] = s[k - 1] / top if s.shape[0] >= k else jnp.zeros(())
    return out


def _multiclass_margins(scores, labels):
    """q_i = s_{y_i} - max_{c != y_i} s_c: the multiclass margin of scores (n, k) with labels 0..k-1 (n,)."""
    idx = jnp.asarray(labels).astype(jnp.int32)[:, None]
    own = jnp.take_along_axis(scores, idx, axis=1)[:, 0]
    return own - jnp.max(jnp.where(jnp.arange(scores.shape[1]) == idx, -jnp.inf, scores), axis=1)


def _layer_alignment(theta, depth: int) -> dict:
    values = M.layer_alignment([theta[f"W{i}"] for i in range(1, depth + 1)])
    return {f"alignment_W{i + 1}_W{i}": values[i - 1] for i in range(1, depth)}


def _neurons(model: TwoLayer, theta, const, X) -> dict:
    W = theta["W"]
    active = M.active_neurons(W, X, theta.get("b"))
    max_angle, mean_angle = M.neuron_angles(W, active)
    out = {"n_active": jnp.sum(active), "max_angle": max_angle, "mean_angle": mean_angle}
    if model.train_outer:
        out["balancedness_max"] = jnp.max(jnp.abs(M.balancedness(theta["a"], W)))
    return out
