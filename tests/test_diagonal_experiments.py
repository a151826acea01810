"""Diagonal linear networks (S6): the Woodworth limit, the mirror-flow path and Gunasekar's max-margin limits on
real gradient-flow runs (positive cases) and on runs that violate them (negative controls), and the two catalogued
experiments' input checks."""

import functools

import numpy as np
import pytest

from implicitbias._spec import ConfigError
from implicitbias.data import NearlyOrthogonal, Separable, SparseRegression
from implicitbias.losses import Loss
from implicitbias.models import DiagonalLinear
from implicitbias.papers.gunasekar2018.theorems import GunasekarDiagonal
from implicitbias.papers.woodworth2020.theorems import MirrorFlowPath, WoodworthLimit, host_rtol, mirror_flow_path
from implicitbias.reference import NonSeparableDataError
from implicitbias.runs import RunSpec
from implicitbias.runs.execute import dataset_of, train_group
from implicitbias.runs.results import stack_runs
from implicitbias.theorems import RunContext
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop

REGRESSION = SparseRegression(n=10, d=40, k=2, w_star_values="positive")
GF = GradientFlow(solver="rkc", rtol=1e-8, atol=1e-14, atol_rel=None, dt0=1e-4)


def _context(specs):
    """Train the specs (one call per spec) and return their RunContext, as the runner builds it."""
    arrays = [train_group([s])[0] for s in specs]
    return RunContext(runs=list(specs), results=stack_runs(arrays, specs), data=[dataset_of(s) for s in specs])


def _regression_specs(alphas, depth=2, max_time=1e5, loss_tol=1e-16):
    return [RunSpec(model=DiagonalLinear(depth=depth, trained="displacement"), data=REGRESSION,
                    loss=Loss(name="square"), method=GF, stop=Stop(loss_tol=loss_tol, max_time=max_time),
                    init_scale=a, checkpoints=20, kkt=False, keep_trajectory=True) for a in alphas]


def _predictions(verdicts):
    return [v.outcome for v in verdicts if v.kind == "prediction"]


@pytest.fixture(scope="module")
def depth2():
    return _context(_regression_specs([0.01, 1.0]))


def test_gradient_flow_limit_is_the_q_alpha_minimiser(depth2):
    verdicts = WoodworthLimit().check(depth2)
    assert all(v.outcome == "holds" for v in verdicts if v.kind == "assumption"), [v.line() for v in verdicts]
    assert _predictions(verdicts) == ["holds"], [v.line() for v in verdicts]


def test_a_limit_checked_against_the_wrong_alpha_fails(depth2):
    # negative control: the limit reached from alpha = 1 is not the Q_alpha minimiser for alpha = 0.01
    wrong = RunContext(runs=[s.replace(init_scale=0.01) for s in depth2.runs], results=depth2.results,
                       data=depth2.data)
    assert _predictions(WoodworthLimit().check(wrong)) == ["fails"]


def test_a_run_that_did_not_interpolate_is_outside_scope():
    early = _context(_regression_specs([0.01], max_time=0.5))
    verdicts = WoodworthLimit().check(early)
    assert any(v.outcome == "fails" and "interpolation" in v.statement for v in verdicts)
    assert _predictions(verdicts) in (["outside_scope"], ["not_evaluated"])


def test_the_trajectory_is_the_mirror_flow(depth2):
    assert _predictions(MirrorFlowPath().check(depth2)) == ["holds"]
    # negative control: mirror flow at half the derived rate c = 4 follows another path in time
    assert _predictions(MirrorFlowPath(time_scale=2.0).check(depth2)) == ["fails"]


def test_depth_three_limit_and_path():
    ctx = _context(_regression_specs([0.1, 1.0], depth=3))
    assert _predictions(WoodworthLimit().check(ctx)) == ["holds"]
    assert _predictions(MirrorFlowPath().check(ctx)) == ["holds"]


