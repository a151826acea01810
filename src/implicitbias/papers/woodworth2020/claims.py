"""Woodworth et al. 2020's kernel and rich regimes read across the alphas of a sweep (`experiments`):
the per-run summary against the closed form (the Q_alpha^D minimisers on the same alphas) and the paper's claims
across cells as a `CellsTheorem` (`KernelRichClaims`): the rates at which the GF limits approach the min-l1 and
min-l2 interpolators on either side of their crossover (`regime_rate`), the teacher errors at the ends of the grid
against the two interpolators' (`recovery_claims`), and the transition widths with the uncertainty of the grid and
of the flow (`sharper_claim`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from implicitbias.metrics.extrapolation import relative_distance
from implicitbias.reference import ReferenceSolverError
from implicitbias.theorems.base import CellsTheorem, RunContext, Verdict, compare, prediction
from implicitbias.theorems.diagonal_common import (
    interpolator_references,
    q_alpha_reference,
    q_alpha_solution,
    stored_predictor,
)
from implicitbias.theorems.fitting import linear_fit, rate_verdict
from implicitbias.theorems.rates_common import MIN_FIT_POINTS

#: a distance is used in a regime rate only if it is this many times the flow's error there (its distance to the
#: exact Q_alpha minimiser, relative to the same reference): below, the distance is the integration error, not the
#: regime
TREND_MARGIN = 10.0
TITLE = "Woodworth et al. 2020, kernel and rich regimes"


def cells_by_depth(results) -> dict[int, object]:
    """The cells of the results by depth D (one cell per depth: every alpha of a depth is one cell)."""
    return {int(c.spec.model.depth): c for c in sorted(results.cells, key=lambda c: c.spec.model.depth)}


def summary_rows(cell) -> list[dict]:
    """Per run of a cell (sorted by alpha): the GF limit's distances to w*, to the min-l1 and min-l2
    interpolators and to the Q_alpha minimiser (all relative), and the run's end state."""
    run = RunContext.of(cell)
    rows = []
    for r in np.argsort([s.init_scale for s in run.runs]):
        spec, w = run.runs[r], stored_predictor(run, r)
        refs, q = interpolator_references(run, r), q_alpha_reference(run, r)
        ds = cell.results
        rows.append({
            "depth": int(spec.model.depth), "alpha": float(spec.init_scale),
            "teacher_error": relative_distance(w, run.data[r].info["w_star"]),
            "distance_l1": relative_distance(w, refs["l1"]), "distance_l2": relative_distance(w, refs["l2"]),
            "distance_q_alpha": np.nan if isinstance(q, Exception) else relative_distance(w, q.w),
            # the closed-form predictions at this alpha (the Q_alpha^D minimiser w_alpha) and the flow's error against
            # it relative to each reference: |d(w_GF) - d(w_alpha)| <= ||w_GF - w_alpha|| / ||ref|| (triangle)
            **closed_form(w, q, refs, run.data[r].info["w_star"]),
            "l1_l2_sparsity": float(np.abs(w).sum() ** 2 / (w @ w)),
            "final_loss": float(ds["loss"].values[r, -1]), "time": float(ds["time"].values[r, -1]),
            "grad_evals": int(ds["grad_evals"].values[r, -1]),
        })
    return rows


def closed_form(w, q, refs, star) -> dict:
    """The closed-form quantities of one run (see `summary_rows`)."""
    if isinstance(q, Exception):
        return {k: np.nan for k in ("q_teacher_error", "q_distance_l1", "q_distance_l2", "flow_error_teacher",
                                    "flow_error_l1", "flow_error_l2")}
    gap = float(np.linalg.norm(w - q.w))
    return {"q_teacher_error": relative_distance(q.w, star), "q_distance_l1": relative_distance(q.w, refs["l1"]),
            "q_distance_l2": relative_distance(q.w, refs["l2"]), "flow_error_teacher": gap / np.linalg.norm(star),
            "flow_error_l1": gap / np.linalg.norm(refs["l1"]), "flow_error_l2": gap / np.linalg.norm(refs["l2"])}


def column(rows, name) -> np.ndarray:
    """One column of `summary_rows` as a float array."""
    return np.asarray([row[name] for row in rows], dtype=float)



