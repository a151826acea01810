"""Readings of "active" for the largest angle between the hidden neurons of a two-layer network.

The max angle between active neurons (the quantity of Chistikov et al. 2023, Figure 1) depends on which neurons
count as active, and a paper's caption ("active hidden neurons") does not say. Every reading below keeps the
literally active neurons (<w_j, x_i> > 0 for some training input x_i) and, but for the literal one, only those of
them that pass one more test; the max angle is then taken over the neurons kept (2 atan2(||u - v||, ||u + v||) of
the unit vectors, exact down to ~1e-8 rad; 0 with fewer than two neurons kept):

- ``literal``: no further test (the recorded ``max_angle``);
- ``positive``: a_j > 0 (the sign of the outer weight);
- ``share``: |a_j| ||w_j|| >= tau sum_k |a_k| ||w_k|| (the weight the neuron carries in the network's output;
  tau = 1e-6 is `weighted_max_angle`);
- ``norm``: ||w_j|| >= tau max_k ||w_k|| (a norm threshold relative to the largest neuron);
- ``grown``: max(r_j, 1 / r_j) >= tau, r_j = ||w_j(T)|| / ||w_j(0)|| (moved from its initialisation, read on
  the ratio of final to initial norm: grown or shrunk by at least the factor tau);
- ``turned``: the angle between w_j(T) and w_j(0) is >= tau rad (moved from its initialisation, read on the
  direction).

The last two need the initial parameters, which a stored run does not keep: they are regenerated from the run's
spec (`initial_weights`: its model's init at its seed and scale, bit for bit the init it was trained from).

Why the readings differ at large d (measured on chistikov2023-fig1, d = 1024): a neuron active on k of n training
points moves at a rate of order k / n while the residuals last, and the residuals vanish on the time scale of the
aligned bundle's growth, about ln(1 / lambda) / ||gamma||; a neuron left active on a handful of points when they
vanish stays active at its initial norm and direction (the
frozen-neuron metric of the chistikov2023 paper package derives when). Such a neuron sets the
literal max angle (~ pi/2), carries a weight share of order (lambda / sqrt(m))^2 / (sum of the grown norms), which
falls like lambda^2, and has r_j ~ 1 and a turned angle ~ k t / n.

Every reading is a function of the final parameters, the training inputs and (``grown``, ``turned``) the
initial weights; `reading_quantities` computes the per-neuron values once, and `max_angle_by_reading` /
`threshold_curve` the max angle at one threshold or along a grid of them.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class Reading:
    """One reading of "active": its name, what it keeps (in words), the per-neuron quantity its threshold is
    applied to (None: no threshold), and the threshold grid of its sensitivity curve (`threshold_curve`)."""

    name: str
    description: str
    quantity: str | None = None
    default: float | None = None
    grid: tuple[float, ...] = ()

    @property
    def label(self) -> str:
        """A short label for figures and tables, e.g. "share >= 1e-06"."""
        if self.quantity is None:
            return self.name
        return f"{self.name} >= {self.default:g}"


def _geometric(lo: float, hi: float, per_decade: int) -> tuple[float, ...]:
    n = int(round(np.log10(hi / lo) * per_decade)) + 1
    return tuple(float(v) for v in np.geomspace(lo, hi, n))


#: the readings, by name (in the order figures and tables show them); `default` is the threshold stored with
#: every run (`reading_max_angles`); ``grown`` 2: a neuron that neither doubled nor halved its norm did not move
#: (a frozen neuron moves by k t / n ~ 1e-2 at d = 1024, the aligned bundle grows ~ 1 / lambda)
READINGS: dict[str, Reading] = {r.name: r for r in (
    Reading("literal", "active: <w_j, x_i> > 0 for some training input (Figure 1's caption, read literally)"),
    Reading("positive", "active and a_j > 0"),
    Reading("share", "active and |a_j| ||w_j|| >= tau sum_k |a_k| ||w_k||", "share", 1e-6, _geometric(1e-12, 1e-1, 4)),
    Reading("norm", "active and ||w_j|| >= tau max_k ||w_k||", "norm_rel", 1e-3, _geometric(1e-6, 1.0, 4)),
    Reading("grown", "active and grown or shrunk from its init by a factor >= tau: max(r, 1/r) >= tau, "
            "r = ||w_j(T)|| / ||w_j(0)||", "norm_ratio", 2.0, _geometric(1.01, 100.0, 4)),
    Reading("turned", "active and turned by >= tau rad from its initial direction w_j(0)", "turned", 0.1,
            _geometric(1e-4, 1.0, 2)),
)}


def initial_parameters(spec, d: int) -> dict[str, np.ndarray]:
    """The parameters theta(0) a run was trained from ({"W": (m, d), "a": (m,), ...}): its model's init at its
    seed and scale (the `implicitbias.training.problem.Problem.init` of the run, bit for bit)."""
    theta, _ = spec.model.init(jax.random.PRNGKey(spec.seed), d, spec.init_scale)
    return {k: np.asarray(v, dtype=np.float64) for k, v in theta.items()}


def initial_weights(spec, d: int) -> np.ndarray:
    """The input weights W(0) (m, d) a run was trained from (`initial_parameters`)."""
    return initial_parameters(spec, d)["W"]


def _unit(W, norms):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norms[:, None] > 0, W / norms[:, None], 0.0)


def reading_quantities(W, a, X, W0=None) -> dict[str, np.ndarray]:
    """Per neuron (arrays of length m): ``active`` (bool), ``positive`` (a_j > 0), ``share``, ``norm_rel``, and
    with the initial weights W0 ``norm_ratio`` (max(r, 1/r)) and ``turned`` (rad); NaN where undefined (a zero
    neuron)."""
    W = np.asarray(W, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(W, axis=1)
    weight = np.abs(a) * norms
    total, top = weight.sum(), norms.max(initial=0.0)
    out = {
        "active": np.any(X @ W.T > 0, axis=0) & (norms > 0),
        "positive": a > 0,
        "share": weight / total if total > 0 else np.full_like(weight, np.nan),
        "norm_rel": norms / top if top > 0 else np.full_like(norms, np.nan),
    }
    if W0 is not None:
        W0 = np.asarray(W0, dtype=np.float64)
        norms0 = np.linalg.norm(W0, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = norms / norms0
        out["norm_ratio"] = np.where((norms > 0) & (norms0 > 0), np.maximum(r, 1.0 / r), np.nan)
        u, u0 = _unit(W, norms), _unit(W0, norms0)
        turned = 2.0 * np.arctan2(np.linalg.norm(u - u0, axis=1), np.linalg.norm(u + u0, axis=1))
        out["turned"] = np.where((norms > 0) & (norms0 > 0), turned, np.nan)
    return out


def pairwise_angles(W, keep) -> np.ndarray:
    """The angles (rad) between the rows of W that `keep` marks, as a (k, k) matrix (k = keep.sum()), each
    2 atan2(||u - v||, ||u + v||) of the unit rows, computed from the differences (exact at small angles, where a
    Gram matrix would lose the angle below ~1e-8)."""
    W = np.asarray(W, dtype=np.float64)[np.asarray(keep, dtype=bool)]
    U = _unit(W, np.linalg.norm(W, axis=1))
    out = np.zeros((U.shape[0], U.shape[0]))
    for i in range(U.shape[0] - 1):
        out[i, i + 1:] = 2.0 * np.arctan2(np.linalg.norm(U[i + 1:] - U[i], axis=1),
                                          np.linalg.norm(U[i + 1:] + U[i], axis=1))
    return out + out.T


def reading_mask(q: dict[str, np.ndarray], reading: str | Reading, tau: float | None = None) -> np.ndarray:
    """The neurons a reading keeps, from `reading_quantities`' values; tau None: the reading's default."""
    r = reading if isinstance(reading, Reading) else get_reading(reading)
    keep = q["active"].copy()
    if r.name == "positive":
        keep &= q["positive"]
    elif r.quantity is not None:
        if r.quantity not in q:
            raise ValueError(f"reading {r.name!r} needs the initial weights (W0) of the run: pass W0 to "
                             "reading_quantities")
        with np.errstate(invalid="ignore"):
            keep &= q[r.quantity] >= (r.default if tau is None else tau)
    return keep


def get_reading(name: str) -> Reading:
    """The reading of that name; an unknown name is refused with the names there are."""
    if name not in READINGS:
        raise ValueError(f"unknown reading of 'active' {name!r}: expected one of {', '.join(READINGS)}")
    return READINGS[name]


def _max_over(angles: np.ndarray, active_idx: np.ndarray, keep: np.ndarray) -> float:
    """The max of the pairwise angles among the active neurons that `keep` (over all neurons) also keeps."""
    sub = keep[active_idx]
    if sub.sum() < 2:
        return 0.0
    return float(angles[np.ix_(sub, sub)].max())


def max_angle_by_reading(W, a, X, W0=None, readings=None, taus: dict[str, float] | None = None) -> dict[str, float]:
    """{reading: the max angle (rad) between the neurons it keeps} at each reading's default threshold (or
    `taus[name]`); readings None: every reading that the inputs allow (``grown`` and ``turned`` need W0)."""
    q = reading_quantities(W, a, X, W0)
    names = [n for n in READINGS if READINGS[n].quantity is None or READINGS[n].quantity in q] \
        if readings is None else list(readings)
    idx = np.flatnonzero(q["active"])
    angles = pairwise_angles(W, q["active"])
    return {n: _max_over(angles, idx, reading_mask(q, n, (taus or {}).get(n))) for n in names}


def threshold_curve(W, a, X, reading: str, taus, W0=None) -> np.ndarray:
    """The max angle (rad) between the neurons a threshold reading keeps, at each threshold of `taus`."""
    q = reading_quantities(W, a, X, W0)
    idx = np.flatnonzero(q["active"])
    angles = pairwise_angles(W, q["active"])
    return np.array([_max_over(angles, idx, reading_mask(q, reading, float(t))) for t in taus])


def threshold_curves(W, a, X, W0=None) -> dict[str, np.ndarray]:
    """`threshold_curve` of every threshold reading along its grid (`Reading.grid`), sharing one matrix of
    pairwise angles; {name: array over the grid}."""
    q = reading_quantities(W, a, X, W0)
    idx = np.flatnonzero(q["active"])
    angles = pairwise_angles(W, q["active"])
    return {r.name: np.array([_max_over(angles, idx, reading_mask(q, r, t)) for t in r.grid])
            for r in READINGS.values() if r.quantity is not None and r.quantity in q}


#: the readings stored with every run as final metrics `reading.NAME` (the literal one is the recorded max_angle)
STORED = ("positive", "share", "norm", "grown", "turned")


def final_readings(W, a, X, W0) -> dict[str, np.ndarray]:
    """{"reading.NAME": max angle (rad)} of every reading but the literal one, at its default threshold: the final
    metrics `implicitbias.metrics.final` stores with a two-layer run without a bias."""
    angles = max_angle_by_reading(W, a, X, W0, readings=STORED)
    return {f"reading.{name}": np.asarray(value) for name, value in angles.items()}


def stored_readings(ds, spec, data, r: int = 0, W0=None) -> dict[str, float]:
    """{reading: max angle (rad)} of run `r` of a stored Dataset (one run's, or a cell's stacked), every reading:
    ``literal`` is the recorded max angle (its last checkpoint), the others are read from the `reading.*`
    variables, or computed from the stored final parameters (and `initial_weights` of `spec`) for a run stored
    before they existed.  `spec` and `data` are that run's; W0 its initial weights if already at hand."""
    out = {"literal": float(np.ravel(ds["max_angle"].values[r])[-1])}
    if all(f"reading.{name}" in ds for name in STORED):
        out.update({name: float(ds[f"reading.{name}"].values[r]) for name in STORED})
        return out
    W0 = initial_weights(spec, data.X.shape[1]) if W0 is None else W0
    out.update(max_angle_by_reading(ds["theta.W"].values[r], ds["theta.a"].values[r], data.X, W0, readings=STORED))
    return out


def stored_curves(ds, spec, data, r: int = 0, W0=None) -> dict[str, np.ndarray]:
    """`threshold_curves` of run `r` of a stored Dataset, from its final parameters (not stored: a few ms)."""
    W0 = initial_weights(spec, data.X.shape[1]) if W0 is None else W0
    return threshold_curves(ds["theta.W"].values[r], ds["theta.a"].values[r], data.X, W0)
