"""The compiled loop of the fixed-step methods: an optax transformation advanced to a checkpoint.

`make_discrete(problem, method, stop, n)` builds `(init_carry, advance)` for one member from what the
method declares (`implicitbias.training.methods.base.DiscreteMethod`): its optax transformation
`method.optimizer(hp)` (whose update receives the loss of the step as the extra argument `value`,
as in optax), the data a step sees (`method.minibatch`) and whether that data is random (`method.stochastic`).
`advance(carry, target_step, ...)` runs a `lax.while_loop` until the member reaches `target_step`,
converges (full-batch loss < tol) or diverges.  Under `vmap` the loop runs while any member is
running, and a member that has stopped keeps its state unchanged.

Precision: with `method.dtype` = float32 the parameters, the data, the optimizer's hyper-parameters and every
step are float32 (as in PyTorch, the papers' code bases); the loss is carried through the loop in float64 bits.

Divergence: when the loss at the current parameters is non-finite or exceeds
`divergence_factor` x the initial loss, or the update is longer than `divergence_factor` x
max(||theta||, 1), the member is reset to its previous (finite) parameters and marked DIVERGED with
the step at which it happened, so that no non-finite value is recorded.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from implicitbias.training.problem import Problem, tree_where
from implicitbias.training.stopping import Status, Stop

#: positions in the integer vector of the loop state of `advance`
_STEP, _FAIL, _STATUS, _LOSS = 0, 1, 2, 3


def _loss_bits(loss):
    """The loss as the bits of a float64 in an int64 (exact both ways, see `_loss_from_bits`)."""
    return jax.lax.bitcast_convert_type(jnp.asarray(loss).astype(jnp.float64), jnp.int64)


def _loss_from_bits(bits, dtype):
    return jax.lax.bitcast_convert_type(bits, jnp.float64).astype(dtype)


def _two_norms(a, b):
    """(||a||, ||b||) of two pytrees of the same structure (`tree_norm` of each), as one variadic reduction
    per leaf: a single pass and a single kernel, where two `tree_norm`s take two passes of three kernels."""
    sum_a = sum_b = 0.0
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        zero = jnp.zeros((), jnp.result_type(u, v))
        su, sv = jax.lax.reduce((u * u, v * v), (zero, zero), lambda p, q: (p[0] + q[0], p[1] + q[1]),
                                tuple(range(jnp.ndim(u))))
        sum_a, sum_b = sum_a + su, sum_b + sv
    return jnp.sqrt(sum_a), jnp.sqrt(sum_b)


def _as(dtype, tree):
    """The floating-point leaves of a pytree cast to `dtype` (integer leaves, e.g. seeds, unchanged)."""
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a).astype(dtype) if jnp.issubdtype(jnp.asarray(a).dtype, jnp.floating) else a, tree)


def make_discrete(problem: Problem, method, stop: Stop, n: int):
    """(init_carry, advance) for one member of a `DiscreteMethod`; the caller vmaps and jits them."""
    stochastic = method.stochastic
    dtype = jnp.dtype(method.dtype)
    check_tol = stop.loss_tol > 0 and not stochastic

    def threshold(c):
        return stop.divergence_factor * jnp.maximum(c["loss0"], 1.0)

    def optimizer(hp):
        return optax.with_extra_args_support(method.optimizer(hp))

    def init_carry(hp, theta, const, X, y):
        limit = jnp.iinfo(jnp.int64).max if stop.max_time is None else jnp.floor(stop.max_time / hp["lr"])
        hp, theta, const, X, y = _as(dtype, (hp, theta, const, X, y))
        loss0 = problem.risk(hp, theta, const, X, y)
        return {
            "theta": theta,
            "theta_prev": theta,
            "opt_state": optimizer(hp).init(theta),
            "step": jnp.asarray(0, jnp.int64),
            "fail_step": jnp.asarray(-1, jnp.int64),
            "limit": jnp.asarray(limit, jnp.int64),
            "status": jnp.asarray(Status.RUNNING, jnp.int32),
            "loss": loss0,
            "loss0": loss0,
        }

    def advance(carry, target, hp, const, X, y):
        hp, const, X, y = _as(dtype, (hp, const, X, y))
        opt = optimizer(hp)
        value_and_grad = jax.value_and_grad(lambda th, Xb, yb: problem.risk(hp, th, const, Xb, yb))
        # loop invariants, out of the loop state
        stop_at = jnp.minimum(target, carry["limit"])
        limit_loss = threshold(carry)
        # The loop state packs the scalars into one integer vector (step, fail_step, status and the bits of
        # the loss), updated by one small kernel per step rather than one per field: with small networks a
        # step costs about as many microseconds as it launches kernels.
        state = {
            "theta": carry["theta"],
            "theta_prev": carry["theta_prev"],
            "opt_state": carry["opt_state"],
            "ints": jnp.stack([carry["step"], carry["fail_step"], carry["status"].astype(jnp.int64),
                               _loss_bits(carry["loss"])]),
        }

        def cond(s):
            return (s["ints"][_STATUS] == Status.RUNNING) & (s["ints"][_STEP] < stop_at)

        def body(s):
            step, fail_step = s["ints"][_STEP], s["ints"][_FAIL]
            Xb, yb = method.minibatch(hp, step, X, y)
            L, g = value_and_grad(s["theta"], Xb, yb)
            updates, opt_state = opt.update(g, s["opt_state"], s["theta"], value=L)
            step_len, theta_norm = _two_norms(updates, s["theta"])
            # a step longer than divergence_factor x max(||theta||, 1) is numerically divergent too: with the
            # logistic loss on separable data an absurd lr can send the loss to 0 by a blow-up of ||theta||
            blowup = step_len > stop.divergence_factor * jnp.maximum(theta_norm, 1.0)
            bad = ~jnp.isfinite(L) | (L > limit_loss) | ~jnp.isfinite(step_len) | blowup
            done = (L < stop.loss_tol) if check_tol else jnp.asarray(False)
            moved = optax.apply_updates(s["theta"], updates)
            accept = ~bad & ~done
            status = jnp.where(bad, Status.DIVERGED, jnp.where(done, Status.CONVERGED, Status.RUNNING))
            # A step that turns bad leaves theta and theta_prev as they are, and the parameters are reverted
            # to theta_prev after the loop (as if at once): the new theta never reads theta_prev, which saves
            # the compiled step a copy of the parameters.
            return {
                "theta": tree_where(accept, moved, s["theta"]),
                "theta_prev": tree_where(accept, s["theta"], s["theta_prev"]),
                "opt_state": tree_where(accept, opt_state, s["opt_state"]),
                "ints": jnp.stack([jnp.maximum(step + accept - bad, 0), jnp.where(bad, step, fail_step),
                                   status.astype(jnp.int64),
                                   jnp.where(bad, s["ints"][_LOSS], _loss_bits(L))]),
            }

        s = jax.lax.while_loop(cond, body, state)
        diverged = (carry["status"] == Status.RUNNING) & (s["ints"][_STATUS] == Status.DIVERGED)
        c = {
            **carry,
            "theta": tree_where(diverged, s["theta_prev"], s["theta"]),
            "theta_prev": s["theta_prev"],
            "opt_state": s["opt_state"],
            "step": s["ints"][_STEP],
            "fail_step": s["ints"][_FAIL],
            "status": s["ints"][_STATUS].astype(jnp.int32),
            "loss": _loss_from_bits(s["ints"][_LOSS], carry["loss"].dtype),
        }
        # the parameters handed to the recorder must have a finite, bounded loss: check the last step
        L = problem.risk(hp, c["theta"], const, X, y)
        bad = (c["status"] == Status.RUNNING) & (~jnp.isfinite(L) | (L > limit_loss))
        return {
            **c,
            "theta": tree_where(bad, c["theta_prev"], c["theta"]),
            "step": jnp.where(bad, jnp.maximum(c["step"] - 1, 0), c["step"]),
            "fail_step": jnp.where(bad, c["step"], c["fail_step"]),
            "status": jnp.where(bad, Status.DIVERGED, c["status"]).astype(jnp.int32),
            "loss": jnp.where(bad | stochastic, c["loss"], L),
        }

    return init_carry, advance
