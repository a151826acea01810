"""Chistikov et al. 2023, Figure 1 under every reading of "active": which neurons the published max angle counts.

The paper plots "the maximum angle between active hidden neurons" and gives no operational definition. Read
literally (a training point in the neuron's open positive half-space), the max angle at d = 1024 stays at
~1.7 rad at every lambda, in our flow and in GD as the paper ran it (they agree there to 4 digits): negative
neurons left active on a few points when the residuals vanish never move again (`implicitbias.papers.chistikov2023.metrics.frozen`
derives when; `FROZEN` below measures it). The paper's column falls like lambda, so its "active" excludes them.
Every reading of `implicitbias.metrics.readings` is drawn here, computed from the stored final parameters (and
the init, regenerated from each run's spec), so that `implicitbias report DIR` draws them on outputs already on
disk; `PAPER_READING` is the one reading, with one threshold for every cell, that reproduces the published
column (centred, d = 1024, Table 1 of the paper, `PAPER_COLUMN`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.figures import write_csv as _write_csv
from implicitbias.metrics.readings import READINGS, initial_parameters, max_angle_by_reading, threshold_curves
from implicitbias.papers.chistikov2023.metrics.frozen import early_phase, frozen_counts, growth_time
from implicitbias.theorems.base import CellsTheorem, compare, prediction

#: the paper's Table 1, centred data, d = 1024, m = 200: the median over 5 trials of the max angle between active
#: neurons, in degrees, at lambda = 4^2, 4^1, ..., 4^-13 (from lambda = 4^-1 on it falls 4x per step of lambda)
PAPER_COLUMN = {4.0**k: v for k, v in zip(range(2, -14, -1), (
    96.54, 96.50, 86.95, 29.97, 7.662, 1.918, 0.4796, 0.1199, 0.02998, 7.494e-3, 1.874e-3, 4.684e-4, 1.171e-4,
    2.930e-5, 7.636e-6, 3.912e-6))}
#: the column's cell: (data scheme, d)
PAPER_CELL = ("centred", 1024)
#: the lambdas on which a reading of "active" can be judged against the column: 4^-1 .. 4^-12.  Above, every
#: neuron moves (lambda >= 1: all readings give the same ~97 deg, the literal one included, and no reading can
#: move the paper's 86.95 deg at lambda = 1); at 4^-13 the paper's value leaves its own trend (7.636e-6 -> 3.912e-6
#: deg, a factor 1.95 where every other step of the column is 4.00 +- 0.01), while every reading that keeps the
#: bundle goes on falling 4x (ours: 1.6e-6 deg).  The table (`paper_comparison`) lists all 16.
PAPER_RANGE = (4.0**-12, 4.0**-1)

#: the reading of "active" (a name of `implicitbias.metrics.readings.READINGS`) and its threshold that reproduce
#: `PAPER_COLUMN`: one threshold for every cell, every column and both schemes (see the module docstring of
#: `implicitbias.papers.chistikov2023.experiments.fig1` for how it was found)
PAPER_READING = ("share", 1e-3)

#: readings drawn and tabled: the stored metrics (recorded max angle, off the kinks, carrying weight) and the
#: readings of `implicitbias.metrics.readings` at their default thresholds, then the paper's reading
THRESHOLD_READINGS = tuple(r.name for r in READINGS.values() if r.quantity is not None)

#: the bootstrap of a median of five: resamples, and the central interval a published median should lie in
BOOTSTRAP, BAND = 4000, (0.025, 0.975)


def paper_label() -> str:
    """The paper reading's label, e.g. "share >= 0.001"."""
    name, tau = PAPER_READING
    return f"{name} >= {tau:g}"


def paper_angle(W, a, X, W0) -> float:
    """The max angle (rad) between the neurons the paper's reading (`PAPER_READING`) keeps."""
    name, tau = PAPER_READING
    return max_angle_by_reading(W, a, X, W0, readings=[name], taus={name: tau})[name]


def _init(cell, r: int) -> dict[str, np.ndarray]:
    cache = cell.__dict__.setdefault("_initial", {})
    if r not in cache:
        cache[r] = initial_parameters(cell.runs[r], cell.data[r].X.shape[1])
    return cache[r]


def _final(cell, r: int):
    return cell.results["theta.W"].values[r], cell.results["theta.a"].values[r]


def cell_readings(cell) -> dict[str, np.ndarray]:
    """{reading: max angle (rad) per run of the cell}: every reading at its default threshold, and "paper" (the
    paper's reading, `PAPER_READING`), computed from the stored final parameters and the regenerated init."""
    if "_readings" in cell.__dict__:
        return cell.__dict__["_readings"]
    out: dict[str, list[float]] = {}
    for r in range(len(cell.runs)):
        W, a = _final(cell, r)
        X, W0 = cell.data[r].X, _init(cell, r)["W"]
        values = max_angle_by_reading(W, a, X, W0)
        values["paper"] = paper_angle(W, a, X, W0)
        for k, v in values.items():
            out.setdefault(k, []).append(v)
    cell.__dict__["_readings"] = {k: np.asarray(v) for k, v in out.items()}
    return cell.__dict__["_readings"]


