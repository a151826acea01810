"""Arora, Cohen, Hu & Luo 2019 (NeurIPS), "Implicit regularization in deep matrix factorization" (S8): completion of
a random low-rank matrix by factorisations W = W_N ... W_1 of depth N = 1 (from a small init), 2, 3, 4, trained by
gradient flow, against the minimum-nuclear-norm completion (`reference.min_nuclear_norm_completion`: ADMM with a
certified duality gap at 100 x 100, Clarabel at the quick variant's 20 x 20). Reconstruction error against the number of
observed entries, one curve per depth, and the effective rank of the solutions. The paper's finding: with few
observations, depth >= 3 recovers the matrix better than the nuclear-norm minimiser and than depth 2. It is read at
the smallest n where the completion is identifiable (n > r (2 d - r)): below that no method can recover W*.

A finding of the full variant (one data set per n): at n = 2000, depth 3 from alpha = 1e-4 ends at zero loss
(9e-11) with error 21.9, while 1e-3, 3e-4, 1e-5 and 1e-6 end at 4.6e-4. Its W is the rank-5 fit plus a rank-1
spike of singular value 219 carried by one row (row 87, 14 observed entries; |u_87| = 0.99985) on that row's
unobserved entries: 8e-5 of the spike's mass lies on observed entries. The same run at rtol 1e-8 ends at the same
W (error 21.90 against 21.896), so it is the flow's, not the solver's. Small init does not make the error
monotone in alpha: the escape from the origin can pick up a direction the loss barely sees and grow it.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from implicitbias.data import MatrixCompletion
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.validation import check_factorization_runs
from implicitbias.losses import Loss
from implicitbias.metrics.factorization import effective_rank, end_to_end
from implicitbias.models import MatrixFactorization
from implicitbias.theorems.base import CellsTheorem, Verdict, compare, prediction
from implicitbias.theorems.matrix_common import min_nuclear_norm
from implicitbias.training.methods import GradientFlow
from implicitbias.training.stopping import Stop


def _error(W, W_star) -> float:
    return float(np.linalg.norm(W - W_star) / np.linalg.norm(W_star))


def _erank(W) -> float:
    return float(effective_rank(np.linalg.svd(W, compute_uv=False)))


def _table(results) -> list[dict]:
    """One row per run and one per data set for the nuclear-norm minimiser (depth 0 in the rows)."""
    rows, seen = [], set()
    for cell in results.cells:
        W = end_to_end(cell.results, cell.spec.model.depth, trajectory=False)
        for r, spec in enumerate(cell.runs):
            ds = cell.data[r]
            W_star = ds.info["W_star"]
            rows.append({"method": f"depth {spec.model.depth}", "depth": spec.model.depth, "n": spec.data.n,
                         "init": spec.init_scale, "trial": spec.trial, "error": _error(W[r], W_star),
                         "effective_rank": _erank(W[r]), "final_loss": float(cell.results["loss"].values[r, -1])})
            key = (spec.data.n, spec.trial)
            if key not in seen:
                seen.add(key)
                ref = min_nuclear_norm(ds, spec.data_key()).W
                rows.append({"method": "nuclear norm", "depth": 0, "n": spec.data.n, "init": "", "trial": spec.trial,
                             "error": _error(ref, W_star), "effective_rank": _erank(ref), "final_loss": 0.0})
    return rows


def common_init(rows) -> float:
    """The smallest init from which every depth of the table ran (the paper's regime, read where all depths are
    compared; the full variant takes depth 4 down to a larger init than the others, see `DEPTH_4_INITS`)."""
    methods = {r["method"] for r in rows} - {"nuclear norm"}
    inits = [{r["init"] for r in rows if r["method"] == m} for m in methods]
    common = set.intersection(*inits) if inits else set()
    return min(common) if common else min(set.union(*inits))


def _smallest_init(rows) -> list[dict]:
    """The nuclear-norm rows and the runs from `common_init`, the smallest init every depth ran from."""
    init = common_init(rows)
    return [r for r in rows if r["method"] == "nuclear norm" or r["init"] == init]


def _curves(rows, key):
    out = {}
    for method in sorted({r["method"] for r in rows}, key=lambda m: (m != "nuclear norm", m)):
        ns = sorted({r["n"] for r in rows if r["method"] == method})
        out[method] = (np.array(ns), np.array([np.median([r[key] for r in rows if r["method"] == method and r["n"] == n])
                                               for n in ns]))
    return out


def _figure(results):
    rows = _table(results)
    fig, (a, b, c) = panels(3)
    methods = sorted({r["method"] for r in rows} - {"nuclear norm"})
    color = {m: f"C{k + 1}" for k, m in enumerate(methods)} | {"nuclear norm": "k"}  # one colour per method
    for method, (ns, v) in _curves(_smallest_init(rows), "error").items():
        a.plot(ns, v, "s--" if method == "nuclear norm" else "o-", ms=4, color=color[method], label=method)
    a.set_xlabel("observed entries n")
    a.set_yscale("log")
    a.set_ylabel("||W - W*||_F / ||W*||_F (median over trials)")
    spec = results.cells[0].spec
    finish(a, f"reconstruction error, {spec.data.d} x {spec.data.d}, rank {spec.data.rank}, init {common_init(rows):g}")
    # against the init, one panel pair per n would crowd the figure: the n the claims are read at (the smallest
    # identifiable one, n > r (2 d - r); the smallest n where none is)
    ns = sorted({r["n"] for r in rows})
    n = next(iter(identifiable(ns, spec.data.d, spec.data.rank)), ns[0])
    at_n = [r for r in rows if r["n"] == n]
    for ax, key in ((b, "error"), (c, "effective_rank")):
        for method in sorted({r["method"] for r in at_n} - {"nuclear norm"}):
            inits = sorted({r["init"] for r in at_n if r["method"] == method})  # depth 4 stops at a larger init
            v = [np.median([r[key] for r in at_n if r["method"] == method and r["init"] == i]) for i in inits]
            ax.plot(inits, v, "o-", ms=4, color=color[method], label=method)
        ref = np.median([r[key] for r in at_n if r["method"] == "nuclear norm"])
        ax.axhline(ref, ls="--", color="k", lw=1, label="nuclear norm")
        ax.set_xscale("log")
        ax.set_xlabel("init scale alpha (per factor)")
        ax.grid(True, which="both", alpha=0.3)
    b.set_yscale("log")
    b.set_ylabel("||W - W*||_F / ||W*||_F (median over trials)")
    finish(b, f"reconstruction error against the init, n = {n}")
    c.set_ylabel("effective rank of the solution")
    finish(c, f"effective rank against the init, n = {n}")
    return fig


def _tables(results, out_dir):
    rows = _table(results)
    path = Path(out_dir) / "deep_completion.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return [path]


def identifiable(ns, d: int, rank: int) -> list:
    """The observation counts n > r (2 d - r) among `ns`, ascending: the degrees of freedom of a rank-r d x d
    matrix, below which the completion is not unique."""
    return sorted(n for n in set(ns) if n > rank * (2 * d - rank))


_SOURCE = ("Arora, Cohen, Hu & Luo 2019 (NeurIPS), Sec. 3.1 and Figure 1; read at the smallest identifiable n, "
           "n > r (2 d - r) (ours: below it no method can recover W*), and the smallest init every depth ran from")


class AroraClaims(CellsTheorem):
    """Arora et al. 2019, Sec. 3.1 and Figure 1: with few observations, depth >= 3 recovers W* better than the
    nuclear-norm minimiser and than depth 2. Read at the smallest n of the grid where the completion is
    identifiable, n > r (2 d - r) (the degrees of freedom of a rank-r d x d matrix: with fewer entries, infinitely
    many rank-r matrices fit them and no method can recover W*, so which one a method picks says nothing about its
    bias), and at the smallest init every depth ran from (`common_init`): the best of the depths >= 3 has a lower
    median error than each. Where no
    n of the grid is identifiable, both are not_evaluated with that reason.

    The claims read `ctx.once("arora.rows")`: (rows, d, rank), the rows of `_table` (method, n, error, ...) at
    the smallest init and the matrix's size and rank."""

    @property
    def title(self) -> str:
        """The name its verdicts carry."""
        return "Arora et al. 2019, deep matrix completion"

    @prediction("depth >= 3 recovers better than the nuclear-norm minimiser (median error, smallest identifiable n)",
                source=_SOURCE)
    def beats_nuclear_norm(self, ctx) -> Verdict:
        """The best median error of the depths >= 3 is below the nuclear-norm minimiser's."""
        return self._compare(ctx, "nuclear norm",
                             "depth >= 3 recovers better than the nuclear-norm minimiser: best median error of the "
                             "depths >= 3")

    @prediction("depth >= 3 recovers better than depth 2 (median error, smallest identifiable n)", source=_SOURCE)
    def beats_depth_2(self, ctx) -> Verdict:
        """The best median error of the depths >= 3 is below depth 2's."""
        return self._compare(ctx, "depth 2", "depth >= 3 recovers better than depth 2: best median error of the "
                             "depths >= 3")

    def _compare(self, ctx, other: str, statement: str) -> Verdict:
        rows, d, rank = ctx.once("arora.rows", lambda: _rows_at_smallest_init(ctx.results))
        dof = rank * (2 * d - rank)
        ns = identifiable((r["n"] for r in rows), d, rank)
        if not ns:
            why = f"no n of the grid exceeds r (2 d - r) = {dof}: the completion is not identifiable"
            return compare(self.title, "prediction", f"at an identifiable n, {statement}", None, "<", None, why)
        n = ns[0]
        med = {m: float(np.median([r["error"] for r in rows if r["method"] == m and r["n"] == n]))
               for m in {r["method"] for r in rows if r["n"] == n}}
        deep = min(v for m, v in med.items() if m.startswith("depth ") and int(m.split()[1]) >= 3)
        note = ", ".join(f"{m}: {v:.3g}" for m, v in sorted(med.items())) + f"; r (2 d - r) = {dof}"
        return compare(self.title, "prediction", f"at the smallest identifiable n (n = {n} > r (2 d - r)), {statement}",
                       deep, "<", med[other], note)


