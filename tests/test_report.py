"""Figures, the self-contained report.html, the index of runs, and (where Chromium is installed) that they render."""

import base64
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from implicitbias.reports import (
    find_chromium,
    layout_probe,
    render_check,
    tally,
    tally_line,
    write_index,
    write_report,
)

SCALES = (0.01, 0.1, 1.0)
TRIALS = 2


def fake_results(n_checkpoints: int = 12) -> xr.Dataset:
    """Results laid out as `train` writes them: runs = init scales x trials, checkpoints from t = 0."""
    init_scale = np.repeat(SCALES, TRIALS)
    trial = np.tile(np.arange(TRIALS), len(SCALES))
    time = np.concatenate([[0.0], np.geomspace(0.1, 100.0, n_checkpoints - 1)])
    t = np.broadcast_to(time, (init_scale.size, n_checkpoints))
    a = init_scale[:, None]
    stable_rank = 5.0 / (1.0 + t / (1.0 + 10 * a))
    max_angle = np.pi / 2 * a / (1 + a) * (1 + 0.1 * trial[:, None]) * (1 - np.exp(-t - 1))
    loss = np.log1p(np.exp(-t))
    loss[0, -1] = np.nan  # a run whose last checkpoint was not recorded
    data = {"loss": (("run", "checkpoint"), loss), "W.stable_rank": (("run", "checkpoint"), stable_rank),
            "max_angle": (("run", "checkpoint"), max_angle), "time": (("run", "checkpoint"), t.copy()),
            "step": (("run", "checkpoint"), t * 10)}
    coords = {"run": np.arange(init_scale.size), "checkpoint": np.arange(n_checkpoints),
              "init_scale": ("run", init_scale), "trial": ("run", trial), "seed": ("run", 1000 * trial)}
    return xr.Dataset(data, coords=coords, attrs={"cell": '{"data.n": 20}'})


