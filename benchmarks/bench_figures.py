"""Writing an experiment's figures (PNG at 120 dpi and PDF): the layout computed once (`lay_out_once`, what
`implicitbias run` and `implicitbias report` do) against the layout engine left on the figure for `savefig`
(the baseline: every save then draws the figure twice, once to measure its text and once to render).
With `--labels`: the log axes labelled in plain text (`PowerLabels`, as shipped) against matplotlib's mathtext
labels (the baseline), both laid out once.

Each experiment's quick variant is run once (or loaded from --out-root, where a former run left it); then every
figure is rendered and written both ways, alternately, `--repeat` times, into a scratch folder.  Printed per
experiment: the median seconds of writing all its figures each way, the number of figure draws each way, and
the ratio baseline / once (above 1: faster).

    python benchmarks/bench_figures.py                        # ~2 min on 2 cores (runs the quick variants)
    python benchmarks/bench_figures.py --experiments soudry2018-logistic --repeat 5
    python benchmarks/bench_figures.py --labels --experiments chistikov2023-fig1 soudry2018-logistic
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

DEFAULT = ("woodworth2020-kernel-rich", "soudry2018-logistic", "chistikov2023-fig1", "frei2023-kkt")


def _write(experiment, results, folder: Path, once: bool, mathtext: bool = False) -> int:
    """Every figure of the experiment as PNG and PDF under folder; returns how many times figures were drawn.
    `mathtext`: with matplotlib's mathtext labels on the log axes instead of `PowerLabels`."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from implicitbias.experiments.figures import lay_out_once, plain_log_labels, thin_log_axes

    draws = 0
    original = Figure.draw

    def counted(self, renderer):
        nonlocal draws
        draws += 1
        return original(self, renderer)

    Figure.draw = counted
    try:
        for figure in experiment.figures:
            fig = figure.render(results)
            if mathtext:
                plain_log_labels(fig, plain=False)
            thin_log_axes(fig)
            if once:
                lay_out_once(fig)
                fig.savefig(folder / f"{figure.name}.png", format="png", dpi=120)
            else:  # the baseline: the engine lays the PNG out at its save, and the PDF keeps that layout
                fig.savefig(folder / f"{figure.name}.png", format="png", dpi=120)
                fig.set_layout_engine("none")
            fig.savefig(folder / f"{figure.name}.pdf", format="pdf")
            plt.close(fig)
    finally:
        Figure.draw = original
    return draws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", nargs="+", default=list(DEFAULT))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--labels", action="store_true", help="compare plain-text log labels (shipped) with "
                                                              "mathtext ones (baseline), both laid out once")
    parser.add_argument("--out-root", default=None, help="where the quick variants are run (default: a temporary "
                                                          "folder); a former run there is loaded, not trained")
    args = parser.parse_args()

    import implicitbias
    from implicitbias.pipeline.definitions import resolve

    root = Path(args.out_root) if args.out_root else Path(tempfile.mkdtemp(prefix="bench-figures-"))
    new = "plain s" if args.labels else "once s"
    print(f"{'experiment':32s} {'figures':>7s} {'baseline s':>10s} {new:>8s} {'draws':>9s} {'ratio':>6s}")
    for name in args.experiments:
        results = implicitbias.run(name, quick=True, out=root / name, workers=0, progress=False, log=lambda m: None)
        experiment = resolve(name)
        times = {False: [], True: []}
        draws = {}
        for _ in range(args.repeat):
            for once in (False, True):  # with --labels: False is mathtext labels, True plain ones (both once)
                with tempfile.TemporaryDirectory() as scratch:
                    start = time.perf_counter()
                    draws[once] = (_write(experiment, results, Path(scratch), True, mathtext=not once) if args.labels
                                   else _write(experiment, results, Path(scratch), once))
                    times[once].append(time.perf_counter() - start)
        base, once = statistics.median(times[False]), statistics.median(times[True])
        print(f"{name:32s} {len(experiment.figures):7d} {base:10.2f} {once:8.2f} {draws[False]:4d}/{draws[True]:<4d} "
              f"{base / once:6.2f}")


if __name__ == "__main__":
    main()
