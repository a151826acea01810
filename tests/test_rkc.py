"""Tests for the Runge--Kutta--Chebyshev solver `implicitbias.training.rkc.RKC2`."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

from implicitbias._spec import ConfigError
from implicitbias.data import Dataset
from implicitbias.losses import Loss
from implicitbias.models import Linear
from implicitbias.training import GradientFlow, Stop, train
from implicitbias.training.rkc import _DAMPING, RKC2, GradientFlowTerm, _chebyshev_end, rkc_stage_count
from implicitbias.training.rkc_control import (
    CountingController,
    erk_num_evaluations,
    gradient_flow_controller,
    rkc_num_evaluations,
)

P = 40
T_LONG = 1000.0


@pytest.fixture(scope="module")
def stiff_linear():
    """dθ/dt = -Aθ, A symmetric PSD with eigenvalues 1e-3 ... 1e2."""
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((P, P)))
    eig = np.logspace(-3, 2, P)
    A = (Q * eig) @ Q.T
    A = 0.5 * (A + A.T)
    y0 = rng.standard_normal(P)
    Aj = jnp.asarray(A)
    term = diffrax.ODETerm(lambda t, y, args: -(Aj @ y))
    return dict(A=A, eig=eig, y0=y0, term=term)


def _solve(term, solver, controller, y0, t1, dt0=None, max_steps=10**6):
    return diffrax.diffeqsolve(
        term, solver, 0.0, t1, dt0, y0, stepsize_controller=controller, max_steps=max_steps,
        saveat=diffrax.SaveAt(t1=True, solver_state=True, controller_state=True),
    )


def test_stage_count_rule():
    assert int(rkc_stage_count(0.0)) == 2
    # s stages must be stable: h*rho <= beta(s) ~ 0.65 (s^2 - 1)
    for hr in [1.0, 10.0, 100.0, 1e4]:
        s = int(rkc_stage_count(hr))
        assert hr <= 0.65 * (s**2 - 1)
    assert int(rkc_stage_count(1e8, s_max=50)) == 50


def test_chebyshev_end_matches_the_recurrence():
    """The closed form of T_s'(w0), T_s''(w0) against the three-term recurrences, at the solver's w0."""
    for s in [2, 3, 5, 17, 100, 400, 1000]:
        w0 = 1.0 + _DAMPING / s**2
        t, t_prev, d, d_prev, e, e_prev = w0, 1.0, 1.0, 0.0, 0.0, 0.0  # T_1, T_0 and their derivatives
        for _ in range(2, s + 1):
            t, t_prev, d, d_prev, e, e_prev = (2 * w0 * t - t_prev, t, 2 * t + 2 * w0 * d - d_prev, d,
                                               4 * d + 2 * w0 * e - e_prev, e)
        d_s, e_s = _chebyshev_end(jnp.asarray(w0), s)
        np.testing.assert_allclose([float(d_s), float(e_s)], [d, e], rtol=1e-11)


def test_linear_matches_expm_and_beats_tsit5(stiff_linear):
    A, y0, term = stiff_linear["A"], stiff_linear["y0"], stiff_linear["term"]
    exact = sla.expm(-A * T_LONG) @ y0
    rtol, atol = 1e-6, 1e-9

    ctrl = CountingController(diffrax.PIDController(rtol=rtol, atol=atol))
    sol = jax.jit(lambda y: _solve(term, RKC2(report_evals=True), ctrl, y, T_LONG))(jnp.asarray(y0))
    err = np.linalg.norm(np.asarray(sol.ys[-1]) - exact) / np.linalg.norm(y0)
    assert err < 2e-6
    counts = rkc_num_evaluations(sol)
    n_rkc = int(counts["total"])
    assert int(counts["accepted"]) <= n_rkc

    sol_t = jax.jit(lambda y: _solve(term, diffrax.Tsit5(), diffrax.PIDController(rtol=rtol, atol=atol), y,
                                     T_LONG))(jnp.asarray(y0))
    err_t = np.linalg.norm(np.asarray(sol_t.ys[-1]) - exact) / np.linalg.norm(y0)
    assert err_t < 1e-6
    n_tsit5 = int(erk_num_evaluations(sol_t))
    # Tsit5 is stability-limited (dt ~ 3/100 over t = 1000); RKC2 is not.
    assert n_rkc * 5 < n_tsit5, (n_rkc, n_tsit5)


def test_fixed_step_order_two(stiff_linear):
    """Global error with constant steps scales like dt^2 on the wide-spectrum problem.

    (a) Data in the slow eigen-subspace, steps with h·λ_max = 40 ... 5 (4 to 9 stages, the regime where RKC
    is meant to be used): the smooth components converge at order 2. (b) Generic data in the asymptotic
    regime h·λ_max <= 1.25. (RKC is not L-stable: with fixed large steps a stiff initial transient is damped
    only by a factor ~0.95 per step, so generic data at large fixed steps is pre-asymptotic; with the
    adaptive controller this is handled by the error estimate.)
    """
    A, term, eig = stiff_linear["A"], stiff_linear["term"], stiff_linear["eig"]
    Q = np.linalg.eigh(A)[1]
    lam_max = float(eig.max())
    rng = np.random.default_rng(5)
    y_slow = Q[:, np.linalg.eigh(A)[0] <= 1.0] @ rng.standard_normal(int((eig <= 1.0).sum()))
    y_all = stiff_linear["y0"]

    @jax.jit
    def solve(y0, t1, dt):
        solver = RKC2(spectral_radius=lambda t, y, args: lam_max)
        return diffrax.diffeqsolve(term, solver, 0.0, t1, dt, y0, max_steps=1024,
                                   stepsize_controller=diffrax.ConstantStepSize()).ys[-1]

    for y0, t1, n_steps in [(y_slow, 10.0, [10, 20, 40, 80]), (y_all, 1.0, [80, 160, 320, 640])]:
        exact = sla.expm(-A * t1) @ y0
        dts = t1 / np.array(n_steps, dtype=float)
        errs = np.array([np.linalg.norm(np.asarray(solve(jnp.asarray(y0), t1, dt)) - exact) for dt in dts])
        slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
        assert 1.85 < slope < 2.15, (slope, errs)


def test_nonlinear_nonautonomous_order_two():
    """Order 2 on a nonlinear, non-autonomous problem (checks the stage times c_j), with the power method."""
    rng = np.random.default_rng(1)
    n = 8
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = jnp.asarray((Q * np.logspace(-1, 1.5, n)) @ Q.T)
    y0 = jnp.asarray(rng.standard_normal(n))
    term = diffrax.ODETerm(lambda t, y, args: -(A @ y) - y**3 + jnp.sin(3.0 * t))
    t1 = 2.0
    ref = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, t1, None, y0, max_steps=10**5,
                              stepsize_controller=diffrax.PIDController(rtol=1e-13, atol=1e-13)).ys[-1]

    @jax.jit
    def solve(dt):
        return diffrax.diffeqsolve(term, RKC2(refresh_every=1), 0.0, t1, dt, y0,
                                   stepsize_controller=diffrax.ConstantStepSize(), max_steps=4096).ys[-1]

    dts = np.array([0.1, 0.05, 0.025, 0.0125])
    errs = np.array([float(jnp.linalg.norm(solve(dt) - ref)) for dt in dts])
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    assert 1.8 < slope < 2.4, (slope, errs)


def test_vmap_matches_one_by_one(stiff_linear):
    term = stiff_linear["term"]
    rng = np.random.default_rng(2)
    batch = jnp.asarray(rng.standard_normal((3, P)) * np.array([[1.0], [1e-3], [10.0]]))

    def one(y):
        # the recommended controller, with the atol floor derived from (traced, per-member) y
        ctrl = gradient_flow_controller(rtol=1e-5, theta0=y, atol_init_rel=1e-3, atol_rel=1e-4)
        sol = _solve(term, RKC2(report_evals=True), ctrl, y, 100.0)
        return sol.ys[-1], rkc_num_evaluations(sol)["total"], sol.stats["num_steps"]

    f = jax.jit(one)
    ys_v, n_v, steps_v = jax.jit(jax.vmap(one))(batch)
    for i in range(batch.shape[0]):
        y_i, n_i, steps_i = f(batch[i])
        np.testing.assert_allclose(np.asarray(ys_v[i]), np.asarray(y_i), rtol=1e-10, atol=1e-14)
        assert int(n_v[i]) == int(n_i)
        assert int(steps_v[i]) == int(steps_i)


def test_counts_are_exact():
    """Count real vector-field calls with a host callback and compare with the reported counts."""
    calls = {"n": 0}

    def bump():
        calls["n"] += 1

    rng = np.random.default_rng(3)
    n = 6
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = jnp.asarray((Q * np.logspace(-2, 2, n)) @ Q.T)

    def vf(t, y, args):
        jax.debug.callback(bump)
        return -(A @ y) - 0.1 * y**3

    term = diffrax.ODETerm(vf)
    y0 = jnp.asarray(rng.standard_normal(n))

    def run(solver, ctrl, t1):
        calls["n"] = 0
        sol = _solve(term, solver, ctrl, y0, t1)
        jax.block_until_ready(sol.ys)
        jax.effects_barrier()
        return sol

    ctrl = CountingController(diffrax.PIDController(rtol=1e-5, atol=1e-8))
    sol = run(RKC2(report_evals=True), ctrl, 50.0)
    counts = rkc_num_evaluations(sol)
    assert int(sol.stats["num_rejected_steps"]) > 0  # the rejected steps are part of what we check
    assert int(counts["total"]) == calls["n"]
    assert int(counts["accepted"]) < calls["n"]

    # without the counting controller: exact accepted-step count, and an estimate
    sol = run(RKC2(), diffrax.PIDController(rtol=1e-5, atol=1e-8), 50.0)
    counts = rkc_num_evaluations(sol)
    assert counts["total"] is None
    assert int(counts["accepted"]) < calls["n"]
    assert abs(float(counts["estimate"]) - calls["n"]) <= 0.2 * calls["n"]

    # Tsit5: 6 per attempted step + F(y0) once per attempt of the first step
    sol = run(diffrax.Tsit5(), diffrax.PIDController(rtol=1e-5, atol=1e-8), 5.0)
    assert int(sol.stats["num_rejected_steps"]) > 0
    assert 0 <= calls["n"] - int(erk_num_evaluations(sol)) <= 2


def test_power_part_keeps_the_power_method_off_a_large_passive_component():
    """A passive component q (the field does not depend on it) that is huge, like the loss clock's physical time:
    over the whole state the probe step δ = sqrt(eps)·‖y‖ follows q, the probe of the nonlinear x-field lands far
    outside its linear range, ρ comes out orders of magnitude off and the solve does not end within the step
    budget (the negative control).  With `power_part` zeroing q, ρ is right and the solve ends."""
    A = jnp.diag(jnp.asarray([100.0, 1.0, 0.1]))
    term = diffrax.ODETerm(lambda t, y, args: {"x": -jnp.tanh(A @ y["x"]), "q": jnp.sum(y["x"] ** 2)})
    y0 = {"x": jnp.asarray([1.0, -0.5, 0.3]), "q": jnp.asarray(1e30)}
    active = lambda y: {"x": y["x"], "q": jnp.zeros_like(y["q"])}

    def solve(part):
        sol = diffrax.diffeqsolve(term, RKC2(power_part=part), 0.0, 20.0, 0.01, y0, max_steps=4000, throw=False,
                                  stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-7),
                                  saveat=diffrax.SaveAt(t1=True, solver_state=True))
        return sol.result, float(sol.solver_state["rho"])

    result, rho = solve(active)
    assert result == diffrax.RESULTS.successful
    assert 0.5 < rho < 1.2 * 100.0  # within the spectrum of the Jacobian of -tanh(Ax) along the path, up to 100
    result, rho = solve(None)
    assert result == diffrax.RESULTS.max_steps_reached
    assert not 1e-2 < rho < 1e4


def test_stop_below_ends_where_an_event_would():
    """RKC2(stop_below=tol) on a GradientFlowTerm stops at the same step as a boolean Event(L < tol), with
    the same counts, and makes no evaluation beyond the counted ones (host counter), also under vmap."""
    calls = {"n": 0}

    def bump():
        calls["n"] += 1

    rng = np.random.default_rng(4)
    n = 6
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = jnp.asarray((Q * np.logspace(-2, 1, n)) @ Q.T)
    loss = lambda y: 0.5 * y @ (A @ y) + 0.05 * jnp.sum(y**4)
    tol = 1e-3

    def value_and_field(t, y, args):
        jax.debug.callback(bump)
        value, g = jax.value_and_grad(loss)(y)
        return value, -g

    def solve(y0, stop_below):
        ctrl = CountingController(diffrax.PIDController(rtol=1e-6, atol=1e-9))
        if stop_below:
            term, solver, event = GradientFlowTerm(value_and_field), RKC2(report_evals=True, stop_below=tol), None
        else:
            term = diffrax.ODETerm(lambda t, y, args: value_and_field(t, y, args)[1])
            solver, event = RKC2(report_evals=True), diffrax.Event(lambda t, y, args, **kw: loss(y) < tol)
        sol = diffrax.diffeqsolve(term, solver, 0.0, 1e4, 0.01, y0, stepsize_controller=ctrl, event=event,
                                  max_steps=10**5, saveat=diffrax.SaveAt(t1=True, solver_state=True,
                                                                         controller_state=True))
        return sol.ts[-1], sol.ys[-1], rkc_num_evaluations(sol)["total"], sol.stats["num_steps"], sol.result

    y0s = jnp.asarray(rng.standard_normal((3, n)) * np.array([[1.0], [0.3], [3.0]]))
    with_stop, with_event = jax.jit(lambda y: solve(y, True)), jax.jit(lambda y: solve(y, False))
    t_v, y_v, n_v, _, _ = jax.jit(jax.vmap(lambda y: solve(y, True)))(y0s)
    for i, y0 in enumerate(y0s):
        calls["n"] = 0
        t_s, y_s, n_s, steps_s, result_s = jax.block_until_ready(with_stop(y0))
        jax.effects_barrier()
        assert int(n_s) == calls["n"]
        t_e, y_e, n_e, steps_e, result_e = with_event(y0)
        assert result_s == diffrax.RESULTS.event_occurred and result_e == diffrax.RESULTS.event_occurred
        assert float(t_s) == float(t_e) < 1e4 and int(n_s) == int(n_e) and int(steps_s) == int(steps_e)
        np.testing.assert_allclose(np.asarray(y_s), np.asarray(y_e), rtol=1e-14, atol=0)
        assert float(loss(y_s)) < tol
        # batched: the same steps, up to rounding
        assert int(n_v[i]) == int(n_s)
        np.testing.assert_allclose(float(t_v[i]), float(t_s), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(y_v[i]), np.asarray(y_s), rtol=1e-10, atol=1e-14)

    with pytest.raises(ValueError, match="report_evals"):
        RKC2(stop_below=tol)
    with pytest.raises(TypeError, match="GradientFlowTerm"):
        jax.eval_shape(lambda y: _solve(diffrax.ODETerm(lambda t, y, args: -y), RKC2(report_evals=True, stop_below=tol),
                                        CountingController(diffrax.PIDController(rtol=1e-6, atol=1e-9)), y, 1.0), y0s[0])


# -- the implicit solver of gradient flow (GradientFlow(solver="kvaerno5")) ---------------------------------
def _least_squares(eig, seed=0):
    """Square data X (n = d) with X^T X / n = Q diag(eig) Q^T, and w* = X^{-1} y."""
    rng = np.random.default_rng(seed)
    d = len(eig)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = np.sqrt(d) * (Q * np.sqrt(eig)) @ Q.T
    return Dataset(X=X, y=rng.standard_normal(d), task="regression")


def _gf_closed_form(data, w0, t):
    """Gradient flow on |Xw - y|^2 / (2n): w(t) = w* + expm(-A t)(w0 - w*), A = X^T X / n."""
    A = data.X.T @ data.X / data.X.shape[0]
    w_star = np.linalg.solve(A, data.X.T @ data.y / data.X.shape[0])
    return w_star + sla.expm(-A * t) @ (w0 - w_star)


def _train_gf(data, solver, rtol, w0, t1):
    method = GradientFlow(solver=solver, rtol=rtol, atol=rtol * 1e-2, atol_rel=None, max_solver_steps=10**6)
    return train(Linear(), data, Loss(name="square"), method, stop=Stop(max_time=t1), theta0={"w": w0},
                 checkpoints=[t1], kkt=False)


def test_kvaerno5_gradient_flow_matches_matrix_exponential():
    data = _least_squares(np.logspace(-1, 1, 6))
    w0 = np.random.default_rng(2).normal(size=6)
    ds = _train_gf(data, "kvaerno5", 1e-9, w0, 10.0)
    np.testing.assert_allclose(ds["theta.w"].values[0], _gf_closed_form(data, w0, 10.0), rtol=0, atol=1e-8)
    steps = int(ds.step.values[0, -1])
    # grad_evals is a lower bound: one Newton iteration (a gradient and p = 6 Hessian columns) per implicit stage
    assert int(ds.grad_evals.values[0, -1]) == 6 * (6 + 1) * steps + 1


def test_kvaerno5_takes_far_fewer_steps_than_tsit5_on_a_stiff_flow():
    """Eigenvalues of the Hessian spread over 1e6 (1e-2 ... 1e4): Tsit5 is held to dt ~ 3e-4 by stability over
    t = 10, the L-stable Kvaerno5 steps at the pace of the solution."""
    data = _least_squares(np.logspace(-2, 4, 5), seed=1)
    w0 = np.random.default_rng(3).normal(size=5)
    exact = _gf_closed_form(data, w0, 10.0)
    steps = {}
    for solver in ("kvaerno5", "tsit5"):
        ds = _train_gf(data, solver, 1e-8, w0, 10.0)
        np.testing.assert_allclose(ds["theta.w"].values[0], exact, rtol=0, atol=1e-6)
        steps[solver] = int(ds.step.values[0, -1])
    assert 100 * steps["kvaerno5"] < steps["tsit5"], steps


def test_kvaerno5_is_refused_for_a_large_model_before_training():
    rng = np.random.default_rng(0)
    data = Dataset(X=rng.standard_normal((4, 1100)), y=rng.standard_normal(4), task="regression")
    with pytest.raises(ConfigError, match="method.solver = 'kvaerno5'.*1100 parameters"):
        _train_gf(data, "kvaerno5", 1e-6, np.zeros(1100), 1.0)