CHECKS = [
    {"cell": "n=20", "theorem": "Frei et al. 2023, Thm 3.2", "kind": "assumption",
     "statement": "R_min^2 >= 3 gamma^-3 R^2 n max|<x_i, x_j>|", "measured": 812.3, "relation": ">=",
     "bound": 97.1, "outcome": "holds", "note": "", "line": "[assumption] ...: holds"},
    {"cell": "n=20", "theorem": "Frei et al. 2023, Thm 3.2", "kind": "assumption",
     "statement": "init scale <= omega_init", "measured": 1.0, "relation": "<=", "bound": 0.1,
     "outcome": "fails", "note": "", "line": "[assumption] ...: fails"},
    {"cell": "n=20", "theorem": "Frei et al. 2023, Thm 3.2", "kind": "prediction",
     "statement": "stable rank <= 2 <script>alert(1)</script>", "measured": 1.7, "relation": "<=",
     "bound": 2.0, "outcome": "holds", "note": "a & b", "line": "[prediction] ...: holds"},
    {"cell": "n=20", "theorem": "Frei et al. 2023, Thm 3.2", "kind": "prediction",
     "statement": "margin spread -> 1", "measured": 1.3, "relation": "<=", "bound": 1.01,
     "outcome": "fails", "note": "", "line": ""},
    {"cell": "n=20", "theorem": "Frei et al. 2023, Thm 3.2", "kind": "prediction",
     "statement": "angle -> 0", "measured": 0.2, "relation": "<=", "bound": 0.1, "outcome": "outside_scope",
     "note": "measured fails, but an assumption is not met", "line": ""},
    {"cell": "n=20", "theorem": "Frei et al. 2023, Thm 3.2", "kind": "prediction",
     "statement": "KKT residual -> 0", "measured": None, "relation": "<=", "bound": 0.1,
     "outcome": "not_evaluated", "note": "margins not yet positive", "line": ""},
]


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> list[tuple[str, str, object]]:
    """Two figures drawn with matplotlib, saved once for the report tests."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds, directory = fake_results(), tmp_path_factory.mktemp("figures")
    out = []
    for name, metrics in (("stable_rank", ["W.stable_rank"]), ("angle_and_loss", ["max_angle", "loss"])):
        fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3), squeeze=False)
        for ax, metric in zip(axes[0], metrics):
            for r in range(ds.sizes["run"]):
                ax.plot(ds["time"].values[r][1:], ds[metric].values[r][1:])
            ax.set_xscale("log")
            ax.set_title(metric)
        png = directory / f"{name}.png"
        fig.savefig(png, dpi=80)
        plt.close(fig)
        out.append(png)
    return [("stable_rank", "Stable rank relative to init.", out[0]),
            ("angle_and_loss", "Final max angle against init scale; loss.", out[1])]


def test_report_is_self_contained_and_escaped(tmp_path, figures):
    path = write_report(tmp_path, title="Frei et al. 2023 <Fig. 1>", experiment="frei_fig1",
                        summary="Stable rank & angles.", config={"model": {"width": 100, "dims": (2, 3)}},
                        figures=figures, checks=CHECKS, paper="Frei, Vardi, Bartlett, Srebro (2023)",
                        run_info={"method": "gd", "wall_time_s": 12.34, "mode": "quick",
                                  "command": "implicitbias run frei_fig1 --quick --out out"})
    html = path.read_text()
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", html)  # only data URIs and anchors
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == len(figures)
    assert all(base64.b64decode(im).startswith(b"\x89PNG") for im in images)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;Fig. 1&gt;" in html
    assert tally_line(CHECKS) in html
    assert tally_line(CHECKS) == ("1 assumption holds / 1 fails; "
                                  "1 prediction holds / 1 fails / 1 outside scope / 1 not evaluated")
    for outcome in ("holds", "fails", "outside_scope", "not_evaluated"):
        assert f'class="verdict v-{outcome}"' in html
    assert "dims:\n  - 2\n  - 3" in html and "<dt>wall time</dt><dd>12.3 s</dd>" in html
    assert tally(CHECKS)["prediction"] == {"holds": 1, "fails": 1, "outside_scope": 1, "not_evaluated": 1}


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")
def test_report_renders_in_headless_chromium(tmp_path, figures):
    path = write_report(tmp_path, title="render check", experiment="fake", summary="", config={},
                        figures=figures, checks=CHECKS, run_info={})
    result = render_check(path)
    assert result["count"] == len(figures)
    assert result["all_rendered"], result["images"]
    assert all(im["naturalWidth"] > 100 for im in result["images"])


# -- the page a researcher reads -----------------------------------------------------------------------
#: as long as the longest summary in the catalog, so the headline is as tall as it gets
LONG_SUMMARY = ("Teacher-neuron regression with a one-hidden-layer ReLU network (m = 200, both layers trained) from a "
                "balanced init of scale lambda, trained by gradient flow to loss < 1e-9 or t = 2e5: the largest angle "
                "between active neurons at the end of training decreases with lambda, about proportionally. One curve "
                "per d, centred and uncentred data (medians over 5 trials), all lambdas of a trial in one batched call. "
                "Also shown: the max angle between the active neurons that remain at the end.")
OTHER_THEOREM = [dict(c, theorem="Kou et al. 2023, Thm 1", cell=f"n={n}") for n in (20, 40) for c in CHECKS[2:4]]


def make_run(run_dir: Path, figures, *, run_json: dict | None = None, config_head: str | None = None) -> Path:
    """A run directory as `implicitbias run` leaves it: figures/ (PNG + CSV), checks.json, report.html."""
    fig_dir = run_dir / "figures"
    fig_dir.mkdir(parents=True)
    entries = []
    for name, caption, png in figures:
        shutil.copy(png, fig_dir / f"{name}.png")
        (fig_dir / f"{name}.csv").write_text("x,y\n1,2\n")
        entries.append((name, caption, fig_dir / f"{name}.png", [fig_dir / f"{name}.csv"]))
    (fig_dir / "extra table.csv").write_text("a\n1\n")
    checks = CHECKS + OTHER_THEOREM
    (run_dir / "checks.json").write_text(json.dumps(checks))
    if run_json is not None:
        (run_dir / "run.json").write_text(json.dumps(run_json))
    if config_head is not None:
        (run_dir / "config.yaml").write_text(config_head + "\nexperiment: x\n")
    info = {k: v for k, v in (run_json or {}).items() if k != "experiment"}
    return write_report(run_dir, title=(run_json or {}).get("experiment", "chistikov2023-fig1"),
                        experiment="chistikov2023-fig1", summary=LONG_SUMMARY, config={"model": {"width": 200}},
                        figures=entries, checks=checks, run_info=info, paper="Chistikov, Englert, Lazic (2023)",
                        tables=[("extra table", fig_dir / "extra table.csv")])


def local_links(html: str) -> list[str]:
    return [h for h in re.findall(r'(?:href|src)="([^"]+)"', html) if not h.startswith(("#", "data:"))]


def test_report_reads_headline_figures_checks_config(tmp_path, figures):
    run_info = {"variant": "quick", "method": "gf", "started": "2025-03-01T10:20:30", "wall_time_s": "95.5",
                "command": "implicitbias run chistikov2023-fig1 --quick"}
    path = make_run(tmp_path / "run", figures, run_json={"experiment": "chistikov2023-fig1", **run_info})
    html = path.read_text()
    order = ['id="headline"', "Chistikov, Englert, Lazic (2023)", "remain at the end", 'class="verdicts"',
             "quick variant · method gf · started 2025-03-01 10:20 · wall time 95.5 s", 'id="fig-stable_rank"',
             'id="fig-angle_and_loss"', 'id="checks"', 'id="config"', "width: 200", 'id="rerun"',
             "implicitbias run chistikov2023-fig1 --quick"]
    positions = [html.index(marker) for marker in order]
    assert positions == sorted(positions)
    headline = html[html.index('class="verdicts"'):html.index('class="meta"')]
    assert "Assumptions" in headline and ">1 holds<" in headline and ">1 fails<" in headline
    assert "Predictions" in headline and ">3 holds<" in headline and ">1 outside scope<" in headline
    # one expandable line per theorem, open where something fails, failures first inside
    details = re.findall(r'<details class="theorem"( open)?>\n<summary>(.*?)</summary>(.*?)</details>', html, re.S)
    assert [re.search(r'class="name">([^<]*)', s).group(1) for _, s, _ in details] == [
        "Frei et al. 2023, Thm 3.2", "Kou et al. 2023, Thm 1"]
    assert all(opened for opened, _, _ in details)
    assert "2 cells" in details[1][1] and "cells" not in details[0][1]
    kou = details[1][2]
    assert "Assumptions" not in kou and kou.index("v-fails") < kou.index("v-holds")
    frei_predictions = details[0][2].split("<h3>Predictions</h3>")[1]
    verdicts = re.findall(r'class="verdict (v-\w+)"', frei_predictions)
    assert verdicts == ["v-fails", "v-outside_scope", "v-not_evaluated", "v-holds"]
    # CSV links are relative to the report and resolve; the figures stay embedded
    links = local_links(html)
    assert links == ["figures/stable_rank.csv", "figures/angle_and_loss.csv", "figures/extra%20table.csv"]
    assert all((path.parent / h.replace("%20", " ")).is_file() for h in links)
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == len(figures)


def test_report_accepts_three_tuples_and_rejects_missing_tables(tmp_path, figures):
    path = write_report(tmp_path, title="t", experiment="e", summary="", config={}, figures=figures, checks=[],
                        run_info={})
    assert "No theorem checks" in path.read_text() and "#rerun" not in path.read_text()
    with pytest.raises(FileNotFoundError, match="no such file"):
        write_report(tmp_path, title="t", experiment="e", summary="", config={}, figures=figures, checks=[],
                     run_info={}, tables=["figures/missing.csv"])


def test_index_lists_every_run_with_fallbacks(tmp_path, figures):
    root = tmp_path / "runs"
    make_run(root / "frei2023-fig1-quick", figures, run_json={
        "experiment": "frei2023-fig1", "variant": "quick", "started": "2025-03-02T09:00:00", "wall_time_s": 42.0,
        "command": "implicitbias run frei2023-fig1 --quick"})
    make_run(root / "sweeps" / "old", figures, config_head="# kou2023-rank (full), rerun with: implicitbias run kou2023-rank")
    bare = root / "bare"
    bare.mkdir()
    (bare / "report.html").write_text("<html><head><title>bare run</title></head><body></body></html>")
    (bare / "checks.json").write_text("not json")
    path = write_index(root)
    assert path == root / "index.html"
    html = path.read_text()
    rows = re.findall(r"<tr><td.*?</tr>", html, re.S)
    assert len(rows) == 3
    assert "frei2023-fig1" in rows[0] and "2025-03-02 09:00" in rows[0] and "42 s" in rows[0]
    assert ">1 fails<" in rows[0] and ">3 holds<" in rows[0]  # assumptions, then predictions, from checks.json
    assert 'title="implicitbias run frei2023-fig1 --quick"' in rows[0]
    assert "bare run" in rows[1] and "checks.json unreadable" in rows[1] and rows[1].count("—") >= 4
    assert "kou2023-rank" in rows[2] and ">full<" in rows[2] and "sweeps/old" in rows[2]
    assert 'src="frei2023-fig1-quick/figures/stable_rank.png"' in rows[0]  # the report's first figure
    links = local_links(html)
    assert "sweeps/old/report.html" in links
    assert all((root / h).is_file() for h in links)
    from implicitbias.reports import find_runs
    assert [r.experiment for r in find_runs(root)] == ["frei2023-fig1", "bare run", "kou2023-rank"]


needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")


@needs_chromium
def test_headline_and_first_figure_fit_a_1280x800_window(tmp_path, figures):
    path = make_run(tmp_path / "run", figures, run_json={
        "experiment": "chistikov2023-fig1", "variant": "full", "started": "2025-03-01T10:20:30",
        "wall_time_s": 3600.0, "command": "implicitbias run chistikov2023-fig1"})
    result = layout_probe(path, ["#headline", "figure img", "figure"], width=1280, height=800)
    headline, image = result["rects"]["#headline"], result["rects"]["figure img"]
    assert headline["top"] >= 0 and headline["bottom"] <= 800
    assert 0 <= image["top"] < 800 and image["height"] > 200
    # Chromium's headless window keeps ~140 px for the browser frame: the whole image fits what is left
    assert image["bottom"] <= result["viewport"]["height"], (image, result["viewport"])
    assert result["images"][0]["naturalWidth"] > 0 and result["all_rendered"], result["images"]
    assert result["missing"] == [], result["missing"]
    assert len([link for link in result["links"] if not link["href"].startswith("#")]) == 3
    assert all(url.startswith(("file:", "data:")) for url in result["resources"]), result["resources"]


@needs_chromium
def test_index_links_and_thumbnails_resolve_in_chromium(tmp_path, figures):
    root = tmp_path / "runs"
    make_run(root / "a", figures, run_json={"experiment": "a", "variant": "quick", "started": "2025-01-01T00:00:00",
                                            "wall_time_s": 1.0, "command": "implicitbias run a --quick"})
    make_run(root / "nested" / "b", figures)
    result = layout_probe(write_index(root), ["table.runs"])
    assert result["count"] == 2 and result["all_rendered"], result["images"]
    assert result["missing"] == [], result["missing"]
    assert sorted(link["href"] for link in result["links"]) == sorted(["a/report.html"] * 2 + ["nested/b/report.html"] * 2)
