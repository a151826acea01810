"""The census of active neurons (Chistikov et al. 2023, S11): on a hand-built network, recomputed from a stored
result, and the float32 discrete methods it is compared under."""

import itertools
import math

import numpy as np
import pytest

from implicitbias._spec import ConfigError
from implicitbias.losses import Loss
from implicitbias.metrics.census import (
    ALIGNED,
    CENSUS_VERSION,
    DIMS,
    INACTIVE,
    UNALIGNED,
    angle_exponents,
    bundles,
    neuron_census,
    stored_census,
)
from implicitbias.metrics.trials import median_of_k
from implicitbias.models import TwoLayer
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.papers.chistikov2023.metrics.census_trials import (
    CATEGORIES,
    categorise,
    fractions,
    median_bands,
    pair_exponents,
    trial_category,
)
from implicitbias.papers.chistikov2023.theorems.census import CensusTheorem7
from implicitbias.runs import RunSpec
from implicitbias.runs.execute import dataset_of, train_group
from implicitbias.runs.spec import RESULTS_FORMAT, _digest
from implicitbias.storage.datasets import data_from_xarray, data_to_xarray
from implicitbias.storage.files import load, save
from implicitbias.theorems.base import RunContext
from implicitbias.training import GD, Stop
from implicitbias.training.methods import GradientFlow
from implicitbias.training.recompute import recompute

