"""Figure helpers shared by the experiment definitions (curves over checkpoints, finals against a
grid axis), drawn from the cells of a `Results`."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import csv
import re
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import LogFormatterSciNotation, NullLocator

#: readable axis labels of the recorded quantities (docs/science/quantities.md), by recorded name
METRIC_LABELS = {
    "step": "step k",
    "time": "time t",
    "grad_evals": "gradient evaluations",
    "loss": "training loss",
    "test_loss": "test loss",
    "accuracy": "training accuracy",
    "test_accuracy": "test accuracy",
    "param_norm": "parameter norm ||θ||",
    "min_margin": "smallest margin min_i y_i f(x_i)",
    "normalized_margin": "normalised margin",
    "margin_spread": "margin spread (max / min margin)",
    "z_norm": "norm of the linear predictor ||z||",
    "z_margin": "margin of the linear predictor z",
    "linear_agreement": "agreement of sign f(x) with sign <z, x>",
    "cosine_to_reference": "cosine to the reference direction",
    "unit_distance_to_reference": "distance to the reference direction",
    "n_active": "number of active neurons",
    "max_angle": "largest angle between active neurons (rad)",
    "mean_angle": "mean angle between active neurons (rad)",
    "weighted_max_angle": "largest angle between weighted active neurons (rad)",
    "kink_max_angle": "largest angle between active neurons off the kink (rad)",
    "balancedness_max": "balancedness max_j |a_j² - ||w_j||²|",
    "kkt_stationarity": "KKT stationarity residual",
    "kkt_complementarity": "KKT complementarity gap",
    "l1_l2_sparsity": "sparsity ||w||_1² / ||w||_2²",
}

#: readable labels of the per-matrix quantities `<M>.<name>`, with `{M}` the matrix (`W`, `W1`, ...)
MATRIX_LABELS = {
    "frobenius": "Frobenius norm of {M}",
    "spectral": "spectral norm of {M}",
    "nuclear": "nuclear norm of {M}",
    "stable_rank": "stable rank of {M}",
    "numerical_rank": "numerical rank of {M}",
    "effective_rank": "effective rank of {M}",
    "sigma2_ratio": "σ2 / σ1 of {M}",
    "sigma3_ratio": "σ3 / σ1 of {M}",
}


def metric_label(metric: str, relative: bool = False) -> str:
    """The axis label of a recorded quantity: readable words where the name is known (`W.stable_rank` ->
    "stable rank of W", `max_angle` -> "largest angle between active neurons (rad)"), the name itself otherwise;
    `relative` (the value over its value at init) adds " (relative to init)"."""
    label = METRIC_LABELS.get(metric)
    if label is None and "." in metric:
        matrix, _, name = metric.rpartition(".")
        if name in MATRIX_LABELS:
            label = MATRIX_LABELS[name].format(M=matrix)
    if label is None:
        pair = re.fullmatch(r"alignment_(\w+?)_(\w+)", metric)
        label = f"alignment of {pair[1]} with {pair[2]} (top singular vectors)" if pair else metric
    return label + (" (relative to init)" if relative else "")


def panels(n: int = 1, width: float = 5.0, height: float = 3.8):
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])


def curves(ax, cell, metric: str, *, x: str = "step", hue: str | None = None, relative: bool = False,
           logx: bool = True, logy: bool = False, label: str | None = None, reduce_trials: bool = True):
    """One line per run of a cell (median over trials when `reduce_trials`), x over checkpoints."""
    ds = cell.results
    if metric not in ds:
        return
    y = ds[metric].values.astype(float)
    xs = ds[x].values.astype(float)
    if relative:
        y = y / y[:, :1]
    groups = _groups(ds, hue)
    for name, idx in groups.items():
        yy, xx = np.median(y[idx], axis=0) if reduce_trials else y[idx[0]], xs[idx[0]]
        keep = xx > 0 if logx else np.ones_like(xx, bool)
        text = label if label is not None else (f"{hue} = {name:g}" if hue else None)
        ax.plot(xx[keep], yy[keep], marker=".", ms=3, label=text)
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    ax.set_xlabel({"step": "GD step k", "time": "time t (= lr k for GD)"}.get(x, x))
    ax.set_ylabel(metric_label(metric, relative))
    ax.grid(True, which="both", alpha=0.3)


def _groups(ds, hue):
    if hue is None or hue not in ds.coords:
        return {None: list(range(ds.sizes["run"]))}
    values = ds[hue].values
    return {float(v): [i for i in range(len(values)) if values[i] == v] for v in dict.fromkeys(values)}


def finish(ax, title: str):
    ax.set_title(title, fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        ax.legend(fontsize=7)


def headline(fig, text: str, *, fontsize: float = 10, max_lines: int = 3):
    """Head `fig` with `text` (a figure's title) as its suptitle, wrapped to the figure's width (at most
    `max_lines` lines, the rest cut at a word and marked "…"), and give the figure a layout engine when it has
    none (tight layout, which makes room for the suptitle): a plain `fig.savefig(path)` then keeps the heading
    clear of the panel titles and every label inside the figure.  A layout the figure already has (e.g.
    `layout="constrained"`) is kept.  Returns the suptitle's Text."""
    width_pt = fig.get_figwidth() * 72
    chars = max(20, int(0.95 * width_pt / (0.55 * fontsize)))  # DejaVu Sans: about 0.55 em a character
    lines = textwrap.wrap(" ".join(text.split()), chars) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = textwrap.shorten(lines[-1] + " …", chars, placeholder=" …")
    title = fig.suptitle("\n".join(lines), fontsize=fontsize)
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("tight")
    return title


def thin_log_axes(fig, decades: float = 3.0):
    """No minor ticks (nor their grid lines) on a log axis that spans more than `decades` decades: there the
    labelled decades carry the reading, and the minor ticks (8 a decade, each a few matplotlib artists) were
    half the time of writing a figure (measured on soudry2018's three 6-panel figures: 5.7 s -> 2.7 s)."""

    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(limits)
            if axis.get_scale() == "log" and lo > 0 and np.log10(hi / lo) > decades:
                axis.set_minor_locator(NullLocator())


#: digits and minus as Unicode superscripts, for exponents written as plain text
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def plain_power_label(label: str) -> str:
    """A log axis's mathtext tick label (`$\\mathdefault{10^{-3}}$`, `$\\mathdefault{2\\times10^{1}}$`,
    `$\\mathdefault{0.1}$`) as the same text without mathtext (`10⁻³`, `2×10¹`, `0.1`); any other label is
    returned unchanged."""
    whole = re.fullmatch(r"\$\\mathdefault\{(.*)\}\$", label)
    if whole is None:
        return label
    body = whole[1]
    power = re.fullmatch(r"(-?)(?:([0-9.]+)\\times)?([0-9.]+)\^\{(-?[0-9]+)\}", body)
    if power is not None:
        sign, coeff, base, exponent = power.groups()
        return ("\u2212" if sign else "") + (f"{coeff}×" if coeff else "") + base + exponent.translate(_SUPERSCRIPT)
    if re.fullmatch(r"-?[0-9.]+", body):
        return body.replace("-", "\u2212")
    return label


class PowerLabels(LogFormatterSciNotation):
    """matplotlib's log-axis labels (`LogFormatterSciNotation`: the same ticks labelled, the same numbers) as
    plain text with Unicode superscripts instead of mathtext.  Parsing mathtext was a quarter of the time of
    writing a figure: every tick label parsed again for the layout, the PNG and the PDF (each at its own dpi).
    `python benchmarks/bench_figures.py --labels` measures it."""

    def __call__(self, x, pos=None):
        return plain_power_label(super().__call__(x, pos))


def plain_log_labels(fig, plain: bool = True) -> None:
    """Label every log (and symlog) axis of `fig` with `PowerLabels` where it has matplotlib's default
    formatter; a formatter of the figure's own is kept.  Call it once the scales are set (a scale set later
    brings its default formatter back).  `plain=False` puts matplotlib's mathtext formatter back instead (the
    baseline of `benchmarks/bench_figures.py --labels`)."""
    if matplotlib.rcParams["text.usetex"]:
        return
    source, target = (LogFormatterSciNotation, PowerLabels) if plain else (PowerLabels, LogFormatterSciNotation)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                             (axis.get_minor_formatter, axis.set_minor_formatter)):
                old = get()
                if type(old) is source:
                    new = target.__new__(target)
                    new.__dict__.update(old.__dict__)  # base, labelOnlyBase, thresholds, linthresh as they were
                    put(new)


def lay_out_once(fig) -> None:
    """Apply the figure's layout engine (tight or constrained) once, then drop the engine, so that each of the
    saves that follow draws the figure once.  With an engine, every `savefig` draws twice (a text-measuring draw
    to lay the figure out, then the real one); the layout is in inches, the same at any dpi and in any format.
    `python benchmarks/bench_figures.py` measures it."""
    engine = fig.get_layout_engine()
    if engine is None:
        return
    engine.execute(fig)
    with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)  # None with those settings: no engine (not a placeholder that still draws)


def write_csv(path, header: list[str], rows: list[list]):
    """The numbers behind a figure as CSV: a header row, then the rows (the folder is created)."""

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_dict_csv(path, rows: list[dict]):
    """`write_csv` of rows given as dicts with the same keys (the header is the first row's keys)."""
    header = list(rows[0])
    return write_csv(path, header, [[row[k] for k in header] for row in rows])
