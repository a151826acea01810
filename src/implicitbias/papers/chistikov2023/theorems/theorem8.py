"""Chistikov, Englert & Lazic 2023 (NeurIPS), Sec. 7: Theorem 8, rank-1 against minimum-norm interpolators (S11),
and the reference numbers it compares (the Z-matrix condition, M, the convex minimum norm).

Checked on the cells of `chistikov2023-min-norm` (lambda x trials, n = d); the learned network is GF's at the
cell's smallest lambda, read through Theorem 7 (`theorems.theorem7`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pydantic

from implicitbias.models import TwoLayer
from implicitbias.papers.chistikov2023.reference import chistikov_M, z_matrix_condition
from implicitbias.papers.chistikov2023.theorems.common import RANK_ONE_SOURCE, ds_angle, rank_one_bound
from implicitbias.reference import min_norm_relu_interpolator, rank_one_norm
from implicitbias.reference.memo import array_key, memoized
from implicitbias.theorems.base import Theorem, Verdict, assumption, compare, prediction
from implicitbias.theorems.fitting import flag
from implicitbias.theorems.init_scale_cells import relu_net_verdict, run_lambdas, theta_sq, trials


# -- the reference numbers ----------------------------------------------------------------------------------------------
def chistikov_reference(X, v_star, y, *, m_exact_max_d: int = 6, min_norm_max_n: int = 6,
                        seed: int = 0) -> dict:
    """The Sec. 7 measurements of one data set: the Z-matrix condition (max_{k != l} <chi_k, chi_l>), M
    (exactly, for d <= m_exact_max_d, else NaN), the convex minimum ||theta||^2 over interpolators (for
    n <= min_norm_max_n, else NaN) and the rank-1 value 2 ||v*||. M and the minimum are solved once per data
    set (`reference.memo`)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    v = np.ascontiguousarray(v_star, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n, d = X.shape
    z = z_matrix_condition(X)
    M = (memoized("chistikov_M", array_key(X, v), {"seed": seed}, lambda: chistikov_M(X, v, seed=seed).M)
         if d <= m_exact_max_d else math.nan)
    mn = (memoized("min_norm_relu_interpolator", array_key(X, y), {},
                   lambda: min_norm_relu_interpolator(X, y).theta_sq_norm) if n <= min_norm_max_n else math.nan)
    return {"z_holds": z.holds, "z_max_offdiag": z.max_offdiag, "M": M, "min_norm": mn,
            "rank_one": rank_one_norm(v)}


_T8 = "Chistikov et al. 2023, Theorem 8"


class ChistikovTheorem8(Theorem):
    """Chistikov et al. 2023, Theorem 8 (Sec. 7): for n = d, X invertible, teacher labels with every
    <v*, x_i> > 0 and width m > 1: if M < 0 the balanced rank-1 interpolators (||theta||^2 = 2 ||v*||) are
    exactly the minimum-norm interpolators; if M > 0 none of them is (the minimum is < 2 ||v*||). The
    inverse Gram matrix being a Z-matrix (<chi_k, chi_l> <= 0, k != l) is sufficient for M < 0. Combined
    with Theorem 7 (GF from lambda -> 0 reaches the rank-1 limit): the learned ||theta||^2 tends to 2 ||v*||,
    which is the minimum norm if M < 0 and above it if M > 0.

    Evaluated for every data set (trial) of the cell; the learned ||theta||^2 is taken at the cell's smallest
    lambda, where it stands for GF's limit as lambda -> 0 within the finite-time bound b of
    `two_layer_bounds.rank_one_bounds` (what the rank-1 limit allows at that run's final loss, bundle angle
    and imbalance): "learned -> 2||v*||" holds when |learned / 2||v*|| - 1| <= b, and "GF does not find a
    min-norm interpolator" (M > 0) when learned - min ||theta||^2 exceeds 2||v*|| b, the room the finite run
    leaves its limit. Fields:
    m_exact_max_d: M is computed exactly (all 2^d - 2 subsets K) for d <= this, else not evaluated (the sign
        is then known only when the Z-matrix condition holds).
    min_norm_max_n: the convex min-norm program (all activation patterns) is solved for n <= this.
    norm_tol: relative accuracy of the convex minimum (the interior-point solver stops at a relative duality
        gap of 1e-8; the pattern enumeration and the recovered network lose more): M < 0 needs
        |min - 2||v*||| <= norm_tol 2||v*||; M > 0 needs (2||v*|| - min) / 2||v*|| >= norm_tol.
    learned_tol: if set, a fixed tolerance on |learned / 2||v*|| - 1| in place of the derived bound (default
        None: the derived bound).
    m_zero_tol: |M| <= this counts as the excluded threshold case M = 0.
    seed: of the multi-start search for M.
    rank_one_max_angle: the predictions about the learned network come from Theorem 7, whose proof assumes
        every angle between v* and an x_i below pi/4; on a data set beyond this they are outside_scope.
    """

    m_exact_max_d: int = pydantic.Field(6, ge=2)
    min_norm_max_n: int = pydantic.Field(6, ge=1)
    norm_tol: float = pydantic.Field(1e-5, gt=0.0)
    learned_tol: float | None = pydantic.Field(None, gt=0.0)
    m_zero_tol: float = pydantic.Field(1e-9, ge=0.0)
    seed: int = pydantic.Field(0, ge=0)
    rank_one_max_angle: float = pydantic.Field(math.pi / 4, gt=0.0, le=math.pi)

    @property
    def title(self) -> str:
        """The theorem named in this object's verdicts."""
        return _T8

    def _ref(self, run, r) -> dict:
        """The Sec. 7 reference numbers of run r's data (`chistikov_reference`)."""
        ds = run.data[r]
        return chistikov_reference(ds.X, ds.info["v_star"], ds.y, m_exact_max_d=self.m_exact_max_d,
                                   min_norm_max_n=self.min_norm_max_n, seed=self.seed)

    def _label(self, run, r, text: str) -> str:
        return text + (f" (trial {run.runs[r].trial})" if len(trials(run)) > 1 else "")

    # -- assumptions ----------------------------------------------------------------------------------------
    @staticmethod
    def _square(run) -> tuple[list[bool], list[str]]:
        ok, notes = [], []
        for r in trials(run):
            ds = run.data[r]
            square = ds.n == ds.d
            cond = float(np.linalg.cond(ds.X)) if square else math.inf
            ok.append(square and cond < 1e12)
            notes.append(f"trial {run.runs[r].trial}: n = {ds.n}, d = {ds.d}, cond(X) = {cond:.3g}")
        return ok, notes

    @staticmethod
    def _no_teacher(run) -> bool:
        return any(run.data[r].info.get("v_star") is None for r in trials(run))

    @assumption("n = d and X invertible", source=f"{_T8} (Sec. 7); invertible: cond(X) < 1e12 (ours, float64)")
    def square_invertible(self, run) -> Verdict:
        """Every trial's X is square with cond(X) < 1e12."""
        ok, notes = self._square(run)
        return flag(self.title, "assumption", "n = d and X invertible", all(ok), "; ".join(notes))

    @assumption("labels y_i = [<v*, x_i>]_+ (teacher labels)", source=f"{_T8} (Sec. 7); equality to 1e-12 relative")
    def teacher_labels(self, run) -> Verdict:
        """The labels are the teacher's, on every trial's data."""
        if self._no_teacher(run):
            return flag(self.title, "assumption", "teacher labels", None, "no v_star recorded")
        resid = max(float(np.max(np.abs(run.data[r].y - np.maximum(run.data[r].X @ run.data[r].info["v_star"], 0.0))))
                    for r in trials(run))
        scale = max(1.0, max(float(np.max(np.abs(run.data[r].y))) for r in trials(run)))
        return flag(self.title, "assumption", "labels y_i = [<v*, x_i>]_+ (teacher labels)", resid <= 1e-12 * scale,
                    f"max |y_i - [<v*, x_i>]_+| = {resid:.2g}")

    @assumption("every <v*, x_i> > 0", source=f"{_T8} (Sec. 7)")
    def positive_projections(self, run) -> list[Verdict]:
        """min_i cos angle(v*, x_i) > 0, worst trial (nothing without a teacher)."""
        if self._no_teacher(run):
            return []
        worst = []
        for r in trials(run):
            ds, v = run.data[r], run.data[r].info["v_star"]
            worst.append(float(np.min(ds.X @ v / np.linalg.norm(ds.X, axis=1) / np.linalg.norm(v))))
        return [compare(self.title, "assumption", "every <v*, x_i> > 0: min_i cos angle(v*, x_i)", min(worst), ">",
                        0.0)]

    @assumption("width m > 1", source=f"{_T8} (Sec. 7)")
    def width(self, run) -> list[Verdict]:
        """The network has more than one neuron (nothing without a teacher)."""
        if self._no_teacher(run):
            return []
        model = run.spec.model
        width = model.width if isinstance(model, TwoLayer) else None
        return [compare(self.title, "assumption", "width m > 1", width, ">", 1)]

    @assumption("ReLU network, both layers trained, no bias, balanced init",
                source="Chistikov et al. 2023, Sec. 2 (the network and its balanced initialisation)")
    def relu_network(self, run) -> list[Verdict]:
        """The model is the paper's network (nothing without a teacher)."""
        return [] if self._no_teacher(run) else [relu_net_verdict(self.title, run, balanced=True)]

    @assumption("M != 0 (the excluded threshold case)", threshold="m_zero_tol, m_exact_max_d",
                source=f"{_T8} (Sec. 7) excludes M = 0; |M| <= m_zero_tol counts as 0 (ours)")
    def m_nonzero(self, run) -> list[Verdict]:
        """|M| > m_zero_tol on every trial's data (on square invertible data with a teacher only)."""
        if self._no_teacher(run) or not all(self._square(run)[0]):
            return []
        out = []
        for r in trials(run):
            M = self._ref(run, r)["M"]
            statement = self._label(run, r, "M != 0 (the excluded threshold): |M|")
            out.append(compare(self.title, "assumption", statement, abs(M) if np.isfinite(M) else None, ">",
                               self.m_zero_tol,
                               "" if np.isfinite(M) else f"M not computed for d > {self.m_exact_max_d}"))
        return out

    # -- predictions (one verdict per trial) ----------------------------------------------------------------
    @staticmethod
    def _sign(ref) -> int:
        """-1 if M < 0 (or M unknown and the Z-matrix condition holds), +1 if M > 0, else 0 (unknown)."""
        M = ref["M"]
        known = np.isfinite(M)
        return -1 if (known and M < 0) or (not known and ref["z_holds"]) else (1 if known and M > 0 else 0)

    def _not_square(self, run, r, statement) -> Verdict:
        ds = run.data[r]
        # M, the min-norm program and the rank-1 norm 2||v*|| are defined for square invertible X only
        why = f"the theorem is stated for n = d (square, invertible X); here n = {ds.n}, d = {ds.d}"
        return compare(self.title, "prediction", self._label(run, r, statement), None, "<=", None, why)

    @staticmethod
    def _is_square(run, r) -> bool:
        return run.data[r].n == run.data[r].d

    @prediction("the inverse Gram matrix is a Z-matrix => M < 0", source=f"{_T8} (Sec. 7, the sufficient condition)")
    def z_matrix(self, run) -> list[Verdict]:
        """M < 0 where the Z-matrix condition holds; not evaluated (no prediction) where it does not."""
        out = []
        for r in trials(run):
            if not self._is_square(run, r):
                continue
            ref = self._ref(run, r)
            M = ref["M"]
            znote = f"max_(k!=l) <chi_k, chi_l> = {ref['z_max_offdiag']:.4g}"
            if ref["z_holds"]:
                out.append(compare(self.title, "prediction", self._label(run, r, "Z-matrix condition holds => M < 0"),
                                   M, "<", 0.0, znote + ("" if np.isfinite(M) else "; M not computed")))
            else:
                out.append(compare(self.title, "prediction",
                                   self._label(run, r, "Z-matrix condition (sufficient for M < 0)"), None, "<", 0.0,
                                   znote + f" > 0: the condition does not hold, no prediction; M = {M:.4g}"))
        return out

    @prediction("the sign of M decides whether the rank-1 interpolators have the minimum norm", threshold="norm_tol",
                source=f"{_T8}; tolerance: the relative accuracy of the convex minimum (the interior-point solver's "
                       "duality gap 1e-8, and what the pattern enumeration loses)")
    def min_norm_sign(self, run) -> list[Verdict]:
        """M < 0: the convex minimum equals 2||v*||; M > 0: it is below."""
        out = []
        for r in trials(run):
            if not self._is_square(run, r):
                out.append(self._not_square(run, r, "sign of M decides min-norm"))
                continue
            ref = self._ref(run, r)
            M, mn, r1 = ref["M"], ref["min_norm"], ref["rank_one"]
            sign = self._sign(ref)
            note = f"M = {M:.4g}, convex min ||theta||^2 = {mn:.8g}, rank-1 2||v*|| = {r1:.8g}"
            if sign < 0:
                statement = "M < 0 => min-norm interpolators are rank-1: |min ||theta||^2 - 2||v*||| / 2||v*||"
                v = compare(self.title, "prediction", self._label(run, r, statement), abs(mn - r1) / r1, "<=",
                            self.norm_tol, note)
            elif sign > 0:
                statement = "M > 0 => rank-1 is not min-norm: (2||v*|| - min ||theta||^2) / 2||v*||"
                v = compare(self.title, "prediction", self._label(run, r, statement), 1.0 - mn / r1, ">=",
                            self.norm_tol, note)
            else:
                v = compare(self.title, "prediction", self._label(run, r, "sign of M decides min-norm"), None, "<=",
                            self.norm_tol, note + "; sign of M unknown")
            out.append(v)
        return out

    def _learned(self, run, r) -> tuple[float, float, str] | None:
        """(learned ||theta||^2 at the smallest lambda of run r's trial, its bound, why) or None."""
        learned = theta_sq(run.results)
        lam = run_lambdas(run)
        same = np.array([spec.trial == run.runs[r].trial for spec in run.runs])
        runs = np.flatnonzero((lam == lam.min()) & same)
        if learned is None or runs.size == 0:
            return None
        value = float(learned[runs[0]])
        b = rank_one_bound(run, int(runs[0]))
        bound = (b["theta"] if b is not None else math.nan) if self.learned_tol is None else self.learned_tol
        why = "fixed learned_tol" if self.learned_tol is not None else (
            "no final parameters" if b is None else "the rank-1 limit's finite-time bound: " + b["note"])
        return value, bound, f"learned {value:.8g} at lambda {lam.min():.3g}; {why}"

    def _theorem7_scope(self, run, r, verdicts: list[Verdict]) -> list[Verdict]:
        """The verdicts about the learned network come from Theorem 7: outside_scope on data beyond its angle
        bound rank_one_max_angle."""
        ds = run.data[r]
        v = ds_angle(ds, ds.info["v_star"])
        if v < self.rank_one_max_angle:
            return verdicts
        why = (f"largest angle between v* and an x_i {v:.4g} rad >= {self.rank_one_max_angle:.4g} "
               "(Theorem 7's assumption)")
        return [dataclasses.replace(x, outcome="outside_scope", note=f"{x.note}; measured "
                f"{x.outcome}, but {why}") if x.outcome in ("holds", "fails") else x for x in verdicts]

    @prediction("GF's learned ||theta||^2 at the smallest lambda -> 2||v*|| (rank-1, Theorem 7)",
                threshold="learned_tol, rank_one_max_angle", source=RANK_ONE_SOURCE)
    def learned_rank_one(self, run) -> list[Verdict]:
        """|learned / 2||v*|| - 1| against the rank-1 limit's finite-time bound (or learned_tol)."""
        out = []
        for r in trials(run):
            if not self._is_square(run, r):
                out.append(self._not_square(run, r, "learned ||theta||^2 -> 2||v*||"))
                continue
            learned = self._learned(run, r)
            if learned is None:
                continue
            value, bound, note = learned
            r1 = self._ref(run, r)["rank_one"]
            statement = "learned ||theta||^2 at the smallest lambda -> 2||v*|| (rank-1, Theorem 7): relative gap"
            out += self._theorem7_scope(run, r, [compare(self.title, "prediction", self._label(run, r, statement),
                                                         abs(value - r1) / r1, "<=", bound, note)])
        return out

    @prediction("M > 0 => GF does not find a min-norm interpolator", threshold="learned_tol, rank_one_max_angle",
                source=f"{_T8} with Theorem 7; bound: the room 2||v*|| b / min that the finite run leaves its "
                       "rank-1 limit (b: two_layer_bounds.rank_one_bounds)")
    def gf_not_min_norm(self, run) -> list[Verdict]:
        """Where M > 0: (learned - min ||theta||^2) / min above the room the finite run leaves its limit."""
        out = []
        for r in trials(run):
            if not self._is_square(run, r):
                continue
            ref = self._ref(run, r)
            mn, r1 = ref["min_norm"], ref["rank_one"]
            learned = self._learned(run, r)
            if learned is None or self._sign(ref) <= 0 or not np.isfinite(mn):
                continue
            value, bound, _ = learned
            statement = ("M > 0 => GF does not find a min-norm interpolator: (learned - min ||theta||^2) / min, "
                         "above the room 2||v*|| b / min the finite run leaves its limit")
            out += self._theorem7_scope(run, r, [compare(self.title, "prediction", self._label(run, r, statement),
                                                         value / mn - 1.0, ">=", r1 * bound / mn,
                                                         f"learned {value:.8g}, min {mn:.8g}")])
        return out
