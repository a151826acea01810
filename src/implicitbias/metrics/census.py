"""A census of the active neurons of a trained two-layer ReLU network (Chistikov et al. 2023, S11).

At the end of training from a small balanced init of scale lambda, the positive-sign neurons that escaped the
saddle at 0 form a *bundle*: they point, up to angles of order lambda, along one direction (v* in the limit
lambda -> 0). Figure 1's max angle between active neurons measures that spread, and it is set instead by any
active neuron outside the bundle. The census sorts every neuron j (w_j its input weights, a_j its outer weight):

- inactive: no training input in its open positive half-space, <w_j, x_i> <= 0 for all i;
- aligned: active and at an angle <= c lambda to the direction of its nearest bundle;
- unaligned: active and further than c lambda from every bundle.

Bundles (`bundles`). Usually one: u = sum_{j active, a_j > 0} a_j w_j (the positive active neurons, each weighted
by a_j ||w_j||, so that the grown bundle dominates). But some trials end with the positive neurons in two
directions a fixed angle apart (centred d = 4 of the full census: 3 of 50 trials at every lambda <= 4^-7, two
groups of 34-48 neurons carrying 0.38-0.62 of sum |a_j| ||w_j|| each, 0.04-0.28 rad apart at every lambda), and
their single u lies between the two: every neuron was "unaligned", with an unaligned share of 1. So: the active
positive neurons carrying weight (share >= `WEIGHT_REL`, as `weighted_max_angle`) are linked when their angle is
<= `BUNDLE_MERGE` c lambda (two neurons within c lambda of one direction are within 2 c lambda of each other),
and a connected group is a bundle when it carries a share >= `BUNDLE_SHARE` of sum |a_k| ||w_k||: more than a
neuron that did not grow can carry (its angle to any grown direction is ~ lambda |z_perp| / ||w_j||, so
unaligned means ||w_j|| < |z_perp| / c and, balanced, share < (|z_perp| / c)^2 <~ (0.3 / 100)^2 ~ 1e-5).
Every active positive neuron then joins the bundle whose group direction is nearest, and a bundle's direction is
sum a_j w_j over its members; with one bundle that is u above, so a rank-1 network is classified exactly as by
the single-bundle census (version 1). The number of bundles is stored per run (`census.bundles`; 0 when no
positive neuron is active), each neuron's bundle in `census.bundle` (-1: inactive). A bundle of the second
direction can itself be spread wider than 2 c lambda, and then counts as several bundles: the count is the
number of directions resolved at the census' resolution c lambda, not a rank (one of the three trials above has
3 bundles at 4^-10, its second direction spread over ~5 c lambda with 0.17 of the weight more than c lambda
from either bundle direction, and 7 at 4^-13).

`ALIGN_C` = c = 100. Why a multiple of lambda, and which: while a neuron is active on every training point,
its component orthogonal to gamma_[n] does not move (the linear phase of the dynamics changes only its
component along gamma_[n] and a_j), so at the end its angle to the bundle is about lambda |z_perp| / ||w_j||,
|z_perp| <~ |z_j| ~ 1/sqrt(m). Angle <= c lambda is therefore ||w_j|| >~ |z_perp| / c: with c = 100 (m = 200),
a final norm above ~ 7e-4, a share of sum |a_k| ||w_k|| above ~ 5e-7 - about the "carries weight" threshold
1e-6 of `weighted_max_angle`. There is no gap to put c in: in 80 runs of d = 4..64 at lambda = 4^-7..4^-13,
the angles of active neurons to the bundle, in units of lambda, fill 0.1..10 (95%), thin out to ~600, and a
few per hundred trials lie at 1e3..1e5 with final norms 1e-5..1e-6 that no longer depend on lambda (they
still align like lambda), next to the neurons that did not grow at all (angles ~ 2 rad: negative-sign ones
active on one or two points, positive ones near their init size). c = 100 also
keeps c lambda < pi/4 at the census' largest lambda 4^-4. A neuron with a lambda-independent final norm below
|z_perp| / c counts as unaligned at every lambda although its angle falls like lambda: whether an unaligned
neuron aligns as lambda -> 0 is read across lambdas of the same trial (`angle_exponents`).

For every neuron the census records its class, sign, angle to u, growth ||w_j|| / lambda, share
|a_j| ||w_j|| / sum_k |a_k| ||w_k||, the training points it is active on, and over those points the smallest
label and the smallest and largest angle to v*; per training point, its label and its angle to v*; per run
the counts and the largest angle between v* and a training point (Theorem 7 assumes it < pi/4). Everything
is a function of the final parameters, the training data, v* and lambda (`neuron_census`), stored with every
run as final metrics (`implicitbias.metrics.final`) and recomputable from a stored result; `census.version`
(`CENSUS_VERSION`) marks the definition it was stored under, and `stored_census` recomputes an older one.
"""

from __future__ import annotations

import numpy as np

from implicitbias.metrics.neurons import WEIGHT_REL, angles_to

