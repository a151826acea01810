"""The census of neurons (`implicitbias.metrics.census`) read per trial and per cell: each trial's category at
the end of training, the fraction of trials in each category per cell, and where a median of k trials can lie.

The input is one row per run (a dict with scheme, d, dtype, lambda, trial and the run's census: `max_angle`,
Figure 1's max angle between active neurons; `unaligned`, `bundles`; `not_shrinking`, how many unaligned
neurons do not follow angle ~ lambda across the lambdas of their trial, -1 where no other lambda of the trial was
run). A cell is (scheme, d, dtype, lambda). Categories, first match wins:

- `several_bundles`: the positive neurons carrying weight point in more than one direction (>= 2 bundles);
- `aligned`: every active neuron within c lambda of its bundle (Theorem 7's picture at this lambda);
- `near_median`: some active neuron is further than c lambda from every bundle, but the max angle stays within
  `FAR_FACTOR` of the cell's typical max angle (at lambda <= 4^-10 of the full census every such trial's
  unaligned neurons fall like lambda: they align late; at 4^-4, where c lambda = 0.39 rad, the typical max
  angle is itself ~2 rad);
- `far_aligning`: the max angle is more than `FAR_FACTOR` times the cell's typical max angle, but every unaligned
  neuron's angle falls like lambda (so it would join the bundle at a smaller lambda);
- `off_bundle`: the max angle is more than `FAR_FACTOR` times the typical one and some unaligned neuron does not
  fall like lambda (or no other lambda of the trial tells).

Typical max angle: the median over the cell's trials (Figure 1's own statistic, over all the census' trials).
`FAR_FACTOR` = 10: one decade on Figure 1's log axis, the distance at which a trial's angle stops being a
member of the population a median describes. It is a reading threshold, not a fitted one, and the figures draw
the whole distribution beside it; in the full census it cuts through a continuum (at centred d = 16,
lambda = 4^-13 the trials falling like lambda reach from 13 lambda to 2.3e5 lambda). What splits the far
trials is the exponent: `metrics.census.SHRINK_EXPONENT` = 1/2 lies midway between the theory's p = 1 (the part
of a neuron orthogonal to v* is frozen at its init size lambda |z_perp| during the linear phase, so its angle
is proportional to lambda) and p = 0 (a neuron held off the bundle by the data); the far trials' smallest
exponents cluster there (full census, lambda = 4^-13: 71 of the 75 far trials within 0.1 of 0 or 1).
A trial's exponent is read from the next larger lambda
of the same trial, and at its largest lambda from the next smaller one (`pair_exponents`). Where more than half
of a cell's trials are far the median is itself a far trial and `far` undercounts: the fraction printed beside
it (`frac_far`) makes that visible.
"""

from __future__ import annotations

import math

import numpy as np

from implicitbias.metrics.census import angle_exponents
from implicitbias.metrics.trials import median_of_k, quantile_of

__all__ = ["CATEGORIES", "FAR_FACTOR", "by_cell", "categorise", "fractions", "median_bands", "pair_exponents",
           "trial_category"]

#: a trial is far from its cell's population when its max angle exceeds FAR_FACTOR x the cell's median
FAR_FACTOR = 10.0

#: the categories of a trial, in the order they are tested
CATEGORIES = ("several_bundles", "aligned", "near_median", "far_aligning", "off_bundle")

#: one row per cell: its key fields
CELL = ("scheme", "d", "dtype", "lambda")


def pair_exponents(runs, censuses) -> list[np.ndarray]:
    """`angle_exponents`, with a trial's largest lambda given the exponent of the pair it forms with the next
    smaller lambda (the same number as that run's): every run of a trial with two lambdas or more has one."""
    out = angle_exponents(runs, censuses)
    trials: dict[tuple, list[int]] = {}
    for i, spec in enumerate(runs):
        trials.setdefault((spec.part, spec.static_key(), spec.seed, spec.data_seed), []).append(i)
    for members in trials.values():
        members = sorted(members, key=lambda i: runs[i].init_scale)
        if len(members) > 1:
            out[members[-1]] = out[members[-2]]
    return out


