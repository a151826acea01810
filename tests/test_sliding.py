"""`GradientFlow(kinks="slide")`: gradient flow of a two-layer ReLU network that slides along its kinks (the
Filippov flow), against closed forms, autodiff and numpy, with the plain flow as the negative control."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from implicitbias._spec import ConfigError
from implicitbias.data import Dataset
from implicitbias.losses import Loss
from implicitbias.models import TwoLayer
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.runs.spec import RunSpec
from implicitbias.training.methods import GradientFlow
from implicitbias.training.problem import Problem
from implicitbias.training.sliding import _Kinks, compact, held_count, spd_solve
from implicitbias.training.stopping import Status, Stop
from implicitbias.training.train import train

# One neuron w in R^2 with a fixed outer weight 1 and the square loss on two points.  x_1 = e_2 (target -1) pulls
# w_2 down while <w, x_1> > 0; x_2 = (1, 1/2) (target 2) pushes w_2 up.  From w(0) = (1/2, 1/2) both are active until
# w_2 reaches 0 at t*; there the field points down from above (x_1 on) and up from below (x_1 off), so the Filippov
# solution slides on the kink w_2 = 0 with dw_1/dt = (2 - w_1) / 2 (n = 2), a closed form from (t*, w_1(t*)).
X_KINK = np.array([[0.0, 1.0], [1.0, 0.5]])
Y_KINK = np.array([-1.0, 2.0])
W0_KINK = np.array([0.5, 0.5])
T_KINK = 20.0
NEURON = TwoLayer(width=1, activation="relu", train_outer=False, outer_scale=1.0, outer_signs="balanced")


def _kink_reference(T: float) -> np.ndarray:
    def field(t, w):
        z = X_KINK @ w
        return -((np.where(z > 0, z - Y_KINK, 0.0) / 2) @ X_KINK)

    def hit(t, w):
        return w[1]

    hit.terminal, hit.direction = True, -1
    sol = scipy.integrate.solve_ivp(field, (0, T), W0_KINK, rtol=1e-12, atol=1e-14, events=hit)
    t_star, w_star = sol.t_events[0][0], sol.y_events[0][0]
    return np.array([2 - (2 - w_star[0]) * np.exp(-(T - t_star) / 2), 0.0])


def _kink_run(kinks: str, rtol: float, max_solver_steps: int = 1_000_000):
    method = GradientFlow(rtol=rtol, atol=1e-12, atol_rel=None, kinks=kinks, kink_slots=2, kink_candidates=4,
                          max_solver_steps=max_solver_steps)
    return train(NEURON, Dataset(X=X_KINK, y=Y_KINK, task="regression"), Loss(name="square"), method,
                 stop=Stop(loss_tol=0.0, max_time=T_KINK), checkpoints=4, theta0={"W": jnp.asarray([W0_KINK])})


def test_slides_on_the_kink_to_the_closed_form_and_converges_with_rtol():
    ref = _kink_reference(T_KINK)
    errors = []
    for rtol in (1e-6, 1e-8):
        ds = _kink_run("slide", rtol)
        w = ds["theta.W"].values[0, 0]
        assert ds["time"].values[0, -1] == T_KINK and ds["status"].values[0] == Status.BUDGET
        # held on the kink: on its inactive side by the rounding margin (4 d eps |w| |x_1| = 1.8e-15 |w|), as ReLU(0) = 0
        assert -1e-14 * np.linalg.norm(w) < w[1] <= 0.0
        errors.append(abs(w[0] - ref[0]))
    # the crossing step has a first-order error: measured 5.2e-6 and 2.4e-7 at rtol 1e-6 and 1e-8 (error ~ rtol^0.66)
    assert errors[1] < errors[0] / 10 and errors[1] < 1e-6, errors


def test_the_plain_flow_chatters_at_the_same_kink():
    # negative control: the field as it is (kinks = "cross") jumps across w_2 = 0 at every step and does not get
    # past t* within the same budget of steps
    ds = _kink_run("cross", 1e-8, max_solver_steps=5_000)
    assert ds["status"].values[0] == Status.SOLVER_FAILED
    assert ds["time"].values[0, -1] < 1.4 < T_KINK


@pytest.mark.parametrize("train_outer", [True, False])
@pytest.mark.parametrize("loss", ["square", "logistic"])
def test_without_kink_pairs_the_field_is_minus_the_gradient(train_outer, loss):
    model = TwoLayer(width=7, activation="relu", train_outer=train_outer, init_scheme="gaussian")
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.standard_normal((9, 4)))
    y = jnp.asarray(np.sign(rng.standard_normal(9)) if loss == "logistic" else rng.standard_normal(9))
    problem = Problem(model, Loss(name=loss))
    hp = {"seed": 3, "init_scale": 1.0}
    theta, const = problem.init(hp, 4)
    kinks = _Kinks(problem, hp, const, X, y, K=3, P=8)
    args = kinks.prepare(-jnp.ones((7, 3), jnp.int64))
    value, field = kinks.value_and_field(0.0, theta, args)
    L, grad = jax.value_and_grad(lambda th: problem.risk(hp, th, const, X, y))(theta)
    assert float(value["L"]) == pytest.approx(float(L), rel=1e-14)
    assert set(field) == set(grad)
    for name in grad:
        np.testing.assert_allclose(field[name], -grad[name], rtol=1e-12, atol=1e-15)
    # what the end-of-step tests read from the value: the pre-activations, dL/df and <field of w_j, x_k>
    np.testing.assert_allclose(value["Z"], theta["W"] @ X.T, rtol=1e-13, atol=1e-15)
    a = model.outer(theta, const)
    g = jax.grad(lambda f: Loss(name=loss).risk(f, y))(a @ jax.nn.relu(theta["W"] @ X.T))
    np.testing.assert_allclose(value["g"], g, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(value["CXX"], -grad["W"] @ X.T, rtol=1e-11, atol=1e-14)


def test_a_held_pair_keeps_its_neuron_on_the_kink_and_the_rest_of_the_field():
    # with neuron 0 held on the kink of point 2 (its pre-activation set to 0), its field is the field without that
    # pair minus its component along x_2; the other neurons' fields are the gradient's
    model = TwoLayer(width=3, activation="relu", train_outer=True, init_scheme="gaussian")
    rng = np.random.default_rng(1)
    X = jnp.asarray(rng.standard_normal((5, 4)))
    y = jnp.asarray(rng.standard_normal(5))
    problem = Problem(model, Loss(name="square"))
    hp = {"seed": 0, "init_scale": 1.0}
    theta, const = problem.init(hp, 4)
    x = X[2]
    theta = {**theta, "W": theta["W"].at[0].add(-(theta["W"][0] @ x) / (x @ x) * x)}
    kinks = _Kinks(problem, hp, const, X, y, K=2, P=4)
    S = jnp.asarray([[2, -1], [-1, -1], [-1, -1]], jnp.int64)
    _, field = kinks.value_and_field(0.0, theta, kinks.prepare(S))
    _, grad = jax.value_and_grad(lambda th: problem.risk(hp, th, const, X, y))(theta)
    assert abs(float(field["W"][0] @ x)) < 1e-14 * float(jnp.linalg.norm(field["W"][0]) * jnp.linalg.norm(x)) + 1e-300
    np.testing.assert_allclose(field["W"][1:], -grad["W"][1:], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(field["a"], -grad["a"], rtol=1e-12, atol=1e-15)
    # the point is on its kink, so the gradient gives it no weight either: the held field is the gradient projected
    g0 = -grad["W"][0]
    np.testing.assert_allclose(field["W"][0], g0 - (g0 @ x) / (x @ x) * x, rtol=1e-10, atol=1e-14)


def test_a_batch_equals_its_members_run_alone():
    data = TeacherNeuron(d=4, scheme="uncentred", n_test=0).generate(0)
    net = TwoLayer(width=8, activation="relu", train_outer=True, init_scheme="balanced", outer_signs="random")
    method = GradientFlow(rtol=1e-5, kinks="slide", kink_slots=4, kink_candidates=16)
    stop = Stop(loss_tol=1e-8, max_time=100.0)
    scales = [0.25, 0.0625]
    both = train(net, data, Loss(name="square"), method, stop=stop, checkpoints=3, batch={"init_scale": scales})
    for i, scale in enumerate(scales):
        alone = train(net, data, Loss(name="square"), method, stop=stop, checkpoints=3, init_scale=scale)
        assert int(alone["grad_evals"].values[0, -1]) == int(both["grad_evals"].values[i, -1])
        # the same steps, up to rounding: the batched and the one-member programs round differently, and the PI
        # controller's step sizes (`sliding.PID_COEFFICIENTS`) carry that into the path (5e-10 x max |W| here with
        # the suite's -O1, 0 with XLA's default -O2).  Members that interacted would differ at the solver's own
        # accuracy (rtol) or more, a thousand times this bound.
        W = alone["theta.W"].values[0]
        np.testing.assert_allclose(W, both["theta.W"].values[i], rtol=0, atol=1e-3 * method.rtol * np.abs(W).max())


@pytest.mark.parametrize("change, field", [
    ({"model": {"activation": "leaky_relu"}}, "model.activation = 'leaky_relu'"),
    ({"model": {"bias": True}}, "model.bias = True"),
    ({"method": {"solver": "tsit5"}}, "method.solver = 'tsit5'"),
    ({"method": {"clock": "loss"}}, "method.clock = 'loss'"),
])
def test_what_it_does_not_apply_to_is_refused_before_compiling(change, field):
    model = TwoLayer(width=4, train_outer=True, **{"activation": "relu", **change.get("model", {})})
    method = GradientFlow(kinks="slide", **change.get("method", {}))
    data = Dataset(X=X_KINK, y=Y_KINK, task="regression")
    with pytest.raises(ConfigError, match=f"{field.replace('.', '[.]')} is not allowed with method.kinks = 'slide'"):
        train(model, data, Loss(name="square"), method, stop=Stop(max_time=1.0), checkpoints=2)


def test_spd_solve_is_numpy_solve():
    rng = np.random.default_rng(2)
    for K in (1, 5, 24):
        M = rng.standard_normal((3, K, K))
        A = M @ np.swapaxes(M, 1, 2) + K * np.eye(K)
        B = rng.standard_normal((3, K, 4))
        np.testing.assert_allclose(spd_solve(jnp.asarray(A), jnp.asarray(B)), np.linalg.solve(A, B), rtol=1e-12,
                                   atol=1e-13)
        np.testing.assert_allclose(spd_solve(jnp.asarray(A), jnp.asarray(B[..., 0])), np.linalg.solve(A, B)[..., 0],
                                   rtol=1e-12, atol=1e-13)


def test_spd_solve_on_the_leading_block_alone():
    """With `size`, the loops run over the leading size x size block only: right where the rest of A is the identity
    (as for the Gram matrices of compacted held pairs), and wrong where it is not (the negative control)."""
    rng = np.random.default_rng(3)
    K = 8
    A = np.broadcast_to(np.eye(K), (4, K, K)).copy()
    for i, k in enumerate((0, 2, 5, 5)):  # each member's own block, the largest one of 5
        M = rng.standard_normal((k, k))
        A[i, :k, :k] = M @ M.T + k * np.eye(k)
    B = rng.standard_normal((4, K, 3))
    expected = np.linalg.solve(A, B)
    for size in (5, jnp.asarray(5), K):
        np.testing.assert_allclose(spd_solve(jnp.asarray(A), jnp.asarray(B), size), expected, rtol=1e-12, atol=1e-13)
    assert held_count(compact(jnp.asarray([[-1, 3, -1, 2], [-1, -1, -1, -1]]))) == 2
    np.testing.assert_array_equal(compact(jnp.asarray([[-1, 3, -1, 2]])), [[3, 2, -1, -1]])
    A[0, 6, 7] = A[0, 7, 6] = 0.5  # outside the block: not the identity there
    assert not np.allclose(spd_solve(jnp.asarray(A), jnp.asarray(B), 5), np.linalg.solve(A, B))


def test_runs_of_the_plain_flow_keep_their_identity():
    spec = RunSpec(model=NEURON, data=TeacherNeuron(d=4), loss=Loss(name="square"), method=GradientFlow(),
                   stop=Stop(max_time=10.0))
    dump = spec.model_dump(mode="json")
    for name in ("kinks", "kink_slots", "kink_candidates"):
        dump["method"].pop(name)
    assert RunSpec(**dump).key() == spec.key()  # a run stored before the fields existed is found again
    sliding = spec.model_copy(update={"method": GradientFlow(kinks="slide")})
    assert sliding.key() != spec.key()