#: a neuron is aligned with the bundle when its angle to the bundle direction is <= ALIGN_C x lambda
ALIGN_C = 100.0

#: class codes of `census.class`
INACTIVE, ALIGNED, UNALIGNED = 0, 1, 2

#: the census' definition: 1 one bundle direction u; 2 the nearest of several bundles (`bundles`)
CENSUS_VERSION = 2

#: two positive neurons carrying weight are in one bundle when linked by steps of angle <= BUNDLE_MERGE c lambda
BUNDLE_MERGE = 2.0

#: a linked group of positive neurons is a bundle when it carries at least this share of sum |a_k| ||w_k||
BUNDLE_SHARE = 1e-5

#: the dimensions (after `run`) of every census variable: per run, per neuron, per neuron and training
#: point, per training point
DIMS: dict[str, tuple[str, ...]] = {
    "census.active": (),
    "census.aligned": (),
    "census.unaligned": (),
    "census.unaligned_negative": (),
    "census.unaligned_positive": (),
    "census.unaligned_share": (),
    "census.bundle_growth": (),
    "census.data_max_angle": (),
    "census.c": (),
    "census.version": (),
    "census.bundles": (),
    "census.class": ("neuron",),
    "census.bundle": ("neuron",),
    "census.sign": ("neuron",),
    "census.angle": ("neuron",),
    "census.growth": ("neuron",),
    "census.share": ("neuron",),
    "census.n_points": ("neuron",),
    "census.min_label": ("neuron",),
    "census.min_point_angle": ("neuron",),
    "census.max_point_angle": ("neuron",),
    "census.active_on": ("neuron", "point"),
    "census.point_label": ("point",),
    "census.point_angle": ("point",),
}


