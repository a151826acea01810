"""Issue 42 item 8 (figures): a figure is headed by the title its `Figure` was given (not an internal name),
y-labels are words, `Results.plot` lays the figure out for a plain savefig, and the stable-rank note of Frei et
al.'s Theorem 4.2 says "drops" only when the stable rank fell."""

from __future__ import annotations

import io
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

from implicitbias import Figure  # noqa: E402
from implicitbias.experiments.figures import curves, finish, metric_label, panels  # noqa: E402
from implicitbias.papers.frei2023.theorems.gd import FreiTheorem42, change_to  # noqa: E402
from implicitbias.runs.results import Results  # noqa: E402

TITLE = "Stable rank of W over GD steps"


def _cell(metric: str = "W.stable_rank"):
    """A cell of two runs over five checkpoints: what `curves` reads (no training)."""
    step = np.array([[0.0, 1, 10, 100, 1000]] * 2)
    values = np.array([[20.0, 18, 9, 3, 2], [20.0, 19, 15, 11, 10]])
    ds = xr.Dataset({metric: (("run", "checkpoint"), values), "step": (("run", "checkpoint"), step)},
                    coords={"init_scale": ("run", [1.0, 0.02])})
    return SimpleNamespace(results=ds)


def _two_panels(results):
    """A user's own figure, drawn with the library's helpers (as a notebook would): two panels."""
    fig, (left, right) = panels(2)
    curves(left, _cell(), "W.stable_rank", relative=True, hue="init_scale")
    finish(left, "by dimension")
    curves(right, _cell("max_angle"), "max_angle", hue="init_scale")
    finish(right, "by init scale")
    return fig


