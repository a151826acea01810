"""The example plugin package examples/quadratic-net (issue 23, item 2): installed with
`pip install -e examples/quadratic-net`, its model, data generator, theorem and experiment join implicitbias's
registries; the model's gradients are exact; the theorem holds from a small init and fails from a large one (the
kernel regime) with every assumption holding; the quick variant passes --strict as a sweep, and on SLURM.
Skipped when the plugin is not installed."""


import numpy as np
import pytest

pytest.importorskip("implicitbias_quadratic")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from implicitbias_quadratic.data import QuadraticTeacher  # noqa: E402
from implicitbias_quadratic.model import QuadraticNet  # noqa: E402
from implicitbias_quadratic.theorem import LiMaZhang2018  # noqa: E402

import implicitbias  # noqa: E402
from implicitbias import plugins  # noqa: E402
from implicitbias.cli import main  # noqa: E402
from implicitbias.data import GENERATORS  # noqa: E402
from implicitbias.experiments import registry  # noqa: E402
from implicitbias.models import MODELS  # noqa: E402
from implicitbias.pipeline import load  # noqa: E402
from implicitbias.theorems import catalog  # noqa: E402

NAME = "li2018-quadratic"
PACKAGE = "implicitbias-quadratic"


def test_the_plugin_joins_every_registry():
    assert MODELS["quadratic_net"] is QuadraticNet
    assert GENERATORS["quadratic_teacher"] is QuadraticTeacher
    assert catalog()["LiMaZhang2018"] is LiMaZhang2018
    assert NAME in registry.catalog() and registry.source(NAME) == PACKAGE
    assert plugins.origins("models")["quadratic_net"] == PACKAGE
    assert plugins.origins("data")["quadratic_teacher"] == PACKAGE
    assert not any(PACKAGE in line for kind in plugins.GROUPS for line in plugins.failures(kind))


@pytest.mark.parametrize("outer", ["signed", "positive"])
def test_the_model_is_the_quadratic_form_and_its_gradient_matches_finite_differences(outer):
    model = QuadraticNet(width=6, outer=outer)
    theta, const = model.init(jax.random.PRNGKey(3), 3, 0.7)
    plus = np.asarray(theta["W"][: 3 if outer == "signed" else 6])  # alpha B, B with orthonormal columns
    np.testing.assert_allclose(plus.T @ plus, 0.49 * np.eye(3), atol=1e-14)
    if outer == "signed":  # W_-(0) = W_+(0): f = 0 at initialisation
        np.testing.assert_allclose(model.matrix(theta, const), 0.0, atol=1e-15)
    X = np.random.default_rng(0).standard_normal((5, 3))
    y = np.random.default_rng(1).standard_normal(5)
    W = np.asarray(theta["W"]) + 0.1 * np.random.default_rng(2).standard_normal(theta["W"].shape)
    M = np.asarray(model.matrix({"W": W}, const))
    np.testing.assert_allclose(model.predict({"W": W}, const, X), np.einsum("ni,ij,nj->n", X, M, X), rtol=1e-12)
    np.testing.assert_allclose(model.apply({"W": W}, const, X[0]), X[0] @ M @ X[0], rtol=1e-12)

    def loss(W):
        return 0.5 * jnp.mean((model.predict({"W": W}, const, X) - y) ** 2)

    grad = np.asarray(jax.grad(loss)(jnp.asarray(W)))
    eps, fd = 1e-6, np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        step = np.zeros_like(W)
        step[idx] = eps
        fd[idx] = (loss(W + step) - loss(W - step)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-7, atol=1e-9)


def _verdicts(tmp_path, name, overrides):
    results = implicitbias.run(NAME, quick=True, overrides={"trials": 1, **overrides}, workers=0,
                               out=tmp_path / name, progress=False, log=lambda message: None)
    return {kind: [r["outcome"] for r in results.checks if r["kind"] == kind] for kind in ("assumption", "prediction")}


def test_small_init_holds_and_large_init_fails_with_every_assumption_holding(tmp_path):
    # positive control: alpha = 0.01, the end point has the minimum nuclear norm and is M* (ratio ~1.01, error ~0.04
    # against the midpoints ~1.18 and ~0.3); negative control: alpha = 1, the kernel regime, the end point is the
    # minimum-Frobenius interpolant M_F itself (ratio 1.37, error 0.61: beyond the midpoints)
    small = _verdicts(tmp_path, "small", {"grid.init_scale": [0.01]})
    large = _verdicts(tmp_path, "large", {"grid.init_scale": [1.0]})
    assert small["assumption"] == ["holds"] * 6 and small["prediction"] == ["holds", "holds"]
    assert large["assumption"] == ["holds"] * 6 and large["prediction"] == ["fails", "fails"]


def test_positive_outer_weights_are_outside_scope(tmp_path):
    # with a_j = +1 (M PSD) the large init ends at M* too: the only PSD interpolant of these 40 measurements. The
    # prediction could not fail there, so the theorem assumes signed outer weights
    positive = _verdicts(tmp_path, "positive", {"grid.init_scale": [1.0], "model.outer": "positive"})
    assert positive["assumption"].count("fails") == 1 and positive["prediction"] == ["outside_scope"] * 2


@pytest.mark.xdist_group("sweep-cli")
def test_the_quick_variant_passes_strict_as_a_sweep_and_writes_its_report(tmp_path):
    out = tmp_path / "quick"
    assert main(["run", NAME, "--quick", "--strict", "--workers", "2", "--no-progress", "--out", str(out)]) == 0
    assert (out / "figures" / "nuclear_ratio.png").stat().st_size > 0
    assert "nuclear_ratio" in (out / "report.html").read_text()
    assert [c["outcome"] for c in load(out).checks if c["kind"] == "prediction"] == ["holds", "holds"]


# The plugin's quick variant on SLURM through --cluster: tests/test_slurm.py (one SLURM sweep per CI run).
