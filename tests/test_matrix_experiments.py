"""Matrix factorisation (S8): the balanced init, the data options, bad input refused before training, and the
theorems of Razin & Cohen 2020, Gunasekar et al. 2017 and Li et al. 2021 on real runs (positive cases) and on
runs that violate them (negative controls, which must fail)."""

import jax
import numpy as np
import pytest

import _table_instances as ti
from implicitbias._spec import ConfigError
from implicitbias.cli import main
from implicitbias.data import MatrixCompletion, MatrixSensing, RazinCohen
from implicitbias.experiments import get
from implicitbias.losses import Loss
from implicitbias.metrics.factorization import commutator_gap, crossing_times, end_to_end
from implicitbias.models import MatrixFactorization
from implicitbias.papers.arora2019.experiments import AroraClaims
from implicitbias.papers.gunasekar2017.theorems import GunasekarCommuting, GunasekarConjecture
from implicitbias.papers.li2021.theorems import LiIncremental
from implicitbias.papers.razin2020.experiments import LOSS_TOL, RAZIN
from implicitbias.papers.razin2020.theorems import RazinCohen2020
from implicitbias.runs import RunSpec
from implicitbias.theorems.base import CellsContext, RunContext
from implicitbias.theorems.matrix_common import min_nuclear_norm, min_nuclear_norm_psd
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop
from implicitbias.training.train import train

SQUARE = Loss(name="square")


def _outcomes(verdicts, kind="prediction"):
    return [v.outcome for v in verdicts if v.kind == kind]


def _context(model, data_spec, method, stop, seeds, scales, checkpoints, data_seeds=None):
    """Real gradient-flow runs (one per (seed, scale)) as a RunContext."""
    data_seeds = data_seeds or [0] * len(seeds)
    data = [data_spec.generate(s) for s in data_seeds]
    ds = train(model, data if len(set(data_seeds)) > 1 else data[0], SQUARE, method, stop=stop,
               batch={"seed": list(seeds), "init_scale": list(scales)}, checkpoints=checkpoints, keep_trajectory=True,
               kkt=False, compact=False)
    runs = [RunSpec(model=model, data=data_spec, data_seed=ds_, loss=SQUARE, method=method, stop=stop, seed=s,
                    init_scale=a, checkpoints=checkpoints, kkt=False, keep_trajectory=True, trial=t)
            for t, (s, a, ds_) in enumerate(zip(seeds, scales, data_seeds))]
    return RunContext(runs=runs, results=ds, data=data)


# -- model and data ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_balanced_init_is_balanced_with_positive_determinant(depth):
    m = MatrixFactorization(dim=3, depth=depth, init_scheme="balanced", positive_det=True)
    for seed in range(4):
        theta, _ = m.init(jax.random.PRNGKey(seed), 9, 0.7)
        Ws = [np.asarray(theta[f"W{j}"]) for j in range(1, depth + 1)]
        for lo, hi in zip(Ws[:-1], Ws[1:]):
            np.testing.assert_allclose(hi.T @ hi, lo @ lo.T, atol=1e-12)
        assert np.linalg.det(np.asarray(m.product(theta))) > 0


def test_identity_init_with_noise_is_unbalanced_and_without_is_alpha_identity():
    m = MatrixFactorization(dim=2, depth=3)
    theta, _ = m.init(jax.random.PRNGKey(0), 4, 0.3)
    np.testing.assert_array_equal(theta["W2"], 0.3 * np.eye(2))
    noisy, _ = m.replace(init_noise=0.1).init(jax.random.PRNGKey(0), 4, 0.3)
    W1, W2 = np.asarray(noisy["W1"]), np.asarray(noisy["W2"])
    assert np.linalg.norm(W2.T @ W2 - W1 @ W1.T) > 1e-4