def bundle_direction(W, a, active) -> np.ndarray:
    """sum_{j active, a_j > 0} a_j w_j (not normalised; zero when no positive neuron is active)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    return np.where(np.asarray(active) & (a > 0), a, 0.0) @ np.asarray(W, dtype=np.float64)


def _linked_groups(close) -> np.ndarray:
    """Connected components of the symmetric boolean matrix `close`: a label per row, 0, 1, ... by first row."""
    labels = np.full(close.shape[0], -1)
    for start in range(close.shape[0]):
        if labels[start] >= 0:
            continue
        labels[start], stack = labels.max() + 1, [start]
        while stack:
            new = np.flatnonzero(close[stack.pop()] & (labels < 0))
            labels[new] = labels[start]
            stack.extend(new.tolist())
    return labels


def bundles(W, a, active, merge_angle: float, min_share: float = BUNDLE_SHARE,
            rel: float = WEIGHT_REL) -> tuple[np.ndarray, np.ndarray]:
    """(bundle of each neuron, -1 if none; bundle directions, one row each, not normalised) (module docstring).

    Active positive neurons with a share >= rel of sum |a_k| ||w_k|| are linked at angles <= merge_angle; a
    linked group carrying a share >= min_share is a bundle. Every active positive neuron joins the bundle whose
    group direction is nearest; a bundle's direction is sum a_j w_j over its members. With no such group (no
    neuron grew) the active positive neurons form one bundle; with none active, there is none."""
    W = np.asarray(W, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    positive = np.asarray(active) & (a > 0)
    member = np.full(a.shape, -1)
    if not positive.any():
        return member, np.zeros((0, W.shape[1]))
    weight = np.abs(a) * np.linalg.norm(W, axis=1)
    carriers = np.flatnonzero(positive & (weight >= rel * weight.sum()))
    groups = _linked_groups(np.stack([angles_to(W[carriers], W[j]) <= merge_angle for j in carriers])
                            if carriers.size else np.zeros((0, 0), bool))
    heavy = [g for g in range(groups.max(initial=-1) + 1) if weight[carriers[groups == g]].sum()
             >= min_share * weight.sum()]
    if len(heavy) <= 1:
        member[positive] = 0
    else:
        seeds = np.stack([a[carriers[groups == g]] @ W[carriers[groups == g]] for g in heavy])
        member[positive] = np.argmin(np.stack([angles_to(W[positive], s) for s in seeds]), axis=0)
    return member, np.stack([bundle_direction(W, a, member == b) for b in range(member.max() + 1)])


def _over_points(mask, values, reduce) -> np.ndarray:
    """reduce(values[i] for the points i of each row of mask), NaN for an empty row."""
    out = np.full(mask.shape[0], np.nan)
    for j in np.flatnonzero(mask.any(axis=1)):
        out[j] = reduce(values[mask[j]])
    return out


def neuron_census(W, a, X, y, v_star, init_scale: float, c: float = ALIGN_C) -> dict[str, np.ndarray]:
    """The census of one network (module docstring): {name: array shaped as in `DIMS`}.

    W: (m, d) input weights, a: (m,) outer weights, X: (n, d) training inputs, y: (n,) labels, v_star: the
    teacher direction, init_scale: lambda, c: the alignment constant (aligned: angle <= c lambda)."""
    W = np.asarray(W, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64).reshape(-1)
    active_on = (X @ W.T > 0).T  # (m, n)
    active = active_on.any(axis=1)
    norms = np.linalg.norm(W, axis=1)
    weight = np.abs(a) * norms
    share = weight / weight.sum() if weight.sum() > 0 else np.zeros_like(weight)
    member, directions = bundles(W, a, active, BUNDLE_MERGE * c * init_scale)
    to_each = np.stack([angles_to(W, u) for u in directions]) if len(directions) else np.full((1, len(a)), np.nan)
    nearest = np.argmin(np.where(np.isnan(to_each), np.inf, to_each), axis=0)
    angle = to_each[nearest, np.arange(len(a))]
    member = np.where(member >= 0, member, np.where(active & (len(directions) > 0), nearest, -1))
    aligned = active & (angle <= c * init_scale)
    unaligned = active & ~aligned
    point_angle = angles_to(X, v_star)
    growth = norms / init_scale if init_scale > 0 else np.full_like(norms, np.nan)
    return {
        "census.active": np.asarray(active.sum()),
        "census.aligned": np.asarray(aligned.sum()),
        "census.unaligned": np.asarray(unaligned.sum()),
        "census.unaligned_negative": np.asarray((unaligned & (a < 0)).sum()),
        "census.unaligned_positive": np.asarray((unaligned & (a > 0)).sum()),
        "census.unaligned_share": np.asarray(share[unaligned].sum()),
        "census.bundle_growth": np.asarray(np.median(growth[aligned]) if aligned.any() else np.nan),
        "census.data_max_angle": np.asarray(point_angle.max()),
        "census.c": np.asarray(float(c)),
        "census.version": np.asarray(CENSUS_VERSION),
        "census.bundles": np.asarray(len(directions)),
        "census.bundle": member.astype(np.int16),
        "census.class": np.where(aligned, ALIGNED, np.where(unaligned, UNALIGNED, INACTIVE)).astype(np.int8),
        "census.sign": np.sign(a).astype(np.int8),
        "census.angle": angle,
        "census.growth": growth,
        "census.share": share,
        "census.n_points": active_on.sum(axis=1),
        "census.min_label": _over_points(active_on, y, np.min),
        "census.min_point_angle": _over_points(active_on, point_angle, np.min),
        "census.max_point_angle": _over_points(active_on, point_angle, np.max),
        "census.active_on": active_on.astype(np.int8),
        "census.point_label": y,
        "census.point_angle": point_angle,
    }


def stored_census(ds, spec, data, r: int = 0, c: float = ALIGN_C) -> dict[str, np.ndarray]:
    """The census of run `r` of a stored Dataset (one run's, or a cell's runs stacked), without the run axis:
    read from its `census.*` variables, or computed from its stored final parameters when the run predates
    them, was stored under an older definition (`census.version` missing or < `CENSUS_VERSION`) or was
    classified with another constant than `c`.  `spec` and `data` are that run's."""
    if ("census.class" in ds and "census.c" in ds and float(ds["census.c"].values[r]) == c
            and "census.version" in ds and int(ds["census.version"].values[r]) >= CENSUS_VERSION):
        return {name: np.asarray(ds[name].values[r]) for name in DIMS}
    return neuron_census(ds["theta.W"].values[r], ds["theta.a"].values[r], data.X, data.y, data.info["v_star"],
                         spec.init_scale, c)


#: an unaligned neuron does not align (*not shrinking*) when its angle to its bundle falls slower than
#: lambda^SHRINK_EXPONENT between two init scales of the same trial (aligned neurons follow angle ~ lambda, p = 1)
SHRINK_EXPONENT = 0.5


def angle_exponents(runs, censuses) -> list[np.ndarray]:
    """Per run, per neuron: the exponent p of angle ~ lambda^p between this run and the run of the same trial
    (same data, same init directions z_j and signs s_j, only lambda differs) at the next larger lambda,
    p = log(angle(next) / angle(this)) / log(lambda_next / lambda); NaN at a trial's largest lambda.

    `runs` are RunSpecs, `censuses` their censuses (`neuron_census`). p ~ 1: the neuron's angle shrinks like
    lambda (it aligns as lambda -> 0, Figure 1's reading); p ~ 0: it stays where it is."""
    trials: dict[tuple, list[int]] = {}
    for i, spec in enumerate(runs):
        trials.setdefault((spec.part, spec.static_key(), spec.seed, spec.data_seed), []).append(i)
    out = [np.full(np.shape(c["census.angle"]), np.nan) for c in censuses]
    for members in trials.values():
        members = sorted(members, key=lambda i: runs[i].init_scale)
        for i, nxt in zip(members, members[1:]):
            lam, lam_next = runs[i].init_scale, runs[nxt].init_scale
            if lam_next > lam > 0:
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = censuses[nxt]["census.angle"] / censuses[i]["census.angle"]
                    out[i] = np.log(ratio) / np.log(lam_next / lam)
    return out