def transition_width(alpha, error, low: float = 0.1, high: float = 0.9) -> float:
    """The width in decades of alpha over which the teacher error climbs from `low` to `high` of its range
    (first crossings, interpolated linearly in log10 alpha); nan if it does not cross both levels."""
    la, e = np.log10(np.asarray(alpha, float)), np.asarray(error, float)
    span = e.max() - e.min()
    if not span > 0:
        return np.nan
    s = (e - e.min()) / span
    crossings = []
    for level in (low, high):
        k = np.flatnonzero((s[:-1] < level) & (s[1:] >= level))
        if k.size == 0:
            return np.nan
        i = k[0]
        crossings.append(la[i] + (level - s[i]) * (la[i + 1] - la[i]) / (s[i + 1] - s[i]))
    return float(crossings[1] - crossings[0])





def crossover(alpha, d_l1, d_l2) -> float:
    """The alpha where the distances to the min-l1 and min-l2 interpolators cross (log d_l1 - log d_l2 changes sign
    from - to +, interpolated linearly in log alpha; the first such crossing), the boundary between the rich and the
    kernel side; nan without a crossing."""
    la = np.log(np.asarray(alpha, float))
    g = np.log(np.asarray(d_l1, float)) - np.log(np.asarray(d_l2, float))
    k = np.flatnonzero((g[:-1] < 0) & (g[1:] >= 0))
    if k.size == 0:
        return np.nan
    i = k[0]
    return float(np.exp(la[i] + (0.0 - g[i]) * (la[i + 1] - la[i]) / (g[i + 1] - g[i])))


def regime_rate(statement: str, alpha, measured, predicted, error, side) -> Verdict:
    """A regime's approach to its limit interpolator, read as a rate: the slope of log(distance) against log alpha
    over the alphas of `side` whose GF distance exceeds TREND_MARGIN x the flow's `error` there (>= MIN_FIT_POINTS of
    them), against the closed form's: the same slope fitted to the distances of the Q_alpha^D minimisers w_alpha
    (`predicted`) on the same alphas. Two conditions, both derived:
    - the GF exponent is the closed form's up to what the flow's error allows: |d_GF - d_alpha| <= error at each
      alpha (triangle inequality), so |log d_GF - log d_alpha| <= e_k = error / (d_GF - error), and by Cauchy-Schwarz
      the least-squares slopes differ by at most sqrt(sum e_k^2 / sum (x_k - mean x)^2), x = log alpha;
    - the exponent, with its 95% confidence interval, lies nearer the closed form's than the nearest wrong rate, 0 (the
      distance levelling off: a limit other than that interpolator) (`rate_verdict`).
    Fails when either fails; not_evaluated (with the reason) with too few points."""
    alpha, measured, predicted, error = (np.asarray(v, float) for v in (alpha, measured, predicted, error))
    keep = side & np.isfinite(predicted) & (predicted > 0) & (measured > TREND_MARGIN * np.where(
        np.isfinite(error), error, np.inf))
    where = (f"fitted on the {int(keep.sum())} alphas of that side (alpha in [{alpha[keep].min():.3g}, "
             f"{alpha[keep].max():.3g}]) whose distance exceeds {TREND_MARGIN:g} x the flow's error there"
             if keep.any() else "no alpha of that side has a distance above the flow's error")
    if keep.sum() < MIN_FIT_POINTS:
        return Verdict(TITLE, "prediction", statement, None, "~", None, "not_evaluated",
                       f"{where}: fewer than {MIN_FIT_POINTS}, the slope's uncertainty cannot be estimated")
    x = np.log(alpha[keep])
    fit, closed = linear_fit(x, np.log(measured[keep])), linear_fit(x, np.log(predicted[keep]))
    e = error[keep] / (measured[keep] - error[keep])
    allowed = float(np.sqrt(np.sum(e**2) / np.sum((x - x.mean()) ** 2)))
    agree = f"closed-form exponent {closed.slope:.4g}; GF - closed form = {fit.slope - closed.slope:.2g}, allowed " \
            f"+-{allowed:.2g} by the flow's error"
    v = rate_verdict(TITLE, statement, fit, closed.slope, [0.0], note=f"{where}; {agree}")
    if abs(fit.slope - closed.slope) > allowed:
        v = dataclasses.replace(v, outcome="fails", note=v.note + "; the GF exponent is not the closed form's")
    return v


