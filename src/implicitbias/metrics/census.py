"""A census of the active neurons of a trained two-layer ReLU network (Chistikov et al. 2023, S11).

At the end of training from a small balanced init of scale lambda, the positive-sign neurons that escaped the
saddle at 0 form a *bundle*: they point, up to angles of order lambda, along one direction (v* in the limit
lambda -> 0). Figure 1's max angle between active neurons measures that spread, and it is set instead by any
active neuron outside the bundle. The census sorts every neuron j (w_j its input weights, a_j its outer weight):

- inactive: no training input in its open positive half-space, <w_j, x_i> <= 0 for all i;
- aligned: active and at an angle <= c lambda to the bundle direction u = sum_{j active, a_j > 0} a_j w_j
  (the positive active neurons, each weighted by a_j ||w_j||, so that the grown bundle dominates);
- unaligned: active and further from u.

`ALIGN_C` = c: in the runs of `chistikov2023-fig1-census` (m = 200, d = 4..64) the neurons of the bundle lie
within about 0.05 lambda of u, and the unaligned ones (negative-sign neurons that stayed at size ~ lambda,
positive ones that grew little) at 1e-3 rad and more, i.e. > 10^4 lambda at lambda = 4^-10; c = 1 sits
between the two at every lambda <= 4^-4 of the census (at large lambda, c lambda > pi and every active neuron
counts as aligned: the census is meant for small lambda).

For every neuron the census records its class, sign, angle to u, growth ||w_j|| / lambda, share
|a_j| ||w_j|| / sum_k |a_k| ||w_k||, the training points it is active on, and over those points the smallest
label and the smallest and largest angle to v*; per training point, its label and its angle to v*; per run
the counts and the largest angle between v* and a training point (Theorem 7 assumes it < pi/4). Everything
is a function of the final parameters, the training data, v* and lambda (`neuron_census`), stored with every
run as final metrics (`implicitbias.metrics.final`) and recomputable from a stored result.
"""

from __future__ import annotations

import numpy as np

from implicitbias.metrics.neurons import angles_to

#: a neuron is aligned with the bundle when its angle to the bundle direction is <= ALIGN_C x lambda
ALIGN_C = 1.0

#: class codes of `census.class`
INACTIVE, ALIGNED, UNALIGNED = 0, 1, 2

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
    "census.class": ("neuron",),
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
    angle = angles_to(W, bundle_direction(W, a, active))
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
    them (or when `c` differs from the stored `ALIGN_C`).  `spec` and `data` are that run's."""
    if "census.class" in ds and c == ALIGN_C:
        return {name: np.asarray(ds[name].values[r]) for name in DIMS}
    return neuron_census(ds["theta.W"].values[r], ds["theta.a"].values[r], data.X, data.y, data.info["v_star"],
                         spec.init_scale, c)
