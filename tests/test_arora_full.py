"""Arora et al. 2019's full variant is the paper's setting; its claims and figure read the smallest init."""

from __future__ import annotations

from implicitbias.experiments import get
from implicitbias.experiments.arora2019 import _smallest_init


def test_full_variant_is_the_papers_setting():
    exp = get("arora2019-deep-completion")
    config = exp.resolve()
    assert (config.data.d, config.data.rank, config.model.dim) == (100, 5, 100)
    assert sorted(config.grid["data.n"]) == [2000, 5000]
    assert sorted(config.grid["model.depth"]) == [1, 2, 3, 4]
    assert sorted(config.grid["init_scale"]) == [1e-6, 1e-5, 1e-4, 1e-3]
    # depth 4 from the smallest init leaves the origin near t ~ alpha^-(N - 2) = 1e12: the time budget covers it
    assert config.stop.max_time >= 1e3 * min(config.grid["init_scale"]) ** -2
    assert len(exp.runs(config)) == 2 * 4 * 4


def test_claims_and_figure_read_the_smallest_init():
    rows = [{"method": "nuclear norm", "init": "", "n": 2000, "error": 0.5}]
    rows += [{"method": f"depth {d}", "init": a, "n": 2000, "error": a * d} for d in (2, 3) for a in (1e-3, 1e-6)]
    kept = _smallest_init(rows)
    assert {r["init"] for r in kept if r["method"] != "nuclear norm"} == {1e-6}
    assert sum(r["method"] == "nuclear norm" for r in kept) == 1 and len(kept) == 3