def cell_curves(cell) -> dict[str, np.ndarray]:
    """{threshold reading: (runs, thresholds) max angles} along each reading's grid (`Reading.grid`)."""
    if "_curves" not in cell.__dict__:
        per_run = [threshold_curves(*_final(cell, r), cell.data[r].X, _init(cell, r)["W"]) for r in range(len(cell.runs))]
        cell.__dict__["_curves"] = {k: np.stack([c[k] for c in per_run]) for k in per_run[0]}
    return cell.__dict__["_curves"]


def cell_frozen(cell) -> list[dict[str, float]]:
    """Per run, the frozen negative neurons measured against predicted (`metrics.frozen.frozen_counts`:
    the early phase integrated once per trial, which every lambda of it shares, and each run's residual time from
    its bundle's growth, `growth_time`)."""
    if "_frozen" in cell.__dict__:
        return cell.__dict__["_frozen"]
    paths, out = {}, []
    for r, spec in enumerate(cell.runs):
        init, data = _init(cell, r), cell.data[r]
        key = (spec.seed, spec.data_seed)
        if key not in paths:
            paths[key] = early_phase(init["W"], init["a"], data.X, data.y)
        W, _ = _final(cell, r)
        tau = growth_time(W, init["W"], data.X, data.y)
        out.append({"lambda": spec.init_scale, "trial": spec.trial,
                    **frozen_counts(W, data.X, data.y, init["W"], init["a"], tau, paths[key])})
    cell.__dict__["_frozen"] = out
    return out


def _by_scheme(results) -> dict[str, list]:
    """The cells of Figure 1 by data scheme, each list sorted by d."""
    out: dict[str, list] = {}
    for cell in sorted(results.cells, key=lambda c: c.spec.data.d):
        out.setdefault(cell.spec.data.scheme, []).append(cell)
    return out


def _lambdas(cell) -> np.ndarray:
    return np.array([s.init_scale for s in cell.runs], dtype=np.float64)


def medians(cell, values) -> tuple[np.ndarray, np.ndarray]:
    """(lambdas from largest to smallest, the median over trials of `values` at each)."""
    lam = _lambdas(cell)
    grid = np.unique(lam)[::-1]
    return grid, np.array([np.median(np.asarray(values)[lam == g]) for g in grid])


def bootstrap_band(values, seed: int = 0) -> tuple[float, float]:
    """The central `BAND` interval of the median of five drawn with replacement from `values` (the spread of a
    published five-trial median, estimated from the trials at hand)."""
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(values, size=(BOOTSTRAP, 5), replace=True), axis=1)
    return float(np.quantile(meds, BAND[0])), float(np.quantile(meds, BAND[1]))


def paper_comparison(results) -> list[dict]:
    """Per lambda of the paper's cell (`PAPER_CELL`) present in the results: the paper's value, the cell median
    under the paper reading and under the literal one (all in degrees), the bootstrap band of the paper reading's
    median of five, whether the paper's value lies in it, and the ratio ours / paper."""
    cell = next((c for c in results.cells if (c.spec.data.scheme, c.spec.data.d) == PAPER_CELL), None)
    if cell is None:
        return []
    values, lam = cell_readings(cell), _lambdas(cell)
    rows = []
    for g in sorted(set(lam.tolist()), reverse=True):
        paper = next((v for k, v in PAPER_COLUMN.items() if math.isclose(k, g, rel_tol=1e-9)), None)
        if paper is None:
            continue
        sel = lam == g
        ours = math.degrees(float(np.median(values["paper"][sel])))
        lo, hi = (math.degrees(v) for v in bootstrap_band(values["paper"][sel]))
        rows.append({"lambda": g, "paper_deg": paper, "ours_deg": ours, "literal_deg":
                     math.degrees(float(np.median(values["literal"][sel]))), "band_lo_deg": lo, "band_hi_deg": hi,
                     "trials": int(sel.sum()), "within": bool(lo <= paper <= hi), "ratio": ours / paper})
    return rows