def test_commuting_measurements_and_prescribed_singular_values():
    ds = MatrixSensing(d=6, rank=2, n=5, psd=True, measurements="commuting").generate(0)
    assert commutator_gap(ds) < 1e-12
    W = ds.info["W_star"]
    assert np.linalg.matrix_rank(W, tol=1e-10) == 2 and np.linalg.eigvalsh(W).min() > -1e-12
    np.testing.assert_allclose(ds.y, ds.X @ W.reshape(-1))
    assert commutator_gap(MatrixSensing(d=6, rank=2, n=5).generate(0)) > 0.1
    sv = MatrixSensing(d=6, rank=3, n=5, singular_values=(3.0, 2.0, 1.0)).generate(1)
    np.testing.assert_allclose(np.linalg.svd(sv.info["W_star"], compute_uv=False)[:4], [3, 2, 1, 0], atol=1e-12)


@pytest.mark.parametrize("fields, field", [
    ({"d": 3, "observed": [[0, 1], [3, 0]]}, "observed[1]"),
    ({"d": 3, "observed": []}, "observed"),
    ({"d": 3, "observed": [[0, 1], [0, 1]]}, "observed"),
    ({"d": 3, "rank": 4}, "rank"),
    ({"d": 3, "rank": 2, "singular_values": [1.0]}, "singular_values"),
])
def test_bad_completion_data_is_refused_naming_the_field(fields, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        MatrixCompletion(**fields)


def test_explicit_observed_entries():
    mc = MatrixCompletion(d=3, rank=1, observed=[[0, 1], [2, 2]], n_test=2).generate(0)
    assert mc.n == 2 and mc.info["observed"].tolist() == [[0, 1], [2, 2]]
    np.testing.assert_allclose(mc.y, mc.info["W_star"][[0, 2], [1, 2]])


@pytest.mark.parametrize("setting, field", [
    ({"init_scale": 0.0}, "init_scale"),
    ({"init_scale": -1.0}, "init_scale"),
    ({"model.depth": 0}, "model.depth"),
    ({"model.dim": 3}, "model.dim"),
])
def test_bad_factorisation_runs_are_refused_before_training(setting, field):
    exp = get("razin2020-counterexample")
    with pytest.raises(ConfigError, match=field):
        exp.runs(exp.resolve(quick=True, overrides=setting))


def test_bad_input_from_the_command_line_exits_2_naming_the_field(tmp_path, capsys):
    code = main(["run", "razin2020-counterexample", "--quick", "--out", str(tmp_path / "o"), "--set",
                 "grid.init_scale=[0.5, 0.0]"])
    assert code == 2 and "init_scale" in capsys.readouterr().err
    assert not (tmp_path / "o" / "results.nc").exists()


# -- Razin & Cohen 2020 ------------------------------------------------------------------------------------
RAZIN_GF = GradientFlow(rtol=1e-8)
RAZIN_STOP = Stop(loss_tol=1e-5, max_time=1e8)


def test_razin_cohen_balanced_run_holds_and_a_determinant_crossing_fails():
    model = MatrixFactorization(dim=2, depth=2)  # alpha I: balanced, det W(0) > 0
    run = _context(model, RazinCohen(), RAZIN_GF, RAZIN_STOP, [0], [0.5], 50)
    out = RazinCohen2020().check(run)
    assert set(_outcomes(out, "assumption")) == {"holds"}, [v.line() for v in out]
    assert set(_outcomes(out)) == {"holds"}, [v.line() for v in out]
    # negative control: a balanced start (W_1 = W_2 = I) whose path ends at the finite completion [[2, 1], [1, 0]]
    # (det -1, loss 0): the determinant, the norm bounds and the growth all fail
    ds = run.results
    k = ds.sizes["checkpoint"]
    eps = np.geomspace(1.0, 1e-6, k)[:, None, None]  # the loss falls over decades, the norm stays bounded
    W2 = eps * np.eye(2) + (1 - eps) * np.array([[2.0, 1.0], [1.0, 0.0]])
    W1 = np.broadcast_to(np.eye(2), (k, 2, 2))
    target = np.array([[2.0, 1.0], [1.0, 0.0]])
    loss = np.array([((w[0, 1] - 1) ** 2 + (w[1, 0] - 1) ** 2 + w[1, 1] ** 2) / 6 for w in W2])
    fake = ds.assign({
        "trajectory.theta.W1": (ds["trajectory.theta.W1"].dims, W1[None].copy()),
        "trajectory.theta.W2": (ds["trajectory.theta.W2"].dims, W2[None].copy()),
        "theta.W1": (ds["theta.W1"].dims, np.eye(2)[None]), "theta.W2": (ds["theta.W2"].dims, target[None]),
        "loss": (ds["loss"].dims, loss[None]),
    })
    out = RazinCohen2020().check(RunContext(run.runs, fake, run.data))
    assert set(_outcomes(out, "assumption")) == {"holds"}, [v.line() for v in out]
    fails = [v.statement for v in out if v.outcome == "fails"]
    assert any("det W(t) > 0" in f for f in fails) and any("Frobenius norm >=" in f for f in fails)
    assert any("grows as the loss falls" in f for f in fails), fails


@pytest.mark.parametrize("model, unresolved", [
    (MatrixFactorization(dim=2, depth=2, symmetric=True), True),  # W = U U^T: det W ~ 1e-24 from L ~ 1e-3 on
    (MatrixFactorization(dim=2, depth=3), False),  # det W ~ L^2, resolved from the factors down to 1e-8
])
def test_razin_cohen_holds_down_to_loss_1e8_with_the_implicit_solver(model, unresolved):
    assert LOSS_TOL <= 1e-8
    method = RAZIN.config.method
    assert method.solver == "kvaerno5"
    run = _context(model, RazinCohen(), method, Stop(loss_tol=LOSS_TOL, max_time=1e14), [0], [0.5], 30)
    assert run.results.loss.values[0, -1] <= LOSS_TOL
    out = RazinCohen2020().check(run)
    assert set(_outcomes(out, "assumption")) == {"holds"}, [v.line() for v in out]
    judged = [v.outcome for v in out if v.kind == "prediction" and not (model.symmetric and v.outcome == "not_evaluated"
                                                                         and "PSD by construction" in v.note)]
    assert set(judged) == {"holds"} and len(judged) == (4 if model.symmetric else 10), [v.line() for v in out]
    det = [v for v in out if v.statement.startswith("det W(t) > 0")][0]
    assert ("run 0, seed 0: 0 of" not in det.note) == unresolved, det.note


def test_razin_cohen_unbalanced_init_is_outside_scope():
    model = MatrixFactorization(dim=2, depth=3, init_noise=0.1)
    run = _context(model, RazinCohen(), GradientFlow(rtol=1e-8), Stop(loss_tol=1e-9, max_time=1e4), [0], [0.3], 30)
    out = RazinCohen2020().check(run)
    balanced = [v for v in out if v.statement.startswith("balanced init")][0]
    assert balanced.outcome == "fails"
    assert set(_outcomes(out)) <= {"outside_scope", "not_evaluated"}, [v.line() for v in out]


# -- Gunasekar et al. 2017 ---------------------------------------------------------------------------------
COMMUTING = MatrixSensing(d=6, rank=4, n=3, psd=True, measurements="commuting")


def _gunasekar_context(spec, alphas):
    model = MatrixFactorization(dim=spec.d, depth=2, symmetric=True)
    run = _context(model, spec, GradientFlow(rtol=1e-8), Stop(loss_tol=1e-16, max_time=1e5), [0] * len(alphas),
                   alphas, 12)
    return RunContext([r.replace(trial=0) for r in run.runs], run.results, run.data)  # one trial over the alphas


def test_gunasekar_commuting_holds_and_a_flat_ratio_fails():
    run = _gunasekar_context(COMMUTING, [1e-1, 1e-2, 1e-3, 1e-6])  # four alphas: the limit fit needs one dof
    out = GunasekarCommuting().check(run)
    assert set(_outcomes(out, "assumption")) == {"holds"}, [v.line() for v in out]
    assert set(_outcomes(out)) == {"holds"}, [v.line() for v in out]
    # negative control: a nuclear norm 2% above the minimum at every alpha (no approach to 1)
    ref = min_nuclear_norm_psd(run.data[0]).nuclear_norm
    ds = run.results
    flat = ds.assign({"W.nuclear": (ds["W.nuclear"].dims, np.full(ds["W.nuclear"].shape, 1.02 * ref))})
    out = GunasekarCommuting().check(RunContext(run.runs, flat, run.data))
    assert _outcomes(out) == ["fails", "fails"], [v.line() for v in out]


def test_gunasekar_commuting_is_outside_scope_for_gaussian_measurements():
    run = _gunasekar_context(MatrixSensing(d=4, rank=1, n=12, psd=True), [1e-1, 1e-2, 1e-3, 1e-4])
    out = GunasekarCommuting().check(run)
    assert [v for v in out if "commute" in v.statement][0].outcome == "fails"
    assert set(_outcomes(out)) <= {"outside_scope", "not_evaluated"}
    conj = GunasekarConjecture().check(run)
    assert set(_outcomes(conj, "assumption")) == {"holds"}, [v.line() for v in conj]


def test_symmetric_factorisation_is_depth_2_only():
    with pytest.raises(ConfigError, match="symmetric"):
        MatrixFactorization(dim=3, depth=3, symmetric=True)
    m = MatrixFactorization(dim=3, depth=2, symmetric=True)
    theta, _ = m.init(jax.random.PRNGKey(0), 9, 0.1)
    assert list(theta) == ["W1"]
    np.testing.assert_allclose(m.product(theta), 0.01 * np.eye(3))


def test_the_end_to_end_path_is_the_product_of_the_stored_factors():
    model = MatrixFactorization(dim=2, depth=3, init_scheme="balanced")
    run = _context(model, RazinCohen(), RAZIN_GF, RAZIN_STOP, [0], [0.5], 10)
    W = end_to_end(run.results, 3)
    final = end_to_end(run.results, 3, trajectory=False)
    np.testing.assert_allclose(W[:, -1], final, atol=1e-12)


# -- Li, Luo & Lyu 2021 ------------------------------------------------------------------------------------
def test_li_incremental_holds_and_simultaneous_learning_fails():
    spec = MatrixSensing(d=6, rank=2, n=30, singular_values=(3.0, 1.0))
    model = MatrixFactorization(dim=6, depth=2)
    times = [0.0] + list(np.linspace(0.25, 40.0, 160)) + list(np.geomspace(40.0, 1e3, 11)[1:])
    alphas = [1e-4, 1e-5, 1e-6, 1e-7]
    run = _context(model, spec, GradientFlow(rtol=1e-8), Stop(loss_tol=1e-6, max_time=1e3), [0] * 4, alphas, times)
    run = RunContext([r.replace(trial=0) for r in run.runs], run.results, run.data)
    out = LiIncremental().check(run)
    assert set(_outcomes(out, "assumption")) == {"holds"}, [v.line() for v in out]
    held = [v.outcome for v in out if v.kind == "prediction" and "the path converges" not in v.statement]
    assert held == ["holds"] * 3, [v.line() for v in out]
    # negative control: every run follows W(t) = min(t / 5, 1) W(final) - all singular values learned together, at a
    # time that does not depend on alpha - while the stored final state is unchanged
    ds = run.results
    t = ds["time"].values
    ramp = np.minimum(t / 5.0, 1.0)[:, :, None, None]
    W1, W2 = ds["theta.W1"].values, ds["theta.W2"].values
    fake = ds.assign({"trajectory.theta.W1": (ds["trajectory.theta.W1"].dims, ramp * W1[:, None]),
                      "trajectory.theta.W2": (ds["trajectory.theta.W2"].dims, np.broadcast_to(W2[:, None], ramp.shape[:2]
                                                                                               + W2.shape[1:]).copy())})
    out = LiIncremental().check(RunContext(run.runs, fake, run.data))
    fails = [v.statement for v in out if v.outcome == "fails"]
    assert any("one at a time" in f for f in fails) and any("each later plateau" in f for f in fails), fails
    # crossing times on a hand-made curve: sigma reaches half its final value at t = 2
    s = np.array([[[0.0], [0.25], [0.75], [1.0]]])
    np.testing.assert_allclose(crossing_times(np.array([[0.0, 1.0, 3.0, 4.0]]), s), [[2.0]])


# -- Arora et al. 2019 --------------------------------------------------------------------------------------
def test_entries_encoding_matches_the_dense_one():
    dense = MatrixCompletion(d=4, rank=1, n=6).generate(2)
    pairs = MatrixCompletion(d=4, rank=1, n=6, encoding="entries").generate(2)
    assert pairs.X.shape == (6, 2)
    np.testing.assert_array_equal(pairs.y, dense.y)
    theta, _ = MatrixFactorization(dim=4, depth=3, init_scheme="balanced").init(jax.random.PRNGKey(0), 16, 0.5)
    f_dense = MatrixFactorization(dim=4, depth=3).predict(theta, {}, dense.X)
    f_pairs = MatrixFactorization(dim=4, depth=3, inputs="entries").predict(theta, {}, pairs.X)
    np.testing.assert_allclose(f_pairs, f_dense, atol=1e-14)
    np.testing.assert_allclose(min_nuclear_norm(pairs).nuclear_norm, min_nuclear_norm(dense).nuclear_norm, rtol=1e-6)


def test_arora_claims_are_read_at_an_identifiable_n():
    """Issue 24, item 4: the claims are read at the smallest n above r (2 d - r) (20 x 20, rank 2: 76), not at the
    smallest n. Negative control: depth 3 best at n = 60 (not identifiable: what the old reading, at the smallest n,
    passed) but worse than the nuclear norm and depth 2 at n = 120."""
    def claims_at(rows, d, rank):  # the claims on a table of rows at the smallest init (what they read from a run)
        ctx = CellsContext(results=None)
        ctx.once("arora.rows", lambda: (rows, d, rank))
        return AroraClaims().check(ctx)

    def rows(errors):
        return [{"method": m, "n": n, "error": e} for n, table in errors.items() for m, e in table.items()]

    below = {"nuclear norm": 0.8, "depth 2": 0.8, "depth 3": 0.3}
    good = {60: below, 120: {"nuclear norm": 0.5, "depth 2": 0.6, "depth 3": 0.02}}
    out = claims_at(rows(good), 20, 2)
    assert [v.outcome for v in out] == ["holds", "holds"] and all("n = 120" in v.statement for v in out)
    bad = {60: below, 120: {"nuclear norm": 0.01, "depth 2": 0.02, "depth 3": 0.3}}  # depth does not help
    assert [v.outcome for v in claims_at(rows(bad), 20, 2)] == ["fails", "fails"]
    assert {v.outcome for v in claims_at(rows({60: below}), 20, 2)} == {"not_evaluated"}


def test_razin_symmetric_depth_2_bounds_are_not_predictions():
    """Issue 24, item 1: for W = U U^T, det W = det(U)^2 >= 0 and the norm and rank bounds follow from the loss alone;
    they were reported "holds" (det(U)^2 > 0 cannot fail) and are now not_evaluated with that reason, on the
    table's Razin instance read as the symmetric model (W_1 = W_2 = S = S^T: the same path as U U^T with U = S)."""
    ctx = ti.razin_cohen()
    model = MatrixFactorization(dim=2, depth=2, symmetric=True)
    S = ctx.results["trajectory.theta.W1"]
    res = ctx.results.drop_vars(["trajectory.theta.W2", "theta.W2"])
    sym = RunContext([r.replace(model=model) for r in ctx.runs], res.assign({"trajectory.theta.W1": S}), ctx.data)
    out = RazinCohen2020().check(sym)
    assert set(_outcomes(out, "assumption")) == {"holds"}, [v.line() for v in out]
    structural = [v for v in out if v.kind == "prediction" and "slope" not in v.statement]
    assert len(structural) == 6 and {v.outcome for v in structural} == {"not_evaluated"}, [v.line() for v in out]
    assert all("PSD by construction" in v.note for v in structural)
    assert {v.outcome for v in out if "grows as the loss falls" in v.statement} == {"holds"}
