"""Gradient flow d theta/dt = -grad L(theta), integrated by diffrax between checkpoints (the stepping of
`implicitbias.training.methods.GradientFlow`).

`advance(carry, t_target, ...)` integrates one member from its current time to `t_target` with an
adaptive step and a PID controller (rtol, atol), stopping early through a diffrax `Event` when the
loss falls below `loss_tol`.  Each chunk starts with the average accepted step of the previous
one.  The carry counts solver steps and gradient (vector-field) evaluations.

With `clock="loss"` the solver integrates the same trajectory in the rescaled time s (ds = L dt),
d theta/ds = -grad L / L, carrying the physical time t as an extra state dt/ds = 1/L.  For the
logistic and exponential losses L decays like 1/t, so s ~ log t: gradient flow to t = 1e30 costs
about as much as to t = 1e2 in ordinary time.  Checkpoints and `stop.max_time` are then in s; the
recorded `time` is the physical time t.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import diffrax
import jax
import jax.numpy as jnp

from implicitbias.training.problem import Problem, tree_norm, tree_where
from implicitbias.training.stopping import Status, Stop

if TYPE_CHECKING:
    from implicitbias.training.methods import GradientFlow

#: vector-field evaluations per solver step (accepted or rejected) of the explicit RK solvers;
#: first-same-as-last solvers reuse their last stage, so a step costs stages - 1.
EVALS_PER_STEP = {"tsit5": 6, "dopri5": 6}

#: with the loss clock, a run stops (converged) once log L < -LOG_T_MAX: t = int ds / L would then
#: exceed e^600 ~ 1e260, near the end of the float64 range
LOG_T_MAX = 600.0


def make_solver(method: GradientFlow):
    if method.solver == "rkc":
        from implicitbias.training.rkc import RKC2

        return RKC2(report_evals=True)
    return {
        "tsit5": diffrax.Tsit5,
        "dopri5": diffrax.Dopri5,
    }[method.solver]()


def make_controller(method: GradientFlow, atol, loss_clock: bool):
    """PID control with an absolute-tolerance floor `atol` plus a part that follows the size of the
    parameters (not with the loss clock, whose state also carries the astronomically growing t)."""
    from implicitbias.training.rkc import gradient_flow_controller

    atol_rel = None if loss_clock else method.atol_rel
    return gradient_flow_controller(rtol=method.rtol, atol=atol, atol_rel=atol_rel,
                                    count=method.solver == "rkc")


def chunk_evaluations(method: GradientFlow, sol) -> jnp.ndarray:
    """Vector-field evaluations used by one diffeqsolve call (one chunk)."""
    if method.solver == "rkc":
        from implicitbias.training.rkc import rkc_num_evaluations

        return rkc_num_evaluations(sol, dt0_given=True)["total"]
    from implicitbias.training.rkc import erk_num_evaluations

    return erk_num_evaluations(sol, EVALS_PER_STEP[method.solver], dt0_given=True)


def make_flow(problem: Problem, method: GradientFlow, stop: Stop):
    """(init_carry, advance) for one member; the caller vmaps and jits them."""
    solver = make_solver(method)
    max_time = jnp.inf if stop.max_time is None else stop.max_time
    loss_clock = method.clock == "loss"

    def init_carry(hp, theta, const, X, y):
        loss0 = problem.risk(hp, theta, const, X, y)
        if method.atol is None:
            rms = tree_norm(theta) / jnp.sqrt(sum(leaf.size for leaf in jax.tree_util.tree_leaves(theta)))
            atol = jnp.where(rms > 0, 1e-5 * rms, 1e-9)
        else:
            atol = method.atol
        return {
            "theta": theta,
            "t": jnp.asarray(0.0),
            "t_phys": jnp.asarray(0.0),
            "dt": jnp.asarray(method.dt0, dtype=float),
            "atol": jnp.asarray(atol, dtype=float),
            "step": jnp.asarray(0, jnp.int64),
            "evals": jnp.asarray(0, jnp.int64),
            "fail_step": jnp.asarray(-1, jnp.int64),
            "status": jnp.asarray(Status.RUNNING, jnp.int32),
            "loss": loss0,
            "loss0": loss0,
        }

    def advance(carry, t_target, hp, const, X, y):
        risk = lambda th: problem.risk(hp, th, const, X, y)
        grad = jax.grad(risk)
        if loss_clock:
            # the same trajectory in the rescaled time s, ds = L dt: d theta/ds = -grad L / L, dt/ds = 1 / L
            log_risk = lambda th: problem.log_risk(hp, th, const, X, y)

            def field(s, state, args):
                # grad L / L = grad log L, evaluated in log space so that it stays finite as L underflows
                logL, g = jax.value_and_grad(log_risk)(state["theta"])
                return {"theta": jax.tree_util.tree_map(jnp.negative, g), "t_phys": jnp.exp(-logL)}

            y0 = {"theta": carry["theta"], "t_phys": carry["t_phys"]}
            unpack = lambda state: (state["theta"], state["t_phys"])
        else:
            field = lambda t, th, args: jax.tree_util.tree_map(jnp.negative, grad(th))
            y0 = carry["theta"]
            unpack = lambda th: (th, None)
        term = diffrax.ODETerm(field)
        running = carry["status"] == Status.RUNNING
        t0 = carry["t"]
        t1 = jnp.where(running, jnp.minimum(t_target, max_time), t0)
        active = t1 > t0
        # a member with nothing to do integrates over a dummy unit interval and is discarded below
        t1_solve = jnp.where(active, t1, t0 + 1.0)
        event = None
        if loss_clock:
            # stop before the physical time t = int ds / L leaves the float64 range (log L < -LOG_T_MAX)
            tol = jnp.log(stop.loss_tol) if stop.loss_tol > 0 else -LOG_T_MAX
            floor = jnp.maximum(tol, -LOG_T_MAX)
            event = diffrax.Event(
                lambda t, state, args, **kw: problem.log_risk(hp, unpack(state)[0], const, X, y) < floor)
        elif stop.loss_tol > 0:
            event = diffrax.Event(lambda t, state, args, **kw: risk(unpack(state)[0]) < stop.loss_tol)
        controller = make_controller(method, carry["atol"], loss_clock)
        sol = diffrax.diffeqsolve(
            term,
            solver,
            t0,
            t1_solve,
            jnp.minimum(carry["dt"], t1_solve - t0),
            y0,
            stepsize_controller=controller,
            event=event,
            max_steps=method.max_solver_steps,
            saveat=diffrax.SaveAt(t1=True, solver_state=True, controller_state=True),
            adjoint=diffrax.ForwardMode(),
            throw=False,
        )
        theta, t_phys = unpack(jax.tree_util.tree_map(lambda leaf: leaf[-1], sol.ys))
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
        ).astype(jnp.int32)
        accepted = sol.stats["num_accepted_steps"]
        keep = active & ~bad
        new = {
            **carry,
            "theta": tree_where(keep, theta, carry["theta"]),
            "t": jnp.where(keep, t_end, t0),
            "t_phys": jnp.where(keep, t_phys, carry["t_phys"]),
            "dt": jnp.where(keep & (accepted > 0), (t_end - t0) / jnp.maximum(accepted, 1), carry["dt"]),
            "step": carry["step"] + jnp.where(active, sol.stats["num_steps"], 0),
            "evals": carry["evals"] + jnp.where(active, chunk_evaluations(method, sol), 0),
            "fail_step": jnp.where(active & bad, carry["step"], carry["fail_step"]),
            "status": jnp.where(active, status, carry["status"]),
            "loss": jnp.where(keep, L, carry["loss"]),
        }
        return new

    return init_carry, advance