def trial_category(row: dict, typical: float, far_factor: float = FAR_FACTOR) -> str:
    """The category of one run (module docstring), given its cell's typical max angle."""
    if row["bundles"] >= 2:
        return "several_bundles"
    if row["unaligned"] == 0:
        return "aligned"
    if not row["max_angle"] > far_factor * typical:
        return "near_median"
    return "off_bundle" if row["not_shrinking"] != 0 else "far_aligning"


def by_cell(rows: list[dict]) -> dict[tuple, list[dict]]:
    """The rows grouped by (scheme, d, dtype, lambda), in first-seen order."""
    cells: dict[tuple, list[dict]] = {}
    for row in rows:
        cells.setdefault(tuple(row[k] for k in CELL), []).append(row)
    return cells


def categorise(rows: list[dict], far_factor: float = FAR_FACTOR) -> list[dict]:
    """The rows, each with its cell's typical (median) max angle, `far` and its `category` added (in place)."""
    for members in by_cell(rows).values():
        typical = float(np.median([m["max_angle"] for m in members]))
        for m in members:
            m["typical_max_angle"] = typical
            m["far"] = bool(m["max_angle"] > far_factor * typical)
            m["category"] = trial_category(m, typical, far_factor)
    return rows


def fractions(rows: list[dict], kinds: tuple[str, ...] = ()) -> list[dict]:
    """Per cell: how many trials, the fraction in each category, the fraction far from the typical max angle, and
    the fraction with a row[k] > 0 for every k of `kinds`, each over all trials and split by the proofs' angle
    condition (`meets_pi4`); and the quartiles of the max angle. `rows` must be categorised (`categorise`)."""
    out = []
    for key, members in by_cell(rows).items():
        row = dict(zip(CELL, key))
        row["trials"] = len(members)
        for name, want in (("", None), ("_pi4", True), ("_beyond_pi4", False)):
            part = [m for m in members if want is None or m["meets_pi4"] == want]
            if name:
                row[f"trials{name}"] = len(part)
            for k in kinds:
                row[f"frac_{k}{name}"] = float(np.mean([m[k] > 0 for m in part])) if part else math.nan
            for cat in CATEGORIES:
                row[f"frac_{cat}{name}"] = float(np.mean([m["category"] == cat for m in part])) if part else math.nan
            row[f"frac_far{name}"] = float(np.mean([m["far"] for m in part])) if part else math.nan
        angles = np.array([m["max_angle"] for m in members])
        row["typical_max_angle"] = float(np.median(angles))
        row["max_angle_q25"], row["max_angle_median"], row["max_angle_q75"] = np.quantile(angles, [0.25, 0.5, 0.75])
        out.append(row)
    return out


#: the paper's number of trials a median is taken over
PAPER_TRIALS = 5
BAND = (0.05, 0.25, 0.5, 0.75, 0.95)


def median_bands(rows: list[dict], k: int = PAPER_TRIALS) -> list[dict]:
    """Per cell: the median over all trials of the max angle between active neurons, and the distribution of the
    median of k of them (`median_of_k`; k the largest odd number up to min(k, trials)): its quantiles `BAND` and
    their spread q95 / q05, the factor by which a k-trial median can move between draws. Where the trials split
    into an aligned and an off-bundle population, the band spans both: which one a published median of five
    reports is a matter of the draw."""
    out = []
    for key, members in by_cell(rows).items():
        angles = [m["max_angle"] for m in members]
        used = min(k, len(angles))
        used -= 1 - used % 2  # the largest odd number of trials up to k
        x, p = median_of_k(angles, used)
        row = {**dict(zip(CELL, key)), "trials": len(angles), "k": used, "median_all": float(np.median(angles))}
        row.update({f"median_of_k_q{round(100 * q):02d}": quantile_of(x, p, q) for q in BAND})
        row["spread_q95_over_q05"] = row["median_of_k_q95"] / max(row["median_of_k_q05"], 1e-300)
        out.append(row)
    return sorted(out, key=lambda r: (r["scheme"], r["d"], r["dtype"], -r["lambda"]))