def _plain_subplots(results):
    """A user's own figure drawn with plain matplotlib (docs/notebook.md's `distance_to_svm`)."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax in axes:
        ax.plot([1, 10, 100], [1.0, 0.5, 0.2])
        ax.set_xscale("log")
        ax.set_xlabel("gradient-flow time t")
        ax.set_ylabel("distance")
        ax.set_title("a panel title")
    return fig


def _results(*figures: Figure) -> Results:
    """Results that carry only an experiment definition with `figures` (what `Results.plot` draws)."""
    definition = SimpleNamespace(name="my-srank", paper="ours", figures=figures)
    return Results(experiment="my-srank", config=None, runs=[], arrays=[], datasets={}, definition=definition)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# -- the heading is the user's title ----------------------------------------------------------------------
def test_plot_is_headed_by_the_figures_title_not_its_name():
    res = _results(Figure("final_srank", TITLE, _two_panels))
    fig = res.plot("final_srank")
    heading = fig.get_suptitle()
    assert heading == TITLE
    assert "final_srank" not in heading and "ours" not in heading
    assert [ax.get_title() for ax in fig.axes] == ["by dimension", "by init scale"]


def test_render_heads_with_the_title_and_falls_back_to_the_name():
    fig = Figure("final_srank", TITLE, _plain_subplots).render(None)
    assert fig.get_suptitle() == TITLE
    assert Figure("final_srank", "  ", _plain_subplots).heading == "final_srank"


def test_a_long_title_is_wrapped_to_the_figure_and_cut_at_three_lines():
    title = " ".join(["word"] * 400)
    fig = Figure("long", title, _plain_subplots).render(None)
    lines = fig.get_suptitle().split("\n")
    assert 1 < len(lines) <= 3 and lines[-1].endswith("…")
    fig.savefig(io.BytesIO(), format="png")
    box = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1


# -- y-labels in words -----------------------------------------------------------------------------------
@pytest.mark.parametrize("metric, relative, label", [
    ("W.stable_rank", True, "stable rank of W (relative to init)"),
    ("W.stable_rank", False, "stable rank of W"),
    ("W2.frobenius", False, "Frobenius norm of W2"),
    ("max_angle", False, "largest angle between active neurons (rad)"),
    ("loss", False, "training loss"),
    ("alignment_W2_W1", False, "alignment of W2 with W1 (top singular vectors)"),
    ("my_new_metric", False, "my_new_metric"),
    ("my_new_metric", True, "my_new_metric (relative to init)"),
])
def test_metric_label(metric, relative, label):
    assert metric_label(metric, relative) == label


def test_curves_labels_the_y_axis_in_words():
    fig = _two_panels(None)
    left, right = fig.axes
    assert left.get_ylabel() == "stable rank of W (relative to init)"
    assert right.get_ylabel() == "largest angle between active neurons (rad)"
    assert "W.stable_rank" not in left.get_ylabel() and "value at init" not in left.get_ylabel()


# -- the layout of a plain savefig ----------------------------------------------------------------------
@pytest.mark.parametrize("draw", [_two_panels, _plain_subplots])
def test_plain_savefig_of_plot_keeps_heading_clear_and_labels_inside(draw):
    fig = _results(Figure("final_srank", TITLE, draw)).plot()
    fig.savefig(io.BytesIO(), format="png")          # what a user writes: no bbox_inches="tight"
    renderer = fig.canvas.get_renderer()
    heading = fig._suptitle.get_window_extent(renderer)
    inside = fig.bbox
    assert inside.y0 <= heading.y0 and heading.y1 <= inside.y1
    for ax in fig.axes:
        title = ax.title.get_window_extent(renderer)
        assert not heading.overlaps(title), (heading, title)
        assert heading.y0 >= title.y1                 # the heading sits above the panel titles
        assert not heading.overlaps(ax.get_window_extent(renderer))
        xlabel = ax.xaxis.label.get_window_extent(renderer)
        ylabel = ax.yaxis.label.get_window_extent(renderer)
        for box in (xlabel, ylabel):
            assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1, box


def test_a_layout_the_user_chose_is_kept():
    def constrained(results):
        fig, ax = plt.subplots(layout="constrained")
        ax.set_title("panel")
        return fig

    fig = Figure("c", TITLE, constrained).render(None)
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"


# -- the stable-rank note follows the sign -----------------------------------------------------------------
def test_change_to_follows_the_sign():
    rise = change_to(21.99, 22.02)
    assert "rises to 22.02" in rise and "drop" not in rise
    fall = change_to(46.63, 32.48)
    assert "drops to 32.48" in fall and "rise" not in fall
    assert "stays at 5" in change_to(5.0, 5.0)


def _srank_run(srank):
    """A one-run RunContext stand-in with a stored W and its stable rank at steps 0, 1 and 10."""
    ds = xr.Dataset({"W.stable_rank": (("run", "checkpoint"), np.array([srank])),
                     "step": (("run", "checkpoint"), np.array([[0.0, 1.0, 10.0]])),
                     "theta.W": (("run", "m", "d"), np.ones((1, 4, 9)))})
    return SimpleNamespace(results=ds, runs=[SimpleNamespace(seed=0)], n_runs=1)


@pytest.mark.parametrize("srank, words, not_words", [
    ([21.99, 22.02, 21.5], "rises to 22.02", "drop"),     # the report's case: up from 21.99 at init
    ([46.63, 32.48, 30.0], "drops to 32.48", "rise"),
])
def test_theorem_42_note_follows_the_sign(srank, words, not_words):
    verdict = FreiTheorem42().bounded_stable_rank(_srank_run(srank))
    assert f"srank at init {srank[0]:.4g}" in verdict.note
    assert words in verdict.note and not_words not in verdict.note
    assert verdict.measured == pytest.approx(max(srank[1:]))   # the number is the same as before


@pytest.mark.parametrize("mathtext, plain", [
    (r"$\mathdefault{10^{-3}}$", "10⁻³"),
    (r"$\mathdefault{10^{12}}$", "10¹²"),
    (r"$\mathdefault{10^{0}}$", "10⁰"),
    (r"$\mathdefault{2\times10^{-1}}$", "2×10⁻¹"),
    (r"$\mathdefault{-10^{2}}$", "\u221210²"),  # symlog: negative ticks
    (r"$\mathdefault{0.1}$", "0.1"),
    (r"$\mathdefault{0}$", "0"),
    ("", ""),
    (r"$\alpha$", r"$\alpha$"),  # anything else is left as it was
])
def test_plain_power_label(mathtext, plain):
    from implicitbias.experiments.figures import plain_power_label

    assert plain_power_label(mathtext) == plain


@pytest.mark.parametrize("limits", [(1e-8, 10.0), (0.2, 3.0)])  # many decades (majors only) and a few (minors labelled)
def test_rendered_log_axes_label_the_same_ticks_in_plain_text(limits):
    """`Figure.render` labels log axes with `PowerLabels`: the same ticks, each label matplotlib's own mathtext
    label converted (no mathtext left), in the PNG as in the PDF."""
    from matplotlib.ticker import LogFormatterSciNotation

    from implicitbias.experiments.figures import PowerLabels, plain_log_labels, plain_power_label

    def draw(results):
        fig, (ax,) = panels(1)
        ax.plot(limits, limits)
        ax.set_xscale("log")
        ax.set_yscale("log")
        return fig

    fig = Figure("f", TITLE, draw).render(None)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert isinstance(ax.yaxis.get_major_formatter(), PowerLabels)
    ours = [(t.get_position(), t.get_text()) for t in ax.yaxis.get_ticklabels(which="both")]
    plain_log_labels(fig, plain=False)  # matplotlib's own formatter back
    assert type(ax.yaxis.get_major_formatter()) is LogFormatterSciNotation
    fig.canvas.draw()
    theirs = [(t.get_position(), t.get_text()) for t in ax.yaxis.get_ticklabels(which="both")]
    assert [p for p, _ in ours] == [p for p, _ in theirs]
    assert [s for _, s in ours] == [plain_power_label(s) for _, s in theirs]
    assert any(s for _, s in ours) and not any("$" in s for _, s in ours)
    assert any("$" in s for _, s in theirs)  # the control: matplotlib's own labels are mathtext
    for fmt in ("png", "pdf"):
        fig.savefig(io.BytesIO(), format=fmt)
    plt.close(fig)
