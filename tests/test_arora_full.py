"""Arora et al. 2019's full variant is the paper's setting (depth 4 from the two largest of its inits); its claims
and figure read the smallest init every depth ran from."""

from __future__ import annotations

from implicitbias.experiments import get
from implicitbias.papers.arora2019.experiments import DEPTH_4_INITS, INITS, _smallest_init, common_init


def test_full_variant_is_the_papers_setting():
    exp = get("arora2019-deep-completion")
    runs = exp.runs(exp.resolve())
    assert {(r.data.d, r.data.rank, r.model.dim) for r in runs} == {(100, 5, 100)}
    inits = {depth: sorted({r.init_scale for r in runs if r.model.depth == depth}) for depth in (1, 2, 3, 4)}
    assert inits == {1: sorted(INITS), 2: sorted(INITS), 3: sorted(INITS), 4: sorted(DEPTH_4_INITS)}
    assert {1e-3, 1e-4, 1e-5, 1e-6} <= set(INITS) and set(DEPTH_4_INITS) <= set(INITS)  # the paper's inits
    assert {(r.model.depth, r.data.n) for r in runs} == {(d, n) for d in (1, 2, 3, 4) for n in (2000, 5000)}
    # depth N from alpha leaves the origin near t ~ alpha^-(N - 2) / s with s ~ 5e-4: the time budget covers it
    for r in runs:
        assert r.stop.max_time >= 1e3 * r.init_scale ** -(max(r.model.depth, 2) - 2) / 5e-4
    assert len(runs) == 2 * 3 * len(INITS) + 2 * len(DEPTH_4_INITS)


def test_claims_and_figure_read_the_smallest_init():
    rows = [{"method": "nuclear norm", "init": "", "n": 2000, "error": 0.5}]
    rows += [{"method": f"depth {d}", "init": a, "n": 2000, "error": a * d} for d in (2, 3) for a in (1e-3, 1e-6)]
    kept = _smallest_init(rows)
    assert {r["init"] for r in kept if r["method"] != "nuclear norm"} == {1e-6}
    assert sum(r["method"] == "nuclear norm" for r in kept) == 1 and len(kept) == 3


def test_a_depth_with_fewer_inits_moves_the_reading_to_the_common_init():
    """Depth 4 runs from 1e-3 and 1e-4 only: the claims compare every depth at 1e-4, never depth 2 at 1e-6 with
    depth 4 missing; with no init in common, the smallest one."""
    rows = [{"method": "nuclear norm", "init": "", "n": 2000, "error": 0.5}]
    rows += [{"method": f"depth {d}", "init": a, "n": 2000, "error": 0.1} for d in (2, 3) for a in INITS]
    rows += [{"method": "depth 4", "init": a, "n": 2000, "error": 0.01} for a in DEPTH_4_INITS]
    assert common_init(rows) == min(DEPTH_4_INITS)
    kept = _smallest_init(rows)
    assert {r["method"] for r in kept} == {"nuclear norm", "depth 2", "depth 3", "depth 4"}
    disjoint = [{"method": "depth 2", "init": 1e-6}, {"method": "depth 4", "init": 1e-3}]
    assert common_init(disjoint) == 1e-6
