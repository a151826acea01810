"""Readings of "active" (metrics/readings.py), frozen neurons (metrics/frozen.py) and the claims of Figure 1 under
the readings (issue 39): closed forms on hand-built networks, the exact early phase against a fine Euler
integration, the init regenerated bit for bit, and the paper-column verdict with its negative control."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from implicitbias.experiments import get
from implicitbias.metrics.readings import (
    READINGS,
    initial_parameters,
    max_angle_by_reading,
    reading_quantities,
    stored_readings,
    threshold_curve,
)
from implicitbias.papers.chistikov2023.experiments import readings as R
from implicitbias.papers.chistikov2023.metrics.frozen import early_phase, frozen_counts, growth_time
from implicitbias.training.batch import Batch
from implicitbias.training.problem import Problem


def _unit(angle):
    return np.array([math.cos(angle), math.sin(angle)])


def _network():
    """Three neurons in the plane: two grown ones 0.1 rad apart (a > 0), and a tiny negative one at 1.2 rad
    that is still active on one point; X has points at angles 0.05, 1.25 and pi."""
    W = np.stack([2.0 * _unit(0.0), 1.5 * _unit(0.1), 1e-3 * _unit(1.2)])
    a = np.array([2.0, 1.5, -1e-3])
    X = np.stack([_unit(0.05), _unit(1.25), _unit(math.pi)])
    W0 = np.stack([1e-3 * _unit(0.7), 1e-3 * _unit(-0.4), 1e-3 * _unit(1.2)])
    return W, a, X, W0


def test_each_reading_keeps_what_it_says_in_closed_form():
    W, a, X, W0 = _network()
    got = max_angle_by_reading(W, a, X, W0)
    assert got["literal"] == pytest.approx(1.2, abs=1e-12)  # the tiny neuron counts: it is active on x_2
    assert got["positive"] == pytest.approx(0.1, abs=1e-12)
    # shares: 4, 2.25, 1e-6 over 6.250001: the tiny neuron's 1.6e-7 < 1e-6
    assert got["share"] == pytest.approx(0.1, abs=1e-12)
    assert got["norm"] == pytest.approx(0.1, abs=1e-12)  # 1e-3 / 2 = 5e-4 < 1e-3
    assert got["grown"] == pytest.approx(0.1, abs=1e-12)  # norm ratios 2000, 1500, 1
    assert got["turned"] == pytest.approx(0.1, abs=1e-12)  # turned 0.7, 0.5, 0 rad
    q = reading_quantities(W, a, X, W0)
    assert q["norm_ratio"] == pytest.approx([2000.0, 1500.0, 1.0]) and q["turned"] == pytest.approx([0.7, 0.5, 0.0])
    # a threshold below the tiny neuron's share keeps it again: the curve steps at its share 1.6e-7
    curve = threshold_curve(W, a, X, "share", [1e-8, 1e-7, 2e-7, 1e-6])
    assert curve == pytest.approx([1.2, 1.2, 0.1, 0.1], abs=1e-12)
    # the angles are exact at small angles (2 atan2(|u - v|, |u + v|)), where arccos of a dot product is not
    W[1] = 1.5 * _unit(1e-9)
    assert max_angle_by_reading(W, a, X, W0, readings=["positive"])["positive"] == pytest.approx(1e-9, rel=1e-6)
    with pytest.raises(ValueError, match="unknown reading of 'active' 'sign'"):
        max_angle_by_reading(W, a, X, W0, readings=["sign"])
    with pytest.raises(ValueError, match="needs the initial weights"):
        max_angle_by_reading(W, a, X, None, readings=["grown"])


def test_the_init_is_regenerated_bit_for_bit():
    exp = get("chistikov2023-fig1")
    config = exp.resolve(quick=True)
    for spec in exp.runs(config)[:3]:
        d = spec.data.d
        theta, _ = Problem(spec.model, spec.loss).init(jax.tree_util.tree_map(jnp.asarray, Batch.of([spec]).member(0)), d)
        init = initial_parameters(spec, d)
        assert np.array_equal(np.asarray(theta["W"]), init["W"]) and np.array_equal(np.asarray(theta["a"]), init["a"])


def _teacher(d, seed=0):
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal(d)
    mu /= np.linalg.norm(mu)
    X = mu + rng.standard_normal((d, d)) / np.sqrt(d)
    return rng, X, np.maximum(X @ mu, 0.0)


def _euler(w, sign, X, y, tau, dt=2e-4, t_max=60.0):
    """The early phase by explicit Euler steps: (time the active set empties, active count at tau)."""
    w, t, k, n = w / np.linalg.norm(w), 0.0, None, X.shape[0]
    while t < t_max:
        active = X @ w > 0
        if k is None and t >= tau:
            k = int(active.sum())
            if sign > 0:
                return math.inf, k
        if sign < 0 and not active.any():
            return t, (0 if k is None else k)
        w = w + dt * sign * (y[active] @ X[active]) / n
        t += dt
    return math.inf, k


def test_the_early_phase_is_exact_against_a_fine_euler_integration():
    rng, X, y = _teacher(32)
    W0 = rng.standard_normal((12, 32))
    s = np.array([-1.0, 1.0] * 6)
    phase = early_phase(W0, s, X, y)
    assert phase.monotone  # every <x_i, x_l> > 0 here: points only leave (s < 0) or enter (s > 0)
    k = phase.k_at(3.0)
    for j in range(12):
        T, k_euler = _euler(W0[j], s[j], X, y, 3.0)
        if s[j] < 0:
            assert phase.T[j] == pytest.approx(T, abs=5e-3), j  # the Euler step resolves the event to ~dt
        else:
            assert math.isnan(phase.T[j])
        assert k[j] == k_euler, j
    # the state at tau straight from a run stopped at tau agrees with k_at
    assert np.array_equal(early_phase(W0, s, X, y, 3.0).active_end.sum(axis=1), k)


def test_growth_time_is_the_path_time_of_an_aligned_neuron():
    _, X, y = _teacher(16, seed=3)
    gamma = y @ X / X.shape[0]
    W0 = 1e-4 * np.stack([gamma / np.linalg.norm(gamma), np.eye(16)[0]])
    W = W0.copy()
    W[0] *= math.exp(np.linalg.norm(gamma) * 7.5)  # grown as d ln|w|/dt = <w/|w|, gamma> for a time 7.5
    assert growth_time(W, W0, X, y) == pytest.approx(7.5, rel=1e-12)


def test_frozen_counts_predict_the_negative_neurons_left_active():
    rng, X, y = _teacher(64, seed=1)
    W0 = rng.standard_normal((40, 64))
    s = np.where(np.arange(40) % 2 == 0, -1.0, 1.0)
    phase = early_phase(W0, s, X, y)
    tau = float(np.nanmedian(phase.T[s < 0]))
    # the end state the prediction describes: every negative neuron that has not emptied by tau, left where the
    # early phase leaves it (a stand-in for a trained network whose residuals vanished at path time tau)
    frozen = (s < 0) & (phase.T > tau)
    W = np.where(frozen[:, None], W0, -X.sum(axis=0))  # -sum_l x_l: inactive on every point (the Gram is positive)
    counts = frozen_counts(W, X, y, W0, s, tau, phase)
    assert counts["negative_predicted"] == frozen.sum() == counts["negative_active"]
    assert counts["agree"] == 1.0
    # negative control: the same prediction at a much longer phase leaves none, and disagrees with that state
    later = frozen_counts(W, X, y, W0, s, 10 * np.nanmax(phase.T[s < 0]), phase)
    assert later["negative_predicted"] == 0 and later["agree"] < 1.0


def test_the_paper_column_verdict_holds_inside_the_band_and_fails_outside(monkeypatch):
    class Ctx:
        results = None

    def rows(shift):
        out = []
        for lam, paper in R.PAPER_COLUMN.items():
            ours = paper * shift
            out.append({"lambda": lam, "paper_deg": paper, "ours_deg": ours, "literal_deg": 96.0,
                        "band_lo_deg": ours * 0.8, "band_hi_deg": ours * 1.2, "trials": 5,
                        "within": ours * 0.8 <= paper <= ours * 1.2, "ratio": shift})
        return out

    claim = R.ReadingClaims()
    monkeypatch.setattr(R, "paper_comparison", lambda results: rows(1.1))
    (verdict,) = claim.reproduces_the_paper_column(Ctx())
    assert verdict.outcome == "holds" and verdict.measured == 0
    # negative control: the literal reading's ~96 deg at every lambda is far outside every band
    monkeypatch.setattr(R, "paper_comparison", lambda results: rows(1e4))
    (verdict,) = claim.reproduces_the_paper_column(Ctx())
    assert verdict.outcome == "fails" and verdict.measured == 12  # 4^-1 .. 4^-12
    monkeypatch.setattr(R, "paper_comparison", lambda results: [])
    (verdict,) = claim.reproduces_the_paper_column(Ctx())
    assert verdict.outcome == "not_evaluated"


def test_the_bootstrap_band_of_a_median_of_five():
    lo, hi = R.bootstrap_band([1.0, 2.0, 3.0, 4.0, 5.0])
    assert 1.0 <= lo <= 2.0 and 4.0 <= hi <= 5.0
    assert R.bootstrap_band([3.0] * 5) == (3.0, 3.0)


def test_stored_readings_recompute_what_a_run_predates(tmp_path):
    """A stored run without the reading.* variables (stored before they existed) gets them from its parameters."""
    import xarray as xr

    exp = get("chistikov2023-fig1")
    spec = exp.runs(exp.resolve(quick=True))[0]
    from implicitbias.runs.execute import dataset_of

    data = dataset_of(spec)
    init = initial_parameters(spec, data.X.shape[1])
    W, a = init["W"] * 50.0, init["a"] * 50.0
    ds = xr.Dataset({"theta.W": (("run", "n", "d"), W[None]), "theta.a": (("run", "n"), a[None]),
                     "max_angle": (("run", "checkpoint"), [[0.0, 1.0]])})
    got = stored_readings(ds, spec, data)
    want = max_angle_by_reading(W, a, data.X, init["W"])
    assert got["literal"] == 1.0 and all(got[k] == pytest.approx(want[k]) for k in READINGS if k != "literal")
