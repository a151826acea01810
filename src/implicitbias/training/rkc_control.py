"""Step-size control and evaluation counting for the Runge--Kutta--Chebyshev solver `implicitbias.training.rkc.RKC2`.

Usage
-----
::

    solver = RKC2(report_evals=True)
    controller = gradient_flow_controller(rtol=1e-6, atol=1e-5 * rms(θ0), atol_rel=1e-6)
    sol = diffrax.diffeqsolve(term, solver, t0, t1, None, θ0, stepsize_controller=controller,
                              saveat=diffrax.SaveAt(t1=True, solver_state=True, controller_state=True))
    n_grad = rkc_num_evaluations(sol)["total"]

A plain ``diffrax.PIDController(rtol, atol)`` works too (then only accepted steps are counted exactly).

Recommended tolerances for gradient flow from a small initialisation (measured on S11, see
``benchmarks/prototype_gradient_flow_s11.py``): rtol = 1e-6, atol = 1e-5·rms(θ0) as a floor, raised to
1e-6·rms(θ(t)) as the parameters grow (:class:`ScaledAtolController`), PID error_order = 2, factormax = 3
(:func:`gradient_flow_controller`). The error in the final parameters comes almost entirely from the first
few time units, where the small neurons cross ~1500 ReLU kinks (the gradient is discontinuous there, and a
step across a kink has an O(h) local error); the exponentially converging tail is cheap and accurate with
RKC2. On S11 (n = d = 16, m = 200, λ = 4^-6) this uses ~6e3 gradient evaluations for t up to 1e4 and
~1e4 for t ~ 1e5 (GD with η = 0.01 needs t/η), with the final parameters 2-3e-4 (relative) from a tight
reference flow; the gap GD(η = 0.01) − flow is itself ~1.5e-3. Use atol_rel = 1e-7 if the time axis matters
to better than ~0.1% (the loss tail's rate is then a bit more accurate; +15% evaluations).

Counting vector-field evaluations (honestly)
--------------------------------------------
diffrax keeps the solver state of a step only if the step is accepted (a rejected step rolls the state
back), so a counter in the solver state can only count the evaluations of *accepted* steps. This module
therefore counts in two places:

* the solver state holds ``num_vf_evals``: the evaluations made by every accepted step (stages, FSAL
  evaluation, power iterations; the first step also evaluates F(y0) and makes the first ρ estimate, since
  `init` evaluates nothing);
* to also count the evaluations made by *rejected* steps, wrap the step-size controller in
  :class:`CountingController` (done by :func:`gradient_flow_controller`) and build the solver with
  ``RKC2(report_evals=True)``: the solver then hands the evaluation count of each attempt to the
  controller alongside the error estimate, and the controller accumulates it in its own state (which
  diffrax never rolls back). ``report_evals=True`` requires the counting controller.

Read the counts with :func:`rkc_num_evaluations` (needs ``SaveAt(..., solver_state=True)`` and, for the
complete count, ``controller_state=True``). With a plain ``diffrax.PIDController`` it returns the exact
accepted-step count and an ``estimate``. For a diffrax FSAL Runge--Kutta solver (Tsit5, Dopri5) use
:func:`erk_num_evaluations`: 6 · num_steps + 1.
Both counts are checked against a host-side call counter in ``tests/test_rkc.py``. A diffrax Event's
cond_fn (e.g. the loss) is evaluated once per step on top of this, and is not counted here; to stop a
gradient flow when the loss is small, use ``RKC2(stop_below=tol)`` on a :class:`GradientFlowTerm`
instead, which reads the loss from the evaluation of F(y_{n+1}) that the step makes anyway.
"""

from __future__ import annotations

from typing import Any

import diffrax
import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu

__all__ = [
    "CountingController",
    "CountState",
    "ErrorWithCount",
    "ScaledAtolController",
    "gradient_flow_controller",
    "rkc_num_evaluations",
    "erk_num_evaluations",
]


def int_dtype():
    """The default integer dtype (int64 when JAX runs in x64 mode)."""
    return jnp.result_type(int)


class ErrorWithCount(eqx.Module):
    """The error estimate of one step together with the number of vector-field evaluations it used and
    whether its end point passes the stop test (1.0) or not (0.0; None without a stop test).

    Only produced when ``RKC2(report_evals=True)``; unpacked by :class:`CountingController`.
    """

    error: Any
    count: Any
    stop: Any = None


# --------------------------------------------------------------------------------------------------------
# counting controller
# --------------------------------------------------------------------------------------------------------


class CountState(eqx.Module):
    """State of :class:`CountingController`: the wrapped controller's state and the number of
    vector-field evaluations of every step attempted so far (accepted or rejected)."""

    inner: Any
    attempted_evals: Any