NET = TwoLayer(width=12, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")


def _spec(**method) -> RunSpec:
    return RunSpec(model=NET, data=TeacherNeuron(d=3, scheme="centred", n_test=8), loss=Loss(name="square"),
                   method=GD(lr=0.05, **method), stop=Stop(loss_tol=1e-9, max_steps=3000), init_scale=4.0**-3,
                   checkpoints=5, kkt=False)


def _rotated(angle: float) -> np.ndarray:
    """A unit vector at `angle` from e_1, in the (e_1, e_2) plane."""
    return np.array([math.cos(angle), math.sin(angle), 0.0])


def test_census_of_a_hand_built_network():
    lam = 1e-3
    v_star = np.array([1.0, 0.0, 0.0])
    X = np.array([[1.0, 0.5, 0.0], [1.0, -0.5, 0.2], [0.05, 0.0, 1.0]])  # the last point nearly orthogonal to v*
    y = np.maximum(X @ v_star, 0.0)
    W = np.stack([
        2.0 * _rotated(0.1 * lam),      # aligned (the bundle)
        1.0 * _rotated(-0.1 * lam),     # aligned
        3 * lam * _rotated(0.5),        # positive, 0.5 rad off: unaligned
        0.07 * lam * np.array([-1.0, 0.0, 1.0]),  # negative sign, active on the third point only: unaligned
        lam * np.array([-1.0, 0.0, -1.0]),        # inactive on every point
    ])
    a = np.array([2.0, 1.0, 3 * lam, -0.07 * lam * math.sqrt(2.0), lam * math.sqrt(2.0)])
    c = neuron_census(W, a, X, y, v_star, lam)
    assert set(c) == set(DIMS)
    assert c["census.class"].tolist() == [ALIGNED, ALIGNED, UNALIGNED, UNALIGNED, INACTIVE]
    assert (int(c["census.active"]), int(c["census.aligned"]), int(c["census.unaligned"])) == (4, 2, 2)
    assert (int(c["census.unaligned_negative"]), int(c["census.unaligned_positive"])) == (1, 1)
    assert c["census.n_points"].tolist() == [3, 3, 3, 1, 0]
    assert c["census.active_on"][3].tolist() == [0, 0, 1]
    assert c["census.min_label"][3] == pytest.approx(0.05) and np.isnan(c["census.min_label"][4])
    assert c["census.sign"].tolist() == [1, 1, 1, -1, 1]
    np.testing.assert_allclose(c["census.growth"], np.linalg.norm(W, axis=1) / lam)
    weight = np.abs(a) * np.linalg.norm(W, axis=1)
    assert float(c["census.unaligned_share"]) == pytest.approx(weight[2:4].sum() / weight.sum())
    assert c["census.angle"][2] == pytest.approx(0.5, abs=1e-3)  # the bundle is within ~lambda of e_1
    point_angles = np.arccos(X @ v_star / np.linalg.norm(X, axis=1))
    np.testing.assert_allclose(c["census.point_angle"], point_angles, atol=1e-12)
    assert float(c["census.data_max_angle"]) == pytest.approx(point_angles.max()) and point_angles.max() > math.pi / 4
    assert c["census.max_point_angle"][3] == pytest.approx(point_angles[2])
    # a larger c makes the positive straggler aligned; the negative neuron is ~2 rad off
    loose = neuron_census(W, a, X, y, v_star, lam, c=600.0)
    assert loose["census.class"].tolist() == [ALIGNED, ALIGNED, ALIGNED, UNALIGNED, INACTIVE]


@pytest.fixture(scope="module")
def trained():
    spec = _spec()
    (ds,) = train_group([spec])
    return spec, ds


def test_census_is_reproducible_from_the_stored_parameters_and_data(trained, tmp_path):
    spec, ds = trained
    path = save(ds, tmp_path / "run.nc")
    stored = load(path)
    data = data_from_xarray(data_to_xarray(dataset_of(spec), spec))  # the data as stored beside the run
    assert stored["census.active_on"].dims == ("run", "neuron", "point")
    again = recompute(stored, spec, data)
    for name in DIMS:
        np.testing.assert_array_equal(again[name], stored[name].values, err_msg=name)
    np.testing.assert_array_equal(stored_census(stored, spec, data)["census.class"], stored["census.class"].values[0])
    assert int(stored["census.active"].values[0]) == int(np.sum(stored["census.class"].values[0] > 0))


def test_census_theorem_splits_trials_by_the_pi4_condition(trained):
    spec, ds = trained
    ctx = RunContext(runs=[spec], results=ds, data=[dataset_of(spec)])
    angle = float(ds["census.data_max_angle"].values[0])
    within, beyond = CensusTheorem7(subset="within").check(ctx), CensusTheorem7(subset="beyond").check(ctx)
    inside = angle < math.pi / 4
    assert within[0].outcome == ("holds" if inside else "not_evaluated")
    assert beyond[0].outcome == ("not_evaluated" if inside else "fails")
    if not inside:
        assert all(v.outcome in ("outside_scope", "not_evaluated") for v in beyond if v.kind == "prediction")


def test_float32_gd_runs_and_is_recorded_as_float32(trained):
    spec64, ds64 = trained
    spec = _spec(dtype="float32")
    (ds,) = train_group([spec])
    assert ds["theta.W"].dtype == np.float32 and ds["theta.a"].dtype == np.float32
    assert ds64["theta.W"].dtype == np.float64
    assert RunSpec.from_json(ds.attrs["spec"]).method.dtype == "float32"
    loss = ds["loss"].values[0]
    assert loss[-1] < 1e-2 * loss[0]
    # the same init and data: float32 follows float64 closely on this short run
    np.testing.assert_allclose(ds["theta.W"].values, ds64["theta.W"].values, rtol=1e-2, atol=1e-4)
    assert "census.unaligned" in ds


def test_dtype_field_keeps_float64_keys_and_gradient_flow_refuses_float32():
    spec = _spec()
    dump = spec.model_dump(mode="json")
    dump["method"].pop("dtype")
    assert spec.key() == _digest({"format": RESULTS_FORMAT, **dump})  # identity as before the field existed
    assert _spec(dtype="float32").key() != spec.key()
    assert _spec(dtype="float32").static_key() != spec.static_key()
    with pytest.raises(ConfigError, match=r"method\.dtype = 'float32' is not allowed"):
        RunSpec(model=NET, data=TeacherNeuron(d=3), loss=Loss(name="square"),
                method={"kind": "gf", "dtype": "float32"})
    assert GradientFlow().dtype == "float64"


def test_angle_exponents_follow_each_trial_across_lambda():
    specs = [_spec().replace(init_scale=lam, seed=seed) for seed in (0, 1) for lam in (1e-2, 1e-4)]
    angles = {(0, 1e-2): [1e-2, 2.0], (0, 1e-4): [1e-4, 2.0], (1, 1e-2): [3.0, 1.0], (1, 1e-4): [3.0, 1e-2]}
    censuses = [{"census.angle": np.asarray(angles[(s.seed, s.init_scale)])} for s in specs]
    p = angle_exponents(specs, censuses)
    np.testing.assert_allclose(p[1], [1.0, 0.0])  # seed 0, lambda 1e-4: the first neuron aligns, the second is stuck
    np.testing.assert_allclose(p[3], [0.0, 1.0])
    assert np.all(np.isnan(p[0])) and np.all(np.isnan(p[2]))  # a trial's largest lambda


def test_median_of_k_is_the_exact_distribution_over_every_draw():
    """Against brute force: every 5-subset of 9 values, counted once."""
    values = np.array([3.0, 0.1, 7.0, 0.2, 5.0, 0.05, 2.0, 9.0, 0.3])
    x, p = median_of_k(values, 5)
    draws = [np.median(c) for c in itertools.combinations(values, 5)]
    np.testing.assert_allclose(p, [np.mean(np.isclose(draws, v)) for v in x], atol=1e-15)
    assert p.sum() == pytest.approx(1.0) and p[0] == p[1] == 0.0  # the two smallest are never a median of five
    with pytest.raises(ValueError, match="odd number of trials"):
        median_of_k(values, 4)
    with pytest.raises(ValueError, match="odd number of trials"):
        median_of_k(values[:3], 5)


def test_median_bands_say_when_a_five_trial_median_is_a_coin_toss():
    """Two populations of 25 trials each, aligned (angle ~1e-5) and off the bundle (angle 1): the median of five is
    an off-bundle trial with probability 1/2 exactly (by symmetry), so the band runs from one population to the
    other; with 5 off-bundle trials of 50 the median of five is one of them with probability 0.0048
    (hypergeometric: 3 or more of the 5 drawn), below 5%, so the band stays in the aligned population."""
    def rows(off):
        return [{"scheme": "centred", "d": 4, "dtype": "float64", "lambda": 4.0**-10, "trial": t,
                 "max_angle": 1.0 if t < off else 1e-5 * (1 + t / 100)} for t in range(50)]

    (even,) = median_bands(rows(25))
    assert even["k"] == 5 and even["trials"] == 50
    assert even["median_of_k_q05"] < 2e-5 and even["median_of_k_q95"] == 1.0 and even["spread_q95_over_q05"] > 5e4
    x, p = median_of_k([r["max_angle"] for r in rows(25)], 5)
    assert p[x == 1.0].sum() == pytest.approx(0.5, abs=1e-12)
    (few,) = median_bands(rows(5))
    x, p = median_of_k([r["max_angle"] for r in rows(5)], 5)
    expected = sum(math.comb(5, j) * math.comb(45, 5 - j) for j in (3, 4, 5)) / math.comb(50, 5)
    assert p[x == 1.0].sum() == pytest.approx(expected, rel=1e-12) and expected == pytest.approx(0.0048, abs=1e-4)
    assert few["median_of_k_q95"] < 2e-5 and few["spread_q95_over_q05"] < 1.5
    (small,) = median_bands(rows(2)[:4])  # 4 trials: a median of 3
    assert small["k"] == 3 and small["trials"] == 4


# -- bundles (census version 2) -------------------------------------------------------------------------------
def _two_bundles(separation: float, lam: float, extra=()):
    """Two groups of three positive neurons around directions +-separation/2 from e_1 (each neuron within
    0.1 lambda of its group's direction), data on which every neuron is active, and `extra` (w, a) neurons."""
    X = np.array([[1.0, 0.3, 0.1], [1.0, -0.3, 0.2], [1.0, 0.0, -0.3]])
    W, a = [], []
    for centre in (separation / 2, -separation / 2):
        for k, norm in enumerate((1.0, 0.7, 0.4)):
            W.append(norm * _rotated(centre + 0.1 * lam * (k - 1)))
            a.append(norm)
    for w, out in extra:
        W.append(w)
        a.append(out)
    return np.array(W), np.array(a), X, np.maximum(X[:, 0], 0.0), np.array([1.0, 0.0, 0.0])


def _single_bundle_classes(W, a, X, lam, c=100.0):
    """The census' classes by its version-1 definition: the angle to the one direction u = sum_{active, a > 0} a_j w_j."""
    active = (X @ W.T > 0).any(axis=0)
    u = np.where(active & (a > 0), a, 0.0) @ W
    cos = W @ u / (np.linalg.norm(W, axis=1) * np.linalg.norm(u))
    aligned = active & (np.arccos(np.clip(cos, -1, 1)) <= c * lam)
    return np.where(aligned, ALIGNED, np.where(active, UNALIGNED, INACTIVE))


def test_two_bundles_are_found_and_their_neurons_are_aligned():
    lam, sep = 1e-4, 0.1  # c lambda = 0.01, linked at <= 2 c lambda = 0.02, the groups 0.1 apart
    W, a, X, y, v = _two_bundles(sep, lam)
    c = neuron_census(W, a, X, y, v, lam)
    assert int(c["census.bundles"]) == 2 and int(c["census.version"]) == CENSUS_VERSION
    assert c["census.bundle"].tolist() == [0, 0, 0, 1, 1, 1]
    assert c["census.class"].tolist() == [ALIGNED] * 6 and float(c["census.unaligned_share"]) == 0.0
    # negative control: the single direction u lies between the groups, 0.05 rad from each: all unaligned, share 1
    assert _single_bundle_classes(W, a, X, lam).tolist() == [UNALIGNED] * 6
    # and linking at a threshold above the separation merges the groups into one bundle
    member, directions = bundles(W, a, np.ones(6, bool), merge_angle=1.5 * sep)
    assert len(directions) == 1 and member.tolist() == [0] * 6
    member, directions = bundles(W, a, np.ones(6, bool), merge_angle=0.5 * sep)
    assert len(directions) == 2


def test_a_neuron_off_both_bundles_is_unaligned_with_its_share():
    lam, sep = 1e-4, 0.1
    off = (1e-3 * _rotated(0.6), 1e-3)  # positive, 0.55 rad from the nearest bundle, share ~ 1e-6 < BUNDLE_SHARE
    neg = (0.05 * _rotated(-0.02), -0.05)  # negative sign, 0.03 rad from the nearest bundle (> c lambda)
    W, a, X, y, v = _two_bundles(sep, lam, extra=[off, neg])
    c = neuron_census(W, a, X, y, v, lam)
    assert int(c["census.bundles"]) == 2
    assert c["census.class"].tolist() == [ALIGNED] * 6 + [UNALIGNED, UNALIGNED]
    weight = np.abs(a) * np.linalg.norm(W, axis=1)
    assert float(c["census.unaligned_share"]) == pytest.approx(weight[6:].sum() / weight.sum())
    assert c["census.angle"][6] == pytest.approx(0.55, abs=1e-3) and c["census.angle"][7] == pytest.approx(0.03, abs=1e-3)
    assert c["census.bundle"].tolist()[6:] == [0, 1]
    # a positive neuron off both bundles that carries more than BUNDLE_SHARE is a third bundle, not unaligned
    heavy = (0.3 * _rotated(0.6), 0.3)
    c3 = neuron_census(*_two_bundles(sep, lam, extra=[heavy]), lam)
    assert int(c3["census.bundles"]) == 3 and int(c3["census.unaligned"]) == 0


def test_a_rank1_network_keeps_its_single_bundle_classes():
    """Random rank-1-like networks: one bundle, and classes, angles and shares as by the version-1 definition."""
    rng = np.random.default_rng(3)
    lam = 1e-3
    for _ in range(20):
        X = rng.normal(size=(6, 4))
        v = np.array([1.0, 0.0, 0.0, 0.0])
        W = lam * rng.normal(size=(30, 4))
        a = lam * rng.choice([-1.0, 1.0], size=30)
        grown = rng.random(30) < 0.5
        W[grown] += rng.uniform(0.1, 1.0, size=(grown.sum(), 1)) * v
        a[grown] = np.linalg.norm(W[grown], axis=1)
        c = neuron_census(W, a, X, np.maximum(X @ v, 0), v, lam)
        assert int(c["census.bundles"]) == 1
        np.testing.assert_array_equal(c["census.class"], _single_bundle_classes(W, a, X, lam))
    assert int(c["census.unaligned"]) > 0  # the check compares something: stragglers exist


def test_stored_census_is_recomputed_when_it_predates_the_bundles(trained):
    spec, ds = trained
    data = dataset_of(spec)
    fresh = stored_census(ds, spec, data)
    tampered = ds.copy()
    tampered["census.class"] = tampered["census.class"] * 0 + 7  # a marker no census writes
    assert np.all(stored_census(tampered, spec, data)["census.class"] == 7)  # current version: read as stored
    old = tampered.drop_vars(["census.version"])
    np.testing.assert_array_equal(stored_census(old, spec, data)["census.class"], fresh["census.class"])
    older = tampered.assign({"census.version": tampered["census.version"] * 0 + 1})
    np.testing.assert_array_equal(stored_census(older, spec, data)["census.class"], fresh["census.class"])


# -- categories of trials ---------------------------------------------------------------------------------------
def _row(trial, max_angle, unaligned=1, bundles_=1, not_shrinking=0, pi4=True):
    return {"scheme": "centred", "d": 16, "dtype": "float64", "lambda": 4.0**-13, "trial": trial, "max_angle": max_angle,
            "unaligned": unaligned, "bundles": bundles_, "not_shrinking": not_shrinking, "meets_pi4": pi4}


def test_every_category_is_reached_and_far_is_ten_times_the_median():
    rows = [_row(0, 1e-6, unaligned=0), _row(1, 2e-6, unaligned=0), _row(2, 3e-6), _row(3, 4e-6),
            _row(4, 5e-6), _row(5, 1e-3), _row(6, 1.0, not_shrinking=2), _row(7, 1.0, bundles_=2, unaligned=0),
            _row(8, 6e-5, not_shrinking=1)]
    categorise(rows)
    assert rows[0]["typical_max_angle"] == 5e-6  # the median of the nine
    assert [r["category"] for r in rows] == ["aligned", "aligned", "near_median", "near_median", "near_median",
                                             "far_aligning", "off_bundle", "several_bundles", "off_bundle"]
    assert set(CATEGORIES) == {r["category"] for r in rows}
    # negative control: just below 10 x the median a trial is near, whatever its exponents
    row = _row(9, 4.9e-5, not_shrinking=1)
    assert trial_category(row, 5e-6) == "near_median" and trial_category(row, 4.8e-6) == "off_bundle"
    assert trial_category(_row(10, 1.0), 5e-6, far_factor=1e6) == "near_median"
    (frac,) = fractions(rows, ("unaligned",))
    assert sum(frac[f"frac_{k}"] for k in CATEGORIES) == pytest.approx(1.0)
    assert frac["frac_far"] == pytest.approx(4 / 9) and frac["frac_off_bundle"] == pytest.approx(2 / 9)
    assert frac["frac_unaligned"] == pytest.approx(6 / 9) and frac["trials_beyond_pi4"] == 0


def test_pair_exponents_give_a_trials_largest_lambda_the_next_pair():
    specs = [_spec().replace(init_scale=lam, seed=0) for lam in (1e-2, 1e-4, 1e-6)]
    angles = {1e-2: [1e-2, 2.0], 1e-4: [1e-4, 2.0], 1e-6: [1e-6, 2.0]}
    censuses = [{"census.angle": np.asarray(angles[s.init_scale])} for s in specs]
    p = pair_exponents(specs, censuses)
    np.testing.assert_allclose(p[0], [1.0, 0.0])
    np.testing.assert_allclose(p[1], [1.0, 0.0])
    assert np.all(np.isnan(angle_exponents(specs, censuses)[0]))
    lone = pair_exponents(specs[:1], censuses[:1])
    assert np.all(np.isnan(lone[0]))  # one lambda: nothing to compare with


def test_the_fig1_report_links_to_the_census_report_and_its_median_of_5_figure(tmp_path):
    from implicitbias.experiments import get
    from implicitbias.pipeline.outputs import related_links
    from implicitbias.reports.html import write_report

    fig1, census = get("chistikov2023-fig1"), get("chistikov2023-fig1-census")
    assert {"census_median_of_5", "census_categories"} <= {f.name for f in census.figures}  # the anchors exist
    runs = tmp_path / "runs"
    (runs / "chistikov2023-fig1-census").mkdir(parents=True)
    (runs / "chistikov2023-fig1-census" / "report.html").write_text("<html></html>")
    (link,) = related_links(fig1, runs / "chistikov2023-fig1", quick=False)
    page = "../chistikov2023-fig1-census/report.html"
    assert link["href"] == page and link["exists"] and link["command"] == "implicitbias run chistikov2023-fig1-census"
    assert ("census_median_of_5", page + "#fig-census_median_of_5") in link["figures"]
    assert (runs / "chistikov2023-fig1" / link["href"]).resolve() == (runs / "chistikov2023-fig1-census" / "report.html")
    (quick,) = related_links(fig1, runs / "chistikov2023-fig1-quick", quick=True)
    assert quick["href"] == "../chistikov2023-fig1-census-quick/report.html" and not quick["exists"]
    assert quick["command"].endswith("--quick")
    (elsewhere,) = related_links(fig1, tmp_path / "mine", quick=False)
    assert elsewhere["href"] == page and not elsewhere["exists"]
    out = write_report(runs / "chistikov2023-fig1", title="t", experiment="chistikov2023-fig1", summary="s", config={},
                       figures=[], checks=[], run_info={}, related=[link, quick]).read_text()
    assert f'<a href="{page}#fig-census_median_of_5">census_median_of_5</a>' in out
    assert "<code>implicitbias run chistikov2023-fig1-census</code>." in out
    assert "not next to this report" in out.split("census-quick")[-1]  # only the missing one says so
    assert "not next to this report" not in out.split("census-quick")[0]
    assert related_links(census, runs / "chistikov2023-fig1-census", quick=False) == []
