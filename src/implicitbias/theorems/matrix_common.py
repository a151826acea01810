"""What the matrix-factorisation theorems (S8) share: their common assumptions, the reading of an alpha -> 0 grid,
and the reference solutions they compare with.

The references (the minimum nuclear norm interpolator, over all matrices or over PSD ones; the minimum-Frobenius
interpolator's nuclear norm; greedy low-rank learning) are solved once per data set and parameters through
`implicitbias.reference.memo.memoized`: keyed by the run's `data_key()` where a `RunContext` is at hand, by a hash
of the arrays (`memo.array_key`) otherwise, and kept in the run directory, so that `implicitbias report` solves
none of them again.
"""

from __future__ import annotations

import math

import numpy as np

from implicitbias.data import MatrixCompletion, MatrixSensing
from implicitbias.models import MatrixFactorization
from implicitbias.reference import (
    greedy_low_rank,
    memo,
    min_l2_interpolator,
    min_nuclear_norm_completion,
    min_nuclear_norm_psd_sensing,
    min_nuclear_norm_sensing,
)
from implicitbias.theorems._small_init import approach_verdict
from implicitbias.theorems.base import Verdict
from implicitbias.theorems.fitting import final, flag, over_runs, run_labels

#: the nuclear-norm solvers' settings (their defaults), part of each reference's memo key
NUCLEAR_SOLVER = {"method": "auto", "tol": 1e-8, "max_iter": 100_000}


# -- the data ------------------------------------------------------------------------------------------------
def observed_entries(data) -> dict[tuple[int, int], float] | None:
    """{(p, q): value} of a completion data set whose rows are vec(e_p e_q^T) or (p, q) pairs (encoding
    "entries"), or None if a row is neither."""
    if data.d == 2 and np.all(data.X == np.round(data.X)) and data.X.min() >= 0:
        return {(int(p), int(q)): float(y) for (p, q), y in zip(data.X, data.y)}
    d = int(round(math.sqrt(data.d)))
    out = {}
    for x, y in zip(data.X, data.y):
        nz = np.flatnonzero(x)
        if d * d != data.d or nz.size != 1 or x[nz[0]] != 1.0:
            return None
        out[tuple(int(v) for v in divmod(int(nz[0]), d))] = float(y)
    return out


def _side(data) -> int:
    """d of the d x d matrix a sensing or completion data set observes."""
    W_star = data.info.get("W_star")
    return W_star.shape[0] if W_star is not None else int(round(math.sqrt(data.d)))


def _key(data, data_key: str | None) -> str:
    return data_key if data_key is not None else memo.array_key(data.X, data.y)


# -- references, solved once per data set ---------------------------------------------------------------------
def min_nuclear_norm(data, data_key: str | None = None):
    """The minimum-nuclear-norm interpolator of a sensing or completion data set (`NuclearNormResult`).
    data_key: the run's `data_key()` (default: a hash of the arrays); the solution is memoized under it."""
    d = _side(data)
    entries = observed_entries(data)

    def solve():
        if entries is not None:
            return min_nuclear_norm_completion(np.array(list(entries)), np.array(list(entries.values())), (d, d))
        return min_nuclear_norm_sensing(data.X, data.y, shape=(d, d))

    params = {"shape": [d, d], "psd": False, "completion": entries is not None, **NUCLEAR_SOLVER}
    return memo.memoized("min_nuclear_norm", _key(data, data_key), params, solve)


def min_nuclear_norm_psd(data, data_key: str | None = None):
    """The minimum nuclear norm (= trace) over PSD interpolators of a sensing data set (`NuclearNormResult`),
    memoized like `min_nuclear_norm`."""
    d = int(round(math.sqrt(data.d)))
    params = {"shape": [d, d], "psd": True, **NUCLEAR_SOLVER}
    return memo.memoized("min_nuclear_norm_psd", _key(data, data_key), params,
                         lambda: min_nuclear_norm_psd_sensing(data.X, data.y, shape=(d, d)))


def min_frobenius_nuclear_norm(data, data_key: str | None = None) -> float:
    """||W||_* of the minimum-Frobenius interpolator X^+ y (the alpha -> infinity, kernel-like end), memoized like
    `min_nuclear_norm`."""
    d = int(round(math.sqrt(data.d)))

    def solve():
        return float(np.linalg.svd(min_l2_interpolator(data.X, data.y).reshape(d, d), compute_uv=False).sum())

    return memo.memoized("min_frobenius_nuclear_norm", _key(data, data_key), {"shape": [d, d]}, solve)