def _rows_at_smallest_init(results) -> tuple[list[dict], int, int]:
    data = results.cells[0].spec.data
    return _smallest_init(_table(results)), data.d, data.rank


#: the paper's inits, per factor (W(0) = alpha^N G), and 3e-4, the smallest one depth 4 runs from: depths 1-3 from
#: every one of them
INITS = [1e-3, 3e-4, 1e-4, 1e-5, 1e-6]
#: depth 4 runs from 1e-3 and 3e-4 only. From a small init the flow sits near the origin until t ~ alpha^-(N-2) / s
#: (s ~ 5e-4: the signal of the mean loss on a 100 x 100 matrix with ||W*||_F = 10), while the directions it has
#: already learned relax at rates ~1e-3: a stiffness ratio that grows like alpha^-(N-2) = alpha^-2 at depth 4, and an
#: explicit stabilised solver pays ~ sqrt(ratio) gradient evaluations or more per plateau. Measured at n = 2000:
#: 9.2e4 evaluations from 1e-3, 3.1e5 from 3e-4 (n = 5000), 3.2e6 from 1e-4: 35x for one decade, so ~1e8 a run
#: from 1e-5 and ~4e9 from 1e-6. The catalogue's measured run time of the full variant is `implicitbias list`'s.
DEPTH_4_INITS = [1e-3, 3e-4]

