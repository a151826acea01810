"""What is recorded at every checkpoint (SCIENCE.md section 0, S10, S11).

`Recorder.record` is traced and vmapped over the runs of a batch: it returns a flat dict of scalar
metrics for one run, plus the weight matrices under `MATRIX`-prefixed keys; `Recorder.host` turns those
into the spectral metrics with NumPy on the host (LAPACK through NumPy takes ~1 ms for the SVD of a
200 x 64 matrix, where the SVD compiled by XLA for the CPU took ~140 ms, and it leaves it out of the
compiled recorder).  `Recorder.kkt_host` adds the KKT residual of S10 (an NNLS on the host) for
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

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from threadpoolctl import ThreadpoolController

from implicitbias import metrics as M
from implicitbias.metrics.layer_alignment import layer_alignment_host
from implicitbias.metrics.spectral import spectral_summary
from implicitbias.models.linear import DeepLinear
from implicitbias.models.two_layer import TwoLayer
from implicitbias.training.batch import Batch
from implicitbias.training.problem import Problem, tree_norm


@functools.cache
def _blas_controller():
    return ThreadpoolController()


def _one_blas_thread():
    """Small host-side factorisations run on one BLAS thread: a multi-threaded OpenBLAS competing with
    XLA's own thread pool made the SVD of a 200 x 64 matrix 13 ms instead of 0.35 ms here."""
    return _blas_controller().limit(limits=1, user_api="blas")


#: key prefixes of the matrices `record` hands to `host`
MATRIX = "matrix:"
LAYER = "layer:"


@dataclass(frozen=True)
class Recorder:
    """What one run records at a checkpoint (see the module docstring): `record` traced, `host` and `kkt_host` on
    the host.  problem: the model and loss; classification, has_test, has_reference: which metrics apply."""

    problem: Problem
    classification: bool
    has_test: bool
    has_reference: bool

    def record(self, hp, theta, const, X, y, Xt, yt, reference=None) -> dict:
        """The metrics of one member at parameters `theta` (traced; matrices under `MATRIX`/`LAYER` keys for
        `host`)."""
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
            out[MATRIX + name] = W  # spectral metrics: `host`
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
            out.update({f"{LAYER}W{i}": theta[f"W{i}"] for i in range(1, model.depth + 1)})  # alignment: `host`
        if self.has_reference:
            out.update(self.with_reference(hp, theta, const, reference))
        return out

    @staticmethod
    def host(row: dict) -> dict:
        """The recorded row with its matrices replaced by their spectral metrics (and the layer alignment of
        deep linear networks), computed with NumPy; arrays may carry leading axes (runs, checkpoints)."""
        with _one_blas_thread():
            return Recorder._host(row)

    @staticmethod
    def _host(row: dict) -> dict:
        out = {k: v for k, v in row.items() if not k.startswith((MATRIX, LAYER))}
        for key in row:
            if key.startswith(MATRIX):
                name = key[len(MATRIX):]
                values = spectral_summary(np.linalg.svd(np.asarray(row[key]), compute_uv=False))
                out.update({f"{name}.{metric}": v for metric, v in values.items()})
        layers = [np.asarray(row[k]) for k in sorted((k for k in row if k.startswith(LAYER)),
                                                     key=lambda k: int(k[len(LAYER) + 1:]))]
        if layers:
            values = layer_alignment_host(layers)
            out.update({f"alignment_W{i + 1}_W{i}": values[..., i - 1] for i in range(1, len(layers))})
        return out

    def with_reference(self, hp, theta, const, reference) -> dict:
        """The cosine and unit distance between the member's linear predictor and the reference direction."""
        z = self.problem.member_model(hp).linear_predictor(theta, const)
        return {"cosine_to_reference": M.cosine(z, reference),
                "unit_distance_to_reference": M.unit_distance(z, reference)}

    # -- KKT residual (host) -----------------------------------------------------------------------
    def kkt_host(self, batch: Batch, theta, const, X, y) -> dict:
        """The KKT residual (S10) of every member of `batch` at parameters `theta` (leading axis: the members);
        empty for a model that is not homogeneous or a loss that is not a classification loss."""
        with _one_blas_thread():
            return self._kkt_host(batch, theta, const, X, y)

    def _kkt_host(self, batch: Batch, theta, const, X, y) -> dict:
        model = self.problem.model
        if not self.classification or model.homogeneity is None or self.problem.loss.task != "classification":
            return {}
        theta, const = jax.device_get(theta), jax.device_get(const)
        n_runs = batch.size
        X, y = np.asarray(X), np.asarray(y)
        stat, comp = np.full(n_runs, np.nan), np.full(n_runs, np.nan)
        for r in range(n_runs):
            take = lambda tree, r=r: jax.tree_util.tree_map(lambda a: a[r], tree)
            mparams = {"model": {k: v[r] for k, v in batch.model.items()}}
            Xr, yr = (X[r], y[r]) if X.ndim == 3 else (X, y)
            res = M.kkt_residual(_model_output(self.problem), take(theta), Xr, yr, model.homogeneity,
                                 args=(take(const), mparams))
            if res.valid:
                stat[r], comp[r] = res.stationarity, res.complementarity
        return {"kkt_stationarity": stat, "kkt_complementarity": comp}


@functools.lru_cache(maxsize=64)
def _model_output(problem: Problem):
    """f(theta, x, const, mparams): the model's output on one input, one function object per problem.  It is a
    static argument of the jitted `kkt_system`: a bound method of the recorder (one per `train` call) made every
    call of `train` compile it again (0.15-0.2 s each, e.g. for each task of a sweep)."""

    def f(theta, x, const, mparams):
        return problem.member_model(mparams).apply(theta, const, x)

    return f


def _multiclass_margins(scores, labels):
    """q_i = s_{y_i} - max_{c != y_i} s_c: the multiclass margin of scores (n, k) with labels 0..k-1 (n,)."""
    idx = jnp.asarray(labels).astype(jnp.int32)[:, None]
    own = jnp.take_along_axis(scores, idx, axis=1)[:, 0]
    return own - jnp.max(jnp.where(jnp.arange(scores.shape[1]) == idx, -jnp.inf, scores), axis=1)


def _neurons(model: TwoLayer, theta, const, X) -> dict:
    W = theta["W"]
    active = M.active_neurons(W, X, theta.get("b"))
    max_angle, mean_angle = M.neuron_angles(W, active)
    out = {"n_active": jnp.sum(active), "max_angle": max_angle, "mean_angle": mean_angle}
    if model.train_outer:
        out["balancedness_max"] = jnp.max(jnp.abs(M.balancedness(theta["a"], W)))
    return out