def greedy_path(data, rank: int, data_key: str | None = None):
    """Greedy low-rank learning on a sensing data set (`implicitbias.reference.greedy_low_rank`, depth 2, U V^T),
    up to `rank` phases, memoized like `min_nuclear_norm`."""
    d = int(round(math.sqrt(data.d)))
    return memo.memoized("greedy_low_rank", _key(data, data_key), {"shape": [d, d], "max_rank": rank},
                         lambda: greedy_low_rank(data.X, data.y, max_rank=rank, shape=(d, d)))


def nuclear_ratios(run, psd: bool = False) -> np.ndarray:
    """||W(inf)||_* / min ||W||_* of every run of a `RunContext` (the final recorded W.nuclear); the minimum over
    all interpolators, or over PSD ones (`psd`)."""
    nuc = final(run.results, "W.nuclear")
    ref = min_nuclear_norm_psd if psd else min_nuclear_norm
    return np.array([nuc[r] / ref(run.data[r], run.runs[r].data_key()).nuclear_norm for r in range(run.n_runs)])


# -- the grid of init scales ----------------------------------------------------------------------------------
def run_alphas(run) -> np.ndarray:
    """The init scale alpha of every run of a `RunContext`."""
    return np.array([spec.init_scale for spec in run.runs], dtype=np.float64)


def smallest(run) -> np.ndarray:
    """The runs at the smallest alpha of the grid."""
    alpha = run_alphas(run)
    return np.flatnonzero(alpha == alpha.min())


def target_rank(run) -> int:
    """The rank r of W* (the data's `rank`; 1 for data that fix no rank)."""
    data = run.spec.data
    return int(data.rank) if isinstance(data, (MatrixSensing, MatrixCompletion)) else 1


def excess_trend(theorem: str, run, ratio: np.ndarray, floor: float) -> Verdict:
    """ratio -> 1 as alpha -> 0 at a power of alpha, per trial (`approach_verdict`: exponent of ratio - 1 against
    alpha with a 95% CI above 0, profile interval of the extrapolated limit of ratio = r_inf + c alpha^q reaching 1)."""
    trials = np.array([spec.trial for spec in run.runs])
    return approach_verdict(theorem, "the excess ratio - 1 vanishes as a power of alpha: exponent of ratio - 1 "
                            "against alpha (95% CI above 0) and extrapolated limit of ratio = r_inf + c alpha^q "
                            "(profile interval reaching 1)", run_alphas(run), ratio, 1.0, trials, floor=floor)


# -- common assumptions ---------------------------------------------------------------------------------------
def depth_verdict(theorem: str, run, minimum: int) -> Verdict:
    """The model is a matrix factorisation of depth >= minimum."""
    model = run.spec.model
    factorisation = isinstance(model, MatrixFactorization)
    ok = factorisation and model.depth >= minimum
    return flag(theorem, "assumption", f"a matrix factorisation of depth N >= {minimum}", ok,
                f"model = {model.kind}" + (f", depth = {model.depth}" if factorisation else ""))


def flow_verdict(theorem: str, run) -> Verdict:
    """Gradient flow on the square loss (GD only approximates it: not evaluated)."""
    kind, loss = run.spec.method.kind, run.spec.loss.name
    ok = None if kind != "gf" else loss == "square"
    return flag(theorem, "assumption", "gradient flow on the square loss", ok,
                f"method = {kind}, loss = {loss}" + ("" if kind == "gf" else ": GD approximates the flow"))


def reached(theorem: str, run, tol: float, why: str) -> Verdict:
    """The final loss of every run <= tol (the hypothesis that the loss -> 0, read at tol)."""
    loss = final(run.results, "loss")
    return over_runs(theorem, "assumption", f"the loss reached {tol:.3g} (final loss <= {tol:.3g})", loss, "<=",
                     tol, labels=run_labels(run), note=why)


def identity_init_verdict(theorem: str, run) -> Verdict:
    """W = U U^T from U(0) = alpha I, with no noise (Gunasekar et al.'s model)."""
    m = run.spec.model
    if isinstance(m, MatrixFactorization):
        ok = m.init_scheme == "identity" and m.init_noise == 0.0 and m.symmetric and m.depth == 2
        note = (f"symmetric = {m.symmetric}, depth = {m.depth}, init_scheme = {m.init_scheme}, "
                f"init_noise = {m.init_noise}")
    else:
        ok, note = False, f"model = {m.kind}"
    return flag(theorem, "assumption", "W = U U^T from U(0) = alpha I (Gunasekar et al.'s model)", ok, note)


def alpha_grid_verdict(theorem: str, run, need: int) -> Verdict:
    """alpha -> 0 is read over at least `need` distinct init scales alpha > 0."""
    grid = np.unique(run_alphas(run))
    return flag(theorem, "assumption", f"alpha -> 0 read over a grid of at least {need} init scales alpha > 0",
                bool(grid.size >= need and grid.min() > 0), ", ".join(f"{a:.3g}" for a in grid),
                measured=float(grid.size))
