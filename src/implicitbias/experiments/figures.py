"""Figure helpers shared by the experiment definitions (curves over checkpoints, finals against a
grid axis), drawn from the cells of a `Results`."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import csv
from pathlib import Path

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import NullLocator


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
    ax.set_ylabel(metric + (" / value at init" if relative else ""))
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


def thin_log_axes(fig, decades: float = 3.0):
    """No minor ticks (nor their grid lines) on a log axis that spans more than `decades` decades: there the
    labelled decades carry the reading, and the minor ticks (8 a decade, each a few matplotlib artists) were
    half the time of writing a figure (measured on soudry2018's three 6-panel figures: 5.7 s -> 2.7 s)."""

    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(limits)
            if axis.get_scale() == "log" and lo > 0 and np.log10(hi / lo) > decades:
                axis.set_minor_locator(NullLocator())


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
