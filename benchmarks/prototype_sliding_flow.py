"""Prototype for issue 40: gradient flow of a two-layer ReLU network that slides along ReLU kinks (Filippov).

A stored run of chistikov2023-fig1 gives the data, the initialisation and the baseline (the pipeline's RKC flow);
this script integrates the same flow with the project's RKC2 solver and step-size controller in its own stepping
loop, so that it can act between accepted steps.  The pairs (neuron j, point k) held on their kink <w_j, x_k> = 0
are the sliding set S (at most K per neuron):

* **the field** for a fixed S: every point's contribution to dw_j/dt is a multiple of x_k, so the Filippov (Clarke)
  field is dw_j/dt = F_j + sum_k beta_jk x_k, with F_j the field without the pairs of S and each beta_jk between 0
  (alpha_k = 0: point k off) and -a_j r_k (alpha_k = 1: on).  The beta's solve the box-constrained convex QP
  min 1/2 beta^T G beta + <F_j, X_S^T beta> (G the Gram matrix of the x_k of S_j), whose KKT conditions are the
  sliding conditions: <dw_j/dt, x_k> = 0 inside the box, <= 0 at alpha_k = 0, >= 0 at alpha_k = 1.  A primal-dual
  active-set iteration solves it in every evaluation (`FIELD_PDAS_ITERATIONS`; G is fixed while S is);
* **entries and exits**, after every accepted step: the pairs whose pre-activation changed sign over the step (and,
  with `--predict`, those the field takes to their kink within the next step) join S as candidates; the QP at the
  end point keeps those that slide (inside their box) and drops the others, old pairs included; each neuron is
  projected onto the kinks of its pairs (a no-op to rounding for the pairs that stayed).

Each accepted step costs one more evaluation (the field at the end point, for the tests), and one more where S
changed (the first-same-as-last field of the next step): both counted.  With `--no-slide` the loop is the plain RKC
flow, the pipeline's method (a check of the loop); `--freeze-after T` then keeps the activation pattern of time T to
the end: not the flow, a measure of what a field without kinks costs.

    implicitbias run chistikov2023-fig1 --workers 0 --out /tmp/probe --set 'grid.data.d=[256]' \\
      'grid.data.scheme=[uncentred]' 'grid.init_scale=[0.25]' trials=1
    python benchmarks/prototype_sliding_flow.py /tmp/probe --K 24 --P 256          # the sliding flow
    python benchmarks/prototype_sliding_flow.py /tmp/probe --no-slide              # the pipeline's flow, this loop
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax import lax

import implicitbias  # noqa: F401  (float64)
from implicitbias.metrics.neurons import kink_max_angle, weighted_max_angle
from implicitbias.metrics.readings import initial_parameters, max_angle_by_reading
from implicitbias.runs.spec import RunSpec
from implicitbias.training.rkc import RKC2, GradientFlowTerm
from implicitbias.training.rkc_control import CountState, gradient_flow_controller
from implicitbias.training.sliding import spd_solve  # Cholesky in XLA ops: LAPACK's batched solves can deadlock


def load(folder, trial: int = 0):
    """(spec, X, y, theta(0), the stored run's final parameters and counts) of the run of `trial` in `folder`."""
    for run in sorted(glob.glob(os.path.join(folder, "runs", "*.nc"))):
        ds = xr.open_dataset(run)
        spec = RunSpec.model_validate(json.loads(ds.attrs["spec"]))
        if spec.trial == trial:
            break
    else:
        raise SystemExit(f"no run of trial {trial} in {folder}/runs")
    for path in sorted(glob.glob(os.path.join(folder, "data", "*.nc"))):
        data = xr.open_dataset(path)
        if int(data.attrs["data_seed"]) == spec.data_seed:
            break
    else:
        raise SystemExit(f"no data set of seed {spec.data_seed} in {folder}/data")
    X, y = np.asarray(data["X"].values), np.asarray(data["y"].values)
    theta0 = initial_parameters(spec, X.shape[1])
    base = {"W": np.asarray(ds["theta.W"].values[0]), "a": np.asarray(ds["theta.a"].values[0]),
            "evals": int(ds["grad_evals"].values[0, -1]), "time": float(ds["time"].values[0, -1]),
            "loss": float(ds["loss"].values[0, -1])}
    return spec, X, y, theta0, base


#: primal-dual active-set iterations of the sliding QP at the end of a step (exact once the active set is found;
#: 6 and 3 gave the same evaluations on the probe at K = 24)
PDAS_ITERATIONS = 6
#: in the field, where every pair of S slid at the start of the step
FIELD_PDAS_ITERATIONS = 3


def make(X, y, K: int, P: int, *, slide: bool = True, predict: bool = False, hold: bool = False,
         free_first: bool = False):
    """The pieces of the flow (parts, value_and_vf, handle, prepare).  slide=False: the plain field (no QP);
    predict: also take as candidates the pairs the field takes to their kink within the next step; hold: keep the
    sliding pairs of the last accepted step on their kinks through the next step (a projection, no QP in the field);
    free_first: the field's QP from the inverse Gram matrices where every pair slides, the active-set iteration only
    where one has left its box (the same field up to rounding)."""
    X = jnp.asarray(X)
    y = jnp.asarray(y)
    n = X.shape[0]

    def mask_of(S):
        m = S.shape[0]
        rows = jnp.broadcast_to(jnp.arange(m)[:, None], S.shape)
        return jnp.zeros((m, n), bool).at[rows, jnp.maximum(S, 0)].max(S >= 0)

    def forward(theta, S, mask=None, frozen=None):
        """(loss, C, H, Z, r / n) without the pairs of S: the field of W without them is C X (C_jk = -a_j r_k / n on
        the active pairs), that of a is -H r / n."""
        W, a = theta["W"], theta["a"]
        Z = W @ X.T
        on = Z > 0 if frozen is None else jnp.where(frozen["f"], frozen["M"], Z > 0)
        act = on & ~(mask_of(S) if mask is None else mask)
        H = jnp.where(act, Z, 0.0)
        res = a @ H - y
        rn = res / n
        C = -(a[:, None] * jnp.where(act, rn[None, :], 0.0))
        return 0.5 * jnp.mean(res**2), C, H, Z, rn

    def parts(theta, S, mask=None, frozen=None):
        L, C, H, Z, rn = forward(theta, S, mask, frozen)
        return L, C @ X, -(H @ rn), Z, rn

    XX = X @ X.T  # the Gram matrix of the data, once: each neuron's is a gather from it

    def gram(S):
        """(valid, the kink normals x_k of each neuron's pairs (m, K, d), their Gram matrices (m, K, K), the identity
        on the empty slots).  Gathered from X X^T: a batched product of 200 x 24 x 256 blocks took 3.4 ms."""
        valid = S >= 0
        Sc = jnp.maximum(S, 0)
        Xs = X[Sc] * valid[..., None]  # (m, K, d)
        both = valid[:, :, None] & valid[:, None, :]
        G = jnp.where(both, XX[Sc[:, :, None], Sc[:, None, :]], 0.0) + jnp.eye(S.shape[1]) * (~valid)[:, None, :]
        return valid, Xs, G

    def project(V, S):
        """V - Xs^T G^-1 Xs V row by row: the component of each row of V orthogonal to its neuron's kinks."""
        valid, Xs, G = gram(S)
        b = jnp.einsum("mkd,md->mk", Xs, V)
        beta = spd_solve(G, b)
        return V - jnp.einsum("mk,mkd->md", beta, Xs)

    def masked_solve(G, rhs, free):
        M = G * (free[:, :, None] & free[:, None, :]) + jnp.eye(G.shape[-1]) * (~free)[:, None, :]
        return spd_solve(M, jnp.where(free, rhs, 0.0))

    def filippov(FW, a, rn, S, Xs=None, G=None, iterations=None):
        """The Filippov coefficients of the kink pairs S: dw_j/dt = FW_j + sum_k beta_jk x_k, each beta_jk between 0
        (point k off: alpha = 0) and -a_j r_k (on: alpha = 1), the solution of the box-constrained convex QP
        min 1/2 beta^T G beta + b^T beta (b_k = <FW_j, x_k>), whose KKT conditions are those of the sliding
        mode: <dw_j/dt, x_k> = 0 where beta is inside its box, <= 0 at alpha = 0 and >= 0 at alpha = 1.  Solved by a
        primal-dual active-set iteration.  Returns (beta, interior: the pairs that slide)."""
        if Xs is None:
            _, Xs, G = gram(S)
        valid = S >= 0
        b = jnp.einsum("mkd,md->mk", Xs, FW)
        full = -a[:, None] * rn[jnp.maximum(S, 0)]
        lo = jnp.where(valid, jnp.minimum(0.0, full), 0.0)
        hi = jnp.where(valid, jnp.maximum(0.0, full), 0.0)

        def solve(sets):
            A_lo, A_hi = sets
            free = valid & ~A_lo & ~A_hi
            fixed = jnp.where(A_lo, lo, jnp.where(A_hi, hi, 0.0))
            rhs = -(b + jnp.einsum("mkl,ml->mk", G, fixed))
            beta = jnp.where(free, masked_solve(G, rhs, free), fixed)
            return beta, free

        def update(_, sets):
            beta, _ = solve(sets)
            g = jnp.einsum("mkl,ml->mk", G, beta) + b
            A_lo = valid & (beta - g < lo)
            A_hi = valid & ~A_lo & (beta - g > hi)
            return A_lo, A_hi

        none = jnp.zeros_like(valid)
        limit = PDAS_ITERATIONS if iterations is None else iterations

        # until the active sets stop changing (a fixed point: further iterations change nothing), at most `limit`
        def unsettled(c):
            i, sets, prev = c
            return (i < limit) & ((i == 0) | jnp.any((sets[0] != prev[0]) | (sets[1] != prev[1])))

        def iterate(c):
            i, sets, _ = c
            return i + 1, update(i, sets), sets

        _, sets, _ = lax.while_loop(unsettled, iterate, (jnp.asarray(0), (none, none), (none, none)))
        beta, free = solve(sets)
        return beta, Xs, free

    def prepare(S):
        """The arguments of the field for the kink pairs S: what stays fixed while S does (the Gram matrices of each
        neuron's kink normals, their inverses for `--hold`), and the frozen pattern of `--freeze-after` (none yet)."""
        valid, Xs, G = gram(S)
        # the held field needs no kink normals (it works with X itself): 200 x 24 x 256 floats (10 MB) fewer to read
        return dict(S=S, mask=mask_of(S), Xs=None if hold else Xs, G=G,
                    Ginv=spd_solve(G, jnp.broadcast_to(jnp.eye(G.shape[-1]), G.shape)) if (hold or free_first) else None,
                    M=jnp.zeros((S.shape[0], n), bool), f=jnp.asarray(False))

    def held_field(theta, args):
        """The field without the pairs of S, projected onto the tangent space of each neuron's kinks: dW/dt =
        (C - B) X, where C X is the field without them (C_jk = -a_j r_k / n on the active pairs), and B holds the
        coefficients beta_j = G_j^-1 <C_j X, x_k> (k in S_j), <C_j X, x_k> read from C (X X^T), X X^T computed once:
        three products of m x n x d over all neurons (the gradient's two and one), no batched (m, K, d) array."""
        S_ = args["S"]
        valid = S_ >= 0
        Sc = jnp.maximum(S_, 0)
        L, C, H, _, rn = forward(theta, S_, args["mask"])
        b = jnp.where(valid, jnp.take_along_axis(C @ XX, Sc, axis=1), 0.0)
        beta = jnp.where(valid, jnp.einsum("mkl,ml->mk", args["Ginv"], b), 0.0)
        rows = jnp.broadcast_to(jnp.arange(S_.shape[0])[:, None], S_.shape)
        B = jnp.zeros_like(C).at[rows, Sc].add(beta)
        return L, {"W": (C - B) @ X, "a": -(H @ rn)}

    def value_and_vf(t, theta, args):
        """The Filippov field for a fixed set S of kink pairs: the field without them plus, for each neuron, the
        combination of its kink normals that the sliding QP gives (with `--hold`: the field without them projected
        onto the tangent space of the neuron's kinks, every pair held on its kink)."""
        if slide and hold:
            return held_field(theta, args)
        L, FW, Fa, _, rn = parts(theta, args["S"], args["mask"], args)
        if not slide:
            return L, {"W": FW, "a": Fa}
        if free_first:
            # every pair of S slid at the start of the step: where every one still slides (the unconstrained
            # minimiser -G^-1 b inside its box) that minimiser is the QP's solution, from the inverse Gram matrices
            # fixed while S is (two batched matrix-vector products); the active-set iteration, with its batched
            # LU solves, runs only where some pair has left its box
            valid = args["S"] >= 0
            b = jnp.einsum("mkd,md->mk", args["Xs"], FW)
            beta0 = jnp.where(valid, -jnp.einsum("mkl,ml->mk", args["Ginv"], b), 0.0)
            full = -theta["a"][:, None] * rn[jnp.maximum(args["S"], 0)]
            inside = (beta0 >= jnp.minimum(0.0, full)) & (beta0 <= jnp.maximum(0.0, full))
            beta = lax.cond(jnp.all(inside | ~valid), lambda: beta0,
                            lambda: filippov(FW, theta["a"], rn, args["S"], args["Xs"], args["G"],
                                             FIELD_PDAS_ITERATIONS)[0])
            return L, {"W": FW + jnp.einsum("mk,mkd->md", beta, args["Xs"]), "a": Fa}
        # every pair of S slides at the start of the step: the iteration starts there (all free)
        beta, _, _ = filippov(FW, theta["a"], rn, args["S"], args["Xs"], args["G"], FIELD_PDAS_ITERATIONS)
        return L, {"W": FW + jnp.einsum("mk,mkd->md", beta, args["Xs"]), "a": Fa}

    def handle(theta, args, Z0, h_next):
        """At the end of an accepted step: the pairs that crossed their kink over the step join the kink pairs as
        candidates, the sliding QP at the end point keeps those that slide (entries) and drops the kink pairs
        that no longer do (exits), and the neurons are projected onto the kinks they slide on.
        Returns (theta, args, changed, loss, exits, entries, sign changes)."""
        S = args["S"]
        L, FW, Fa, Z1, rn = parts(theta, S, args["mask"])
        a = theta["a"]
        crossed = (jnp.sign(Z1) != jnp.sign(Z0)) & ~args["mask"]
        cand = crossed
        if predict:
            # and the pairs that the field takes to their kink within the next step
            D = FW @ X.T
            cand = cand | ((jnp.abs(Z1) <= h_next * jnp.abs(D)) & (Z1 * D < 0) & ~args["mask"])
        # the first P candidates in index order (what top_k of the 0/1 scores gave, at a fraction of its cost: 5.9 ms
        # for 200 x 256 pairs)
        (idx,) = jnp.nonzero(cand.ravel(), size=P, fill_value=0)
        score = jnp.arange(P) < jnp.sum(cand)
        jp, kp = idx // crossed.shape[1], idx % crossed.shape[1]

        # the r-th candidate of neuron j (in top_k's order) takes the r-th free slot of its row, while there is one
        # (all at once: a sequential loop over the P candidates took several ms a step)
        m_ = S.shape[0]
        onehot = (jp[:, None] == jnp.arange(m_)[None, :]) & (score[:, None] > 0)
        rank = jnp.take_along_axis(jnp.cumsum(onehot, axis=0) - 1, jp[:, None], axis=1)[:, 0]
        free = S < 0
        free_slots = jnp.argsort(~free, axis=1, stable=True)  # each row's free slots first, in order
        added = (score > 0) & (rank < jnp.sum(free, axis=1)[jp])
        slot = jnp.take_along_axis(free_slots[jp], jnp.clip(rank, 0, S.shape[1] - 1)[:, None], axis=1)[:, 0]
        S_cand = S.at[jnp.where(added, jp, m_), slot].set(kp, mode="drop")
        # the field without the candidates: remove the contribution -a_j r_k x_k of those on the active side
        on = added & (Z1[jp, kp] > 0)
        FW = FW.at[jp].add(jnp.where(on, a[jp] * rn[kp], 0.0)[:, None] * X[kp])
        _, _, interior = filippov(FW, a, rn, S_cand)
        S_new = jnp.where(interior, S_cand, -1)
        exits = jnp.sum((S >= 0) & (S_new < 0))
        entries = jnp.sum((S < 0) & (S_new >= 0))
        changed = jnp.any(S_new != S)
        Wp = project(theta["W"], S_new)  # onto the kinks of S (a no-op up to rounding for unchanged rows)
        has = jnp.any(S_new >= 0, axis=1)
        theta = {"W": jnp.where(has[:, None], Wp, theta["W"]), "a": theta["a"]}
        return theta, prepare(S_new), changed, L, exits, entries, jnp.sum(crossed)

    return parts, value_and_vf, handle, prepare


def _decade(t):
    """The bin of time t: 0 for t < 1e-3, k + 3 for 10^k <= t < 10^(k+1), 9 from 1e6 on."""
    return jnp.clip(jnp.floor(jnp.log10(jnp.maximum(t, 1e-300))).astype(jnp.int64) + 3, 0, 9)


def _progress(every: int):
    """A host callback that prints where the integration is, every `every` accepted steps (0: never)."""

    def say(t, steps, accepted, stages, extra, L):
        print(f"  t = {float(t):.6g}: {int(steps)} steps ({int(accepted)} accepted), {int(stages) + int(extra)} "
              f"evaluations in accepted steps and tests, loss {float(L):.3e}, {time.strftime('%H:%M:%S')}",
              flush=True)

    def maybe(c):
        if every > 0:
            lax.cond(c["accepted"] % every == 0, lambda: jax.debug.callback(
                say, c["t"], c["steps"], c["accepted"], jnp.sum(c["hist"][2]), c["extra"], c["L"]), lambda: None)

    return maybe


def integrate(X, y, theta0, *, rtol, tail_rtol, tail_below, t_max, loss_tol, slide, K, P, max_steps,
              freeze_after=float("inf"), predict=False, hold=False, free_first=False, progress=0):
    """The flow from theta0 on (X, y).  X, y and theta0 are arguments of the compiled program, not constants
    folded into it (at d = 1024, XLA spent minutes folding W0 X^T).  progress: print every that many accepted
    steps (0: only at the end)."""
    m = theta0["W"].shape[0]
    theta0 = {k: jnp.asarray(v) for k, v in theta0.items()}
    solver = RKC2(report_evals=True)
    rms = jnp.sqrt(sum(jnp.sum(v**2) for v in theta0.values()) / sum(v.size for v in theta0.values()))
    atol = 1e-5 * rms
    report = _progress(progress)

    def run(X, y, theta0):
        parts, value_and_vf, handle, prepare = make(X, y, K, P, slide=slide, predict=predict, hold=hold,
                                                    free_first=free_first)
        term = GradientFlowTerm(value_and_vf)
        S0 = prepare(-jnp.ones((m, K), jnp.int64))
        L0 = parts(theta0, S0["S"])[0]

        def controller(L):
            r = jnp.where(L < tail_below * L0, tail_rtol, rtol)
            return gradient_flow_controller(rtol=r, atol=atol, atol_rel=1e-6)

        ctrl = controller(L0)
        dt0 = 0.01
        t_next, cstate = ctrl.init(term, 0.0, t_max, theta0, dt0, S0, solver.func, 3)
        st = solver.init(term, 0.0, t_max, theta0, S0)
        Z0 = theta0["W"] @ X.T
        c = dict(t=jnp.asarray(0.0), h=jnp.asarray(dt0), theta=theta0, S=S0, Z=Z0, st=st, cs=cstate, L=L0,
                 steps=jnp.asarray(0), accepted=jnp.asarray(0), extra=jnp.asarray(0), exits=jnp.asarray(0),
                 entries=jnp.asarray(0), maxS=jnp.asarray(0), hist=jnp.zeros((6, 10), jnp.int64))

        def cond(c):
            return (c["t"] < t_max) & (c["L"] >= loss_tol) & (c["steps"] < max_steps)

        def body(c):
            t0 = c["t"]
            t1 = jnp.minimum(t0 + c["h"], t_max)
            y1, err, _, st1, _ = solver.step(term, t0, t1, c["theta"], c["S"], c["st"], False)
            ctrl = controller(c["L"])
            keep, _, t_next, _, cs1, _ = ctrl.adapt_step_size(t0, t1, c["theta"], y1, c["S"], err, 3, c["cs"])

            def accepted(_):
                if not slide:
                    # the loss at y1 (a forward pass, not counted: the pipeline reads it from the FSAL evaluation)
                    L = parts(y1, c["S"]["S"], c["S"]["mask"], c["S"])[0]
                    Z1 = y1["W"] @ X.T
                    cr = jnp.sum(jnp.sign(Z1) != jnp.sign(c["Z"]))
                    # --freeze-after: from then on the activation pattern of that time, whatever the signs
                    go = (t1 > freeze_after) & ~c["S"]["f"]
                    args = dict(c["S"], M=jnp.where(go, Z1 > 0, c["S"]["M"]), f=c["S"]["f"] | go)
                    return y1, args, st1, L, jnp.asarray(0), jnp.asarray(0), jnp.asarray(0), Z1, cr
                th, S, changed, L, ex, en, cr = handle(y1, c["S"], c["Z"], t_next - t1)

                def refresh(_):
                    return dict(st1, f0=value_and_vf(t1, th, S)[1])

                st2 = lax.cond(changed, refresh, lambda _: st1, None)
                extra = 1 + int(predict) + changed.astype(jnp.int64)  # the D product counted as one evaluation
                return th, S, st2, L, extra, ex, en, th["W"] @ X.T, cr

            def rejected(_):
                return (c["theta"], c["S"], c["st"], c["L"], jnp.asarray(0), jnp.asarray(0), jnp.asarray(0), c["Z"],
                        jnp.asarray(0))

            th, S, st2, L, extra, ex, en, Z, cr = lax.cond(keep, accepted, rejected, None)
            out = dict(t=jnp.where(keep, t1, t0), h=t_next - jnp.where(keep, t1, t0), theta=th, S=S, Z=Z, st=st2,
                        cs=cs1, L=L, steps=c["steps"] + 1, accepted=c["accepted"] + keep,
                        extra=c["extra"] + extra, exits=c["exits"] + ex, entries=c["entries"] + en,
                        maxS=jnp.maximum(c["maxS"], jnp.max(jnp.sum(S["S"] >= 0, axis=1))),
                        hist=c["hist"].at[:, _decade(t0)].add(jnp.stack([
                            en, ex, st2["stages"] * keep, keep.astype(jnp.int64), 1 - keep.astype(jnp.int64), cr])))
            lax.cond(keep, lambda: report(out), lambda: None)
            return out

        return lax.while_loop(cond, body, c)

    out = jax.jit(run)(jnp.asarray(X), jnp.asarray(y), theta0)
    found = [x for x in jax.tree_util.tree_leaves(out["cs"], is_leaf=lambda x: isinstance(x, CountState))
             if isinstance(x, CountState)]
    solver_evals = int(found[0].attempted_evals)
    return out, solver_evals


def angles(W, a, X, W0):
    W, a = np.asarray(W), np.asarray(a)
    r = max_angle_by_reading(W, a, X, W0)
    r["kink 1e-5"] = kink_max_angle(W, X)
    r["kink 1e-12"] = kink_max_angle(W, X, 1e-12)
    r["weighted"] = weighted_max_angle(W, a, X)
    return r


def _rel(value, reference):
    return abs(value - reference) / abs(reference) if reference else abs(value)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder")
    p.add_argument("--trial", type=int, default=0, help="the run of this trial in FOLDER (default 0)")
    p.add_argument("--no-slide", action="store_true")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--tail-rtol", type=float, default=1e-3)
    p.add_argument("--tail-below", type=float, default=1e-4)
    p.add_argument("--K", type=int, default=8, help="sliding pairs per neuron at most")
    p.add_argument("--P", type=int, default=64, help="crossing pairs tested per step at most")
    p.add_argument("--max-steps", type=int, default=2_000_000)
    p.add_argument("--t-max", type=float, help="stop at this time (default: the run's max_time)")
    p.add_argument("--against", help="final parameters of a reference integration (.npz of --save) to compare with")
    p.add_argument("--save", help="save the final parameters (.npz)")
    p.add_argument("--predict", action="store_true", help="candidates: also the pairs predicted to cross next step")
    p.add_argument("--freeze-after", type=float, default=float("inf"),
                   help="with --no-slide: keep the activation pattern of this time to the end (not the flow: a bound "
                        "on what integrating a smooth field costs)")
    p.add_argument("--hold", action="store_true", help="hold the sliding pairs on their kinks through each step")
    p.add_argument("--progress", type=int, default=0, metavar="N",
                   help="print where the integration is every N accepted steps (default: only at the end)")
    p.add_argument("--free-first", action="store_true",
                   help="the field's QP from the inverse Gram matrices where every pair still slides (the same field)")
    args = p.parse_args()
    spec, X, y, theta0, base = load(args.folder, args.trial)
    t0 = time.perf_counter()
    out, solver_evals = integrate(X, y, theta0, rtol=args.rtol, tail_rtol=args.tail_rtol, tail_below=args.tail_below,
                                  t_max=args.t_max or spec.stop.max_time, loss_tol=spec.stop.loss_tol, slide=not args.no_slide,
                                  K=args.K, P=args.P, max_steps=args.max_steps, freeze_after=args.freeze_after,
                                  predict=args.predict, hold=args.hold, free_first=args.free_first,
                                  progress=args.progress)
    wall = time.perf_counter() - t0
    W, a = np.asarray(out["theta"]["W"]), np.asarray(out["theta"]["a"])
    evals = solver_evals + int(out["extra"])
    print(f"{'sliding' if not args.no_slide else 'plain RKC'}: rtol {args.rtol:g} (tail {args.tail_rtol:g}), "
          f"t = {float(out['t']):.6g}, loss {float(out['L']):.3e}, steps {int(out['steps'])} "
          f"({int(out['accepted'])} accepted), evaluations {evals} (solver {solver_evals}, tests {int(out['extra'])}), "
          f"entries {int(out['entries'])}, exits {int(out['exits'])}, pairs on kinks at the end "
          f"{int(np.sum(np.asarray(out['S']['S']) >= 0))} (most per neuron {int(out['maxS'])}), wall {wall:.1f} s")
    print("by decade of t (1e-3 .. 1e6): entries", np.asarray(out["hist"][0]).tolist(), "exits",
          np.asarray(out["hist"][1]).tolist(), "stages of accepted steps", np.asarray(out["hist"][2]).tolist(),
          "accepted", np.asarray(out["hist"][3]).tolist(), "rejected", np.asarray(out["hist"][4]).tolist(),
          "sign changes", np.asarray(out["hist"][5]).tolist())
    print(f"baseline (pipeline): evaluations {base['evals']}, t = {base['time']:.6g}, loss {base['loss']:.3e}")
    ours, theirs = angles(W, a, X, theta0["W"]), angles(base["W"], base["a"], X, theta0["W"])
    ref = None
    if args.against:
        f = np.load(args.against)
        ref = angles(f["W"], f["a"], X, theta0["W"])
    for k in ours:
        line = f"  {k:12s} ours {ours[k]:.6g}  baseline {theirs[k]:.6g}"
        if ref is not None:
            line += (f"  reference {ref[k]:.6g}  (ours {_rel(ours[k], ref[k]):.2%} off it, "
                     f"baseline {_rel(theirs[k], ref[k]):.2%})")
        print(line)
    if args.save:
        np.savez(args.save, W=W, a=a, S=np.asarray(out["S"]["S"]), t=float(out["t"]), h=float(out["h"]))


if __name__ == "__main__":
    main()
