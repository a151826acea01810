"""Curve fits and per-run summaries of a cell's results, shared by the theorem checks and the reports.

A cell's results are an `xarray.Dataset` over (run, checkpoint) (see `implicitbias.storage.results`).

- `fitted_slope(x, y)`: least-squares slope and R^2, e.g. ||W||_F against log t, or log L against log t
  (Kou et al. 2023, S3: ||W||_F = Theta(log t) and L = Theta(1/t) appear as a slope > 0 and a slope -1);
- `late_window(time)`: the late checkpoints of one run, where the asymptotic rates are fitted;
- `curve`, `final`, `initial`: a metric over (run, checkpoint), its last finite value, its first value;
- `over_runs`: the verdict on the worst run of a cell (every theorem reports the worst case over runs);
- `flag`: a verdict on a yes/no condition (an activation, a loss, the structure of the outer layer);
- `run_labels`: a label per run of a `RunContext`.  Everything else about run r is read from its spec,
  `run.runs[r]`, and its data, `run.data[r]` (see `theorems.base.RunContext`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from implicitbias.theorems.base import Kind, Verdict, compare


# -- fits ------------------------------------------------------------------------------------------
def fitted_slope(x, y) -> tuple[float, float]:
    """Least-squares line y ~ slope * x + b through the finite pairs: returns (slope, R^2).

    R^2 = 1 - SS_res / SS_tot (1.0 for an exact fit, also when y is constant). With fewer than two
    finite pairs, or a constant x, the slope is undefined: (nan, nan).
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 2 or np.ptp(x) == 0:
        return math.nan, math.nan
    xc, yc = x - x.mean(), y - y.mean()
    slope = float(xc @ yc / (xc @ xc))
    ss_res = float(np.sum((yc - slope * xc) ** 2))
    ss_tot = float(yc @ yc)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return slope, r2


def late_window(time, fraction: float = 0.5) -> np.ndarray:
    """Boolean mask of the late checkpoints of one run: the last `fraction` of them, with t > 0 finite,
    keeping only strictly increasing times (a run that stopped early repeats its last state)."""
    t = np.asarray(time, dtype=np.float64).ravel()
    keep = np.zeros(t.shape, dtype=bool)
    keep[int(np.floor(t.size * (1.0 - fraction))) :] = True
    last = -np.inf
    for k in range(t.size):
        fresh = bool(np.isfinite(t[k]) and t[k] > 0 and t[k] > last)
        if np.isfinite(t[k]):
            last = max(last, t[k])
        keep[k] &= fresh
    return keep


# -- metrics of a cell ------------------------------------------------------------------------------
def curve(results, name: str) -> np.ndarray | None:
    """The metric `name` as a float array (run, checkpoint), or None if it was not recorded."""
    if name not in results.data_vars:
        return None
    return np.asarray(results[name].values, dtype=np.float64).reshape(results.sizes["run"], -1)


def final(results, name: str) -> np.ndarray | None:
    """The last finite value of the metric per run (nan where a run has none), or None if not recorded."""
    c = curve(results, name)
    if c is None:
        return None
    out = np.full(c.shape[0], np.nan)
    for r, row in enumerate(c):
        # +-inf is a value (e.g. a margin spread with a misclassified point); nan is "not recorded"
        ok = np.flatnonzero(~np.isnan(row))
        if ok.size:
            out[r] = row[ok[-1]]
    return out


def initial(results, name: str) -> np.ndarray | None:
    """The metric at the first checkpoint (step 0, the initialisation) per run, or None."""
    c = curve(results, name)
    return None if c is None else c[:, 0].copy()


# -- verdicts ---------------------------------------------------------------------------------------
def flag(theorem: str, kind: Kind, statement: str, ok: bool | None, note: str = "", measured=None) -> Verdict:
    """A verdict on a yes/no condition: holds / fails, or not_evaluated when `ok` is None."""
    outcome = "not_evaluated" if ok is None else ("holds" if ok else "fails")
    m = None if measured is None else float(measured)
    return Verdict(theorem, kind, statement, m, "", None, outcome, note)


def over_runs(
    theorem: str,
    kind: Kind,
    statement: str,
    measured,
    relation: str,
    bound,
    *,
    where: str = "at the final checkpoint",
    note: str = "",
    labels: Sequence[str] | None = None,
    run_notes: Sequence[str] | None = None,
) -> Verdict:
    """The verdict `measured relation bound` on the worst run of a cell.

    measured: one value per run (None: not recorded in this cell, or `note` says why it is missing);
    bound: a number or one per run. The worst run is the one with the least slack (smallest
    measured - bound for >= and >, largest for <= and <); its entry of `run_notes` joins the note. If some
    runs have no finite value the quantity is undefined there and the verdict is `not_evaluated` (the
    others' worst case is shown).
    """
    if measured is None:
        return compare(theorem, kind, statement, None, relation, None, note or "not recorded in this cell")
    measured = np.atleast_1d(np.asarray(measured, dtype=np.float64))
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), measured.shape)
    n = measured.size
    ok = np.isfinite(measured) & np.isfinite(bound)
    labels = list(labels) if labels is not None else [f"run {r}" for r in range(n)]
    if not ok.any():
        what = f"undefined on all {n} run(s) {where}"
        return compare(theorem, kind, statement, None, relation, None, _join(what, note))
    slack = np.where(ok, measured - bound, np.nan)
    r = int(np.nanargmin(slack) if relation in (">=", ">") else np.nanargmax(slack))
    what = f"worst of {n} runs ({labels[r]}) {where}".rstrip() if n > 1 else where
    extra = run_notes[r] if run_notes is not None else ""
    v = compare(theorem, kind, statement, measured[r], relation, bound[r], _join(what, extra, note))
    if not ok.all():
        bad = ", ".join(labels[i] for i in np.flatnonzero(~ok))
        v = dataclasses.replace(
            v, outcome="not_evaluated", note=_join(v.note, f"undefined (not finite) on {bad}")
        )
    return v


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


# -- labels ------------------------------------------------------------------------------------------
def run_labels(run) -> list[str]:
    """A label per run of a `RunContext` (its position and init seed), for the notes of `over_runs`."""
    return [f"run {r}, seed {spec.seed}" for r, spec in enumerate(run.runs)]