def _fig_readings(results):
    schemes = _by_scheme(results)
    fig, axes = panels(len(schemes))
    for ax, (scheme, cells) in zip(axes, schemes.items()):
        for cell in cells:
            values = cell_readings(cell)
            lam, med = medians(cell, values["paper"])
            ok = med > 0
            line = ax.plot(lam[ok], med[ok], marker="o", ms=3, label=f"d = {cell.spec.data.d}")[0]
            lam, lit = medians(cell, values["literal"])
            ax.plot(lam[lit > 0], lit[lit > 0], "--", color=line.get_color(), lw=0.9)
        if scheme == PAPER_CELL[0]:
            for row in paper_comparison(results):
                ax.plot([row["lambda"]] * 2, np.radians([row["band_lo_deg"], row["band_hi_deg"]]), "-", color="0.6",
                        lw=3, alpha=0.5)
            grid = np.array(sorted(PAPER_COLUMN))
            ax.plot(grid, np.radians([PAPER_COLUMN[g] for g in grid]), "kx", ms=5,
                    label=f"paper, d = {PAPER_CELL[1]}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("initialisation scale lambda")
        ax.set_ylabel("median max angle (rad)")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, f"{scheme} data: solid the paper's reading ({paper_label()}),\ndashed the literal one; grey: "
                   "bootstrap band of a median of 5")
    return fig


def _fig_thresholds(results):
    schemes = _by_scheme(results)
    names = THRESHOLD_READINGS
    fig, axes = panels(len(names), width=4.2)
    styles = {0: "-", 1: "--"}
    for ax, name in zip(axes, names):
        grid = np.asarray(READINGS[name].grid)
        for s, cells in enumerate(schemes.values()):
            for n, cell in enumerate(cells):
                curves, lam = cell_curves(cell), _lambdas(cell)
                if name not in curves:
                    continue
                small = lam == lam.min()
                med = np.median(curves[name][small], axis=0)
                ax.plot(grid, np.maximum(med, 1e-12), styles.get(s, ":"), color=f"C{n}",
                        label=f"d = {cell.spec.data.d}" if s == 0 else None)
        default = READINGS[name].default
        ax.axvline(default, color="0.5", lw=0.8, ls=":")
        if name == PAPER_READING[0]:
            ax.axvline(PAPER_READING[1], color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"threshold tau of '{name}'")
        ax.set_ylabel("cell median max angle (rad)")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, f"{name}: at the smallest lambda\n(solid {list(schemes)[0]}"
                   + (f", dashed {list(schemes)[1]})" if len(schemes) > 1 else ")"))
    return fig


def _fig_frozen(results):
    schemes = _by_scheme(results)
    fig, axes = panels(len(schemes))
    for ax, (scheme, cells) in zip(axes, schemes.items()):
        for cell in cells:
            rows = cell_frozen(cell)
            lam = np.array([r["lambda"] for r in rows])
            grid = np.unique(lam)[::-1]
            measured = [np.median([r["negative_active"] for r in rows if r["lambda"] == g]) for g in grid]
            predicted = [np.median([r["negative_predicted"] for r in rows if r["lambda"] == g]) for g in grid]
            line = ax.plot(grid, np.asarray(measured) + 0.1, "o-", ms=3, label=f"d = {cell.spec.data.d}")[0]
            ax.plot(grid, np.asarray(predicted) + 0.1, "x--", ms=4, color=line.get_color(), lw=0.9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("initialisation scale lambda")
        ax.set_ylabel("negative neurons active at the end (+0.1)")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, f"{scheme} data: measured (o, solid) and predicted\n(x, dashed: T_j > tau), median over trials")
    return fig


def readings_tables(results, out_dir) -> list[Path]:
    """CSV tables: per scheme and reading the cell medians (`fig1_SCHEME_reading_NAME.csv`, one column per d), per
    scheme and threshold reading the cell medians along its thresholds (`fig1_SCHEME_threshold_NAME.csv`, one
    row per (d, lambda)), the frozen neurons per run (`fig1_frozen.csv`) and the paper's column against ours
    (`fig1_paper_column.csv`)."""
    out_dir = Path(out_dir)
    written = []
    for scheme, cells in _by_scheme(results).items():
        values = {c.spec.data.d: cell_readings(c) for c in cells}
        for name in next(iter(values.values())):
            cols = {d: dict(zip(*medians(c, values[d][name]))) for d, c in zip(values, cells)}
            grid = sorted({g for col in cols.values() for g in col}, reverse=True)
            rows = [[f"{g:.10g}"] + [f"{cols[d].get(g, np.nan):.10g}" for d in cols] for g in grid]
            label = paper_label() if name == "paper" else READINGS[name].label if name in READINGS else name
            written.append(_write_csv(out_dir / f"fig1_{scheme}_reading_{name}.csv",
                                      ["lambda"] + [f"d={d} ({label})" for d in cols], rows))
        for name in THRESHOLD_READINGS:
            rows = []
            for cell in cells:
                curves, lam = cell_curves(cell), _lambdas(cell)
                for g in np.unique(lam)[::-1]:
                    rows.append([cell.spec.data.d, f"{g:.10g}"]
                                + [f"{v:.10g}" for v in np.median(curves[name][lam == g], axis=0)])
            written.append(_write_csv(out_dir / f"fig1_{scheme}_threshold_{name}.csv",
                                      ["d", "lambda"] + [f"tau={t:.4g}" for t in READINGS[name].grid], rows))
    keys = ["negative_active", "negative_predicted", "agree", "tau", "max_T", "k_measured", "k_predicted"]
    rows = [[c.spec.data.scheme, c.spec.data.d, f"{r['lambda']:.10g}", r["trial"]] + [f"{r[k]:.6g}" for k in keys]
            for c in results.cells for r in cell_frozen(c)]
    written.append(_write_csv(out_dir / "fig1_frozen.csv", ["scheme", "d", "lambda", "trial"] + keys, rows))
    comparison = paper_comparison(results)
    if comparison:
        keys = list(comparison[0])
        written.append(_write_csv(out_dir / "fig1_paper_column.csv", keys,
                                  [[f"{r[k]:.6g}" if isinstance(r[k], float) else r[k] for k in keys]
                                   for r in comparison]))
    return written


