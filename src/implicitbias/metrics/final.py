"""Named metrics of a finished run computed once on the host from its final parameters and data, and
stored beside the recorded ones (variables over `run`, no checkpoint axis).  Each is recomputable from
the stored parameters and data (`implicitbias.training.recompute`).

weighted_max_angle: `implicitbias.metrics.neurons.weighted_max_angle` (two-layer networks).
l1_l2_sparsity: ||w||_1^2 / ||w||_2^2 of the end-to-end predictor w of a diagonal linear network
(`implicitbias.metrics.norms.l1_l2_sparsity`; S6: Gunasekar et al. 2018, deeper nets are sparser).
"""

from __future__ import annotations

import numpy as np

from implicitbias.metrics.neurons import weighted_max_angle
from implicitbias.metrics.norms import l1_l2_sparsity


def final_metrics(model, theta: dict, data) -> dict[str, float]:
    """{name: value} for one run: `theta` its final parameters (NumPy arrays), `data` its Dataset."""
    out: dict[str, float] = {}
    if model.kind == "two_layer" and "W" in theta and "a" in theta:
        out["weighted_max_angle"] = weighted_max_angle(theta["W"], theta["a"], data.X)
    if model.kind == "diagonal_linear":
        out["l1_l2_sparsity"] = float(l1_l2_sparsity(np.asarray(model.effective(theta), dtype=np.float64)))
    return out


def final_metrics_of(model, ds, data) -> dict[str, np.ndarray]:
    """`final_metrics` of the single run stored in `ds` (its `theta.*` and `const.*` variables)."""
    theta = {k[len("theta."):]: ds[k].values[0] for k in ds.data_vars if k.startswith("theta.")}
    theta.update({k[len("const."):]: ds[k].values[0] for k in ds.data_vars if k.startswith("const.")})
    return {k: np.asarray([v]) for k, v in final_metrics(model, theta, data).items()}