ARORA = Experiment(
    validate_runs=check_factorization_runs,
    name="arora2019-deep-completion",
    paper="Arora, Cohen, Hu & Luo 2019 (NeurIPS), Sec. 3 (Figure 1)",
    systems=("S8",),
    summary="Matrix completion of a random rank-5 100 x 100 matrix from n observed entries by factorisations of depth "
            "1 to 4 from a small balanced init, gradient flow, against the minimum-nuclear-norm completion: "
            "reconstruction error and effective rank against n. With few observations, depth >= 3 beats the "
            "nuclear norm and depth 2.",
    config=ExperimentConfig(
        model=MatrixFactorization(dim=100, depth=2, init_scheme="balanced", inputs="entries"),
        data=MatrixCompletion(d=100, rank=5, n=2000, encoding="entries"),
        loss=Loss(name="square"),
        method=GradientFlow(rtol=1e-6),
        stop=Stop(loss_tol=1e-10, max_time=1e16),
        init_scale=1e-3,
        checkpoints=15,
        kkt=False,
        parts={"depths_1_3": {"grid": {"data.n": [2000, 5000], "model.depth": [1, 2, 3], "init_scale": INITS}},
               "depth_4": {"model.depth": 4, "grid": {"data.n": [2000, 5000], "init_scale": DEPTH_4_INITS}}},
    ),
    quick={"model.dim": 20, "data.d": 20, "data.rank": 2, "data.n": 60, "checkpoints": 10, "init_scale": 0.1,
           "stop": {"loss_tol": 1e-10, "max_time": 1e6}, "parts": {},
           "grid": {"data.n": [60, 120], "model.depth": [2, 3]}},
    figures=(Figure("deep_completion", "Left: relative reconstruction error against the number of observed entries "
                    "at the smallest init every depth ran from, one curve per depth and the minimum-nuclear-norm "
                    "completion. Middle and right: reconstruction error and effective rank against the init scale at "
                    "the smallest identifiable n, one curve per depth over its own inits, the nuclear-norm minimiser "
                    "dashed.", _figure),),
    claims=(AroraClaims(),),
    tables=_tables,
    settings_source="From the paper: 100 x 100, rank 5, n = 2000 and 5000 observed entries, depths 2-4 (and 1), "
                    "inits 1e-3 to 1e-6. Ours: gradient flow (RKC, rtol 1e-6) instead of GD, balanced init with "
                    "alpha = 1e-3..1e-6 per factor (W(0) = alpha^N G, G with entries N(0, 1/d), so a factor's "
                    "entries are ~alpha/sqrt(d)), loss 1e-10 or t = 1e16, one data set per n. Left out: depth 4 "
                    "from alpha = 1e-4, 1e-5 and 1e-6 (it runs from 1e-3 and 3e-4). Its plateau near the origin "
                    "lasts t ~ alpha^-2 while the directions already learned relax at rates ~1e-3, and the explicit "
                    "solver's gradient evaluations grow 35x for one decade of alpha (measured at n = 2000: 9.2e4 "
                    "from 1e-3, 3.2e6 from 1e-4), so ~1e8 evaluations a run from 1e-5 and ~4e9 from 1e-6, against "
                    "3.1e5 from 3e-4 (n = 5000). The claims and the left panel are read at the smallest init every depth "
                    "ran from, 3e-4 (added to the other depths' grid for that). Quick: 20 x 20, "
                    "rank 2, alpha = 0.1, loss 1e-10 or t = 1e6, n = 60 and 120, depths 2 and 3 (the two the claims "
                    "compare; the claims are read at n = 120, the "
                    "smallest n above the 76 degrees of freedom of a rank-2 20 x 20 matrix).",
)

EXPERIMENTS = [ARORA]
