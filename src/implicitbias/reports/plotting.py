"""Figure helpers that experiments use to declare their figures.

Figures are plain `matplotlib.figure.Figure` objects drawn on the Agg canvas: nothing goes through
`pyplot`, so no display is needed and no global figure state leaks between experiments.

- `new_figure` makes a figure in the house style; `save_figure` writes it as PNG and PDF.
- `metric_curves` draws a metric over checkpoints, one line per run, coloured by a run coordinate
  (Frei et al. 2023, Fig. 1: stable rank relative to initialisation, against time, per init scale).
- `final_vs` draws the final value of a metric against a run coordinate, reduced over the runs that
  share it (e.g. the median over trials of the max angle between neurons, against init scale).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from implicitbias.storage.files import atomic_file

#: rcParams of every figure (applied while it is built and drawn on)
STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "axes.grid.which": "major",
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.4,
    "savefig.bbox": "tight",
}

#: axis labels of the recorded quantities (`implicitbias.training.recorder`) and run coordinates
LABELS = {
    "time": "time t = lr × step",
    "step": "step k",
    "grad_evals": "gradient evaluations",
    "loss": "training loss",
    "test_loss": "test loss",
    "accuracy": "training accuracy",
    "test_accuracy": "test accuracy",
    "param_norm": "parameter norm ‖θ‖",
    "min_margin": "min margin min_i y_i f(x_i)",
    "normalized_margin": "normalised margin",
    "margin_spread": "margin spread max q / min q",
    "z_norm": "‖z‖ (linear predictor)",
    "z_margin": "margin of z / ‖z‖",
    "linear_agreement": "agreement of sign f and sign ⟨z, x⟩",
    "cosine_to_reference": "cosine to max-margin reference",
    "unit_distance_to_reference": "distance to reference (unit vectors)",
    "n_active": "active neurons",
    "max_angle": "max angle of active neurons (rad)",
    "mean_angle": "mean angle of active neurons (rad)",
    "balancedness_max": "max_j |a_j² − ‖w_j‖²|",
    "kkt_stationarity": "KKT stationarity residual",
    "kkt_complementarity": "KKT complementarity residual",
    "init_scale": "initialisation scale α",
    "lr": "learning rate",
    "seed": "seed",
    "trial": "trial",
}

_MATRIX_LABELS = {
    "frobenius": "‖{M}‖_F",
    "spectral": "‖{M}‖_2",
    "nuclear": "‖{M}‖_*",
    "stable_rank": "stable rank of {M}",
    "numerical_rank": "numerical rank of {M}",
    "effective_rank": "effective rank of {M}",
    "sigma2_ratio": "σ₂ / σ₁ of {M}",
    "sigma3_ratio": "σ₃ / σ₁ of {M}",
}

LabelFmt = str | Callable[[Any], str]


def metric_label(name: str) -> str:
    """Human-readable axis label of a metric or coordinate name (the name itself when unknown)."""
    if name in LABELS:
        return LABELS[name]
    matrix, _, quantity = name.rpartition(".")
    if matrix and quantity in _MATRIX_LABELS:
        return _MATRIX_LABELS[quantity].format(M=matrix)
    return name


def new_figure(ncols: int = 1, nrows: int = 1, width: float | None = None, height: float | None = None, *,
               title: str | None = None, sharex: bool = False, sharey: bool = False):
    """`(fig, axes)` in the house style: `axes` is one `Axes` for a single panel, otherwise a flat
    array of `nrows * ncols` axes in row-major order.  Sizes are in inches (default 4.2 × 3.2 per panel)."""
    width = 4.2 * ncols if width is None else width
    height = 3.2 * nrows if height is None else height
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(width, height), layout="constrained")
        axes = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False).ravel()
        if title:
            fig.suptitle(title)
    return fig, (axes[0] if axes.size == 1 else axes)


def save_figure(fig: Figure, directory: str | Path, name: str, *, dpi: int = 120) -> list[Path]:
    """Write `directory/name.png` and `directory/name.pdf` and close the figure; returns both paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.png", directory / f"{name}.pdf"]
    with mpl.rc_context(STYLE):  # each file through a temporary one: a reader never sees half a figure
        atomic_file(lambda tmp: fig.savefig(tmp, format="png", dpi=dpi, metadata={"Software": None}), paths[0])
        atomic_file(lambda tmp: fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "Creator": None,
                                                                         "Producer": None}), paths[1])
    _close(fig)
    return paths


def _close(fig: Figure) -> None:
    import sys

    if "matplotlib.pyplot" in sys.modules:  # a figure made with pyplot is registered there
        sys.modules["matplotlib.pyplot"].close(fig)
    fig.clear()


