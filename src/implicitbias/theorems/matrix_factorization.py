"""The matrix-factorisation theorems (survey, seed 002; SCIENCE.md S8), in one place: deep matrix factorisation
W = W_N ... W_1 trained by gradient flow on the square loss of matrix sensing or completion.

- `RazinCohen2020` (`razin_cohen`): the 2 x 2 completion counterexample (Razin & Cohen 2020, "Implicit
  regularization in deep learning may not be explainable by norms", NeurIPS): from a balanced init with
  det W(0) > 0 and depth >= 2, det W stays positive, so driving the loss to 0 forces |W_11| -> infinity and every
  norm diverges;
- `GunasekarCommuting` (`gunasekar_sensing`): Gunasekar et al. 2017 ("Implicit regularization in matrix
  factorization", NeurIPS), Theorem 1: with commuting measurements, gradient flow from alpha I, alpha -> 0, ends
  at the minimum nuclear norm among PSD interpolators;
- `GunasekarConjecture` (`gunasekar_sensing`): their conjecture for general (Gaussian) measurements, as a trend
  in alpha;
- `LiIncremental` (`li_luo_lyu`): Li, Luo & Lyu 2021 ("Towards resolving the implicit bias of gradient descent
  for matrix factorization: greedy low-rank learning", ICLR): from a tiny init the singular values are learned
  one at a time, along the path of greedy low-rank learning.

What they share (assumptions, the alpha grid, the memoized reference solutions) is in `matrix_common`; the
end-to-end matrix along training and the NumPy metrics of it (`end_to_end`, `schatten`, `effective_rank`, ...) in
`implicitbias.metrics.factorization`. This module re-exports all of them.
"""

from implicitbias.metrics.factorization import (
    balance_gap,
    closest_approach,
    commutator_gap,
    crossing_times,
    effective_rank,
    end_to_end,
    factors,
    product,
    schatten,
)
from implicitbias.theorems.gunasekar_sensing import GunasekarCommuting, GunasekarConjecture, star_note
from implicitbias.theorems.li_luo_lyu import LiIncremental, glrl, saddle_distances
from implicitbias.theorems.matrix_common import (
    greedy_path,
    min_frobenius_nuclear_norm,
    min_nuclear_norm,
    min_nuclear_norm_psd,
    nuclear_ratios,
    observed_entries,
    run_alphas,
    target_rank,
)
from implicitbias.theorems.razin_cohen import COUNTEREXAMPLE, NORMS, RazinCohen2020, razin_factors

__all__ = [
    "COUNTEREXAMPLE",
    "NORMS",
    "GunasekarCommuting",
    "GunasekarConjecture",
    "LiIncremental",
    "RazinCohen2020",
    "balance_gap",
    "closest_approach",
    "commutator_gap",
    "crossing_times",
    "effective_rank",
    "end_to_end",
    "factors",
    "glrl",
    "greedy_path",
    "min_frobenius_nuclear_norm",
    "min_nuclear_norm",
    "min_nuclear_norm_psd",
    "nuclear_ratios",
    "observed_entries",
    "product",
    "razin_factors",
    "run_alphas",
    "saddle_distances",
    "schatten",
    "star_note",
    "target_rank",
]
