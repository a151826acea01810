"""Reference solutions: convex programs and closed forms that the implicit bias of training is compared
with (SCIENCE.md S1 prediction 5, S4-S9, S11, S12). Plain NumPy/SciPy/cvxpy, run on the host.

- max-margin classifiers (`svm`): the l2 hard-margin SVM with a KKT certificate, the l1 max-margin LP;
- interpolators (`interpolators`): min-l2 (from w0), min-l1, Woodworth et al.'s Q_alpha, min nuclear norm,
  the minimum-norm ReLU neuron;
- two-layer ReLU networks (`two_layer_min_norm`): the exact min-||theta||^2 interpolator (Pilanci & Ergen
  2020), Boursier et al.'s orthogonal closed form, the rank-1 norm and the lower bound of S11;
- Chistikov et al.'s measurement M and the Z-matrix condition (`chistikov_m`).
"""

from implicitbias.reference._common import NotSeparableError, ReferenceSolverError
from implicitbias.reference.chistikov_m import (
    ChistikovM,
    ZMatrixCondition,
    chistikov_M,
    dual_generators,
    z_matrix_condition,
)
from implicitbias.reference.interpolators import (
    NuclearNormResult,
    QInterpolatorResult,
    min_l1_interpolator,
    min_l2_interpolator,
    min_nuclear_norm_completion,
    min_nuclear_norm_sensing,
    single_neuron_min_norm,
    woodworth_q,
    woodworth_q_interpolator,
)
from implicitbias.reference.svm import (
    KKTCertificate,
    L1MaxMarginResult,
    SVMResult,
    l1_max_margin,
    max_margin_svm,
)
from implicitbias.reference.two_layer_min_norm import (
    MinNormReLUResult,
    OrthogonalMinNorm,
    activation_patterns,
    interpolation_norm_lower_bound,
    min_norm_relu_interpolator,
    orthogonal_min_norm,
    rank_one_interpolator,
    rank_one_norm,
    relu_network,
)

__all__ = [
    "ChistikovM",
    "KKTCertificate",
    "L1MaxMarginResult",
    "MinNormReLUResult",
    "NotSeparableError",
    "NuclearNormResult",
    "OrthogonalMinNorm",
    "QInterpolatorResult",
    "ReferenceSolverError",
    "SVMResult",
    "ZMatrixCondition",
    "activation_patterns",
    "chistikov_M",
    "dual_generators",
    "interpolation_norm_lower_bound",
    "l1_max_margin",
    "max_margin_svm",
    "min_l1_interpolator",
    "min_l2_interpolator",
    "min_norm_relu_interpolator",
    "min_nuclear_norm_completion",
    "min_nuclear_norm_sensing",
    "orthogonal_min_norm",
    "rank_one_interpolator",
    "rank_one_norm",
    "relu_network",
    "single_neuron_min_norm",
    "woodworth_q",
    "woodworth_q_interpolator",
    "z_matrix_condition",
]