def test_mirror_flow_path_starts_at_zero_and_interpolates():
    from implicitbias.reference.diagonal_nets import diagonal_net_potential, q_alpha_interpolator

    data = REGRESSION.generate(3)
    pot = diagonal_net_potential(0.1, 2)
    path = mirror_flow_path(data.X, data.y, pot, 4.0, [0.0, 1.0, 1e4])
    assert np.all(path[0] == 0)
    limit = q_alpha_interpolator(data.X, data.y, 0.1).w
    assert np.linalg.norm(path[-1] - limit) <= 1e-6 * np.linalg.norm(limit)


def test_the_host_mirror_flow_is_never_looser_than_the_flow_it_checks():
    from implicitbias.training.methods import GD

    assert host_rtol(GradientFlow(rtol=1e-6)) == 1e-8
    assert host_rtol(GradientFlow(rtol=1e-10)) == 1e-10  # woodworth2020's depth-3 runs
    assert host_rtol(GD(lr=0.1)) == 1e-8


# -- Gunasekar et al. 2018 -------------------------------------------------------------------------------
from implicitbias.papers.gunasekar2018.experiments import CHECKPOINTS  # noqa: E402

CLASSIFICATION = Separable(n=12, d=30, sparsity=2, margin=0.5)


@functools.cache
def _classification(depth):
    """Trained once per depth and shared (the checks only read it; the negative control copies it)."""
    spec = RunSpec(model=DiagonalLinear(depth=depth), data=CLASSIFICATION, loss=Loss(name="logistic"),
                   method=GradientFlow(solver="rkc", clock="loss", rtol=1e-8), stop=Stop(max_time=1e4),
                   init_scale=0.1, checkpoints=CHECKPOINTS, kkt=True, keep_trajectory=True)
    return _context([spec])


@pytest.mark.xdist_group("gunasekar-classification")
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_diagonal_classification_reaches_its_max_margin_direction(depth):
    verdicts = GunasekarDiagonal().check(_classification(depth))
    assert all(v.outcome == "holds" for v in verdicts), [v.line() for v in verdicts]


@pytest.mark.xdist_group("gunasekar-classification")
def test_a_dense_direction_is_not_the_l1_max_margin_limit():
    # negative control: the depth-2 run's path replaced by the l2 SVM direction at the stored norms (w = u^2 - v^2
    # from u v = alpha^2): the gap to the l1 LP levels off, so both rates are 0 where the theorem's are <= -delta*
    from _table_instances import diagonal_factors
    from implicitbias.reference import max_margin_svm

    ctx = _classification(2)
    data = ctx.data[0]
    svm = max_margin_svm(data.X, data.y).w
    results = ctx.results.copy(deep=True)
    u, v = results["trajectory.theta.u"].values[0], results["trajectory.theta.v"].values[0]
    norms = np.linalg.norm(u**2 - v**2, axis=1)
    W = norms[:, None] * svm[None] / np.linalg.norm(svm)
    U, V = diagonal_factors(W, 0.1)
    results["trajectory.theta.u"].values[0], results["trajectory.theta.v"].values[0] = U, V
    results["theta.u"].values[0], results["theta.v"].values[0] = U[-1], V[-1]
    verdicts = GunasekarDiagonal().check(RunContext(ctx.runs, results, ctx.data))
    assert _predictions(verdicts) == ["fails", "fails"], [v.line() for v in verdicts]


