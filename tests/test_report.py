"""Figures, the self-contained report.html, and (where Chromium is installed) that it renders."""

import base64
import re

import numpy as np
import pytest
import xarray as xr

from implicitbias.reports import (
    final_values,
    final_vs,
    find_chromium,
    metric_curves,
    metric_label,
    new_figure,
    render_check,
    save_figure,
    tally,
    tally_line,
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
    """Two figures drawn with the helpers, saved once for the report tests."""
    ds, directory = fake_results(), tmp_path_factory.mktemp("figures")
    fig, ax = new_figure()
    metric_curves(ax, ds, "W.stable_rank", relative_to_init=True, title="Stable rank")
    png_a, pdf_a = save_figure(fig, directory, "stable_rank")
    fig, axes = new_figure(ncols=2)
    final_vs(axes[0], ds, "max_angle", "init_scale", logx=True)
    metric_curves(axes[1], ds, "loss", logy=True)
    png_b, _ = save_figure(fig, directory, "angle_and_loss")
    assert pdf_a.read_bytes().startswith(b"%PDF")
    return [("stable_rank", "Stable rank relative to init.", png_a),
            ("angle_and_loss", "Final max angle against init scale; loss.", png_b)]


def test_metric_curves_one_line_per_run_legend_per_init_scale():
    ds = fake_results()
    fig, ax = new_figure()
    metric_curves(ax, ds, "W.stable_rank", relative_to_init=True)
    lines = ax.get_lines()
    assert len(lines) == ds.sizes["run"]
    assert all(np.all(line.get_xdata() > 0) for line in lines)  # t = 0 skipped on the log axis
    assert lines[0].get_ydata()[0] == pytest.approx(5.0 / (1 + 0.1 / 1.1) / 5.0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["0.01", "0.1", "1"]
    assert ax.get_ylabel() == metric_label("W.stable_rank") + " / value at init"
    assert metric_label("W.stable_rank") == "stable rank of W" and metric_label("custom") == "custom"
    with pytest.raises(KeyError, match="run coordinate"):
        metric_curves(ax, ds, "loss", hue="width")


def test_final_vs_median_over_trials_and_groups_by_cell_value():
    ds = fake_results()
    assert np.isfinite(final_values(ds, "loss")).all()  # last finite value of a run with a trailing NaN
    fig, ax = new_figure()
    final_vs(ax, ds, "max_angle", "init_scale", logx=True)
    line = ax.get_lines()[0]
    expected = [np.median(final_values(ds, "max_angle")[ds.init_scale.values == s]) for s in SCALES]
    np.testing.assert_allclose(line.get_xdata(), SCALES)
    np.testing.assert_allclose(line.get_ydata(), expected)
    other = fake_results().assign_attrs(cell='{"data.n": 40}')
    fig, ax = new_figure()
    final_vs(ax, [ds, other], "max_angle", "init_scale", group="n")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["20", "40"]
    assert ax.get_legend().get_title().get_text() == "n"


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