class CountingController(diffrax.AbstractAdaptiveStepSizeController):
    """Wraps an adaptive step-size controller and accumulates the evaluations of *every* step attempt.

    Use together with ``RKC2(report_evals=True)``; the state is a :class:`CountState` whose
    ``attempted_evals`` is the number of vector-field evaluations made by all accepted *and rejected*
    steps (not including `init`). Save it with ``SaveAt(..., controller_state=True)`` and read it with
    :func:`rkc_num_evaluations`.

    It also ends the solve for ``RKC2(stop_below=...)``: an accepted step whose end passes the solver's stop
    test gets ``RESULTS.event_occurred``. (The controller, not the solver, has to say it: diffrax replaces
    an okay solver result by the controller's, and only the controller knows whether the step is kept.)
    """

    controller: diffrax.AbstractAdaptiveStepSizeController

    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self):
        return self.controller.norm

    def wrap(self, direction):
        return eqx.tree_at(lambda c: c.controller, self, self.controller.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        tnext, inner = self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return tnext, CountState(inner, jnp.asarray(0, int_dtype()))

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        inner, total = controller_state.inner, controller_state.attempted_evals
        if isinstance(y_error, ErrorWithCount):
            err, count, stop = y_error.error, y_error.count, y_error.stop
        else:
            err, count, stop = y_error, 0, None
        keep, tprev, tnext, made_jump, inner, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, err, error_order, inner
        )
        count = jnp.asarray(count).astype(total.dtype)
        if stop is not None:
            # a float after diffrax's NaN check on the error estimate: 1.0 is a stop
            stopped = keep & (stop > 0.5) & (result == diffrax.RESULTS.successful)
            result = diffrax.RESULTS.where(stopped, diffrax.RESULTS.event_occurred, result)
        return keep, tprev, tnext, made_jump, CountState(inner, total + count), result


class ScaledAtolController(diffrax.AbstractAdaptiveStepSizeController):
    """Wraps an adaptive controller (a ``PIDController``) so that its absolute tolerance follows the scale
    of the solution: at every step ``atol_eff = max(controller.atol, atol_rel * rms(y0))``, with rms the
    root-mean-square over all leaves of the state at the start of the step.

    Why: in gradient flow from a small initialisation the parameters grow by orders of magnitude
    (S11: rms 6e-6 at t = 0, ~2e-2 at the end). The absolute tolerance must be small compared with the
    *initial* scale (the directions of the small neurons decided early fix the end point), but a fixed atol
    that small later forces tiny steps for components that no longer matter (dead neurons sitting on
    ReLU kinks, which the flow crosses or slides along). A floor ``controller.atol`` ~ rtol_0·rms(θ0) plus
    a part relative to the current scale gives both. The rtol of the inner controller is unchanged.
    """

    controller: diffrax.AbstractAdaptiveStepSizeController
    atol_rel: float

    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self):
        return self.controller.norm

    def wrap(self, direction):
        return eqx.tree_at(lambda c: c.controller, self, self.controller.wrap(direction))

    def _with_atol(self, y):
        atol = jnp.maximum(self.controller.atol, self.atol_rel * _rms(y))
        return eqx.tree_at(lambda c: c.atol, self.controller, atol)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        return self._with_atol(y0).init(terms, t0, t1, y0, dt0, args, func, error_order)

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        return self._with_atol(y0).adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
        )


def _rms(tree):
    leaves = jtu.tree_leaves(tree)
    size = sum(jnp.size(x) for x in leaves)
    return jnp.sqrt(sum(jnp.sum(jnp.abs(x) ** 2) for x in leaves) / max(size, 1))


def gradient_flow_controller(
    rtol: float = 1e-6,
    atol=None,
    atol_rel: float | None = 1e-6,
    *,
    theta0=None,
    atol_init_rel: float = 1e-5,
    count: bool = True,
    **pid_kwargs,
):
    """The recommended step-size controller for :class:`RKC2` on gradient flow.

    Returns ``CountingController(ScaledAtolController(PIDController(rtol, atol, **pid), atol_rel))``
    (the counting layer only if `count`, the scaling layer only if `atol_rel` is not None).

    - `atol`: the absolute-tolerance floor. If None, it is ``atol_init_rel * rms(theta0)`` (recommended:
      1e-5 · rms(θ0), a relative accuracy of 1e-5 measured against the initial parameter scale); `theta0`
      is then required. The floor must be > 0 (for θ0 = 0 pass an explicit atol).
    - `atol_rel`: the absolute tolerance used at a step is max(atol, atol_rel · rms(y)) (default 1e-6).
    - `count`: wrap in :class:`CountingController`; build the solver as ``RKC2(report_evals=True)``.
    - `pid_kwargs`: passed to ``diffrax.PIDController``; defaults ``error_order=2, factormax=3``.

    error_order=2 instead of the formal 3: ReLU networks have a discontinuous gradient, and the local
    error of a step that crosses a kink is O(h), not O(h^3); the stronger shrink after a rejection and the
    cap on growth cut the rejected steps by ~1/3 in the kink-dense early phase of S11 (fewer evaluations,
    same accuracy). Works inside jit/vmap (theta0 and atol may be traced).
    """
    if atol is None:
        if theta0 is None:
            raise ValueError("gradient_flow_controller: pass atol, or theta0 to derive it from rms(theta0)")
        atol = atol_init_rel * _rms(theta0)
    pid_kwargs = {"error_order": 2, "factormax": 3.0, **pid_kwargs}
    ctrl = diffrax.PIDController(rtol=rtol, atol=atol, **pid_kwargs)
    if atol_rel is not None:
        ctrl = ScaledAtolController(ctrl, atol_rel)
    if count:
        ctrl = CountingController(ctrl)
    return ctrl


