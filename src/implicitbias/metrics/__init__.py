"""Metrics: every quantity of SCIENCE.md (section 0, S10, S11) measured along training, defined once.

spectral: singular values, norms and ranks of a weight matrix.
margins: margins, normalised margin, spread, accuracy, alignment with a reference.
angles: stable angles between vectors and between active neurons, balancedness.
kkt: the KKT residual of the parameter-space margin problem (S10), for any homogeneous model.
layer_alignment: alignment of adjacent layers of a deep linear network (S5).
norms: the l1/l2 soft sparsity count and Schatten p-(quasi-)norms (S6, S8).
trials: what a median of k trials can come out as (the exact distribution over every draw).
"""

from implicitbias.metrics.angles import (
    active_neurons,
    angle_between,
    balancedness,
    neuron_angles,
    pairwise_angles,
)
from implicitbias.metrics.kkt import (
    KKTResidual,
    KKTSystem,
    kkt_residual,
    kkt_system,
    nonnegative_least_squares,
)
from implicitbias.metrics.layer_alignment import layer_alignment
from implicitbias.metrics.margins import (
    accuracy,
    cosine,
    margin_spread,
    margins,
    normalized_margin,
    unit_distance,
)
from implicitbias.metrics.norms import l1_l2_sparsity, schatten_norm
from implicitbias.metrics.spectral import (
    effective_rank,
    frobenius_norm,
    nuclear_norm,
    numerical_rank,
    singular_value_ratio,
    singular_values,
    spectral_norm,
    stable_rank,
)
from implicitbias.metrics.trials import median_of_k, quantile_of

__all__ = [
    "KKTResidual",
    "KKTSystem",
    "accuracy",
    "active_neurons",
    "angle_between",
    "balancedness",
    "cosine",
    "effective_rank",
    "frobenius_norm",
    "kkt_residual",
    "kkt_system",
    "l1_l2_sparsity",
    "layer_alignment",
    "margin_spread",
    "margins",
    "median_of_k",
    "neuron_angles",
    "nonnegative_least_squares",
    "normalized_margin",
    "nuclear_norm",
    "numerical_rank",
    "pairwise_angles",
    "quantile_of",
    "schatten_norm",
    "singular_value_ratio",
    "singular_values",
    "spectral_norm",
    "stable_rank",
    "unit_distance",
]
