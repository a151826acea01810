"""Chistikov, Englert & Lazic 2023 (NeurIPS), Figure 2 (S11): loss curves from small balanced inits (a plateau
whose length grows like ln(1/lambda), then exponential decay), test loss against lambda, and gradient flow
against the paper's GD from the same inits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from implicitbias.experiments.base import Experiment, Figure
from implicitbias.experiments.config import ExperimentConfig
from implicitbias.experiments.figures import finish, panels
from implicitbias.experiments.figures import write_csv as _write_csv
from implicitbias.papers.chistikov2023.data import TeacherNeuron
from implicitbias.papers.chistikov2023.experiments.fig1 import GF, NET, SQUARE, STOP, theorem7
from implicitbias.papers.chistikov2023.metrics.plateau import plateau_exit_time
from implicitbias.theorems.base import CellsTheorem, compare, prediction
from implicitbias.theorems.fitting import final, fitted_slope
from implicitbias.theorems.init_scale_cells import by_lambda, fmt_lambda, lambdas

FIG2_LAMBDAS = [4.0**k for k in range(-2, -9, -1)]  # 4^-2 ... 4^-8
_FIG2 = "Chistikov et al. 2023, Figure 2"


def _method_cells(results) -> dict[str, object]:
    return {c.spec.method.kind: c for c in results.cells}


def _exit_times(cell) -> np.ndarray:
    ds = cell.results
    return plateau_exit_time(ds["time"].values, ds["loss"].values)


def _fig2(results):
    fig, (left, right) = panels(2)
    cells = _method_cells(results)
    for kind, cell in cells.items():
        ds = cell.results
        t, loss, exits = ds["time"].values, ds["loss"].values, _exit_times(cell)
        style = "-" if kind == "gf" else "--"
        for r in np.argsort(-lambdas(ds)):
            keep = t[r] > 0
            line = left.plot(t[r][keep], loss[r][keep], style, lw=1,
                             label=f"{kind}, lambda = {fmt_lambda(lambdas(ds)[r])}")[0]
            if np.isfinite(exits[r]):
                left.plot([exits[r]], [0.5 * loss[r][0]], "o", color=line.get_color(), ms=4)
        lam, test = by_lambda(ds, final(ds, "test_loss"))
        right.plot(lam, test, "o" + style, label=kind)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("time t (= 0.01 k for GD step k)")
    left.set_ylabel("training loss")
    finish(left, "training loss (dots: plateau exit, loss = L(0)/2)")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("initialisation scale lambda")
    right.set_ylabel("test loss (64 inputs from N(0, I_d))")
    finish(right, "test loss at the end of training")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    return fig


def _network_sum(cell) -> np.ndarray:
    """sum_j a_j w_j of every run: (runs, d)."""
    ds = cell.results
    return np.einsum("rj,rjk->rk", ds["theta.a"].values, ds["theta.W"].values)


def _comparison(results) -> list[dict]:
    """Per lambda, the final networks of GF and GD from the same init and data."""
    cells = _method_cells(results)
    if not {"gf", "gd"} <= set(cells):
        return []
    gf, gd = cells["gf"].results, cells["gd"].results
    order_f, order_d = np.argsort(lambdas(gf)), np.argsort(lambdas(gd))
    vf, vd = _network_sum(cells["gf"])[order_f], _network_sum(cells["gd"])[order_d]
    rows = []
    for i, (rf, rd) in enumerate(zip(order_f, order_d)):
        row = {"lambda": float(lambdas(gf)[rf]),
               "rel_dist_sum_a_w": float(np.linalg.norm(vf[i] - vd[i]) / np.linalg.norm(vf[i]))}
        for metric in ("max_angle", "W.nuclear", "test_loss", "loss", "grad_evals", "time"):
            a, b = final(gf, metric)[rf], final(gd, metric)[rd]
            row[f"{metric}_gf"], row[f"{metric}_gd"] = float(a), float(b)
        rows.append(row)
    return rows


def _fig2_tables(results, out_dir):
    out = []
    cells = _method_cells(results)
    for kind, cell in cells.items():
        ds = cell.results
        lam, exits = lambdas(ds), _exit_times(cell)
        rows = [[f"{lam[r]:.10g}", f"{exits[r]:.6g}", f"{final(ds, 'loss')[r]:.6g}",
                 f"{final(ds, 'test_loss')[r]:.6g}", f"{final(ds, 'grad_evals')[r]:.0f}"]
                for r in np.argsort(-lam)]
        out.append(_write_csv(Path(out_dir) / f"fig2_{kind}.csv",
                              ["lambda", "plateau_exit_time", "final_loss", "test_loss", "grad_evals"], rows))
    rows = _comparison(results)
    if rows:
        out.append(_write_csv(Path(out_dir) / "fig2_gf_vs_gd.csv", list(rows[0]),
                              [[f"{v:.8g}" for v in r.values()] for r in rows]))
    return out


class Figure2Claims(CellsTheorem):
    """Figure 2 across its cells (one per method, gradient flow and the paper's GD): smaller lambda generalises
    better, the loss leaves its plateau at about ln(1/lambda) / ||gamma_[n]||, and where both methods ran, they
    reach the same network, gradient flow with far fewer gradient evaluations.

    exit_interval: the fitted slope of the exit time against ln(1/lambda), times ||gamma_[n]||, must lie in it.
    same_tol: relative differences of GF's and GD's final networks allowed.
    evals_ratio: GF's gradient evaluations over GD's allowed."""

    exit_interval: tuple[float, float] = (0.7, 1.3)
    same_tol: float = 0.05
    evals_ratio: float = 0.1

    @property
    def title(self) -> str:
        """The theorem named in this object's verdicts."""
        return _FIG2

    @prediction("smaller lambda generalises better: test loss at the smallest lambda below the largest's",
                source="Chistikov et al. 2023, Figure 2 (right panel)")
    def smaller_lambda_generalises(self, ctx) -> list:
        """Per method, the median test loss at the smallest lambda against the largest."""
        out = []
        for kind, cell in _method_cells(ctx.results).items():
            ds = cell.results
            lam, test = by_lambda(ds, final(ds, "test_loss"))
            statement = f"{kind}: smaller lambda generalises better: test loss at the smallest lambda < largest"
            out.append(compare(self.title, "prediction", statement, test[0], "<", test[-1],
                               ", ".join(f"{fmt_lambda(g)}: {v:.3g}" for g, v in zip(lam, test))))
        return out

    @prediction("the plateau exit time grows like ln(1/lambda) / ||gamma_[n]||", threshold="exit_interval",
                source="S11 (the saddle escape, Chistikov et al. 2023, Sec. 4); the interval +-30% is ours")
    def plateau_exit(self, ctx) -> list:
        """The saddle escape: the loss leaves its plateau at about ln(1/lambda) / ||gamma_[n]|| (S11), so the exit
        time against ln(1/lambda) has slope ~ 1/||gamma_[n]||, gamma_[n] = (1/n) sum_i y_i x_i."""
        out = []
        lo, hi = self.exit_interval
        for kind, cell in _method_cells(ctx.results).items():
            data = cell.data[0]
            gamma = float(np.linalg.norm(data.y @ data.X / data.n))
            slope, r2 = fitted_slope(np.log(1.0 / lambdas(cell.results)), _exit_times(cell))
            statement = (f"{kind}: the plateau exit time grows like ln(1/lambda) / ||gamma_[n]||: fitted slope x "
                         f"||gamma_[n]|| in [{lo:g}, {hi:g}]")
            note = f"slope {slope:.4g}, ||gamma_[n]|| = {gamma:.4g}, R^2 = {r2:.3f}"
            out += [compare(self.title, "prediction", statement + " (lower end)", slope * gamma, ">=", lo, note),
                    compare(self.title, "prediction", statement + " (upper end)", slope * gamma, "<=", hi, note)]
        return out

    @prediction("GF and GD (lr 0.01) from the same init reach the same network", threshold="same_tol",
                source="ours: GD with a small step approximates the flow (Chistikov et al. 2023 train by GD)")
    def gf_gd_same_network(self, ctx) -> list:
        """The worst relative difference over lambda of sum_j a_j w_j, the max angle, the nuclear norm and the
        test loss (only where both methods ran)."""
        rows = ctx.once("fig2.comparison", lambda: _comparison(ctx.results))
        if not rows:
            return []
        rel = lambda a, b: abs(a - b) / max(abs(a), 1e-300)  # noqa: E731
        worst = {
            "sum_j a_j w_j (relative distance)": max(r["rel_dist_sum_a_w"] for r in rows),
            "max angle": max(rel(r["max_angle_gf"], r["max_angle_gd"]) for r in rows),
            "nuclear norm": max(rel(r["W.nuclear_gf"], r["W.nuclear_gd"]) for r in rows),
            "test loss": max(rel(r["test_loss_gf"], r["test_loss_gd"]) for r in rows),
        }
        return [compare(self.title, "prediction", f"GF and GD (lr 0.01) reach the same network: {k}, worst lambda",
                        v, "<=", self.same_tol) for k, v in worst.items()]

    @prediction("GF uses far fewer gradient evaluations than GD", threshold="evals_ratio",
                source="ours: the reason to train by gradient flow")
    def gf_fewer_evaluations(self, ctx) -> list:
        """The worst ratio over lambda of GF's gradient evaluations to GD's (only where both methods ran)."""
        rows = ctx.once("fig2.comparison", lambda: _comparison(ctx.results))
        if not rows:
            return []
        ratio = max(r["grad_evals_gf"] / r["grad_evals_gd"] for r in rows)
        return [compare(self.title, "prediction", "GF uses far fewer gradient evaluations than GD: worst ratio",
                        ratio, "<=", self.evals_ratio,
                        ", ".join(f"{fmt_lambda(r['lambda'])}: {r['grad_evals_gf']:.0f} vs "
                                  f"{r['grad_evals_gd']:.0f}" for r in rows))]


FIG2 = Experiment(
    name="chistikov2023-fig2",
    paper="Chistikov, Englert, Lazic 2023 (NeurIPS), Figure 2",
    systems=("S11",),
    summary="One centred data set, d = 16, m = 200: training loss against time for lambda = 4^-2..4^-8 (a "
            "plateau that lasts about ln(1/lambda)/||gamma_[n]||, then exponential decay) and test loss on "
            "64 N(0, I) inputs against lambda (smaller lambda generalises better). Full variant: gradient "
            "flow (cell method.kind = gf) and the paper's GD with lr 0.01 (method.kind = gd) from the same "
            "inits; their final networks are compared (fig2_gf_vs_gd.csv). Quick variant: gradient flow "
            "only.",
    config=ExperimentConfig(
        model=NET,
        data=TeacherNeuron(d=16, scheme="centred", n_test=64),
        loss=SQUARE,
        method=GF,
        stop=STOP,
        checkpoints=60,
        kkt=False,
        grid={"method.kind": ["gf", "gd"], "init_scale": FIG2_LAMBDAS},
    ),
    quick={"checkpoints": 40, "grid": {"method.kind": ["gf"], "init_scale": FIG2_LAMBDAS}},
    figures=(Figure("fig2_loss_test",
                    "Left: training loss against time (GF solid, GD dashed, t = 0.01 k), dots where the loss "
                    "leaves its plateau. Right: final test loss against lambda.", _fig2),),
    theorems=theorem7(),
    claims=(Figure2Claims(),),
    tables=_fig2_tables,
    settings_source="From the paper (Sec. 8): d = 16, m = 200, centred data, lambda = 4^-2..4^-8, 64 N(0, I) "
                    "test inputs, GD with lr 0.01 until loss < 1e-9 or 2e7 steps. Ours: the single data set "
                    "(seed 0); gradient flow alongside GD; 60 log-spaced checkpoints.",
)

EXPERIMENTS = [FIG2]