# --------------------------------------------------------------------------------------------------------
# reading the counts
# --------------------------------------------------------------------------------------------------------


def _initial_step_evals(dt0_given: bool) -> int:
    # diffrax 0.7.2: `PIDController.init` with dt0=None calls `_select_initial_step`, which evaluates the
    # vector field twice -- but only for a bare `ODETerm`. `diffeqsolve` always wraps the terms (WrapTerm,
    # for the time direction), so inside `diffeqsolve` it returns dt0 = 0.01 without any evaluation.
    # `tests/test_rkc.py::test_counts_are_exact` counts real calls and would catch a change.
    del dt0_given
    return 0


def rkc_num_evaluations(sol, dt0_given: bool = False) -> dict:
    """Vector-field evaluations of an :class:`RKC2` solve.

    `sol` must have been produced with ``SaveAt(..., solver_state=True)``; if the controller was a
    :class:`CountingController` and ``SaveAt(controller_state=True)`` was set, the count of rejected
    steps is exact too. Works on batched (vmapped) solutions, leafwise.

    Returns a dict with
      - ``accepted``: evaluations of all accepted steps (incl. power iterations and the first step's F(y0));
      - ``initial_step``: evaluations spent by the controller choosing dt0 (0 with diffrax 0.7.2, see
        `_initial_step_evals`);
      - ``total``: exact total (init + every attempted step + initial step choice) when the counting
        controller state is available, else ``None``;
      - ``estimate``: ``total`` if available, else accepted + initial_step + num_rejected × (mean
        evaluations of an accepted step) -- an estimate only, since diffrax does not keep the solver
        state of rejected steps;
      - ``num_accepted_steps``, ``num_rejected_steps``.
    """
    state = sol.solver_state
    if state is None:
        raise ValueError("solve with SaveAt(..., solver_state=True) to read the evaluation count")
    accepted = state["num_vf_evals"]
    init_dt = _initial_step_evals(dt0_given)
    out = dict(
        accepted=accepted,
        initial_step=init_dt,
        num_accepted_steps=sol.stats["num_accepted_steps"],
        num_rejected_steps=sol.stats["num_rejected_steps"],
        total=None,
        estimate=None,
    )
    cstate = _find_count_state(sol.controller_state)
    if cstate is not None:
        out["total"] = state["init_evals"] + cstate.attempted_evals + init_dt
        out["estimate"] = out["total"]
    else:
        num_acc = sol.stats["num_accepted_steps"]
        per_step = (accepted - state["init_evals"]) / jnp.maximum(num_acc, 1)
        out["estimate"] = accepted + init_dt + sol.stats["num_rejected_steps"] * per_step
    return out


def _find_count_state(cstate):
    """The CountState inside a (possibly nested) controller state, or None."""
    found = [x for x in jtu.tree_leaves(cstate, is_leaf=lambda x: isinstance(x, CountState))
             if isinstance(x, CountState)]
    return found[0] if found else None


def erk_num_evaluations(sol, stages_per_step: int = 6, dt0_given: bool = False):
    """Vector-field evaluations of a diffrax FSAL explicit RK solve (Tsit5, Dopri5: 7 stages, FSAL).

    Each step attempt (accepted or rejected) evaluates the 6 non-FSAL stages: the last stage F(y1) is the
    first stage of the next step, and after a rejection the stored F(y0) is still valid. The first stage
    F(y0) of the very first step is evaluated once per attempt until the first step is accepted (diffrax
    rolls the "first step" flag back on a rejection): 1 if the first attempt is accepted, +1 for each
    rejected first attempt. The initial step-size choice costs nothing inside ``diffeqsolve`` (see
    `_initial_step_evals`). So

        evaluations = 6 · sol.stats["num_steps"] + 1   (+ the number of rejected first attempts, 0..2 typ.)

    with num_steps = num_accepted_steps + num_rejected_steps; this function returns the formula without
    the last term (an undercount by at most a couple of evaluations). For Bosh3 (4 stages, FSAL) use
    ``stages_per_step=3``.
    """
    return stages_per_step * sol.stats["num_steps"] + 1 + _initial_step_evals(dt0_given)
