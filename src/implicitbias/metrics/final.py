"""Named metrics of a finished run computed once on the host from its final parameters and data, and
stored beside the recorded ones (variables over `run`, no checkpoint axis; some also over the neurons or
the training points).  Each is recomputable from the stored parameters and data
(`implicitbias.training.recompute`).

weighted_max_angle: `implicitbias.metrics.neurons.weighted_max_angle` (two-layer networks).
kink_max_angle: `implicitbias.metrics.neurons.kink_max_angle` (two-layer networks without a bias).
reading.NAME: the max angle between the neurons that one reading of "active" keeps
(`implicitbias.metrics.readings`; two-layer networks without a bias; the readings that compare with the init
regenerate it from the spec).
census.*: the census of the active neurons, `implicitbias.metrics.census` (two-layer networks on data with a
teacher direction v*, S11: Chistikov et al. 2023), over (run,), (run, neuron), (run, neuron, point) or
(run, point) as listed in `implicitbias.metrics.census.DIMS`.
l1_l2_sparsity: ||w||_1^2 / ||w||_2^2 of the end-to-end predictor w of a diagonal linear network
(`implicitbias.metrics.norms.l1_l2_sparsity`; S6: Gunasekar et al. 2018, deeper nets are sparser).
"""

from __future__ import annotations

import numpy as np

from implicitbias.metrics import census
from implicitbias.metrics.neurons import kink_max_angle, weighted_max_angle
from implicitbias.metrics.norms import l1_l2_sparsity
from implicitbias.metrics.readings import final_readings, initial_weights


def final_metrics(spec, theta: dict, data) -> dict[str, np.ndarray]:
    """{name: value} for one run: `spec` its RunSpec, `theta` its final parameters (NumPy arrays, fixed
    ones included), `data` its Dataset.  Values are scalars or arrays shaped as their dimensions say
    (`dims_of`)."""
    model = spec.model
    out: dict[str, np.ndarray] = {}
    if model.kind == "two_layer" and "W" in theta and "a" in theta:
        out["weighted_max_angle"] = np.asarray(weighted_max_angle(theta["W"], theta["a"], data.X))
        if "b" not in theta:
            out["kink_max_angle"] = np.asarray(kink_max_angle(theta["W"], data.X))
            if callable(getattr(model, "init", None)):  # the readings that compare with the init regenerate it
                out.update(final_readings(theta["W"], theta["a"], data.X, initial_weights(spec, data.X.shape[1])))
        v_star = data.info.get("v_star")
        if v_star is not None:
            out.update(census.neuron_census(theta["W"], theta["a"], data.X, data.y, v_star, spec.init_scale))
    if model.kind == "diagonal_linear":
        out["l1_l2_sparsity"] = np.asarray(l1_l2_sparsity(np.asarray(model.effective(theta), dtype=np.float64)))
    return out


def dims_of(name: str) -> tuple[str, ...]:
    """The dimensions of a final metric, `run` first."""
    return ("run",) + census.DIMS.get(name, ())


def final_metrics_of(spec, ds, data) -> dict[str, np.ndarray]:
    """`final_metrics` of the single run stored in `ds` (its `theta.*` and `const.*` variables), each with a
    leading run axis of length 1."""
    theta = {k[len("theta."):]: ds[k].values[0] for k in ds.data_vars if k.startswith("theta.")}
    theta.update({k[len("const."):]: ds[k].values[0] for k in ds.data_vars if k.startswith("const.")})
    return {k: np.asarray(v)[None] for k, v in final_metrics(spec, theta, data).items()}


def final_variables(spec, ds, data) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """`final_metrics_of` as (dims, values) pairs, ready to be assigned to the run's Dataset."""
    return {k: (dims_of(k), v) for k, v in final_metrics_of(spec, ds, data).items()}