def recovery_claims(depth: int, err, e_l1: float, e_l2: float) -> list[Verdict]:
    """The teacher errors at the ends of the alpha grid against the closed-form limits: at the smallest alpha nearer
    the min-l1 interpolator's error e_l1 (the rich limit) than the min-l2 one's e_l2, at the largest nearer e_l2
    (the midpoint (e_l1 + e_l2) / 2 is the boundary: nearer the predicted limit than the competing one)."""
    mid = 0.5 * (e_l1 + e_l2)
    note = f"closed-form limits: ||w_l1 - w*|| / ||w*|| = {e_l1:.3g}, ||w_l2 - w*|| / ||w*|| = {e_l2:.3g}"
    return [
        compare(TITLE, "prediction", f"D = {depth}: the rich regime recovers the sparse teacher: ||w - w*|| / ||w*|| at "
                "the smallest alpha nearer the min-l1 interpolator's than the min-l2 one's (below their midpoint)",
                err[0], "<", mid, note),
        compare(TITLE, "prediction", f"D = {depth}: the kernel regime does not: ||w - w*|| / ||w*|| at the largest "
                "alpha nearer the min-l2 interpolator's than the min-l1 one's (above their midpoint)", err[-1], ">", mid,
                note),
    ]


def width_uncertainty(alpha, err, error, fine_alpha, fine_err, on_run_grid, span) -> tuple[float, float, str]:
    """(the GF width on the run grid, its uncertainty, what): the uncertainty is the grid's (the closed-form width on
    the run grid, `fine_err[on_run_grid]`, against that on the finer grid `fine_alpha`) plus the flow's (each teacher
    error within `error` of the closed form's moves a crossing by at most error / span over the local slope of the
    normalised error per unit of log10 alpha)."""
    fine_alpha, fine_err = np.asarray(fine_alpha, float), np.asarray(fine_err, float)
    ok = np.isfinite(fine_err)  # alphas where float64 cannot reach w_alpha: left out
    closed = transition_width(fine_alpha[ok & on_run_grid], fine_err[ok & on_run_grid])
    fine = transition_width(fine_alpha[ok], fine_err[ok])
    on_grid = transition_width(alpha, err)
    s = (np.asarray(err) - np.min(err)) / span
    slopes = np.abs(np.diff(s) / np.diff(np.log10(alpha)))
    flow = float(2.0 * np.nanmax(error) / span / np.min(slopes[slopes > 0.05])) if np.any(slopes > 0.05) else np.inf
    grid = abs(closed - fine)
    return on_grid, grid + flow, (f"closed form {closed:.3g} on the run grid, {fine:.3g} on a 4x finer one across the "
                                  f"transition; flow {flow:.2g}")


def regime_claims(depth: int, rows: list[dict], e_l1: float, e_l2: float) -> list[Verdict]:
    """The regime claims of one depth from its `summary_rows` (class of claims: `regime_rate`, `recovery_claims`)."""
    alpha = column(rows, "alpha")
    l1, l2 = column(rows, "distance_l1"), column(rows, "distance_l2")
    star = crossover(alpha, l1, l2)
    rich, kernel = alpha < star, alpha > star
    at = f"crossover d_l1 = d_l2 at alpha = {star:.3g}"
    return [
        regime_rate(f"D = {depth}: alpha -> 0 gives the min-l1 interpolator: rate of log ||w - w_l1|| / ||w_l1|| in "
                    f"log alpha on the rich side of the crossover ({at}), against the closed form's", alpha, l1,
                    column(rows, "q_distance_l1"), column(rows, "flow_error_l1"), rich),
        regime_rate(f"D = {depth}: alpha -> infinity gives the min-l2 interpolator: rate of log ||w - w_l2|| / ||w_l2|| "
                    f"in log alpha on the kernel side of the crossover ({at}), against the closed form's", alpha, l2,
                    column(rows, "q_distance_l2"), column(rows, "flow_error_l2"), kernel),
        *recovery_claims(depth, column(rows, "teacher_error"), e_l1, e_l2),
    ]


def sharper_claim(widths: dict[int, tuple[float, float, str]]) -> Verdict:
    """D = 3's transition is sharper than D = 2's: the widths (decades of alpha over which the teacher error climbs
    from 10% to 90% of its range) on the runs' grids, each with its uncertainty (`width_uncertainty`): holds when
    W_3 + u_3 < W_2 - u_2, fails when W_3 - u_3 >= W_2 + u_2, else inconclusive."""
    (w2, u2, what2), (w3, u3, what3) = widths[2], widths[3]
    statement = ("the transition is sharper for D = 3: decades of alpha over which the teacher error climbs from 10% to "
                 "90% of its range, D = 3 below D = 2 by more than their uncertainties")
    note = f"D = 2: {w2:.3g} +- {u2:.2g} ({what2}); D = 3: {w3:.3g} +- {u3:.2g} ({what3})"
    v = compare(TITLE, "prediction", statement, w3 + u3, "<", w2 - u2, note)
    if v.outcome == "fails" and w3 - u3 < w2 + u2:
        v = dataclasses.replace(v, outcome="not_evaluated", note="inconclusive: the widths' uncertainties overlap; " + note)
    return v