# -- colours and labels ------------------------------------------------------------------------------
def _format(label_fmt: LabelFmt, name: str, value) -> str:
    if callable(label_fmt):
        return label_fmt(value)
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and "{value}" in label_fmt:
        label_fmt = label_fmt.replace("{value}", "{value:g}")
    return label_fmt.format(name=name.split(".")[-1], value=value)


def _colours(values: Sequence) -> dict:
    """A colour per distinct value: a sequential map (log-spaced when the values span decades) for
    numbers, the default cycle otherwise."""
    uniq = sorted(set(values), key=lambda v: (isinstance(v, str), v))
    numeric = all(isinstance(v, int | float | np.number) and not isinstance(v, bool) for v in uniq)
    if not numeric or len(uniq) == 1:
        cycle = mpl.rcParams["axes.prop_cycle"].by_key()["color"]
        return {v: cycle[i % len(cycle)] for i, v in enumerate(uniq)}
    x = np.asarray(uniq, dtype=float)
    if np.all(x > 0) and x.max() / x.min() > 20:
        x = np.log(x)
    t = (x - x.min()) / (x.max() - x.min())
    cmap = mpl.colormaps["viridis"]
    return {v: cmap(0.9 * ti) for v, ti in zip(uniq, t)}


def _style_axes(ax: Axes, x: str, y: str, logx: bool, logy: bool) -> None:
    ax.set_xlabel(metric_label(x))
    ax.set_ylabel(y)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3, linewidth=0.6)


def _visible(x: np.ndarray, y: np.ndarray, logx: bool, logy: bool) -> np.ndarray:
    keep = np.isfinite(x) & np.isfinite(y)
    if logx:
        keep &= x > 0
    if logy:
        keep &= y > 0
    return keep


# -- metric over training -----------------------------------------------------------------------------
def metric_curves(ax: Axes, ds: xr.Dataset, metric: str, x: str = "time", hue: str | None = "init_scale", *,
                  logx: bool = True, logy: bool = False, relative_to_init: bool = False,
                  label_fmt: LabelFmt = "{value}", title: str | None = None, **line_kw) -> Axes:
    """One line per run of `ds[metric]` against `ds[x]` over checkpoints.

    Runs are coloured and labelled by the run coordinate `hue` (one legend entry per value; runs that
    share it, e.g. trials, share the colour), or by run index when `hue` is None.  Points with x <= 0
    (y <= 0) are skipped on a log x (y) axis.  `relative_to_init` divides each run by its value at
    checkpoint 0, as Frei et al. (2023, Fig. 1) plot the stable rank.  Legend entries are
    `label_fmt` (a format string with `{name}` and `{value}`, or a function of the value) under a
    legend title naming `hue`.
    """
    _require(ds, metric, x)
    xs = np.asarray(ds[x].transpose("run", "checkpoint").values, dtype=float)
    ys = np.asarray(ds[metric].transpose("run", "checkpoint").values, dtype=float)
    if relative_to_init:
        with np.errstate(divide="ignore", invalid="ignore"):
            ys = ys / ys[:, :1]
    keys = _run_values(ds, hue) if hue is not None else list(range(ds.sizes["run"]))
    colours = _colours(keys)
    labelled: set = set()
    for r in range(xs.shape[0]):
        keep = _visible(xs[r], ys[r], logx, logy)
        key = keys[r]
        label = None
        if key not in labelled and (hue is not None or len(keys) <= 8):
            label = _format(label_fmt, hue, key) if hue is not None else f"run {key}"
            labelled.add(key)
        ax.plot(xs[r][keep], ys[r][keep], color=colours[key], label=label, **{"alpha": 0.9, **line_kw})
    ylabel = metric_label(metric) + (" / value at init" if relative_to_init else "")
    _style_axes(ax, x, ylabel, logx, logy)
    if labelled:
        _legend(ax, hue)
    if title:
        ax.set_title(title)
    return ax


def _require(ds: xr.Dataset, *names: str) -> None:
    for name in names:
        if name not in ds.variables:
            raise KeyError(f"{name!r} is not in the results; recorded: {sorted(map(str, ds.data_vars))}")


def _run_values(ds: xr.Dataset, name: str) -> list:
    if name not in ds.coords or ds[name].dims != ("run",):
        runs = sorted(str(k) for k, c in ds.coords.items() if c.dims == ("run",))
        raise KeyError(f"{name!r} is not a run coordinate; run coordinates: {runs}")
    return [v.item() if isinstance(v, np.generic) else v for v in ds[name].values]


def _legend(ax: Axes, hue: str | None) -> None:
    handles, labels = ax.get_legend_handles_labels()
    order = list(dict.fromkeys(labels))
    ax.legend([handles[labels.index(lab)] for lab in order], order, frameon=False, fontsize="small",
              title=metric_label(hue) if hue else None, title_fontsize="small")


