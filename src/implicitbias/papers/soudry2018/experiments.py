"""Soudry, Hoffer, Nacson, Gunasekar, Srebro 2018 (JMLR): logistic regression on separable data converges in
direction to the hard-margin SVM, like 1/log t (SCIENCE.md S4); SGD does the same (Nacson, Srebro, Soudry 2019)
and normalised GD gets there polynomially fast (Nacson et al. 2019).

Two data sets: a 2-D set whose SVM is known in closed form (`KnownSVM2D`, the picture of the paper's Figure 1)
and a higher-dimensional separable set (`Separable`); on each, GD, normalised GD and SGD. The figures are the
paper's Figure 1 on log-time axes: ||w(t)||, the loss, the angle gap and the margin gap, with the fitted rates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from implicitbias.data import KnownSVM2D
from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, plt, write_csv
from implicitbias.experiments.validation import check_separable_runs
from implicitbias.losses import Loss
from implicitbias.models import Linear, MulticlassLinear
from implicitbias.papers.soudry2018.theorems.claims import (
    NormalizedSpeedup,
    cell_svm,
    cells_of,
    limit_level,
    run_curves,
    run_fits,
)
from implicitbias.papers.soudry2018.theorems.limits import (
    NacsonNormalizedGD,
    NacsonSGD,
    SoudryMulticlass,
    SoudryTheorem3,
)
from implicitbias.theorems.base import RunContext
from implicitbias.theorems.fitting import late_window
from implicitbias.theorems.max_margin import constraint_system
from implicitbias.training.methods import GD
from implicitbias.training.stopping import Stop

#: normalised GD multiplies the gradient by 1/L: stop before L underflows to 0 in float64 (q ~ 575)
STOP = Stop(max_steps=1_000_000, loss_tol=1e-250)


def _fmt(v) -> str:
    return f"{v:.10g}" if isinstance(v, float | np.floating) else str(v)


# -- figures -----------------------------------------------------------------------------------------------------
LABELS = {"gd": "GD", "normalized_gd": "normalised GD", "sgd": "SGD"}
COLORS = {"gd": "C1", "normalized_gd": "C2", "sgd": "C4"}


def _curve_panels(axes, cells):
    """||w||, loss, angle gap, margin gap and angle gap x ||w|| against the iteration k, one line per method
    (trial 0), with the fitted rates of GD and SGD dashed and GD's predicted limit of angle gap x ||w|| dotted.
    Normalised GD (||w|| ~ t, L ~ e^-t) leaves the first two panels, whose ranges follow GD and SGD."""
    top, bottom = 0.0, np.inf
    for kind, cell in cells.items():
        c, fit = run_curves(cell, 0), run_fits(cell, 0)
        lr = c["time"][-1] / c["step"][-1]
        k = c["step"]
        col = COLORS[kind]
        axes[0].plot(k, c["norm"], color=col, label=LABELS[kind])
        axes[1].plot(k, c["loss"], color=col, label=LABELS[kind])
        axes[2].plot(k, c["angle_gap"], color=col, label=LABELS[kind])
        axes[3].plot(k, np.maximum(c["margin_gap"], 1e-300), color=col, label=LABELS[kind])
        axes[4].plot(k, c["angle_gap"] * c["norm"], color=col, label=LABELS[kind])
        if kind == "normalized_gd":
            continue
        top, bottom = max(top, float(np.max(c["norm"]))), min(bottom, float(np.min(c["loss"])))
        late = k[late_window(c["time"])]
        t = late * lr
        axes[0].plot(late, fit["norm_intercept"] + fit["norm_slope"] * np.log(t), "--", color=col, lw=0.8,
                     label=f"fit: slope {fit['norm_slope']:.3g} vs ||w_hat|| = {fit['w_hat_norm']:.3g}")
        i0 = np.flatnonzero(late_window(c["time"]))[0]
        axes[1].plot(late, c["loss"][i0] * (t / t[0]) ** fit["loss_slope"], "--", color=col, lw=0.8,
                     label=f"fit: t^{fit['loss_slope']:.3g}")
        axes[2].plot(late, c["angle_gap"][i0] * (np.log(t) / np.log(t[0])) ** -fit["angle_p"], "--", color=col,
                     lw=0.8, label=f"fit: (log t)^-{fit['angle_p']:.3g}")
        if kind == "gd" and np.isfinite(level := limit_level(cell, 0)):
            axes[4].axhline(level, color=col, ls=":", lw=1.2, label=f"GD limit ||P w_tilde|| = {level:.3g}")
    if top > 0:
        axes[0].set_ylim(0.0, 1.3 * top)
        axes[1].set_ylim(bottom=0.1 * bottom)
    titles = ["||w(t)|| (log t growth)", "training loss (1/t)", "angle gap ||w/||w|| - w_hat/||w_hat|| ||",
              "margin gap (gamma_hat - gamma(w)) / gamma_hat",
              "angle gap x ||w(t)|| (levels off: gap ~ 1/log t)"]
    for i, (ax, title) in enumerate(zip(axes, titles)):
        ax.set_xscale("log")
        ax.set_yscale("log" if i in (1, 2, 3) else "linear")
        ax.set_xlabel("iteration k")
        ax.grid(True, which="both", alpha=0.3)
        finish(ax, title)


def _data_panel(ax, cells):
    cell = cells["gd"]
    data, svm = cell.data[0], cell_svm(cell, 0)
    X, y = data.X, data.y
    ax.scatter(*X[y > 0].T, marker="+", color="C3", label="y = +1")
    ax.scatter(*X[y < 0].T, marker="o", facecolors="none", edgecolors="C0", label="y = -1")
    ax.scatter(*X[svm.support].T, s=120, facecolors="none", edgecolors="k", lw=0.8, label="support vectors")
    lim = 1.1 * np.max(np.abs(X))
    s = np.linspace(-lim, lim, 2)

    def boundary(w, style, label, color="k"):
        u = w / np.linalg.norm(w)
        ax.plot(-u[1] * s, u[0] * s, style, color=color, lw=1, label=label)

    boundary(svm.w, "-", "max-margin separator")
    for side in (-1.0, 1.0):  # the margin: y <w_hat, x> = 1 on the support vectors
        u = svm.w / np.linalg.norm(svm.w)
        ax.plot(-u[1] * s + side * svm.margin * u[0], u[0] * s + side * svm.margin * u[1], ":", color="0.5", lw=0.8)
    for kind, c in cells.items():
        boundary(c.results["theta.w"].values[0], "--", f"{LABELS[kind]}, last iterate", color=COLORS[kind])
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    finish(ax, "data, SVM and the learned separators")


def _multiclass_panel(ax, cell):
    """Every multiclass margin constraint <w_(y_i) - w_c, x_i> / ||W|| over time, in units of the SVM margin: those of
    the support (solid) tend to 1, the others (grey) stay above it."""
    svm = cell_svm(cell, 0)
    A, lam = constraint_system(RunContext.of(cell), 0, svm)
    ds = cell.results
    t = ds["time"].values[0]
    P = ds["trajectory.theta.W"].values[0].reshape(t.size, -1)
    keep = t > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        g = (P @ A.T) / np.linalg.norm(P, axis=1, keepdims=True) / svm.margin
    support = lam > 1e-8 * lam.max()
    k = ds["step"].values[0][keep]
    rest = np.flatnonzero(~support)
    if rest.size:  # every other constraint as one gray line broken by NaN (one artist, not one per example)
        kk = np.concatenate([np.append(k.astype(float), np.nan)] * rest.size)
        gg = np.concatenate([np.append(g[keep, j], np.nan) for j in rest])
        ax.plot(kk, gg, color="0.75", lw=0.6)
    for j in np.flatnonzero(support):
        ax.plot(k, g[keep, j], lw=1.2)
    ax.axhline(1.0, color="k", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_ylim(0.0, 3.0)
    ax.set_xlabel("iteration k")
    ax.grid(True, which="both", alpha=0.3)
    finish(ax, f"constraint margins / (gamma_hat ||W||): the {int(support.sum())} on the support -> 1")


def _figure(data_kind: str):
    def draw(results):
        cells = cells_of(results, data_kind)
        fig, grid = plt.subplots(2, 3, figsize=(14, 8.5))
        axes = list(grid.ravel())
        if data_kind == "2d":
            _data_panel(axes[0], cells)
            _curve_panels(axes[1:], cells)
        elif data_kind == "multiclass":
            _multiclass_panel(axes[0], cells["gd"])
            _curve_panels(axes[1:], cells)
        else:
            _curve_panels(axes[1:], cells)
            axes[0].axis("off")
            spec = cells["gd"].spec.data
            axes[0].text(0.0, 0.5, f"{spec.name}: n = {spec.n}, d = {spec.d}\n" + "\n".join(
                f"{LABELS[k]}: lr {c.spec.method.lr:g}" for k, c in cells.items()), fontsize=10)
        return fig

    return draw


# -- tables ----------------------------------------------------------------------------------------------------
CURVE_COLUMNS = ["step", "time", "norm", "loss", "angle_gap", "margin_gap", "angle_gap_x_log_t", "angle_gap_x_norm"]


def _tables(results, out_dir):
    out_dir, written = Path(out_dir), []
    for kind in ("2d", "highdim", "multiclass"):
        cells = cells_of(results, kind)
        if not cells:
            continue
        curves, fits = [], []
        for method, cell in cells.items():
            for r, spec in enumerate(cell.runs):
                c = run_curves(cell, r)
                curves += [[method, spec.trial] + [_fmt(c[k][i]) for k in CURVE_COLUMNS] for i in range(len(c["step"]))]
                fits.append([method, spec.trial, spec.method.lr] + [_fmt(v) for v in run_fits(cell, r).values()])
        written.append(write_csv(out_dir / f"soudry_fig1_{kind}_curves.csv", ["method", "trial"] + CURVE_COLUMNS,
                                 curves))
        written.append(write_csv(out_dir / f"soudry_fig1_{kind}_fits.csv", ["method", "trial", "lr"]
                                 + list(run_fits(next(iter(cells.values())), 0)), fits))
        if kind == "2d" and "gd" in cells:
            data, svm = cells["gd"].data[0], cell_svm(cells["gd"], 0)
            rows = [[_fmt(x[0]), _fmt(x[1]), _fmt(yy), int(i in set(svm.support.tolist()))]
                    for i, (x, yy) in enumerate(zip(data.X, data.y))]
            written.append(write_csv(out_dir / "soudry_fig1_2d_data.csv", ["x1", "x2", "y", "support_vector"], rows))
    return written


def _theorems(cell):
    if isinstance(cell.spec.model, MulticlassLinear):
        return [SoudryMulticlass()]
    kind = cell.spec.method.kind
    return [{"gd": SoudryTheorem3, "sgd": NacsonSGD, "normalized_gd": NacsonNormalizedGD}[kind]()]


def _parts(data: dict, steps: int, ngd_steps: int, gd_lr: float, ngd_lr: float, sgd_lr: float, batch: int) -> dict:
    out = {}
    prefix = "2d" if data.get("data.name") == "svm_2d" else "highdim"
    out[f"{prefix}_gd"] = {**data, "method.kind": "gd", "method.lr": gd_lr, "stop.max_steps": steps}
    out[f"{prefix}_normalized_gd"] = {**data, "method.kind": "normalized_gd", "method.lr": ngd_lr,
                                      "stop.max_steps": ngd_steps}
    out[f"{prefix}_sgd"] = {**data, "method.kind": "sgd", "method.lr": sgd_lr, "method.batch_size": batch,
                            "stop.max_steps": steps}
    return out


TWO_D = {"data.name": "svm_2d", "data.n": 16}
HIGH_D = {"data.name": "separable", "data.n": 20, "data.d": 100, "data.margin": 0.5}
#: the multiclass part: 3 classes in 10-D, GD on the cross-entropy; the angle gap to the multiclass SVM is computed
#: from the parameters kept at every checkpoint (the recorder's reference is the binary SVM only)
MULTICLASS = {"data.name": "multiclass_separable", "data.n": 10, "data.d": 10, "data.classes": 3, "data.margin": 0.3,
              "model.kind": "multiclass_linear", "model.classes": 3, "loss.name": "cross_entropy", "method.kind": "gd",
              "method.lr": 0.5, "reference": "none", "keep_trajectory": True}

SOUDRY = Experiment(
    validate_runs=check_separable_runs,
    name="soudry2018-logistic",
    paper="Soudry, Hoffer, Nacson, Gunasekar, Srebro 2018 (JMLR), Figure 1 and Theorem 3",
    systems=("S4",),
    summary="Logistic regression on separable data, w from 0: GD (lr < 2/beta), SGD and normalised GD on a 2-D set "
            "with a closed-form SVM and on a 100-D separable set with n = 20 (every point a support vector). On "
            "log-time axes: ||w(t)|| grows like ||w_hat|| log t, the loss like 1/t (t L -> ||w_hat||^2), the angle gap "
            "to the SVM direction like 1/log t (angle gap x ||w(t)|| levels off at ||P w_tilde||, Theorem 3's "
            "w_tilde), the margin gap like 1/log t; normalised GD reaches the same direction in orders of magnitude "
            "fewer steps. Multiclass cross-entropy (3 classes in 10-D, GD) against the multiclass SVM, with the "
            "same rates.",
    config=ExperimentConfig(
        model=Linear(),
        data=KnownSVM2D(n=16),
        loss=Loss(name="logistic"),
        method=GD(lr=1.0),
        stop=STOP,
        init_scale=0.0,
        checkpoints=40,
        trials=3,
        reference="svm",
        kkt=False,
        parts={**_parts(TWO_D, 1_000_000, 10_000, 1.0, 0.1, 0.5, 4),
               **_parts(HIGH_D, 1_000_000, 10_000, 0.5, 0.01, 0.1, 5),
               "multiclass_gd": {**MULTICLASS, "stop.max_steps": 1_000_000}},
    ),
    quick={"trials": 1, "checkpoints": 30,
           "parts": {**_parts(TWO_D, 100_000, 3000, 1.0, 0.1, 0.5, 4),
                     **_parts(HIGH_D, 100_000, 3000, 0.5, 0.01, 0.1, 5),
                     "multiclass_gd": {**MULTICLASS, "stop.max_steps": 100_000}}},
    figures=(Figure("soudry_fig1_2d", "2-D data with a closed-form SVM: the data, the SVM separator and the last "
                    "iterates; ||w(t)||, loss, angle gap, margin gap and angle gap x ||w(t)|| (levelling off at GD's "
                    "predicted ||P w_tilde||, dotted) against the iteration k (log axes), GD, normalised GD and SGD, "
                    "fitted rates dashed.", _figure("2d")),
             Figure("soudry_fig1_highdim", "The same curves on a 100-dimensional separable set (n = 20).", _figure("highdim")),
             Figure("soudry_multiclass", "Multiclass cross-entropy, 3 classes in 10-D: every margin constraint "
                    "over ||W||, in units of the SVM margin (support constraints -> 1); the same curves against the "
                    "multiclass SVM.", _figure("multiclass"))),
    theorems=_theorems,
    claims=(NormalizedSpeedup(),),
    tables=_tables,
    settings_source="Ours (the paper's Figure 1 uses a 2-D set with a known SVM; its step sizes are not given): "
                    "KnownSVM2D (n = 16, margin 0.5, two support vectors), Separable (n = 20, d = 100, margin 0.5), "
                    "w(0) = 0, GD (lr 1 / 0.5) and SGD (lr 0.5, batch 4 / lr 0.1, batch 5) below their 2/beta, "
                    "normalised GD (lr 0.1 / 0.01) below 2/max||x||^2, 10^6 "
                    "GD/SGD steps and 10^4 normalised steps; multiclass: MulticlassSeparable (n = 10, d = 10, 3 "
                    "classes, score gap 0.3), GD lr 0.5 below 2/beta = 4n / sigma_max(X)^2; 3 data draws. Quick: 10^5 "
                    "steps (3000 normalised), one draw.",
)

EXPERIMENTS = [SOUDRY]