def limits_vs_teacher(cell) -> tuple[float, float]:
    """(||w_l1 - w*|| / ||w*||, ||w_l2 - w*|| / ||w*||) of a cell's data (the first run's)."""
    run = RunContext.of(cell)
    refs, star = interpolator_references(run, 0), run.data[0].info["w_star"]
    return relative_distance(refs["l1"], star), relative_distance(refs["l2"], star)


def fine_teacher_errors(cell, alpha, err) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(alphas, closed-form teacher errors ||w_alpha - w*|| / ||w*||, which alphas are the run grid's): the run grid
    with three more log-spaced alphas in each of its intervals that the transition crosses (the normalised GF error
    `err` between 2% and 98% of its range at either end, and one interval beside), where the width is read."""
    la, s = np.log(alpha), (np.asarray(err) - np.min(err)) / np.ptp(err)
    inside = (s > 0.02) & (s < 0.98)
    near = np.zeros(len(alpha) - 1, bool)
    for i in np.flatnonzero(inside):
        near[max(i - 2, 0):min(i + 2, len(near))] = True
    points, grid = [], []
    for i in range(len(alpha)):
        points.append(la[i])
        grid.append(True)
        if i < len(near) and near[i]:
            points += list(np.linspace(la[i], la[i + 1], 5)[1:-1])
            grid += [False] * 3
    fine = np.exp(points)
    data, depth = cell.data[0], int(cell.spec.model.depth)
    star = data.info["w_star"]
    out = []
    for a in fine:
        ref = q_alpha_solution(cell.runs[0].data_key(), data.X, data.y, float(a), depth)
        if isinstance(ref, ReferenceSolverError):
            out.append(np.nan)
        elif isinstance(ref, Exception):
            raise ref
        else:
            out.append(float(np.linalg.norm(ref.w - star) / np.linalg.norm(star)))
    return fine, np.asarray(out), np.asarray(grid)




class KernelRichClaims(CellsTheorem):
    """Woodworth et al. 2020's claims across the alphas of each depth (module docstring), read against the closed
    form: per depth, the two regime rates and the two recovery claims (`regime_claims`); then the sharper
    transition of D = 3 (`sharper_claim`)."""

    @property
    def title(self) -> str:
        """The theorem's name, as its verdicts give it."""
        return TITLE

    @prediction("per depth: alpha -> 0 gives the min-l1 interpolator and alpha -> infinity the min-l2 one (the "
                "rates against the closed form's), the rich regime recovers the sparse teacher and the kernel regime "
                "does not", threshold="",
                source="Woodworth et al. 2020, Theorems 1-2 and Sec. 5; tolerances: the rate's 95% interval nearer "
                       "the closed form's exponent than the wrong rate 0, the flow's error bound (regime_rate); the "
                       "midpoint between the two interpolators' teacher errors (recovery_claims)")
    def regimes(self, ctx) -> list[Verdict]:
        """Prediction: per depth: alpha -> 0 gives the min-l1 interpolator and alpha -> infinity the min-l2 one (the
        rates against the closed form's), the rich regime recovers the sparse teacher and the kernel regime does
        not."""
        out = []
        for depth, cell in cells_by_depth(ctx.results).items():
            rows = ctx.once(f"rows {depth}", lambda cell=cell: summary_rows(cell))
            e_l1, e_l2 = limits_vs_teacher(cell)
            out += regime_claims(depth, rows, e_l1, e_l2)
        return out

    @prediction("the transition is sharper for D = 3 than for D = 2",
                source="Woodworth et al. 2020, Sec. 5 (depth sharpens the transition); the widths' uncertainties "
                       "from the grid and the flow's error (width_uncertainty)")
    def sharper(self, ctx) -> list[Verdict]:
        """Prediction: the transition is sharper for D = 3 than for D = 2."""
        cells = cells_by_depth(ctx.results)
        if not (2 in cells and 3 in cells):
            return []
        widths = {}
        for depth, cell in cells.items():
            rows = ctx.once(f"rows {depth}", lambda cell=cell: summary_rows(cell))
            alpha, err = column(rows, "alpha"), column(rows, "teacher_error")
            fine_alpha, fine_err, on_run_grid = fine_teacher_errors(cell, alpha, err)
            widths[depth] = width_uncertainty(alpha, err, column(rows, "flow_error_teacher"), fine_alpha, fine_err,
                                              on_run_grid, float(np.ptp(err)))
        return [sharper_claim(widths)]
