"""Gradient flow of a two-layer ReLU network that slides along its kinks (the stepping of
`GradientFlow(kinks="slide")`).

The field of a ReLU network jumps where a pre-activation <w_j, x_k> changes sign (a *kink*).  An explicit step
across a kink has a first-order error, and where the field pushes a neuron onto a kink from both sides, the
plain flow (`kinks="cross"`) chatters across it with collapsing steps; the side a neuron ends on is then decided
by the solver's tolerance.  Here the pairs (neuron j, point k) that sit on their kink are kept in a set S (at most
`kink_slots` per neuron) and the flow is the Filippov (Clarke-subdifferential) flow of Chistikov et al.'s
Proposition 1:

* **between accepted steps** S is fixed, and the field is smooth: the field without the pairs of S, projected, row
  by row, onto the tangent space of each neuron's kinks, dW/dt = (C - B) X with C X the field without them
  (C_jk = -a_j g_k on the active pairs, g = dL/df) and B_j = G_j^-1 <C_j X, x_k>_{k in S_j} (G_j the Gram matrix of
  the x_k of S_j, fixed while S is).  RKC2 and its error control take long steps on it;
* **after every accepted step**, the pairs whose pre-activation changed sign over it (the first `kink_candidates`
  of them) join S as candidates; the sliding QP at the end point (box-constrained, convex: each coefficient
  beta_jk of x_k in dw_j/dt between 0, point k off, and -a_j g_k, on), solved by a primal-dual active-set
  iteration, keeps the pairs that slide (beta inside its box) and drops the others, old pairs included; each
  neuron is projected onto the kinks of its pairs (onto their inactive side by a few ulps, so that a held pair reads
  as inactive, as ReLU(0) = 0 has it).  Its KKT conditions are the sliding conditions: <dw_j/dt, x_k>
  = 0 inside the box, <= 0 where the point is off and >= 0 where it is on.

The tests after a step read the field's evaluation at its end point, which RKC makes anyway (`RKC2(end_value=True)`
keeps what they need of it); an accepted step where S changed costs one evaluation more than RKC's own (the
first-same-as-last field of the next step, under the new S), counted in `grad_evals`.
The linear solves are Cholesky factorisations written in XLA's own operations (`spd_solve`), not LAPACK's:
jaxlib 0.10's batched LAPACK solves deadlock when two run at once (`benchmarks/check_batched_solve_deadlock.py`).

Scope (checked before anything compiles, `check_sliding_model`): a `TwoLayer` network with the ReLU activation and
no biases, trained or fixed outer weights, any loss of the predictions, RKC in physical time.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from implicitbias._spec import ConfigError
from implicitbias.training.flow import initial_carry
from implicitbias.training.problem import Problem, tree_norm, tree_where
from implicitbias.training.rkc import RKC2, GradientFlowTerm
from implicitbias.training.rkc_control import gradient_flow_controller
from implicitbias.training.stopping import Status, Stop

#: primal-dual active-set iterations of the sliding QP after a step (the iteration ends earlier once its active
#: sets stop changing, where it is exact)
PDAS_ITERATIONS = 6

#: a held pair is placed ROUNDING_MARGIN x d x eps x |w_j| |x_k| on the inactive side of its kink (`_Kinks.project`)
ROUNDING_MARGIN = 4

#: RKC's error order for the controller (as in `flow`)
ERROR_ORDER = 3

#: the step-size controller's PI coefficients (diffrax `PIDController`): the first of the less sensitive PI
#: controllers diffrax's documentation lists for error estimates that do not vary smoothly.  Here almost every
#: accepted step has pairs crossing their kinks (on the d = 256 probe of issue 40, 940 of 957, 16 per step at the
#: median), each a first-order error, and the integral controller (pcoeff 0, icoeff 1) rejected 20% of the steps,
#: 22% of the evaluations.  `python benchmarks/bench_sliding_events.py` measures it against the integral controller
#: and the other listed pairs.
PID_COEFFICIENTS = {"pcoeff": 0.4, "icoeff": 0.3}


def check_sliding_model(model, loss, method) -> None:
    """Raise ConfigError, naming the field, where `GradientFlow(kinks="slide")` does not apply."""
    if method.solver != "rkc":
        raise ConfigError(f"method.solver = {method.solver!r} is not allowed with method.kinks = 'slide': expected "
                          "'rkc' (the sliding flow steps with RKC2)")
    if method.clock != "time":
        raise ConfigError(f"method.clock = {method.clock!r} is not allowed with method.kinks = 'slide': expected "
                          "'time'")
    if getattr(model, "kind", None) != "two_layer":
        raise ConfigError(f"model.kind = {getattr(model, 'kind', None)!r} is not allowed with method.kinks = "
                          "'slide': expected 'two_layer' (its kinks are those of <w_j, x_k> = 0)")
    if model.activation != "relu":
        raise ConfigError(f"model.activation = {model.activation!r} is not allowed with method.kinks = 'slide': "
                          "expected 'relu'")
    if model.bias:
        raise ConfigError("model.bias = True is not allowed with method.kinks = 'slide': expected False (the "
                          "kinks are the hyperplanes <w_j, x_k> = 0 through the origin)")
    if loss.name == "cross_entropy":
        raise ConfigError("loss.name = 'cross_entropy' is not allowed with method.kinks = 'slide': expected a loss "
                          "of one output (square, logistic or exponential)")


def spd_solve(A, B, size=None):
    """A^-1 B for a batch of symmetric positive definite A (..., K, K) and B (..., K) or (..., K, r): a Cholesky
    factorisation and two triangular solves, each a loop over the columns in XLA's own operations.

    size: where given (an int, traced or not), every A is the identity outside its leading size x size block (as
    the Gram matrices of a neuron's held pairs are, with its pairs in its first slots), and the loops run over the
    first `size` columns only: they cost `size` sequential iterations over the batch instead of K."""
    vector = B.ndim == A.ndim - 1
    if vector:
        B = B[..., None]
    K = A.shape[-1]
    n = K if size is None else size
    idx = jnp.arange(K)

    def column(j, L):  # the Cholesky factor, column j (L starts as the identity: the columns past n stay so)
        row = jnp.where(idx < j, L[..., j, :], 0.0)
        diag = jnp.sqrt(jnp.maximum(A[..., j, j] - jnp.sum(row * row, axis=-1), 1e-300))
        below = (A[..., :, j] - jnp.einsum("...ik,...k->...i", L, row)) / diag[..., None]
        below = jnp.where(idx > j, below, 0.0)
        return L.at[..., :, j].set(below.at[..., j].set(diag))

    L = lax.fori_loop(0, n, column, jnp.broadcast_to(jnp.eye(K, dtype=A.dtype), A.shape))

    def forward(i, Z):  # L Z = B, row i (the rows past n of L are the identity's: Z = B there)
        left = jnp.where(idx < i, L[..., i, :], 0.0)
        z = (B[..., i, :] - jnp.einsum("...k,...kr->...r", left, Z)) / L[..., i, i][..., None]
        return Z.at[..., i, :].set(z)

    Z = lax.fori_loop(0, n, forward, B)

    def backward(t, Xs):  # L^T X = Z, row n - 1 - t
        i = n - 1 - t
        below = jnp.where(idx > i, L[..., :, i], 0.0)
        x = (Z[..., i, :] - jnp.einsum("...k,...kr->...r", below, Xs)) / L[..., i, i][..., None]
        return Xs.at[..., i, :].set(x)

    X = lax.fori_loop(0, n, backward, Z)
    return X[..., 0] if vector else X


def held_count(S):
    """The most pairs any neuron holds: with each neuron's pairs in its first slots (`compact`), every Gram matrix
    of S is the identity outside its leading block of this size."""
    return jnp.max(jnp.sum(S >= 0, axis=-1))


def compact(S):
    """Each neuron's pairs moved to its first slots, in their order (the empty slots, -1, after them)."""
    return jnp.take_along_axis(S, jnp.argsort(S < 0, axis=-1, stable=True), axis=-1)


class _Kinks:
    """The sliding field and the end-of-step handling of one member on data (X, y)."""

    def __init__(self, problem: Problem, hp, const, X, y, K: int, P: int):
        self.model = problem.member_model(hp)
        self.loss = problem.loss
        self.const, self.X, self.y, self.K, self.P = const, X, y, K, P
        self.n = X.shape[0]
        self.XX = X @ X.T  # each neuron's Gram matrix is a gather from it
        self.x_norm = jnp.linalg.norm(X, axis=1)

    def slot_combination(self, beta, S, size):
        """sum over the slots l of S_j of beta_jl x_(S_jl), for each neuron j (m, d), empty slots left out: a loop over
        the first `size` slots (`held_count`), each a gather of one row of X per neuron (m x size x d reads, where
        gathering every slot's x_k at once would read and write m x K x d)."""
        valid, Sc = S >= 0, jnp.maximum(S, 0)

        def slot(l, out):
            return out + jnp.where(valid[:, l], beta[:, l], 0.0)[:, None] * self.X[Sc[:, l]]

        return lax.fori_loop(0, size, slot, jnp.zeros((S.shape[0], self.X.shape[1]), beta.dtype))

    def outer(self, theta):
        return self.model.outer(theta, self.const)

    def mask_of(self, S):
        m = S.shape[0]
        rows = jnp.broadcast_to(jnp.arange(m)[:, None], S.shape)
        return jnp.zeros((m, self.n), bool).at[rows, jnp.maximum(S, 0)].max(S >= 0)

    def parts(self, theta, mask):
        """(loss, field of W without the pairs of `mask` as C (m, n) with field C X, field of a, Z = W X^T, g):
        g_k = dL/df_k, C_jk = -a_j g_k on the active pairs not in `mask`."""
        W, a = theta["W"], self.outer(theta)
        Z = W @ self.X.T
        act = (Z > 0) & ~mask
        H = jnp.where(act, Z, 0.0)
        pred = a @ H
        L, g = jax.value_and_grad(lambda p: self.loss.risk(p, self.y))(pred)
        C = -(a[:, None] * jnp.where(act, g[None, :], 0.0))
        Fa = -(H @ g)
        return L, C, Fa, Z, g

    def gram(self, S):
        """(valid, the Gram matrices (m, K, K) of each neuron's kink normals x_k, with the identity on the empty
        slots)."""
        valid = S >= 0
        Sc = jnp.maximum(S, 0)
        both = valid[:, :, None] & valid[:, None, :]
        G = jnp.where(both, self.XX[Sc[:, :, None], Sc[:, None, :]], 0.0) + jnp.eye(S.shape[1]) * (~valid)[:, None, :]
        return valid, G

    def prepare(self, S):
        """What stays fixed while S does: the mask of its pairs, the inverse Gram matrices and the most pairs a
        neuron holds (S compact: `compact`)."""
        _, G = self.gram(S)
        size = held_count(S)
        Ginv = spd_solve(G, jnp.broadcast_to(jnp.eye(self.K), G.shape), size)
        return {"S": S, "mask": self.mask_of(S), "Ginv": Ginv, "size": size}

    def value_and_field(self, t, theta, args):
        """The field for the fixed set S of `args`: without the pairs of S, projected onto the tangent space of each
        neuron's kinks (every pair of S held on its kink): (C - B) X with B_jk = beta_jk on the pairs of S,
        beta_j = G_j^-1 <C_j X, x_k>_(k in S_j) read off C X X^T.  (A loop over the held slots, gathering their x_k,
        instead of the product C X X^T was 10% faster at d = 256 with 4 pairs held on half the neurons and 20% slower
        with 12.)  Its value is what `handle` needs of the end point of a step (RKC2 keeps it with `end_value`):
        {"L": the loss, "Z": W X^T, "g": dL/df, "CXX": C X X^T, whose entry (j, k) is <x_k, the field of w_j without
        the pairs of S>}."""
        S = args["S"]
        valid = S >= 0
        Sc = jnp.maximum(S, 0)
        L, C, Fa, Z, g = self.parts(theta, args["mask"])
        CXX = C @ self.XX
        b = jnp.where(valid, jnp.take_along_axis(CXX, Sc, axis=1), 0.0)
        beta = jnp.where(valid, jnp.einsum("mkl,ml->mk", args["Ginv"], b), 0.0)
        rows = jnp.broadcast_to(jnp.arange(S.shape[0])[:, None], S.shape)
        B = jnp.zeros_like(C).at[rows, Sc].add(beta)
        out = {"W": (C - B) @ self.X}
        if "a" in theta:
            out["a"] = Fa
        return {"L": L, "Z": Z, "g": g, "CXX": CXX}, out

    def project(self, V, args, VX):
        """Each row of V moved along its neuron's kink normals onto its kinks, on their inactive side by a few ulps:
        <v_j, x_k> = -ROUNDING_MARGIN d eps |v_j| |x_k| for the pairs of S_j (the rounding bound of a d-term dot
        product, with a margin), so that a held pair reads as inactive, as ReLU(0) = 0 has it, in every reading of
        activity that tests <w_j, x_k> > 0.  `args`: `prepare(S)`, whose inverse Gram matrices it reuses; `VX`: V X^T
        (its entries of S are the <v_j, x_k>)."""
        S, size = args["S"], args["size"]
        valid, Sc = S >= 0, jnp.maximum(S, 0)
        d = self.X.shape[1]
        margin = ROUNDING_MARGIN * d * jnp.finfo(V.dtype).eps * jnp.linalg.norm(V, axis=1)[:, None] * self.x_norm[Sc]
        rhs = jnp.where(valid, jnp.take_along_axis(VX, Sc, axis=1) + margin, 0.0)
        beta = jnp.where(valid, jnp.einsum("mkl,ml->mk", args["Ginv"], rhs), 0.0)
        return V - self.slot_combination(beta, S, size)

    def sliding(self, b, a, g, S):
        """Which pairs of S slide: the interior of the box-constrained QP min 1/2 beta^T G beta + b^T beta (b_jk =
        <F_j, x_k>, F_j the field of w_j without the pairs of S), beta_jk between 0 and -a_j g_k, solved by a
        primal-dual active-set iteration."""
        valid, G = self.gram(S)
        b = jnp.where(valid, b, 0.0)
        full = -a[:, None] * g[jnp.maximum(S, 0)]
        lo = jnp.where(valid, jnp.minimum(0.0, full), 0.0)
        hi = jnp.where(valid, jnp.maximum(0.0, full), 0.0)
        eye = jnp.eye(self.K)
        size = held_count(S)

        def solve(sets):
            A_lo, A_hi = sets
            free = valid & ~A_lo & ~A_hi
            fixed = jnp.where(A_lo, lo, jnp.where(A_hi, hi, 0.0))
            rhs = -(b + jnp.einsum("mkl,ml->mk", G, fixed))
            M = G * (free[:, :, None] & free[:, None, :]) + eye * (~free)[:, None, :]
            return jnp.where(free, spd_solve(M, jnp.where(free, rhs, 0.0), size), fixed)

        def update(sets):
            beta = solve(sets)
            grad = jnp.einsum("mkl,ml->mk", G, beta) + b
            A_lo = valid & (beta - grad < lo)
            A_hi = valid & ~A_lo & (beta - grad > hi)
            return A_lo, A_hi

        none = jnp.zeros_like(valid)

        def unsettled(c):
            i, sets, prev = c
            return (i < PDAS_ITERATIONS) & ((i == 0) | jnp.any((sets[0] != prev[0]) | (sets[1] != prev[1])))

        def iterate(c):
            i, sets, _ = c
            return i + 1, update(sets), sets

        _, (A_lo, A_hi), _ = lax.while_loop(unsettled, iterate, (jnp.asarray(0), (none, none), (none, none)))
        return valid & ~A_lo & ~A_hi

    def handle(self, theta, args, Z0, end):
        """After an accepted step: entries (pairs that crossed their kink and slide) and exits (pairs that no
        longer slide), and each neuron projected onto the kinks of its pairs.  `end`: the value of the field's
        evaluation at the end point `theta` (`value_and_field`, kept by RKC2 from its last stage: no evaluation
        here).  Returns (theta, args, changed, loss).  (Skipping the QP, the projection and the new Gram matrices
        where nothing crossed and every held pair still slid cost more than it saved on the d = 256 probe at 24
        slots: 68 s against 56 s.)"""
        L, Z1, g = end["L"], end["Z"], end["g"]
        crossed = (jnp.sign(Z1) != jnp.sign(Z0)) & ~args["mask"]
        S = args["S"]
        a = self.outer(theta)
        # the first P crossing pairs in index order
        (idx,) = jnp.nonzero(crossed.ravel(), size=self.P, fill_value=0)
        live = jnp.arange(self.P) < jnp.sum(crossed)
        jp, kp = idx // crossed.shape[1], idx % crossed.shape[1]
        # the r-th candidate of neuron j takes the r-th free slot of its row, while there is one
        m = S.shape[0]
        onehot = (jp[:, None] == jnp.arange(m)[None, :]) & live[:, None]
        rank = jnp.take_along_axis(jnp.cumsum(onehot, axis=0) - 1, jp[:, None], axis=1)[:, 0]
        free = S < 0
        free_slots = jnp.argsort(~free, axis=1, stable=True)
        added = live & (rank < jnp.sum(free, axis=1)[jp])
        slot = jnp.take_along_axis(free_slots[jp], jnp.clip(rank, 0, self.K - 1)[:, None], axis=1)[:, 0]
        S_cand = S.at[jnp.where(added, jp, m), slot].set(kp, mode="drop")
        # b_jl = <F_j, x_l> over the slots l of S_cand, F_j the field of w_j without the pairs of S_cand: that without
        # those of S (CXX), less the contribution -a_j g_k x_k of each candidate k of neuron j on the active side
        Sc = jnp.maximum(S_cand, 0)
        b = jnp.take_along_axis(end["CXX"], Sc, axis=1)
        on = added & (Z1[jp, kp] > 0)
        b = b.at[jp].add(jnp.where(on, a[jp] * g[kp], 0.0)[:, None] * self.XX[kp[:, None], Sc[jp]])
        interior = self.sliding(b, a, g, S_cand)
        S_new = compact(jnp.where(interior, S_cand, -1))
        changed = jnp.any(S_new != S)
        args_new = self.prepare(S_new)
        Wp = self.project(theta["W"], args_new, Z1)
        has = jnp.any(S_new >= 0, axis=1)
        theta = {**theta, "W": jnp.where(has[:, None], Wp, theta["W"])}
        return theta, args_new, changed, L


def make_sliding_flow(problem: Problem, method, stop: Stop):
    """(init_carry, advance) of the sliding flow for one member; the caller vmaps and jits them."""
    check_sliding_model(problem.model, problem.loss, method)
    P = method.kink_candidates

    def slots(X) -> int:
        # a neuron lies on at most n kinks, and on at most d with linearly independent normals (its Gram matrix
        # is then positive definite): no more slots than that
        return min(method.kink_slots, *X.shape)
    max_time = jnp.inf if stop.max_time is None else stop.max_time
    loss_tol = stop.loss_tol

    def init_carry(hp, theta, const, X, y):
        K = slots(X)
        kinks = _Kinks(problem, hp, const, X, y, K, P)
        S0 = -jnp.ones((theta["W"].shape[0], K), jnp.int64)
        term = GradientFlowTerm(kinks.value_and_field)
        solver = RKC2(report_evals=True, end_value=True)
        return {
            **initial_carry(method, theta, problem.risk(hp, theta, const, X, y)),
            "kink_pairs": S0,
            "solver": solver.init(term, jnp.asarray(0.0), jnp.asarray(1.0), theta, kinks.prepare(S0)),
        }

    def controller(carry, L):
        rtol = method.rtol
        if method.tail_rtol is not None:
            rtol = jnp.where(L < method.tail_below * carry["loss0"], method.tail_rtol, method.rtol)
        return gradient_flow_controller(rtol=rtol, atol=carry["atol"], atol_rel=method.atol_rel, **PID_COEFFICIENTS)

    def advance(carry, t_target, hp, const, X, y):
        kinks = _Kinks(problem, hp, const, X, y, slots(X), P)
        term = GradientFlowTerm(kinks.value_and_field)
        solver = RKC2(report_evals=True, end_value=True)
        running = carry["status"] == Status.RUNNING
        t0 = carry["t"]
        t1 = jnp.where(running, jnp.minimum(t_target, max_time), t0)
        args0 = kinks.prepare(carry["kink_pairs"])
        theta0 = carry["theta"]
        _, cs0 = controller(carry, carry["loss"]).init(term, t0, jnp.maximum(t1, t0 + 1.0), theta0, carry["dt"],
                                                       args0, solver.func, ERROR_ORDER)
        ceiling = stop.divergence_factor * jnp.maximum(carry["loss0"], 1.0)
        solving = running & (t1 > t0) & jnp.isfinite(carry["loss"])
        c0 = dict(t=t0, h=carry["dt"], theta=theta0, args=args0, Z=theta0["W"] @ X.T, st=carry["solver"], cs=cs0,
                  L=carry["loss"], steps=jnp.asarray(0, jnp.int64), extra=jnp.asarray(0, jnp.int64),
                  bad=jnp.asarray(False), stuck=jnp.asarray(False))

        def cond(c):
            return (solving & (c["t"] < t1) & (c["L"] >= loss_tol) & (c["steps"] < method.max_solver_steps)
                    & ~c["bad"] & ~c["stuck"])

        def body(c):
            ta = c["t"]
            tb = jnp.minimum(ta + c["h"], t1)
            y1, err, _, st1, _ = solver.step(term, ta, tb, c["theta"], c["args"], c["st"], False)
            keep, _, t_next, _, cs1, _ = controller(carry, c["L"]).adapt_step_size(
                ta, tb, c["theta"], y1, c["args"], err, ERROR_ORDER, c["cs"])

            def accepted(_):
                th, args, changed, L = kinks.handle(y1, c["args"], c["Z"], st1["value"])
                st2 = lax.cond(changed, lambda: dict(st1, f0=kinks.value_and_field(tb, th, args)[1]), lambda: st1)
                bad = ~jnp.isfinite(L) | (L > ceiling) | ~jnp.isfinite(tree_norm(th))
                return th, args, st2, L, changed.astype(jnp.int64), th["W"] @ X.T, bad

            def rejected(_):
                return c["theta"], c["args"], c["st"], c["L"], jnp.asarray(0, jnp.int64), c["Z"], jnp.asarray(False)

            th, args, st2, L, extra, Z, bad = lax.cond(keep, accepted, rejected, None)
            t_new = jnp.where(keep, tb, ta)
            # a rejected step that the controller cannot shrink any further (a non-finite error) ends the chunk
            stuck = ~keep & (~jnp.isfinite(t_next) | (t_next <= t_new))
            return dict(t=t_new, h=t_next - t_new, theta=th, args=args, Z=Z, st=st2, cs=cs1, L=L,
                        steps=c["steps"] + 1, extra=c["extra"] + extra, bad=bad, stuck=stuck)

        c = lax.while_loop(cond, body, c0)
        bad = c["bad"] | (running & ~jnp.isfinite(carry["loss"]))
        failed = c["stuck"] | (solving & (c["t"] < t1) & (c["L"] >= loss_tol))
        status = jnp.where(bad, Status.DIVERGED, jnp.where(c["L"] < loss_tol, Status.CONVERGED,
                                                          jnp.where(failed, Status.SOLVER_FAILED, Status.RUNNING)))
        keep = solving & ~bad
        evals = c["cs"].attempted_evals - cs0.attempted_evals + c["extra"]
        return {
            **carry,
            "theta": tree_where(keep, c["theta"], carry["theta"]),
            "t": jnp.where(keep, c["t"], t0),
            "t_phys": jnp.where(keep, c["t"], carry["t_phys"]),
            "dt": jnp.where(keep & (c["h"] > 0), c["h"], carry["dt"]),
            "step": carry["step"] + jnp.where(solving, c["steps"], 0),
            "evals": carry["evals"] + jnp.where(solving, evals, 0),
            "fail_step": jnp.where(solving & bad, carry["step"] + c["steps"], carry["fail_step"]),
            "status": jnp.where(running, status, carry["status"]).astype(jnp.int32),
            "loss": jnp.where(keep, c["L"], carry["loss"]),
            "kink_pairs": jnp.where(keep, c["args"]["S"], carry["kink_pairs"]),
            "solver": tree_where(keep, c["st"], carry["solver"]),
        }

    return init_carry, advance