class ReadingClaims(CellsTheorem):
    """Figure 1 under the readings of "active" (`implicitbias.metrics.readings`): per scheme and reading, the
    median max angle at the smallest lambda is far below its largest value, for every d; and under the paper's
    reading (`PAPER_READING`) the paper's published column lies in the bootstrap band of our median of five at
    every lambda of it.

    fall: as `Figure1Claims.fall` (ours: 1e-2, two orders of magnitude over the grid).
    min_trials: the paper column is compared only with at least this many trials per cell (ours: 3; a band from
    fewer says little)."""

    fall: float = 1e-2
    min_trials: int = 3

    @property
    def title(self) -> str:
        """The theorem named in this object's verdicts."""
        return "Chistikov et al. 2023, Figure 1, readings of 'active'"

    @prediction("under each reading, the median max angle at the smallest lambda is far below its largest value, "
                "for every d", threshold="fall",
                source="Chistikov et al. 2023, Figure 1; the readings are ours (the paper does not define 'active')")
    def falls_under_each_reading(self, ctx) -> list:
        """Per scheme and reading: the worst ratio (median at the smallest lambda) / (largest median) over d."""
        out = []
        for scheme, cells in _by_scheme(ctx.results).items():
            names = list(cell_readings(cells[0]))
            for name in names:
                meds = [medians(c, cell_readings(c)[name])[1] for c in cells]
                ratios = [m[-1] / np.max(m) for m in meds if np.max(m) > 0]
                label = paper_label() if name == "paper" else READINGS[name].label
                out.append(compare(self.title, "prediction",
                                   f"{scheme}, reading '{label}': the median max angle at the smallest lambda is far "
                                   "below its largest value, for every d (worst ratio)",
                                   max(ratios) if ratios else None, "<", self.fall,
                                   ", ".join(f"d = {c.spec.data.d}: {m[-1]:.3g} rad" for c, m in zip(cells, meds))))
        return out

    @prediction("under the paper's reading the published column (centred, d = 1024) lies in the bootstrap band of "
                "our median of five at every lambda from 4^-1 to 4^-12 (`PAPER_RANGE`)", threshold="min_trials",
                source="Chistikov et al. 2023, Table 1 (the values of Figure 1, centred, d = 1024); the band is a "
                       "95% bootstrap interval of a median of five (ours)")
    def reproduces_the_paper_column(self, ctx) -> list:
        """The number of lambdas where the paper's value lies outside our band (0 to hold)."""
        rows = [r for r in paper_comparison(ctx.results)
                if PAPER_RANGE[0] * (1 - 1e-9) <= r["lambda"] <= PAPER_RANGE[1] * (1 + 1e-9)]
        statement = (f"reading '{paper_label()}': lambdas 4^-1 .. 4^-12 of the paper's column (centred, d = 1024) "
                     "outside the bootstrap band of our median of five")
        if not rows or min(r["trials"] for r in rows) < self.min_trials:
            return [compare(self.title, "prediction", statement, None, "<=", 0,
                            f"needs the cell centred, d = 1024 with >= {self.min_trials} trials per lambda (has "
                            f"{min((r['trials'] for r in rows), default=0)})")]
        outside = [r for r in rows if not r["within"]]
        note = "; ".join(f"4^{round(math.log(r['lambda'], 4))}: paper {r['paper_deg']:.4g} deg, band "
                         f"[{r['band_lo_deg']:.4g}, {r['band_hi_deg']:.4g}]" for r in outside) or \
            f"all {len(rows)} lambdas inside; ours / paper from {min(r['ratio'] for r in rows):.3g} to " \
            f"{max(r['ratio'] for r in rows):.3g}"
        return [compare(self.title, "prediction", statement, len(outside), "<=", 0, note)]