def test_old_checks_passed_the_item_7_negative_controls():
    """Issue 24, item 7: the old GunasekarDiagonal checks, recomputed here, passed the negative controls of
    tests/_controls_diagonal.py that the new ones fail: the D = 2 bound gamma_1(w) / gamma_1* >= 1 - 1 / log(||w||_inf /
    alpha^2), the D = 2 direction's negative slope against log log(1/L), and the D = 3 slope over every late
    checkpoint (3 were enough)."""
    from _controls_diagonal import ALPHA_OLD, depth3_negative, old_form_path
    from implicitbias.metrics.extrapolation import unit_distance
    from implicitbias.reference import l1_max_margin
    from implicitbias.theorems.diagonal_common import stored_predictor
    from implicitbias.theorems.fitting import fitted_slope

    def late(ctx):
        L = ctx.results["loss"].values[0]
        return (L < np.log(2.0) / ctx.data[0].n) & (L > 0), L

    ctx = old_form_path()
    data = ctx.data[0]
    Z = data.y[:, None] * data.X
    w1 = l1_max_margin(data.X, data.y).w
    w = stored_predictor(ctx, 0)
    ratio = (Z @ w).min() / np.abs(w).sum() / ((Z @ w1).min() / np.abs(w1).sum())
    assert ratio >= 1.0 - 1.0 / np.log(np.abs(w).max() / ALPHA_OLD**2)
    keep, L = late(ctx)
    W = stored_predictor(ctx, 0, trajectory=True)
    dist = np.array([unit_distance(v, w1) for v in W])
    assert keep.sum() >= 3 and fitted_slope(np.log(np.log(1.0 / L[keep])), np.log(dist[keep]))[0] < 0
    ctx = depth3_negative()
    keep, L = late(ctx)
    kkt = ctx.results["kkt_stationarity"].values[0]
    assert keep.sum() >= 3 and fitted_slope(np.log(np.log(1.0 / L[keep])), np.log(kkt[keep]))[0] < 0


def test_separable_sparse_teacher():
    data = CLASSIFICATION.generate(0)
    w = data.info["w_star"]
    assert np.count_nonzero(w) == 2 and np.isclose(np.linalg.norm(w), 1.0)
    assert np.all(data.y * (data.X @ w) >= 0.5 - 1e-12)
    with pytest.raises(ConfigError, match="sparsity"):
        Separable(d=3, sparsity=4)
    # the dense teacher's draw is unchanged by the new field
    assert np.array_equal(Separable(d=5).generate(1).X, Separable(d=5, sparsity=None).generate(1).X)


# -- the experiments --------------------------------------------------------------------------------------
def test_experiments_are_catalogued_and_refuse_bad_alpha():
    from implicitbias.experiments import get

    for name in ("woodworth2020-kernel-rich", "gunasekar2018-diagonal"):
        exp = get(name)
        assert exp.runs(exp.resolve(quick=True))
    exp = get("woodworth2020-kernel-rich")
    with pytest.raises(ConfigError, match="init_scale"):
        exp.runs(exp.resolve(quick=True, overrides={"grid.init_scale": [0.0, 1.0]}))


def test_non_separable_data_is_refused_before_training():
    from implicitbias.experiments import get

    exp = get("gunasekar2018-diagonal")
    config = exp.resolve(quick=True, overrides={"data.name": "nearly_orthogonal", "data.n": 40, "data.d": 3})
    assert isinstance(config.data, NearlyOrthogonal)
    with pytest.raises(NonSeparableDataError, match="point"):
        exp.runs(config)


def test_transition_width():
    from implicitbias.papers.woodworth2020.claims import transition_width

    alpha = np.logspace(-3, 2, 51)
    sharp = 1 / (1 + (alpha / 0.1) ** -6)
    soft = 1 / (1 + (alpha / 0.1) ** -2)
    assert transition_width(alpha, sharp) < transition_width(alpha, soft)
    assert np.isnan(transition_width(alpha, np.ones_like(alpha)))


ALPHA_GRID = np.logspace(-3, 1, 17)  # 4 per decade, as the quick variant's


def _rate(measured, predicted, side, error=1e-9):
    from implicitbias.papers.woodworth2020.claims import regime_rate

    return regime_rate("rate", ALPHA_GRID, measured, predicted, np.full(ALPHA_GRID.size, error), side).outcome


