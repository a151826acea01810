"""Gradient flow d theta/dt = -grad L(theta), integrated by diffrax between checkpoints (the stepping of
`implicitbias.training.methods.GradientFlow`).

`advance(carry, t_target, ...)` integrates one member from its current time to `t_target` with an
adaptive step and a PID controller (rtol, atol), stopping early when the loss falls below `loss_tol`:
RKC2 reads the loss from the gradient evaluation it makes at the end of every step anyway
(`jax.value_and_grad`, `rkc.GradientFlowTerm`); the other solvers (tsit5, dopri5 and the implicit kvaerno5)
use a diffrax `Event`, which costs one more forward pass per step.  Each chunk starts with the average
accepted step of the previous one.  The carry counts solver steps and gradient (vector-field) evaluations
(for kvaerno5 a lower bound: `chunk_evaluations`).

With `clock="loss"` the solver integrates the same trajectory in the rescaled time s (ds = L dt),
d theta/ds = -grad L / L, carrying the physical time t as an extra state dt/ds = 1/L.  For the
logistic and exponential losses L decays like 1/t, so s ~ log t: gradient flow to t = 1e30 costs
about as much as to t = 1e2 in ordinary time.  Checkpoints and `stop.max_time` are then in s; the
recorded `time` is the physical time t.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import diffrax
import jax
import jax.numpy as jnp
import optimistix

from implicitbias._spec import ConfigError
from implicitbias.training.problem import Problem, tree_norm, tree_where
from implicitbias.training.rkc import RKC2, GradientFlowTerm
from implicitbias.training.rkc_control import erk_num_evaluations, gradient_flow_controller, rkc_num_evaluations
from implicitbias.training.stopping import Status, Stop


class FlowSettings(Protocol):
    """The settings of a gradient-flow method that the integrator reads: `implicitbias.training.methods.GradientFlow`
    (named structurally, not imported: that module imports this one when a flow is stepped, so the two would form
    an import cycle)."""

    solver: str
    clock: str
    rtol: float
    atol: float | None
    atol_rel: float | None
    dt0: float
    max_solver_steps: int
    tail_rtol: float | None
    tail_below: float


#: vector-field evaluations per solver step (accepted or rejected) of the explicit RK solvers;
#: first-same-as-last solvers reuse their last stage, so a step costs stages - 1.
EVALS_PER_STEP = {"tsit5": 6, "dopri5": 6}

#: the least Newton iterations of one kvaerno5 step attempt: 6 implicit stages (the first, explicit stage is the
#: last of the previous step), each solved by at least one iteration (optimistix's Cauchy termination)
KVAERNO5_MIN_NEWTON_PER_STEP = 6

#: with the loss clock, a run stops (converged) once log L < -LOG_T_MAX: t = int ds / L would then
#: exceed e^600 ~ 1e260, near the end of the float64 range
LOG_T_MAX = 600.0


def make_solver(method: FlowSettings, stop_below=None, power_part=None):
    """The diffrax solver of `method`; RKC2 also makes the stop test (value < `stop_below`, None: none)."""
    if method.solver == "rkc":
        return RKC2(report_evals=True, stop_below=stop_below, power_part=power_part)
    if method.solver == "kvaerno5":
        # Newton (a fresh Jacobian every iteration) with the tolerances of the step-size controller: the default
        # chord method (one Jacobian per step) fails to converge on half the steps of a stiff factorisation at
        # rtol 1e-10 and costs ~20 x more steps (measured on Razin & Cohen's counterexample, depth 4)
        return diffrax.Kvaerno5(root_finder=diffrax.with_stepsize_controller_tols(optimistix.Newton)())
    return {
        "tsit5": diffrax.Tsit5,
        "dopri5": diffrax.Dopri5,
    }[method.solver]()


def make_controller(method: FlowSettings, atol, loss_clock: bool, rtol):
    """PID control at relative tolerance `rtol` (may be traced: `chunk_rtol`) with an absolute-tolerance floor
    `atol` plus a part that follows the size of the parameters (not with the loss clock, whose state also carries
    the astronomically growing t)."""
    atol_rel = None if loss_clock else method.atol_rel
    return gradient_flow_controller(rtol=rtol, atol=atol, atol_rel=atol_rel,
                                    count=method.solver == "rkc")


def chunk_evaluations(method: FlowSettings, sol, n_params: int = 0) -> jnp.ndarray:
    """Vector-field evaluations used by one diffeqsolve call (one chunk); `n_params`: the size p of the state.

    kvaerno5: diffrax does not report the Newton iterations of its stages, so this is a lower bound,
    1 + 6 (p + 1) per step attempt: at least one Newton iteration in each of the 6 implicit stages, each a
    linearised gradient evaluation and p Jacobian-vector products (Hessian columns, each counted as one gradient
    evaluation)."""
    if method.solver == "rkc":
        return rkc_num_evaluations(sol, dt0_given=True)["total"]
    if method.solver == "kvaerno5":
        return KVAERNO5_MIN_NEWTON_PER_STEP * (n_params + 1) * sol.stats["num_steps"] + 1
    return erk_num_evaluations(sol, EVALS_PER_STEP[method.solver], dt0_given=True)


def make_flow(problem: Problem, method: FlowSettings, stop: Stop):
    """(init_carry, advance) for one member; the caller vmaps and jits them."""
    max_time = jnp.inf if stop.max_time is None else stop.max_time
    loss_clock = method.clock == "loss"

    def init_carry(hp, theta, const, X, y):
        _check_size(method, theta)
        return {**initial_carry(method, theta, problem.risk(hp, theta, const, X, y)),
                **_initial_solver_state(problem, method, stop, loss_clock, hp, theta, const, X, y)}

    def advance(carry, t_target, hp, const, X, y):
        risk = lambda th: problem.risk(hp, th, const, X, y)
        ode = _ode(problem, loss_clock, stop, hp, const, X, y)
        y0 = ode.y0(carry)
        running = carry["status"] == Status.RUNNING
        t0 = carry["t"]
        t1 = jnp.where(running, jnp.minimum(t_target, max_time), t0)
        active = t1 > t0
        term, solver, event = _term_solver_event(method, ode)
        done_at_start = jnp.asarray(False)
        if event is None and ode.stop_below is not None:
            # RKC2 tests the end of every step; the start is tested here, once per chunk
            done_at_start = active & (ode.value(y0) < ode.stop_below)
        # a member whose loss is already non-finite has diverged: it is not integrated (an adaptive solve would
        # spend all of max_solver_steps on it, and its batch would wait)
        nonfinite = ~jnp.isfinite(carry["loss"])
        broken = active & nonfinite
        solving = active & ~done_at_start & ~broken
        # a member with nothing to do integrates over a dummy unit interval and is discarded below
        t1_solve = jnp.where(solving, t1, t0 + 1.0)
        controller = make_controller(method, carry["atol"], loss_clock, chunk_rtol(method, carry))
        sol = diffrax.diffeqsolve(
            term,
            solver,
            t0,
            t1_solve,
            jnp.minimum(carry["dt"], t1_solve - t0),
            # a diverged member, idle or not, integrates its dummy interval from zeros (from its non-finite state
            # the solver would shrink its step to nothing and spend all of max_solver_steps while its batch
            # waits: 10 s for a batch of 4 linear models before this covered idle members too); other idle
            # members from their own state (zeros can be a singular point of a model, e.g. a single neuron)
            tree_where(nonfinite, jax.tree_util.tree_map(jnp.zeros_like, y0), y0),
            stepsize_controller=controller,
            event=event,
            max_steps=method.max_solver_steps,
            saveat=diffrax.SaveAt(t1=True, solver_state=True, controller_state=True),
            adjoint=diffrax.ForwardMode(),
            throw=False,
            solver_state=carry.get("solver"),  # RKC: from the previous chunk (None: diffrax calls solver.init)
        )
        theta, t_phys = ode.unpack(jax.tree_util.tree_map(lambda leaf: leaf[-1], sol.ys))
        t_end = sol.ts[-1]
        t_phys = t_end if t_phys is None else t_phys
        L = risk(theta)
        bad = ~jnp.isfinite(L) | (L > stop.divergence_factor * jnp.maximum(carry["loss0"], 1.0))
        bad = bad | ~jnp.isfinite(tree_norm(theta))
        event_hit = sol.result == diffrax.RESULTS.event_occurred
        ok = sol.result == diffrax.RESULTS.successful
        status = jnp.where(
            bad,
            Status.DIVERGED,
            jnp.where(event_hit, Status.CONVERGED, jnp.where(ok, Status.RUNNING, Status.SOLVER_FAILED)),
        )
        status = jnp.where(done_at_start, Status.CONVERGED, status)
        status = jnp.where(broken, Status.DIVERGED, status).astype(jnp.int32)
        accepted = sol.stats["num_accepted_steps"]
        keep = solving & ~bad
        new = {
            **carry,
            "theta": tree_where(keep, theta, carry["theta"]),
            "t": jnp.where(keep, t_end, t0),
            "t_phys": jnp.where(keep, t_phys, carry["t_phys"]),
            "dt": jnp.where(keep & (accepted > 0), (t_end - t0) / jnp.maximum(accepted, 1), carry["dt"]),
            "step": carry["step"] + jnp.where(solving, sol.stats["num_steps"], 0),
            "evals": carry["evals"] + jnp.where(solving, chunk_evaluations(method, sol, _size(y0)), 0),
            "fail_step": jnp.where((solving & bad) | broken, carry["step"], carry["fail_step"]),
            "status": jnp.where(active, status, carry["status"]),
            "loss": jnp.where(keep, L, carry["loss"]),
        }
        if "solver" in carry:
            new["solver"] = tree_where(keep, sol.solver_state, carry["solver"])
        return new

    return init_carry, advance


def initial_carry(method: FlowSettings, theta, loss0) -> dict:
    """The carry every gradient-flow stepping starts from (`make_flow`, `training.sliding`): time 0, the first step
    `dt0`, the absolute tolerance (method.atol, or 1e-5 x rms(theta(0)), 1e-9 from theta(0) = 0), no step or
    evaluation yet, running, and the loss at the start."""
    if method.atol is None:
        rms = tree_norm(theta) / jnp.sqrt(sum(leaf.size for leaf in jax.tree_util.tree_leaves(theta)))
        atol = jnp.where(rms > 0, 1e-5 * rms, 1e-9)
    else:
        atol = method.atol
    return {
        "theta": theta,
        "t": jnp.asarray(0.0, dtype=float),  # not weakly typed: advance returns a strong f64
        "t_phys": jnp.asarray(0.0, dtype=float),
        "dt": jnp.asarray(method.dt0, dtype=float),
        "atol": jnp.asarray(atol, dtype=float),
        "step": jnp.asarray(0, jnp.int64),
        "evals": jnp.asarray(0, jnp.int64),
        "fail_step": jnp.asarray(-1, jnp.int64),
        "status": jnp.asarray(Status.RUNNING, jnp.int32),
        "loss": loss0,
        "loss0": loss0,
    }


def chunk_rtol(method: FlowSettings, carry):
    """The relative tolerance of the chunk that starts at `carry`: method.rtol, or method.tail_rtol once the loss
    there is below method.tail_below x L(0)."""
    if method.tail_rtol is None:
        return method.rtol
    tail = carry["loss"] < method.tail_below * carry["loss0"]
    return jnp.where(tail, method.tail_rtol, method.rtol)


def _initial_solver_state(problem, method, stop, loss_clock, hp, theta, const, X, y) -> dict:
    """RKC's solver state goes from one chunk to the next in the carry: `{"solver": state}` (other solvers: {}).

    The state holds F(θ) at the chunk's end (first same as last) and the spectral-radius estimate with its
    eigen-direction, all valid where the next chunk starts.  Fresh at every chunk, each chunk would evaluate F(θ)
    again and re-estimate ρ from a random direction (up to `power_max_iter` evaluations, repeated on each rejected
    first step).  Made here, in `init_carry`'s program: `RKC2.init` evaluates nothing (the first step makes
    F(θ0) and the first estimate), and `advance` then contains no call of `RKC2.init` at all."""
    if method.solver != "rkc":
        return {}
    ode = _ode(problem, loss_clock, stop, hp, const, X, y)
    y0 = ode.y0({"theta": theta, "t_phys": jnp.asarray(0.0, dtype=float)})
    term, solver, _ = _term_solver_event(method, ode)
    return {"solver": solver.init(term, jnp.asarray(0.0), jnp.asarray(1.0), y0, None)}


def _size(tree) -> int:
    return sum(leaf.size for leaf in jax.tree_util.tree_leaves(tree))


def _check_size(method: FlowSettings, theta) -> None:
    """kvaerno5 forms a dense Jacobian and its LU every step: refuse it for large models (static shapes, so this
    runs while tracing, before anything compiles)."""
    p = _size(theta)
    if method.solver == "kvaerno5" and p > method.KVAERNO5_MAX_PARAMETERS:
        raise ConfigError(f"method.solver = 'kvaerno5' is not allowed for a model with {p} parameters: expected at "
                          f"most {method.KVAERNO5_MAX_PARAMETERS} (a dense {p} x {p} Jacobian and its LU every step); "
                          "use 'rkc' for stiff flows of large models")


class _ODE(NamedTuple):
    """The gradient-flow ODE of one member in the clock of the method, with the value its stop test reads."""

    value_and_field: Callable  # (t, state, args) -> (value, d state/dt)
    value: Callable  # state -> value
    y0: Callable  # carry -> initial state
    unpack: Callable  # state -> (theta, physical time or None)
    stop_below: Any  # stop once value < stop_below; None: never
    power_part: Callable | None = None  # state -> state with its passive part (t_phys) zeroed; None: all active


def _ode(problem: Problem, loss_clock: bool, stop: Stop, hp, const, X, y) -> _ODE:
    if loss_clock:
        # the same trajectory in the rescaled time s, ds = L dt: d theta/ds = -grad L / L, dt/ds = 1 / L
        log_risk = lambda th: problem.log_risk(hp, th, const, X, y)

        def value_and_field(s, state, args):
            # grad L / L = grad log L, evaluated in log space so that it stays finite as L underflows
            logL, g = jax.value_and_grad(log_risk)(state["theta"])
            return logL, {"theta": jax.tree_util.tree_map(jnp.negative, g), "t_phys": jnp.exp(-logL)}

        # stop before the physical time t = int ds / L leaves the float64 range (log L < -LOG_T_MAX)
        tol = jnp.log(stop.loss_tol) if stop.loss_tol > 0 else -LOG_T_MAX
        return _ODE(value_and_field, lambda state: log_risk(state["theta"]),
                    lambda carry: {"theta": carry["theta"], "t_phys": carry["t_phys"]},
                    lambda state: (state["theta"], state["t_phys"]), jnp.maximum(tol, -LOG_T_MAX), _theta_part)
    risk = lambda th: problem.risk(hp, th, const, X, y)

    def value_and_field(t, th, args):
        L, g = jax.value_and_grad(risk)(th)
        return L, jax.tree_util.tree_map(jnp.negative, g)

    return _ODE(value_and_field, risk, lambda carry: carry["theta"], lambda th: (th, None),
                stop.loss_tol if stop.loss_tol > 0 else None)


def _theta_part(state):
    """The loss clock's state with t_phys zeroed: RKC's power method acts on theta only.  The field does not depend
    on t_phys (a quadrature, dt/ds = 1/L), but its row of the Jacobian grows like 1/L and, with it in ‖Jv‖, the
    spectral-radius estimate swung by orders of magnitude: one quick frei2023-kkt run took 8 690 or 24 263
    gradient evaluations depending on when ρ happened to be refreshed."""
    return {"theta": state["theta"], "t_phys": jnp.zeros_like(state["t_phys"])}


def _term_solver_event(method: FlowSettings, ode: _ODE):
    """RKC2 stops after the first accepted step whose end has value < stop_below, reading the value from the
    gradient evaluation it makes there anyway (`rkc.GradientFlowTerm`); the other solvers stop through a
    diffrax Event, which evaluates the value once more after every step."""
    if method.solver == "rkc":
        return GradientFlowTerm(ode.value_and_field), make_solver(method, ode.stop_below, ode.power_part), None
    term = diffrax.ODETerm(lambda t, state, args: ode.value_and_field(t, state, args)[1])
    event = None
    if ode.stop_below is not None:
        event = diffrax.Event(lambda t, state, args, **kw: ode.value(state) < ode.stop_below)
    return term, make_solver(method), event
