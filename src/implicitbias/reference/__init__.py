"""Reference solutions: convex programs and closed forms that the implicit bias of training is compared
with (SCIENCE.md S1 prediction 5, S4-S9, S11, S12). Plain NumPy/SciPy/cvxpy, run on the host.

- max-margin classifiers (`svm`): the l2 hard-margin SVM with a KKT certificate, the l1 max-margin LP;
- interpolators (`interpolators`): min-l2 (from w0), min-l1, Woodworth et al.'s Q_alpha, min nuclear norm
  (ADMM with a certified duality gap at large sizes, `nuclear_norm`), the minimum-norm ReLU neuron;
- two-layer ReLU networks (`two_layer_min_norm`): the exact min-||theta||^2 interpolator (Pilanci & Ergen
  2020), Boursier et al.'s orthogonal closed form, the rank-1 norm and the lower bound of S11;
- separability certificates naming the points that cannot be separated (`separability`);
- the multiclass hard-margin SVM, the limit of multiclass cross-entropy GD (`multiclass_svm`, S4);
- mirror potentials (`potentials`) and the Bregman projection onto the interpolators, the limit of mirror
  descent (`bregman`, S7);
- diagonal networks of depth D: Q_alpha^D, its mirror potential and time scale, its minimiser (`diagonal_nets`, S6);
- the leaky-ReLU neuron's closest zero-loss point (`single_neuron`, S9);
- greedy low-rank learning for sensing and completion (`greedy_low_rank`, S8).
"""

from implicitbias.reference._common import LP_TOL, LPCertificate, NotSeparableError, ReferenceSolverError
from implicitbias.reference.bregman import BregmanProjection, bregman_kkt, bregman_projection
from implicitbias.reference.diagonal_nets import (
    DeepDiagonalPotential,
    diagonal_net_potential,
    diagonal_net_time_scale,
    q_alpha,
    q_alpha_interpolator,
)
from implicitbias.reference.greedy_low_rank import (
    GreedyLowRankResult,
    greedy_low_rank,
    greedy_low_rank_completion,
)
from implicitbias.reference.interpolators import (
    NuclearNormResult,
    QInterpolatorResult,
    min_l1_interpolator,
    min_l2_interpolator,
    min_nuclear_norm_completion,
    min_nuclear_norm_psd_sensing,
    min_nuclear_norm_sensing,
    single_neuron_min_norm,
    woodworth_q,
    woodworth_q_interpolator,
)
from implicitbias.reference.multiclass_svm import MulticlassSVMResult, multiclass_svm, multiclass_svm_kkt
from implicitbias.reference.potentials import HyperbolicPotential, LpPotential, MirrorPotential
from implicitbias.reference.separability import (
    NonSeparableDataError,
    check_separable,
    farkas_certificate,
    unseparable_points,
)
from implicitbias.reference.single_neuron import leaky_relu_inverse, neuron_preimage_projection
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
    "BregmanProjection",
    "DeepDiagonalPotential",
    "GreedyLowRankResult",
    "HyperbolicPotential",
    "KKTCertificate",
    "L1MaxMarginResult",
    "LPCertificate",
    "LP_TOL",
    "LpPotential",
    "MinNormReLUResult",
    "MirrorPotential",
    "MulticlassSVMResult",
    "NonSeparableDataError",
    "NotSeparableError",
    "NuclearNormResult",
    "OrthogonalMinNorm",
    "QInterpolatorResult",
    "ReferenceSolverError",
    "SVMResult",
    "activation_patterns",
    "bregman_kkt",
    "bregman_projection",
    "check_separable",
    "diagonal_net_potential",
    "diagonal_net_time_scale",
    "farkas_certificate",
    "greedy_low_rank",
    "greedy_low_rank_completion",
    "interpolation_norm_lower_bound",
    "l1_max_margin",
    "leaky_relu_inverse",
    "max_margin_svm",
    "min_l1_interpolator",
    "min_l2_interpolator",
    "min_norm_relu_interpolator",
    "min_nuclear_norm_completion",
    "min_nuclear_norm_psd_sensing",
    "min_nuclear_norm_sensing",
    "multiclass_svm",
    "multiclass_svm_kkt",
    "neuron_preimage_projection",
    "orthogonal_min_norm",
    "q_alpha",
    "q_alpha_interpolator",
    "rank_one_interpolator",
    "rank_one_norm",
    "relu_network",
    "single_neuron_min_norm",
    "unseparable_points",
    "woodworth_q",
    "woodworth_q_interpolator",
]
