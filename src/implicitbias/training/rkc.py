"""Second-order Runge--Kutta--Chebyshev (RKC2) solver for diffrax, with honest evaluation counting.

Why this solver exists
----------------------
Gradient flow dθ/dt = -∇L(θ) has Jacobian -∇²L(θ), a symmetric matrix: its eigenvalues are real. Near a
minimum they are all <= 0, and the spread is wide (the fastest modes decay at rate λ_max(∇²L) = O(1), the
slowest ones at rate ~1e-3 in the S11 teacher-neuron benchmark). An explicit Runge--Kutta method such as
Tsit5 must keep dt·λ_max inside its small stability region (dt ≈ 3/λ_max) for the whole exponential tail of
the loss, however smooth the solution is. Runge--Kutta--Chebyshev methods are explicit methods whose
stability region along the negative real axis grows like s² with the number of stages s: with s stages
one step of length dt is stable as long as dt·ρ <= β(s) ≈ 0.65 s², so the cost of a step of length dt is
only ~ sqrt(dt·ρ) vector-field evaluations instead of ~ dt·ρ.

The method (Sommeijer, Shampine & Verwer 1997, "RKC: an explicit solver for parabolic PDEs", J. Comput.
Appl. Math. 88; Verwer, Hundsdorfer & Sommeijer 1990): damped Chebyshev polynomials of the first kind
T_j, evaluated at w0 = 1 + ε/s² with damping ε = 2/13, w1 = T_s'(w0)/T_s''(w0), b_j = T_j''(w0)/T_j'(w0)²
(j >= 2), b_0 = b_1 = b_2, and

    Y_0 = y_n,    Y_1 = y_n + μ̃_1 h F_0,                                       μ̃_1 = b_1 w1,
    Y_j = (1 - μ_j - ν_j) y_n + μ_j Y_{j-1} + ν_j Y_{j-2} + μ̃_j h F(Y_{j-1}) + γ̃_j h F_0,   j = 2..s,
    μ_j = 2 w0 b_j / b_{j-1},  ν_j = -b_j / b_{j-2},  μ̃_j = 2 w1 b_j / b_{j-1},
    γ̃_j = -(1 - b_{j-1} T_{j-1}(w0)) μ̃_j,                     y_{n+1} = Y_s,

with stage times c_j = w1 T_j''(w0) / T_j'(w0) (c_1 = c_2 / T_2'(w0), c_s = 1). The error estimate
(same paper) is Est = (12 (y_n - y_{n+1}) + 6 h (F(y_n) + F(y_{n+1}))) / 15, an O(h³) quantity, which is
why `error_order` is 3. F(y_{n+1}) is reused as F_0 of the next step ("first same as last"), so a step
with s stages costs exactly s vector-field evaluations. The number of stages is chosen per step from a
spectral-radius estimate ρ, s = 1 + floor(sqrt(1 + 1.54 h ρ)) (the rule of the RKC code), so that
h ρ lies inside the damped stability interval with a margin.

ρ is estimated by the nonlinear power method on the vector field (as in the RKC code): with f0 = F(y),
repeat  Jv ≈ (F(y + δ v) - f0) / δ,  ρ ≈ ‖Jv‖,  v ← Jv / ‖Jv‖,  with δ = sqrt(eps)·‖y‖. Each iteration is
one vector-field evaluation and is counted (no JVP/HVP is used). The eigen-direction v is kept in the
solver state so that the iteration is warm-started; ρ is refreshed every `refresh_every` accepted steps
(skipped while h·ρ is far inside the 2-stage stability interval, forced after 5·refresh_every steps), and a
safety factor `rho_safety` (1.2, as in RKC) is applied. Alternatively pass `spectral_radius=fn(t, y, args)`
(e.g. an exact bound for a linear problem): it costs nothing in the count, so only use it when it really
is free.

A step has two loops, each with one call of the vector field: F(y0) when it is not known (after `init` or a
jump) followed by the power iterations, then the stages followed by F(y_{n+1}).  Every call site is a copy
of the field's program (for gradient flow, a gradient) for XLA to compile, and every loop one more program:
`init` evaluates nothing and T_s'(w0), T_s''(w0) have a closed form (`_chebyshev_end`).  The loops are
``lax.while_loop`` with traced trip counts, so the solver works under ``jax.jit`` and ``jax.vmap`` (over a
batch, the loop runs as long as the longest member needs and masks the others; each member's count is its
own number of evaluations, the compute spent is that of the longest member).  A rejected first step
repeats F(y0) and the first estimate (the state of a rejected step is rolled back); a caller that solves in
chunks can pass the final ``solver_state`` of one chunk to the next (``diffeqsolve(..., solver_state=)``),
as `implicitbias.training.flow` does, and skip both.

Step-size control, the recommended tolerances and the counting of evaluations (rejected steps included) are
`implicitbias.training.rkc_control`.

Alternatives measured (S11, seed 38, GD 7.45e5 evaluations): Tsit5 at rtol 1e-6/atol 1e-9: 3.6e4
evaluations but 8e-3 from the reference flow; Tsit5 with the controller recommended here: 5.3e4
(stability-limited tail, dt ≈ 3/λ_max); RKC2: 6.1e3. Implicit solvers (Kvaerno) would need Jacobians
(P = 3400 JVPs each with jacfwd) or a Krylov Newton solver and were not pursued.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jax import lax

from implicitbias.training.rkc_control import ErrorWithCount, int_dtype

__all__ = ["RKC2", "GradientFlowTerm", "rkc_stage_count"]

_DAMPING = 2.0 / 13.0


# --------------------------------------------------------------------------------------------------------
# small pytree helpers
# --------------------------------------------------------------------------------------------------------


def _axpy(alpha, x, y):
    """alpha * x + y, leafwise."""
    return jtu.tree_map(lambda a, b: alpha * a + b, x, y)


def _lin(coeffs, trees):
    """Σ_k coeffs[k] * trees[k], leafwise."""

    def f(*leaves):
        out = coeffs[0] * leaves[0]
        for c, leaf in zip(coeffs[1:], leaves[1:]):
            out = out + c * leaf
        return out

    return jtu.tree_map(f, *trees)


def _norm2(tree):
    leaves = jtu.tree_leaves(tree)
    if not leaves:
        return jnp.asarray(0.0)
    return jnp.sqrt(sum(jnp.sum(jnp.abs(x) ** 2) for x in leaves))


def _scale(alpha, tree):
    return jtu.tree_map(lambda x: alpha * x, tree)


def rkc_stage_count(h_rho, s_max: int | None = None):
    """Stage count used for a step with h·ρ = `h_rho` (ρ already including the safety factor).

    s = 1 + floor(sqrt(1 + 1.54 h ρ)), at least 2 (the rule of the RKC code, which keeps hρ inside the
    damped stability interval β(s) ≈ 0.653 s² with a margin).
    """
    # a non-finite or huge h·ρ maps to a huge stage count (capped by s_max -> the step is rejected)
    h_rho = jnp.where(jnp.isfinite(h_rho), jnp.clip(h_rho, 0.0, 1e15), 1e15)
    s = 1 + jnp.floor(jnp.sqrt(1.0 + 1.54 * h_rho)).astype(jnp.int32)
    s = jnp.maximum(s, 2)
    if s_max is not None:
        s = jnp.minimum(s, s_max)
    return s


def _chebyshev_end(w0, s):
    """T_s'(w0) and T_s''(w0) for w0 > 1, in closed form (traced s).

    With w0 = cosh θ: T_s(w0) = cosh(sθ), T_s'(w0) = s sinh(sθ) / sinh θ, and Chebyshev's equation
    (1 - x²) T'' - x T' + s² T = 0 gives T_s''(w0) = (s² T_s - w0 T_s') / (w0² - 1).  For w0 = 1 + ε/s² the
    difference loses about one digit (s² T_s ≈ 1.16 s², w0 T_s' ≈ 1.05 s²); tests/test_rkc.py compares it with
    the three-term recurrences up to s = 1000.  No loop: a loop is one more program for XLA to compile."""
    x = w0 - 1.0
    theta = jnp.log1p(x + jnp.sqrt(x * (2.0 + x)))  # acosh(1 + x), accurate for small x
    s = jnp.asarray(s, w0.dtype)
    t_s = jnp.cosh(s * theta)
    d_s = s * jnp.sinh(s * theta) / jnp.sinh(theta)
    e_s = (s**2 * t_s - w0 * d_s) / (x * (2.0 + x))
    return d_s, e_s


# --------------------------------------------------------------------------------------------------------
# the solver
# --------------------------------------------------------------------------------------------------------


class GradientFlowTerm(diffrax.AbstractTerm):
    """The ODE term dy/dt = F(t, y, args) of a vector field computed together with a scalar value: for gradient
    flow F = -∇L and the value is the loss L, both from one ``jax.value_and_grad``.

    `value_and_vector_field(t, y, args)` returns ``(value, F)``. To diffrax this is
    ``ODETerm(lambda t, y, args: value_and_vector_field(t, y, args)[1])`` (the value of the stage evaluations is
    dead code, removed by XLA); :class:`RKC2` with `stop_below` also reads the value at the end of each step,
    from the evaluation it makes there anyway (first same as last).
    """

    value_and_vector_field: Callable

    def vf(self, t, y, args):
        out = self.value_and_vector_field(t, y, args)[1]
        if jtu.tree_structure(out) != jtu.tree_structure(y):
            raise ValueError("GradientFlowTerm: the vector field must return a pytree with the structure of y")
        return out

    def contr(self, t0, t1, **kwargs):
        return t1 - t0

    def prod(self, vf, control):
        return jtu.tree_map(lambda v: control * v, vf)


def _value_and_vf(terms, t, y, args):
    """(value, F(t, y)) of the :class:`GradientFlowTerm` in `terms`.

    `diffeqsolve` hands the solver its term wrapped for the direction of time (a private diffrax class that
    calls the field at t · direction); the control of the wrapped term over [0, t] is that time, t · direction.
    """
    is_term = lambda x: isinstance(x, GradientFlowTerm)
    found = [x for x in jtu.tree_leaves(terms, is_leaf=is_term) if is_term(x)]
    if len(found) != 1:
        raise TypeError(f"RKC2(stop_below=...) needs a GradientFlowTerm (which has a value), got {terms}")
    term = found[0]
    return term.value_and_vector_field(t if term is terms else terms.contr(0.0, t), y, args)


class RKC2(diffrax.AbstractAdaptiveSolver):
    """Adaptive-stage second-order Runge--Kutta--Chebyshev solver (RKC, Sommeijer--Shampine--Verwer 1997).

    For ODEs dy/dt = F(t, y) whose Jacobian has eigenvalues near the negative real axis (gradient flow:
    -∇²L is symmetric, so they are real). Use with ``diffrax.PIDController(rtol, atol)`` (PI/PID
    coefficients optional), or -- recommended for gradient flow -- with :func:`gradient_flow_controller`,
    which also counts the evaluations of rejected steps.

    **Arguments** (all optional):

    - `s_max`: hard cap on the number of stages per step (default 1000, stable for h·ρ up to ~6.5e5).
      If a step needs more stages than this, it is computed with `s_max` stages and reported with an
      infinite error, so the controller shrinks the step.
    - `damping`: ε in w0 = 1 + ε/s² (default 2/13, as in RKC).
    - `rho_safety`: factor applied to the estimated spectral radius (default 1.2, as in RKC).
    - `refresh_every`: re-estimate ρ every this many accepted steps (default 10; the first step estimates
      it first). The power iteration is warm-started from the previous eigen-direction.
    - `skip_margin`: skip a due refresh while h·ρ·rho_safety·skip_margin < 1.95, i.e. while even a
      `skip_margin`-fold (default 4) growth of ρ would leave the 2-stage step stable; a refresh is forced
      after 5·refresh_every accepted steps regardless.
    - `power_max_iter`: power iterations of the first estimate (first step) at most (default 20); refreshes
      use at most `power_refresh_max_iter` (default 5).
    - `power_rtol`: stop the power iteration once successive estimates agree to this relative tolerance
      (default 0.05).
    - `spectral_radius`: optional callable ``(t, y, args) -> ρ`` replacing the power method (costs nothing
      in the count: use only for a bound that is genuinely free, e.g. a known linear operator).
    - `power_part`: optional callable ``y -> y`` that zeroes the passive components of the state, those the
      vector field does not depend on (e.g. a quadrature t = ∫ ds / L carried along with θ): the power method
      then acts on the others only.  A passive component adds no eigenvalue, but its row of the Jacobian can
      dominate ‖Jv‖ (with the loss clock, dt/ds = 1/L grows like 1/L) and its size would set the probe step δ.
    - `report_evals`: if True, the error estimate handed to the step-size controller carries the number
      of evaluations of the step; the controller must then be a :class:`CountingController` (possibly
      wrapping other controllers), e.g. from :func:`gradient_flow_controller`.
    - `end_value`: if True, the solver state keeps, as ``value``, the term's value at the end point of the last
      step, from the evaluation of F(y_{n+1}) the step makes anyway (the term must be a
      :class:`GradientFlowTerm`; its value may be any pytree).  A caller that needs more of that evaluation than
      F itself (the sliding flow needs the pre-activations and dL/df there) reads it from the state instead of
      evaluating the field at y_{n+1} once more.
    - `stop_below`: stop the solve after the first accepted step whose end point has a term value below this
      (the term must be a :class:`GradientFlowTerm`; needs `report_evals`): the solution then ends there
      with ``RESULTS.event_occurred``, as with a boolean ``diffrax.Event(lambda t, y, args, **kw: value(y) <
      stop_below)`` -- except at t0, which the caller tests itself -- but without the Event's extra
      evaluation of the value at every step: the value comes with F(y_{n+1}), which is evaluated anyway.

    The solver state is a dict: ``num_vf_evals`` is the cumulative number of vector-field evaluations of
    all accepted steps, ``init_evals`` those of `init` (0: it evaluates nothing; kept for the counts'
    formula), ``fresh`` whether F(y0) and ρ are still to be made by the next step, ``rho`` the current ρ
    estimate (without safety factor), ``stages`` the stage count of the last accepted step and
    ``max_stages`` the largest so far. Read counts with :func:`rkc_num_evaluations`.
    """

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.AbstractLocalInterpolation]] = (
        diffrax.ThirdOrderHermitePolynomialInterpolation
    )

    s_max: int = 1000
    damping: float = _DAMPING
    rho_safety: float = 1.2
    refresh_every: int = 10
    power_max_iter: int = 20
    power_refresh_max_iter: int = 5
    power_rtol: float = 0.05
    skip_margin: float = 4.0
    spectral_radius: Callable | None = None
    power_part: Callable | None = None
    report_evals: bool = eqx.field(static=True, default=False)
    stop_below: float | None = None
    end_value: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if self.stop_below is not None and not self.report_evals:
            raise ValueError("RKC2(stop_below=...) needs report_evals=True and a CountingController, which turns the "
                             "stop into RESULTS.event_occurred")

    def order(self, terms):
        return 2

    def error_order(self, terms):
        # Est = (12 (y_n - y_{n+1}) + 6h(F_n + F_{n+1}))/15 is O(h^3): the controller should use
        # factor ~ err^(-1/3), as the RKC code does.
        return 3

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    # -- the evaluations of a step: two loops, one call of the vector field each --------------------------

    def _part(self, y):
        return y if self.power_part is None else self.power_part(y)

    @property
    def _valued(self) -> bool:
        """Whether the stage evaluations carry the term's value (`stop_below` or `end_value`)."""
        return self.stop_below is not None or self.end_value

    def _eval(self, terms, t, y, args):
        """(value, F(t, y)): the value only with `stop_below` or `end_value` (then the term is a GradientFlowTerm)."""
        if not self._valued:
            return None, terms.vf(t, y, args)
        return _value_and_vf(terms, t, y, args)

    def _value_zeros(self, terms, t, y, args):
        """Zeros shaped as the term's value (the loop's value before its first evaluation), or None."""
        if not self._valued:
            return None
        shape = jax.eval_shape(lambda: _value_and_vf(terms, t, y, args)[0])
        return jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shape)

    def _f0_and_rho(self, terms, t, y, f0, need_f0, args, v, rho, max_iter):
        """F(t, y) if `need_f0` (else the stored `f0`), then the nonlinear power method warm-started at
        direction v, in one loop: returns (f0, rho, v, evaluations).

        One loop with one call of the vector field, whose first trip evaluates F(y) itself when it is not known
        (after `init` or a jump): every call site of the field is a copy of the gradient's program for XLA to
        compile."""
        eps = jnp.finfo(jnp.result_type(*jtu.tree_leaves(y))).eps
        part = self._part
        ynorm = _norm2(part(y))
        delta = jnp.sqrt(eps) * jnp.where(ynorm > 0, ynorm, 1.0)

        def cond(c):
            need, k, rho_prev, rho_k, _, _ = c
            # rho_prev starts at the stored estimate, so one warm-started iteration can already agree
            converged = (k >= 1) & (jnp.abs(rho_k - rho_prev) <= self.power_rtol * rho_k)
            return need | ((k < max_iter) & ~converged)

        def body(c):
            need, k, rho_prev, rho_k, v_k, f0_k = c
            z = _axpy(jnp.where(need, 0.0, delta), v_k, y)  # the trip that evaluates F(y) itself has z = y
            fz = self._eval(terms, t, z, args)[1]
            jv = part(_scale(1.0 / delta, jtu.tree_map(lambda a, b: a - b, fz, f0_k)))
            r = _norm2(jv)
            ok = ~need & jnp.isfinite(r) & (r > 0)
            v_new = jtu.tree_map(lambda a, b: jnp.where(ok, a / jnp.where(ok, r, 1.0), b), jv, v_k)
            f0_new = jtu.tree_map(lambda a, b: jnp.where(need, a, b), fz, f0_k)
            rho_new = jnp.where(ok, r, rho_k)  # ok is false on the trip that evaluates F(y)
            return (jnp.zeros_like(need), jnp.where(need, k, k + 1), jnp.where(need, rho_prev, rho_k), rho_new,
                    v_new, f0_new)

        start = (jnp.asarray(need_f0), jnp.asarray(0, int_dtype()), rho, rho, v, f0)
        _, k, _, rho_out, v_out, f0_out = lax.while_loop(cond, body, start)
        evals = k + jnp.where(need_f0, 1, 0).astype(int_dtype())
        if self.spectral_radius is not None:
            rho_out = jnp.asarray(self.spectral_radius(t, y, args), rho.dtype)
        return f0_out, rho_out, v_out, evals

    # -- init / step -----------------------------------------------------------------------------------

    def init(self, terms, t0, t1, y0, args):
        """No evaluation here: the first step evaluates F(y0) and makes the first ρ estimate (at most
        `power_max_iter` iterations) in its own loop, so that the program has fewer call sites of the field."""
        del t1
        f_shape = jax.eval_shape(lambda: terms.vf(t0, y0, args))
        # deterministic start for the power iteration, not orthogonal to the top mode for any but a measure-zero set
        # of problems: the fractional parts of k·(golden ratio) - 1/2 over the flattened state (a Weyl sequence;
        # jax.random's threefry would add a program for XLA to compile for as little)
        leaves, treedef = jtu.tree_flatten(y0)
        sizes = [int(jnp.size(x)) for x in leaves]
        offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        golden = 0.6180339887498949

        def weyl(x, offset):
            k = jnp.arange(1, jnp.size(x) + 1, dtype=jnp.result_type(x)) + offset
            return jnp.reshape(jnp.mod(k * golden, 1.0) - 0.5, jnp.shape(x))

        v0 = jtu.tree_unflatten(treedef, [weyl(x, o) for x, o in zip(leaves, offsets)])
        v0 = self._part(v0)
        v0 = _scale(1.0 / _norm2(v0), v0)
        extra = {} if not self.end_value else {"value": self._value_zeros(terms, t0, y0, args)}
        return dict(
            **extra,
            f0=jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), f_shape),
            fresh=jnp.asarray(True),  # F(y0) not evaluated, ρ not estimated yet
            v=v0,
            rho=jnp.zeros((), jnp.result_type(*leaves)),
            since_refresh=jnp.asarray(0, int_dtype()),
            num_vf_evals=jnp.asarray(0, int_dtype()),
            init_evals=jnp.asarray(0, int_dtype()),
            stages=jnp.asarray(0, jnp.int32),
            max_stages=jnp.asarray(0, jnp.int32),
        )

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        st = solver_state
        h = t1 - t0
        fresh = st["fresh"]

        # spectral radius: refreshed every `refresh_every` accepted steps (warm-started)
        # Skip the refresh while h·ρ is far inside the 2-stage stability interval (hρ <= ~1.95): even a
        # `skip_margin`-fold growth of ρ since the last estimate would not change the stage count. The
        # refresh then happens on the first step where h·ρ gets close (since_refresh keeps counting), and
        # in any case after 5·refresh_every steps: a stale, too small ρ would otherwise limit h through
        # instability and keep h·ρ_stale small forever.  The first step of a solve makes the first estimate.
        since = st["since_refresh"] + 1
        far_inside = jnp.abs(h) * self.rho_safety * st["rho"] * self.skip_margin < 1.95
        forced = since >= 5 * self.refresh_every
        refresh = ((since >= self.refresh_every) & ~far_inside) | forced | made_jump
        if self.spectral_radius is None:
            max_iter = jnp.where(fresh, self.power_max_iter, jnp.where(refresh, self.power_refresh_max_iter, 0))
            since_refresh = jnp.where(fresh, 1, jnp.where(refresh, 0, st["since_refresh"] + 1))
        else:
            max_iter = jnp.asarray(0, int_dtype())
            since_refresh = st["since_refresh"]
        # after a jump (or init) the stored F(y0) is stale: the loop's first trip evaluates it
        f0, rho, v, evals = self._f0_and_rho(terms, t0, y0, st["f0"], fresh | made_jump, args, st["v"], st["rho"],
                                             max_iter)

        # stage count (traced)
        h_rho = jnp.abs(h) * self.rho_safety * rho
        s_needed = rkc_stage_count(h_rho)
        s = jnp.minimum(s_needed, self.s_max)
        capped = s_needed > self.s_max

        dtype = jnp.result_type(float)
        w0 = 1.0 + self.damping / (s.astype(dtype) ** 2)
        d_s, e_s = _chebyshev_end(w0, s)
        w1 = d_s / e_s
        b2 = 1.0 / (4.0 * w0**2)  # b_2 = T_2''/T_2'^2 = 4/(4 w0)^2; b_0 = b_1 = b_2

        control = terms.contr(t0, t1)
        k0 = terms.prod(f0, control)  # h F_0
        y1_stage = _axpy(b2 * w1, k0, y0)  # Y_1
        c1 = b2 * w1

        # Stages j = 2..s evaluate F(Y_{j-1}); one more trip, j = s + 1, evaluates F(t1, Y_s) = F(y_{n+1}) for the
        # error estimate and the next step (first same as last).  That trip's stage update is not used: Y_s
        # is then the loop's second-to-last stage.
        def cond(c):
            return c[0] <= s + 1

        def body(c):
            j, yjm1, yjm2, cjm1, t1_, t0_, d1, d0, e1, e0, bjm1, bjm2, _, _ = c
            tj = 2 * w0 * t1_ - t0_
            dj = 2 * t1_ + 2 * w0 * d1 - d0
            ej = 4 * d1 + 2 * w0 * e1 - e0
            bj = ej / dj**2
            mu = 2 * w0 * bj / bjm1
            nu = -bj / bjm2
            mut = 2 * w1 * bj / bjm1
            gamt = -(1.0 - bjm1 * t1_) * mut
            value, fj = self._eval(terms, jnp.where(j > s, t1, t0 + cjm1 * h), yjm1, args)
            kj = terms.prod(fj, control)  # h F(Y_{j-1})
            yj = _lin((1.0 - mu - nu, mu, nu, mut, gamt), (y0, yjm1, yjm2, kj, k0))
            cj = w1 * ej / dj
            return j + 1, yj, yjm1, cj, tj, t1_, dj, d1, ej, e1, bj, bjm1, fj, value

        one = jnp.ones_like(w0)
        zero = jnp.zeros_like(w0)
        value0 = self._value_zeros(terms, t0, y0, args)
        init = (jnp.asarray(2, s.dtype), y1_stage, y0, c1, w0, one, one, zero, zero, zero, b2, b2, f0, value0)
        out = lax.while_loop(cond, body, init)
        y1, f1, value1 = out[2], out[12], out[13]
        evals = evals + s.astype(int_dtype())  # s - 1 stages and F(y_{n+1})

        stop = None if self.stop_below is None else jnp.where(value1 < self.stop_below, 1.0, 0.0)
        k1 = terms.prod(f1, control)
        y_error = jtu.tree_map(lambda a, b, p, q: (12.0 * (a - b) + 6.0 * (p + q)) / 15.0, y0, y1, k0, k1)
        y_error = jtu.tree_map(lambda e: jnp.where(capped, jnp.inf, e), y_error)

        new_state = dict(
            **({"value": value1} if self.end_value else {}),
            f0=f1,
            fresh=jnp.asarray(False),
            v=v,
            rho=jnp.asarray(rho, st["rho"].dtype),
            since_refresh=since_refresh,
            num_vf_evals=st["num_vf_evals"] + evals.astype(int_dtype()),
            init_evals=st["init_evals"],
            stages=s.astype(jnp.int32),
            max_stages=jnp.maximum(st["max_stages"], s.astype(jnp.int32)),
        )
        dense_info = dict(y0=y0, y1=y1, k0=k0, k1=k1)
        if self.report_evals:
            y_error = ErrorWithCount(y_error, evals, stop)
        return y1, y_error, dense_info, new_state, diffrax.RESULTS.successful