def test_regime_rates_follow_the_closed_form_and_reject_what_the_old_sign_tests_passed():
    """Issue 24, item 8: the old claims were "slope of log distance against log alpha > 0 (rich) / < 0 (kernel)" on
    the smaller / larger half of the grid, the kernel one on 1 or 2 points. A distance to the min-l1 interpolator
    falling like alpha^0.2 where the closed form's falls like alpha^0.9, and one to the min-l2 interpolator falling
    like alpha^-0.5 where the closed form's falls like alpha^-4, passed them; both fail now."""
    rich, kernel = ALPHA_GRID < 0.1, ALPHA_GRID > 0.1
    closed_l1, closed_l2 = 0.5 * ALPHA_GRID**0.9, 1e-3 * ALPHA_GRID**-4.0
    assert _rate(closed_l1 * (1 + 1e-10), closed_l1, rich) == "holds"
    assert _rate(closed_l2 * (1 + 1e-10), closed_l2, kernel) == "holds"
    slow_l1, slow_l2 = 0.5 * ALPHA_GRID**0.2, 1e-3 * ALPHA_GRID**-0.5
    assert np.polyfit(np.log(ALPHA_GRID[rich]), np.log(slow_l1[rich]), 1)[0] > 0  # the old rich check passed
    assert np.polyfit(np.log(ALPHA_GRID[kernel][:2]), np.log(slow_l2[kernel][:2]), 1)[0] < 0  # the old kernel one
    assert _rate(slow_l1, closed_l1, rich) == "fails"
    assert _rate(slow_l2, closed_l2, kernel) == "fails"
    # fewer than 4 distances above 10 x the flow's error: no verdict
    assert _rate(closed_l2, closed_l2, kernel, error=closed_l2[kernel][3] / 10) == "not_evaluated"


def test_recovery_and_sharpness_claims_against_the_closed_form():
    """Issue 24, item 8: the old recovery claim compared the teacher error at the smallest and the largest alpha
    (0.6 < 0.91 passed); now the smallest alpha's must lie nearer the min-l1 interpolator's error than the min-l2
    one's. The old sharpness claim passed any W_3 < W_2; now the widths' uncertainties must not overlap."""
    from implicitbias.papers.woodworth2020.claims import recovery_claims, sharper_claim

    err = np.linspace(0.6, 0.912, 9)
    assert err[0] < err[-1]  # the old claim passed
    assert [v.outcome for v in recovery_claims(2, err, 0.0, 0.912)] == ["fails", "holds"]
    assert [v.outcome for v in recovery_claims(2, np.r_[0.01, err[1:]], 0.0, 0.912)] == ["holds", "holds"]
    assert [v.outcome for v in recovery_claims(2, np.r_[0.01, err[1:-1], 0.3], 0.0, 0.912)] == ["holds", "fails"]
    assert sharper_claim({2: (1.41, 0.16, ""), 3: (0.55, 0.03, "")}).outcome == "holds"
    assert sharper_claim({2: (1.41, 0.16, ""), 3: (1.3, 0.03, "")}).outcome == "not_evaluated"  # old: 1.3 < 1.41
    assert sharper_claim({2: (1.41, 0.16, ""), 3: (1.7, 0.03, "")}).outcome == "fails"


def test_crossover():
    from implicitbias.papers.woodworth2020.claims import crossover

    assert crossover(ALPHA_GRID, ALPHA_GRID, np.ones_like(ALPHA_GRID)) == pytest.approx(1.0)
    assert np.isnan(crossover(ALPHA_GRID, np.ones_like(ALPHA_GRID), 2 * np.ones_like(ALPHA_GRID)))


def test_displacement_parametrisation_is_the_same_flow():
    from implicitbias.training import train

    data = REGRESSION.generate(1)
    finals = []
    for trained in ("weights", "displacement"):
        ds = train(DiagonalLinear(depth=2, trained=trained), data, Loss(name="square"), GF,
                   stop=Stop(loss_tol=1e-16, max_time=1e4), init_scale=0.5, checkpoints=5, kkt=False)
        theta = {k[len("theta."):]: ds[k].values[0] for k in ds.data_vars if k.startswith("theta.")}
        const = {k[len("const."):]: ds[k].values[0] for k in ds.data_vars if k.startswith("const.")}
        finals.append(np.asarray(DiagonalLinear(depth=2, trained=trained).effective(theta, const)))
    assert np.linalg.norm(finals[0] - finals[1]) <= 1e-6 * np.linalg.norm(finals[0])
    with pytest.raises(ConfigError, match="displacement"):
        DiagonalLinear(form="product", trained="displacement")
