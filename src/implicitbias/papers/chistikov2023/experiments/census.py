"""Chistikov et al. 2023, Figure 1 beyond medians of five: the distribution over 50 trials of the max angle
between active neurons, and a census of the active neurons that are not aligned with the bundle
(`implicitbias.metrics.census`, stored with every run), split by the proofs' angle condition (pi/4).

`chistikov2023-fig1-census`: gradient flow, as Figure 1 (`chistikov2023-fig1`), 50 trials, d in {4, 16, 64},
both schemes, lambda in {4^-4, 4^-7, 4^-10, 4^-13}. `chistikov2023-census-dtype`: the paper's GD (lr 0.01) in
float32 (PyTorch's default) and float64 from the same inits, to rule a precision effect in or out.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import panels, plt, write_dict_csv
from implicitbias.metrics.census import ALIGN_C, SHRINK_EXPONENT, UNALIGNED, stored_census
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.papers.chistikov2023.experiments.fig1 import GF, NET, SQUARE, STOP, WEIGHTED
from implicitbias.papers.chistikov2023.metrics.census_trials import (
    CATEGORIES,
    FAR_FACTOR,
    categorise,
    fractions,
    median_bands,
    pair_exponents,
)
from implicitbias.papers.chistikov2023.theorems.census import CensusTheorem7
from implicitbias.theorems.base import CellsTheorem, compare, prediction
from implicitbias.theorems.fitting import final
from implicitbias.theorems.init_scale_cells import fmt_lambda
from implicitbias.training.methods import GD
from implicitbias.training.stopping import Stop

CENSUS_LAMBDAS = [4.0**-4, 4.0**-7, 4.0**-10, 4.0**-13]
KINDS = ("unaligned", "unaligned_negative", "unaligned_positive", "unaligned_positive_all", "unaligned_positive_some")


# -- the census of every run, as rows -----------------------------------------------------------------------
def census_rows(results) -> tuple[list[dict], list[dict]]:
    """(one row per run, one row per unaligned neuron) of the finished runs, sorted by scheme, d, lambda
    (largest first), dtype and trial.  Kinds of unaligned neurons: negative sign; positive sign active on every
    training point; positive sign active on some. `not_shrinking`: unaligned neurons whose angle shrinks slower
    than lambda^SHRINK_EXPONENT between this lambda and the nearest other of the same trial (`pair_exponents`;
    -1 for a trial run at one lambda). Each run's category and its cell's typical max angle: `categorise`."""
    bad = set(results.failed)
    order = sorted((i for i in range(len(results.runs)) if i not in bad), key=lambda i: _sort_key(results.runs[i]))
    specs = [results.runs[i] for i in order]
    censuses = [stored_census(results.arrays[i], results.runs[i], results.data_of(i)) for i in order]
    runs, neurons = [], []
    for i, spec, c, p in zip(order, specs, censuses, pair_exponents(specs, censuses)):
        ds, data = results.arrays[i], results.data_of(i)
        head = {"scheme": spec.data.scheme, "d": spec.data.d, "lambda": spec.init_scale,
                "method": spec.method.kind, "dtype": spec.method.dtype, "trial": spec.trial}
        unaligned = np.flatnonzero(c["census.class"] == UNALIGNED)
        sign, points = c["census.sign"][unaligned], c["census.n_points"][unaligned]
        neg, pos = unaligned[sign < 0], unaligned[sign > 0]
        runs.append({
            **head,
            "data_max_angle": float(c["census.data_max_angle"]),
            "meets_pi4": bool(c["census.data_max_angle"] < math.pi / 4),
            "active": int(c["census.active"]), "bundles": int(c["census.bundles"]), "aligned": int(c["census.aligned"]),
            "unaligned": unaligned.size, "unaligned_negative": neg.size, "unaligned_positive": pos.size,
            "unaligned_positive_all": int(np.sum((sign > 0) & (points == data.n))),
            "unaligned_positive_some": int(np.sum((sign > 0) & (points < data.n))),
            "not_shrinking": -1 if np.all(np.isnan(p)) else int(np.sum(p[unaligned] < SHRINK_EXPONENT)),
            "unaligned_share": float(c["census.unaligned_share"]),
            "bundle_growth": float(c["census.bundle_growth"]),
            "max_angle": float(final(ds, "max_angle")[0]),
            WEIGHTED: float(ds[WEIGHTED].values[0]) if WEIGHTED in ds else math.nan,
            "negative_max_points": int(np.max(c["census.n_points"][neg], initial=0)),
            "negative_min_label": float(np.min(c["census.min_label"][neg], initial=math.inf)),
            "negative_max_growth": float(np.max(c["census.growth"][neg], initial=0.0)),
            "positive_max_growth": float(np.max(c["census.growth"][pos], initial=0.0)),
            "final_loss": float(final(ds, "loss")[0]),
        })
        for j in unaligned:
            on = np.flatnonzero(c["census.active_on"][j])
            neurons.append({
                **head, "neuron": int(j), "sign": int(c["census.sign"][j]),
                "angle_to_bundle": float(c["census.angle"][j]), "growth": float(c["census.growth"][j]),
                "share": float(c["census.share"][j]),
                "angle_exponent": float(p[j]),
                "n_points": on.size, "points": ";".join(str(k) for k in on),
                "labels": ";".join(f"{c['census.point_label'][k]:.4g}" for k in on),
                "point_angles_to_v_star": ";".join(f"{c['census.point_angle'][k]:.4g}" for k in on),
            })
    return categorise(runs), neurons


def shared_census_rows(results) -> tuple[list[dict], list[dict]]:
    """`census_rows(results)`, built once per Results and shared by the figures, the tables and the claims."""
    return results.once("census.rows", lambda: census_rows(results))


def _sort_key(spec):
    return (spec.data.scheme, spec.data.d, -spec.init_scale, spec.method.dtype, spec.trial)


def _median_band_figure(results):
    table = median_bands(shared_census_rows(results)[0])
    schemes = sorted({r["scheme"] for r in table})
    fig, axes = panels(len(schemes))
    for ax, scheme in zip(axes, schemes):
        for n, (d, dtype) in enumerate(sorted({(r["d"], r["dtype"]) for r in table if r["scheme"] == scheme})):
            rows = sorted((r for r in table if (r["scheme"], r["d"], r["dtype"]) == (scheme, d, dtype)),
                          key=lambda r: r["lambda"])
            lam = np.array([r["lambda"] for r in rows])
            ax.fill_between(lam, [r["median_of_k_q05"] for r in rows], [r["median_of_k_q95"] for r in rows],
                            color=f"C{n}", alpha=0.2, lw=0)
            ax.plot(lam, [r["median_of_k_q25"] for r in rows], ":", color=f"C{n}", lw=0.8)
            ax.plot(lam, [r["median_of_k_q75"] for r in rows], ":", color=f"C{n}", lw=0.8)
            ax.plot(lam, [r["median_all"] for r in rows], "o-", ms=4, color=f"C{n}",
                    label=f"d = {d}: median of {rows[0]['trials']} trials")
        lam_all = np.array(sorted({r["lambda"] for r in table}))
        ax.plot(lam_all, 2 * ALIGN_C * lam_all, "k--", lw=0.8,
                label="2 c lambda: the most two aligned neurons can make")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("initialisation scale lambda")
        ax.set_ylabel("max angle between active neurons (rad)")
        ax.set_title(f"{scheme} data: where a median of {table[0]['k']} trials lies\nshaded 5-95%, dotted 25-75% "
                     "(exact over every draw from the census)", fontsize=8)
        ax.legend(fontsize=6)
    return fig


# -- figures ------------------------------------------------------------------------------------------------
def _fraction_table(results) -> list[dict]:
    return results.once("census.fractions", lambda: fractions(shared_census_rows(results)[0], KINDS))


def _fraction_figure(results):
    table = _fraction_table(results)
    schemes = sorted({r["scheme"] for r in table})
    fig, axes = panels(len(schemes))
    styles = {"unaligned": ("-", "any"), "unaligned_negative": ("--", "negative sign"),
              "unaligned_positive": (":", "positive sign"), "far": ("-.", f"far: max angle > {FAR_FACTOR:g} x the cell's median")}
    for ax, scheme in zip(axes, schemes):
        lines = sorted({(r["d"], r["dtype"]) for r in table if r["scheme"] == scheme})
        several = len({dtype for _, dtype in lines}) > 1
        for n, (d, dtype) in enumerate(lines):
            rows = sorted((r for r in table if r["scheme"] == scheme and (r["d"], r["dtype"]) == (d, dtype)),
                          key=lambda r: r["lambda"])
            lam = [r["lambda"] for r in rows]
            name = f"d = {d}" + (f", {dtype}" if several else "")
            for k, (style, what) in styles.items():
                ax.plot(lam, [r[f"frac_{k}"] for r in rows], style, marker="o" if k == "unaligned" else None, ms=3,
                        color=f"C{n}", label=f"{name}, {what}" if k == "unaligned" or n == 0 else None)
        ax.set_xscale("log")
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("initialisation scale lambda")
        ax.set_ylabel("fraction of trials")
        ax.set_title(f"{scheme} data, {rows[0]['trials']} trials a point; unaligned: angle > {ALIGN_C:g} lambda\n"
                     f"solid any, dashed negative sign, dotted positive, dash-dot far (> {FAR_FACTOR:g} x median)", fontsize=8)
        ax.legend(fontsize=6)
    return fig


def _histogram_figure(results):
    rows = shared_census_rows(results)[0]
    ds_, lams = sorted({r["d"] for r in rows}), sorted({r["lambda"] for r in rows}, reverse=True)
    fig, axes = plt.subplots(len(ds_), len(lams), figsize=(2.8 * len(lams), 2.2 * len(ds_)), squeeze=False)
    bins = np.logspace(-10, math.log10(math.pi), 41)
    for a, d in enumerate(ds_):
        for b, lam in enumerate(lams):
            ax = axes[a, b]
            for n, scheme in enumerate(sorted({r["scheme"] for r in rows})):
                values = [max(r["max_angle"], 1e-10) for r in rows if r["d"] == d and r["lambda"] == lam
                          and r["scheme"] == scheme]
                ax.hist(values, bins=bins, color=f"C{n}", alpha=0.55, label=scheme)
            ax.axvline(ALIGN_C * lam, color="k", ls=":", lw=0.8)
            ax.set_xscale("log")
            ax.set_title(f"d = {d}, lambda = {fmt_lambda(lam)}", fontsize=8)
            if a == len(ds_) - 1:
                ax.set_xlabel("max angle (rad); dotted: c lambda")
            if b == 0:
                ax.set_ylabel("trials")
    axes[0, 0].legend(fontsize=6)
    return fig


def _pi4_figure(results):
    table = _fraction_table(results)
    schemes = sorted({r["scheme"] for r in table})
    fig, axes = panels(len(schemes))
    for ax, scheme in zip(axes, schemes):
        for n, d in enumerate(sorted({r["d"] for r in table if r["scheme"] == scheme})):
            rows = sorted((r for r in table if r["scheme"] == scheme and r["d"] == d), key=lambda r: r["lambda"])
            lam = np.array([r["lambda"] for r in rows])
            for name, marker in (("pi4", "o"), ("beyond_pi4", "x")):
                count = rows[0][f"trials_{name}"]
                ax.plot(lam, [r[f"frac_unaligned_{name}"] for r in rows], "-" + marker, ms=4, color=f"C{n}",
                        label=f"d = {d}, {'all angles < pi/4' if name == 'pi4' else 'some angle >= pi/4'} "
                              f"({count} trials)")
                ax.plot(lam, [r[f"frac_far_{name}"] for r in rows], "-." + marker, ms=4, color=f"C{n}", alpha=0.6)
        ax.set_xscale("log")
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("initialisation scale lambda")
        ax.set_ylabel("fraction of trials")
        ax.set_title(f"{scheme} data; o: every angle < pi/4, x: not; solid: unaligned, dash-dot: far", fontsize=8)
        ax.legend(fontsize=6)
    return fig


#: the colours of the categories (`metrics.census_trials.CATEGORIES`) in the stacked bars
_CATEGORY_STYLE = {"aligned": ("C2", "aligned"), "near_median": ("C0", f"unaligned, within {FAR_FACTOR:g} x median"),
                   "far_aligning": ("C1", f"far (> {FAR_FACTOR:g} x median), still aligning"),
                   "off_bundle": ("C3", "far, off the bundle (not shrinking)"), "several_bundles": ("C4", "2+ bundles")}


def _category_figure(results):
    table = _fraction_table(results)
    schemes, cols = sorted({r["scheme"] for r in table}), sorted({(r["d"], r["dtype"]) for r in table})
    fig, axes = plt.subplots(len(schemes), len(cols), figsize=(max(2.6 * len(cols) + 2.4, 9.0), 2.9 * len(schemes)),
                             squeeze=False, sharey=True)
    for ax, key in ((axes[i, j], (sc, *col)) for i, sc in enumerate(schemes) for j, col in enumerate(cols)):
        rows = sorted((r for r in table if (r["scheme"], r["d"], r["dtype"]) == key), key=lambda r: -r["lambda"])
        if not rows:
            ax.set_visible(False)
            continue
        x, bottom = np.arange(len(rows)), np.zeros(len(rows))
        for cat in CATEGORIES:
            colour, label = _CATEGORY_STYLE[cat]
            height = np.array([r[f"frac_{cat}"] for r in rows])
            ax.bar(x, height, bottom=bottom, color=colour, width=0.8, label=label)
            bottom += height
        ax.set_xticks(x, [fmt_lambda(r["lambda"]) for r in rows], fontsize=6, rotation=45)
        ax.set_title(f"{key[0]}, d = {key[1]}" + ("" if key[2] == "float64" else f", {key[2]}")
                     + f"\n{rows[0]['trials']} trials", fontsize=8)
        ax.set_xlabel("lambda", fontsize=7)
    for row in axes:
        row[0].set_ylabel("fraction of trials")
    axes[0, -1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def _dtype_figure(results):
    rows = shared_census_rows(results)[0]
    by = {(r["lambda"], r["trial"], r["dtype"]): r for r in rows}
    fig, (left, right) = panels(2)
    for n, lam in enumerate(sorted({r["lambda"] for r in rows}, reverse=True)):
        pairs = [(by[(lam, t, "float64")], by[(lam, t, "float32")]) for (g, t, dt) in by
                 if g == lam and dt == "float64" and (lam, t, "float32") in by]
        if not pairs:
            continue
        label = f"lambda = {fmt_lambda(lam)}"
        left.plot([p[0]["max_angle"] for p in pairs], [p[1]["max_angle"] for p in pairs], "o", color=f"C{n}",
                  ms=4, label=label)
        right.plot([p[0]["unaligned"] for p in pairs], [p[1]["unaligned"] for p in pairs], "o", color=f"C{n}",
                   ms=4, alpha=0.7, label=label)
    for ax, what, log in ((left, "max angle between active neurons (rad)", True),
                          (right, "unaligned active neurons", False)):
        lo, hi = ax.get_xlim()
        ax.plot([min(lo, ax.get_ylim()[0]), max(hi, ax.get_ylim()[1])],
                [min(lo, ax.get_ylim()[0]), max(hi, ax.get_ylim()[1])], "k:", lw=0.8)
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(f"float64: {what}")
        ax.set_ylabel(f"float32: {what}")
        ax.legend(fontsize=6)
    return fig


def _dtype_pairs(rows) -> list[tuple[dict, dict]]:
    """(float64 row, float32 row) of every (lambda, trial) run in both precisions."""
    by = {(r["lambda"], r["trial"], r["dtype"]): r for r in rows}
    return [(r, by[(lam, t, "float32")]) for (lam, t, dt), r in by.items() if dt == "float64" and (lam, t, "float32") in by]


class DtypeClaims(CellsTheorem):
    """No precision effect, stated as two predictions on the pairs of runs (same data and init) in float64 and
    float32: the same negative-sign unaligned neurons (the census' off-bundle neurons), and the same angular
    spread of the neurons carrying weight (the weighted max angle) within a factor `spread_factor`. Nothing is
    reported where no run has both precisions."""

    spread_factor: float = 10.0

    @property
    def title(self) -> str:
        """The theorem named in this object's verdicts."""
        return "float32 against float64 (the paper's GD)"

    @staticmethod
    def _pairs(ctx) -> list[tuple[dict, dict]]:
        return ctx.once("census.dtype_pairs", lambda: _dtype_pairs(shared_census_rows(ctx.results)[0]))

    @prediction("the same negative-sign unaligned neurons in both precisions",
                source="ours: the paper's code ran in float32 (PyTorch's default); a precision effect would change "
                       "which neurons stay off the bundle")
    def same_negative_unaligned(self, ctx) -> list:
        """The worst |difference in their count| over (lambda, trial) must be 0."""
        pairs = self._pairs(ctx)
        if not pairs:
            return []
        diff = max(abs(a["unaligned_negative"] - b["unaligned_negative"]) for a, b in pairs)
        return [compare(self.title, "prediction", "the same negative-sign unaligned neurons in both precisions: worst "
                        "|difference in their count| over (lambda, trial)", diff, "<=", 0,
                        "; ".join(f"{fmt_lambda(a['lambda'])} trial {a['trial']}: {a['unaligned_negative']} / "
                                  f"{b['unaligned_negative']}" for a, b in pairs))]

    @prediction("the same spread of the neurons carrying weight in both precisions", threshold="spread_factor",
                source="ours: the factor 10 is coarse on purpose; the spread scales like lambda (Figure 1), so a "
                       "precision effect on it would show as orders of magnitude")
    def same_weighted_spread(self, ctx) -> list:
        """The worst ratio over (lambda, trial) of the two precisions' weighted max angles."""
        pairs = self._pairs(ctx)
        if not pairs:
            return []
        ratios = [(max(a[WEIGHTED], b[WEIGHTED]) / max(min(a[WEIGHTED], b[WEIGHTED]), 1e-300), a) for a, b in pairs]
        worst, at = max(ratios, key=lambda x: x[0])
        per = "; ".join(f"{fmt_lambda(a['lambda'])} trial {a['trial']}: {a[WEIGHTED]:.3g} / {b[WEIGHTED]:.3g}"
                        for a, b in pairs)
        return [compare(self.title, "prediction", f"the same spread of the neurons carrying weight (weighted max "
                        f"angle) within a factor {self.spread_factor:g}: worst ratio over (lambda, trial)", worst, "<=",
                        self.spread_factor, f"worst at {fmt_lambda(at['lambda'])} trial {at['trial']}; float64 / "
                        f"float32 (rad): {per}")]


def _tables(results, out_dir):
    runs, neurons = shared_census_rows(results)
    out_dir = Path(out_dir)
    written = [write_dict_csv(out_dir / "census_runs.csv", runs), write_dict_csv(out_dir / "census_fraction.csv",
                                                                                   _fraction_table(results)),
               write_dict_csv(out_dir / "census_median_of_5.csv", median_bands(runs))]
    if neurons:
        written.append(write_dict_csv(out_dir / "census_neurons.csv", neurons))
    return written


def _theorems(cell):
    """Theorem 7 on the census, over the trials within the proofs' angle bound and over those beyond it."""
    return [CensusTheorem7(subset="within"), CensusTheorem7(subset="beyond")]


CENSUS = Experiment(
    name="chistikov2023-fig1-census",
    paper="Chistikov, Englert, Lazic 2023 (NeurIPS), Figure 1 (distribution over trials, census of neurons)",
    systems=("S11",),
    summary="Figure 1's setting (m = 200, gradient flow to loss < 1e-9 or t = 2e5) with 50 trials for d in {4, "
            "16, 64}, centred and uncentred data, lambda in {4^-4, 4^-7, 4^-10, 4^-13}: the distribution over "
            "trials of the max angle between active neurons, and a census of the active neurons at the end of "
            f"every run (aligned: angle to the nearest bundle <= {ALIGN_C:g} lambda; for each unaligned one its sign, "
            "the training points it is active on, their labels and angles to v*, its growth ||w_j|| / lambda "
            "and its share of sum |a_j| ||w_j||), split by the proofs' condition that every angle between v* "
            "and a training point is < pi/4. Each trial falls in one category (aligned, unaligned near the median, far but "
            "aligning, far and off the bundle, two bundles or more; census_categories), so that the share of trials "
            "a five-trial median misrepresents is read per cell.",
    config=ExperimentConfig(
        model=NET,
        data=TeacherNeuron(d=4, scheme="centred", n_test=64),
        loss=SQUARE,
        method=GF,
        stop=STOP,
        trials=50,
        checkpoints=20,
        kkt=False,
        grid={"data.scheme": ["centred", "uncentred"], "data.d": [4, 16, 64], "init_scale": CENSUS_LAMBDAS},
    ),
    quick={"trials": 4, "checkpoints": 12, "model.width": 50,
           "grid": {"data.scheme": ["centred", "uncentred"], "data.d": [4], "init_scale": CENSUS_LAMBDAS[:3]}},
    figures=(Figure("census_categories",
                    f"Per cell (scheme, d) and lambda, the fraction of trials in each category "
                    f"(metrics.census_trials): aligned (every active neuron within {ALIGN_C:g} lambda of its "
                    f"bundle); near the median (some are not, max angle within {FAR_FACTOR:g} x the cell's median); "
                    "far but still aligning (max angle above that, every unaligned neuron's angle falling like "
                    "lambda across the trial's lambdas); far and off the bundle (one that does not fall); two "
                    "bundles or more (the positive neurons carrying weight in several directions). The two far "
                    "categories together are the trials a median does not describe. census_fraction.csv gives the "
                    "fractions, census_runs.csv each trial's category.", _category_figure),
             Figure("census_fraction", "Fraction of trials with active neurons not aligned with their bundle, "
                    "against lambda, per d (colour): any (solid), negative sign (dashed), positive sign "
                    f"(dotted), and far - the max angle more than {FAR_FACTOR:g} times the cell's median "
                    "(dash-dot); left centred, right uncentred data.", _fraction_figure),
             Figure("census_max_angle_hist", "Histogram over trials of the max angle between active neurons, "
                    "per (d, lambda) cell, both schemes; the dotted line is c lambda.", _histogram_figure),
             Figure("census_pi4", "Fraction of trials with unaligned active neurons (solid) and far ones (dash-dot; "
                    f"max angle > {FAR_FACTOR:g} x the cell's median), split by "
                    "whether every angle between v* and a training point is below pi/4 (the proofs' assumption; "
                    "o) or not (x).", _pi4_figure),
             Figure("census_median_of_5",
                    "Where a median of five trials (the paper's number) can lie: per lambda and d, the median over all "
                    "the census's trials (dots) and the exact distribution of the median of five drawn from them, "
                    "shaded from its 5% to its 95% quantile, dotted 25% and 75%. At small lambda the trials split "
                    "into populations, aligned (max angle <= 2 c lambda, dashed) and not (an active neuron off the "
                    "bundle, up to angles ~ 1): a five-trial median reports one or the other depending on the draw, "
                    "and any published five-trial median should lie in the band. census_median_of_5.csv gives the "
                    "quantiles and their spread q95 / q05. The quick variant has 4 trials, so its band is that of a "
                    "median of 3.", _median_band_figure)),
    theorems=_theorems,
    tables=_tables,
    settings_source="The paper's Figure 1 settings (m = 200, balanced init, n = d, centred and uncentred data, "
                    "loss < 1e-9 or t = 2e5) with gradient flow as in chistikov2023-fig1. Ours: 50 trials, "
                    "d in {4, 16, 64}, four lambdas, 20 checkpoints, the census and its constant c. Quick: d = 4, "
                    "m = 50, lambda = 4^-4, 4^-7, 4^-10, 4 trials.",
)

#: GD's time budget for the dtype comparison: t = 5e3 (5e5 steps of lr 0.01) instead of the paper's 2e5. The census
#: is settled when the loss leaves its plateau (t ~ ln(1/lambda) / ||gamma_[n]|| ~ 50); what follows moves the
#: bundle to fit the data. Gradient flow needs t ~ 1.7e4 (median; 90%: 1.2e5) to reach loss 1e-9 at d = 16,
#: which is 1.7e6 GD steps of lr 0.01 for the median run (1.2e7 for the 90th percentile), against 5e5 here.
DTYPE_STOP = Stop(loss_tol=1e-9, max_time=5e3, max_steps=500_000)

DTYPE = Experiment(
    name="chistikov2023-census-dtype",
    paper="Chistikov, Englert, Lazic 2023 (NeurIPS), Figure 1 under the paper's GD in float32 and float64",
    systems=("S11",),
    summary="The paper's code base was PyTorch (float32 by default). The paper's GD (lr 0.01) on centred data, "
            "d = 16, m = 200, in float32 and in float64 from the same data and inits (those of trials 0-3 of "
            "chistikov2023-fig1-census), to time t = 5e3: max angle between active neurons and the census of "
            "unaligned neurons, per precision.",
    config=ExperimentConfig(
        model=NET,
        data=TeacherNeuron(d=16, scheme="centred", n_test=64),
        loss=SQUARE,
        method=GD(lr=0.01),
        stop=DTYPE_STOP,
        trials=4,
        checkpoints=20,
        kkt=False,
        grid={"method.dtype": ["float64", "float32"], "init_scale": [4.0**-7, 4.0**-13]},
    ),
    quick={"trials": 2, "checkpoints": 10, "model.width": 50, "data.d": 4, "stop.max_time": 500.0,
           "stop.max_steps": 50_000, "grid": {"method.dtype": ["float64", "float32"], "init_scale": [4.0**-4, 4.0**-7]}},
    figures=(Figure("census_dtype", "Per trial and lambda, float32 against float64 (same data and init): "
                    "left the max angle between active neurons, right the number of unaligned active neurons; "
                    "the dotted line is equality.", _dtype_figure),
             Figure("census_fraction", "Fraction of trials with unaligned active neurons against lambda, per "
                    "dtype.", _fraction_figure),
             Figure("census_categories", "Per dtype and lambda, the fraction of trials in each category "
                    "(census_categories of chistikov2023-fig1-census).", _category_figure)),
    claims=(DtypeClaims(),),
    tables=_tables,
    settings_source="The paper's GD (lr 0.01), m = 200, centred data, d = 16. Ours: 4 trials, lambda in {4^-7, "
                    "4^-13}, float32 against float64, time budget t = 5e3 (5e5 steps; the paper: 2e7 steps or "
                    "loss < 1e-9). Quick: d = 4, m = 50, lambda = 4^-4, 4^-7, 2 trials, t = 500.",
)

EXPERIMENTS = [CENSUS, DTYPE]