def final_values(ds: xr.Dataset, metric: str) -> np.ndarray:
    """The last finite value of `metric` of every run (NaN for a run with none)."""
    _require(ds, metric)
    ys = np.asarray(ds[metric].transpose("run", "checkpoint").values, dtype=float)
    finite = np.isfinite(ys)
    last = ys.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    return np.where(finite.any(axis=1), ys[np.arange(ys.shape[0]), last], np.nan)


# -- final value against a coordinate -----------------------------------------------------------------
def final_vs(ax: Axes, data, metric: str, x_coord: str, group: str | None = None, *,
             reduce: str | Callable = "median", spread: str | None = "iqr", points: bool = True,
             logx: bool = False, logy: bool = False, label_fmt: LabelFmt = "{value}",
             title: str | None = None) -> Axes:
    """The final value of `metric` against `x_coord`, reduced over the runs with the same x.

    `data` is a Dataset, a list of Datasets, a list of cells (objects with `.results` and `.values`)
    or a `Results` (its `.cells`).  `x_coord` and `group` name a run coordinate or a cell value (the
    value of a cell axis, matched in full or by its last dotted part).  One curve per group value;
    `reduce` is "median", "mean" or a function of an array; `spread` shades the inter-quartile
    range ("iqr") or the full range ("range") where several runs share an x; `points` shows every run.
    """
    rows = _final_rows(data, metric, x_coord, group)
    reducer = {"median": np.median, "mean": np.mean}.get(reduce) if isinstance(reduce, str) else reduce
    if not callable(reducer):
        raise ValueError(f"reduce={reduce!r}: use 'median', 'mean' or a function of an array")
    colours = _colours([g for g, _, _ in rows]) if group is not None else {None: "C0"}
    for g in colours:
        xs = np.array([x for gg, x, _ in rows if gg == g], dtype=float)
        ys = np.array([y for gg, _, y in rows if gg == g], dtype=float)
        keep = _visible(xs, ys, logx, logy)
        xs, ys = xs[keep], ys[keep]
        ux = np.unique(xs)
        centre = np.array([reducer(ys[xs == u]) for u in ux])
        label = _format(label_fmt, group, g) if group is not None else None
        ax.plot(ux, centre, "o-", color=colours[g], label=label, markersize=4)
        if points and len(xs) > len(ux):
            ax.scatter(xs, ys, s=8, color=colours[g], alpha=0.35, linewidths=0)
        if spread and len(xs) > len(ux):
            lo, hi = _spread(spread, [ys[xs == u] for u in ux])
            ax.fill_between(ux, lo, hi, color=colours[g], alpha=0.15, linewidth=0)
    name = reduce if isinstance(reduce, str) else getattr(reduce, "__name__", "reduced")
    _style_axes(ax, x_coord, f"final {metric_label(metric)}\n({name} over runs)", logx, logy)
    if group is not None:
        _legend(ax, group)
    if title:
        ax.set_title(title)
    return ax


def _spread(kind: str, samples: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if kind == "iqr":
        quartiles = np.array([np.percentile(s, [25, 75]) for s in samples]).reshape(-1, 2)
        return quartiles[:, 0], quartiles[:, 1]
    if kind == "range":
        return np.array([s.min() for s in samples]), np.array([s.max() for s in samples])
    raise ValueError(f"spread={kind!r}: use 'iqr', 'range' or None")


def _sources(data) -> Iterable[tuple[xr.Dataset, dict]]:
    if hasattr(data, "cells"):
        data = data.cells
    if isinstance(data, xr.Dataset):
        data = [data]
    for item in data:
        if isinstance(item, xr.Dataset):
            yield item, json.loads(item.attrs.get("cell", "{}"))
        else:
            yield item.results, dict(item.values)


def _lookup(ds: xr.Dataset, values: dict, name: str) -> list:
    if name in ds.variables and ds[name].dims == ("run",):
        return _run_values(ds, name) if name in ds.coords else list(ds[name].values)
    for key, value in values.items():
        if key == name or key.split(".")[-1] == name:
            return [value] * ds.sizes["run"]
    runs = sorted(str(k) for k, c in ds.coords.items() if c.dims == ("run",))
    raise KeyError(f"{name!r} is neither a run coordinate {runs} nor a cell value {sorted(values)}")


def _final_rows(data, metric: str, x_coord: str, group: str | None) -> list[tuple[Any, float, float]]:
    rows = []
    for ds, values in _sources(data):
        xs = _lookup(ds, values, x_coord)
        gs = _lookup(ds, values, group) if group is not None else [None] * ds.sizes["run"]
        rows += [(g, float(x), float(y)) for g, x, y in zip(gs, xs, final_values(ds, metric))]
    rows = [r for r in rows if math.isfinite(r[2])]
    if not rows:
        raise ValueError(f"no run has a finite final value of {metric!r}")
    return rows
