"""One table of every theorem (as scikit-learn's common checks run over every estimator).

Every concrete `Theorem` subclass in `implicitbias.theorems` must have a row in TABLE (discovered, so a new
theorem cannot be forgotten). A row gives a tiny nominal instance and inputs that break one assumption each:
- on the nominal instance every assumption holds;
- with each breaking input the targeted assumption fails and every prediction is outside_scope (or
  not_evaluated, with its reason): "assumption not met" is never reported as a failed prediction;
- no verdict is ever not_evaluated without a reason in its note (`Verdict` refuses to be built so).

Nominal instances: hand-built cells (the Chistikov/Boursier ones of test_negative_controls_chistikov.py) or
the first fixed-step cell of the experiment that checks the theorem, trained for a few steps (the assumptions
read the data and the specs; a few steps suffice for the ones that read the run). A row whose theorem has no
tiny instance yet says why, and is skipped: the list of such rows is the table's open work.
"""

import dataclasses
import functools
import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable

import pytest

import implicitbias.theorems as theorems_pkg
from implicitbias.data import GaussianMixture
from implicitbias.losses import Loss
from implicitbias.theorems.base import RunContext, Theorem


def discovered() -> dict[str, type]:
    out = {}
    for info in pkgutil.iter_modules(theorems_pkg.__path__):
        module = importlib.import_module(f"implicitbias.theorems.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Theorem) and not inspect.isabstract(cls) and not name.startswith("_"):
                out[name] = cls
    return out


# -- nominal instances --------------------------------------------------------------------------------------
def _chistikov7():
    from test_negative_controls_chistikov import _teacher_cell

    return _teacher_cell()


def _chistikov8():
    from test_negative_controls_chistikov import _family_cell

    return _family_cell("m_negative")


def _boursier():
    from test_negative_controls_chistikov import _orthogonal_cell

    return _orthogonal_cell(lambda lam: 0.5 * lam**0.367)


@functools.cache
def _tiny(experiment: str, theorem: str, steps: int = 200) -> tuple[RunContext, Theorem]:
    """The first fixed-step cell of `experiment` whose theorems include `theorem` (quick variant), trained for
    `steps` steps with 6 checkpoints, and that theorem object as the experiment configures it."""
    from implicitbias.experiments.registry import get
    from implicitbias.runs.execute import dataset_of, train_group
    from implicitbias.runs.results import Cell, cell_indices, stack_runs
    from implicitbias.runs.spec import group_runs

    exp = get(experiment)
    runs = exp.runs(exp.resolve(quick=True))
    for idx in cell_indices(runs):
        specs = [runs[i] for i in idx]
        if specs[0].method.kind == "gf":
            continue
        found = [t for t in exp.theorems(Cell(specs, None, [dataset_of(s) for s in specs], idx))
                 if type(t).__name__ == theorem]
        if not found:
            continue
        small = [s.replace(stop=s.stop.model_copy(update={"max_steps": min(s.stop.max_steps or steps, steps)}),
                           checkpoints=6) for s in specs[:3]]
        arrays = {}
        for group in group_runs(small):
            arrays.update({s.key(): a for s, a in zip(group, train_group(group))})
        results = stack_runs([arrays[s.key()] for s in small], small)
        return RunContext(runs=small, results=results, data=[dataset_of(s) for s in small]), found[0]
    raise LookupError(f"{experiment} has no fixed-step cell checking {theorem}")


def _from(experiment, theorem):
    return lambda: _tiny(experiment, theorem)[0], lambda: _tiny(experiment, theorem)[1]


# -- breaking inputs ----------------------------------------------------------------------------------------
def _specs(**change) -> Callable[[RunContext], RunContext]:
    """Replace spec fields of every run (e.g. model=..., loss=...)."""
    def apply(ctx):
        return RunContext([s.replace(**{k: (v(s) if callable(v) else v) for k, v in change.items()}) for s in ctx.runs],
                          ctx.results, ctx.data)
    return apply


def _model(**fields):
    return _specs(model=lambda s: s.model.replace(**fields))


def _data(make) -> Callable[[RunContext], RunContext]:
    """Replace every run's training data by `make(ds)`."""
    return lambda ctx: RunContext(ctx.runs, ctx.results, [make(ds) for ds in ctx.data])


def _labels(fn):
    return _data(lambda ds: dataclasses.replace(ds, y=fn(ds)))


def _correlated(ds):
    """The same labels on strongly correlated inputs (far from orthogonal / nearly orthogonal)."""
    X = ds.X + 3.0 * ds.X.mean(axis=0, keepdims=True) + 1.0
    return dataclasses.replace(ds, X=X)


def _obtuse(ds):
    """x_0 reflected through the hyperplane orthogonal to v*: an angle > pi/2 between v* and an input."""
    v = ds.info["v_star"] / (ds.info["v_star"] @ ds.info["v_star"]) ** 0.5
    X = ds.X.copy()
    X[0] = X[0] - 2.0 * (X[0] @ v) * v
    return dataclasses.replace(ds, X=X)


SQUARE = _specs(loss=Loss(name="square"))
LOGISTIC = _specs(loss=Loss(name="logistic"))


@dataclasses.dataclass(frozen=True)
class Row:
    nominal: Callable[[], RunContext] | None
    theorem: Callable[[], Theorem] | None = None
    #: (assumption statement fragment, breaking input)
    breaks: tuple[tuple[str, Callable], ...] = ()
    why_not: str = ""


T7_EXT = lambda: __import__("implicitbias.theorems.chistikov", fromlist=["x"]).ChistikovTheorem7(  # noqa: E731
    max_data_angle=math.pi / 2)
_NEEDS_FLOW = ("its cells are gradient-flow cells whose assumptions read a converged run (loss below a tolerance, "
               "the asymptotic regime): no tiny instance yet")

TABLE: dict[str, Row] = {
    "ChistikovTheorem7": Row(_chistikov7, T7_EXT, (
        ("ReLU network", _model(activation="leaky_relu")),
        ("ReLU network", _model(init_scheme="gaussian")),
        ("labels y_i = [<v*, x_i>]_+", _labels(lambda ds: -ds.y)),
        ("every angle between v* and an x_i", _data(_obtuse)),
        ("small initialisation", _specs(init_scale=lambda s: 4.0 + s.init_scale)),
    )),
    "ChistikovTheorem8": Row(_chistikov8, None, (
        ("n = d and X invertible", _data(lambda ds: dataclasses.replace(ds, X=ds.X[:2], y=ds.y[:2]))),
        ("labels y_i = [<v*, x_i>]_+", _labels(lambda ds: -ds.y)),
        ("width m > 1", _model(width=1)),
        ("ReLU network", _model(train_outer=False)),
    )),
    "BoursierOrthogonal": Row(_boursier, None, (
        ("inputs pairwise orthogonal", _data(_correlated)),
        ("ReLU network", _model(activation="leaky_relu")),
    )),
    "SoudryTheorem3": Row(*_from("soudry2018-logistic", "SoudryTheorem3"), (
        ("loss is", SQUARE),
        ("linearly separable", _labels(lambda ds: ds.y * (1 - 2 * (abs(ds.X[:, 0]) < abs(ds.X[:, 0]).mean())))),
    )),
    "NacsonSGD": Row(*_from("soudry2018-logistic", "NacsonSGD"), (("loss is", SQUARE),)),
    "NacsonNormalizedGD": Row(*_from("soudry2018-logistic", "NacsonNormalizedGD"), (("loss is", SQUARE),)),
    "SoudryMulticlass": Row(*_from("soudry2018-logistic", "SoudryMulticlass"), (("loss is", SQUARE),)),
    "KouTheorem": Row(*_from("kou2023-rates", "KouTheorem"), (
        ("loss is logistic", SQUARE),
        ("activation is", _model(activation="smooth_leaky_relu")),
        ("||x_i||^2 >= C n", _data(_correlated)),
    )),
    "FreiTheorem42": Row(None, why_not="the first fixed-step cell of frei2023-fig1 (the dimension sweep) violates "
                                       "the near-orthogonality condition by design: no tiny nominal instance yet"),
    "FreiTheorem32": Row(None, why_not=_NEEDS_FLOW + " (frei2023-kkt trains by gradient flow)"),
    "FreiTheorem34": Row(None, why_not=_NEEDS_FLOW + " (frei2023-kkt / frei2023-xor)"),
    "FreiLemma33": Row(None, why_not="no experiment cell checks it on a fixed-step run yet"),
    "LyuLiMonotoneMargin": Row(None, why_not=_NEEDS_FLOW + " (frei2023-kkt)"),
    "JiTelgarskyAlignment": Row(None, why_not=_NEEDS_FLOW + " (ji2019-deep-linear)"),
    "GunasekarDiagonal": Row(None, why_not=_NEEDS_FLOW + " (gunasekar2018-diagonal)"),
    "WoodworthLimit": Row(None, why_not=_NEEDS_FLOW + " (woodworth2020-kernel-rich)"),
    "MirrorFlowPath": Row(None, why_not=_NEEDS_FLOW + " (woodworth2020-kernel-rich)"),
    "RazinCohen2020": Row(None, why_not=_NEEDS_FLOW + " (razin2020-counterexample)"),
    "GunasekarCommuting": Row(None, why_not=_NEEDS_FLOW + " (gunasekar2017-sensing: loss <= 1e-12)"),
    "GunasekarConjecture": Row(None, why_not=_NEEDS_FLOW + " (gunasekar2017-sensing: loss <= 1e-9)"),
    "LiIncremental": Row(None, why_not=_NEEDS_FLOW + " (li2021-incremental)"),
    "VardiLeakyNeuron": Row(None, why_not=_NEEDS_FLOW + " (vardi2021-single-neuron)"),
    "VardiReluNeuron": Row(None, why_not=_NEEDS_FLOW + " (vardi2021-single-neuron)"),
    "BregmanLimit": Row(None, why_not=_NEEDS_FLOW + " (linear-regression-implicit-bias)"),
    "CensusTheorem7": Row(None, why_not="reads the stored census of a finished cell (metrics.census): no tiny "
                                        "instance yet"),
}


def test_every_theorem_has_a_row():
    missing = sorted(set(discovered()) - set(TABLE))
    assert not missing, f"theorems without a row in tests/test_theorem_table.py::TABLE: {missing}"
    stale = sorted(set(TABLE) - set(discovered()))
    assert not stale, f"rows of TABLE naming no theorem: {stale}"


def _theorem(name: str) -> Theorem:
    row = TABLE[name]
    return row.theorem() if row.theorem is not None else discovered()[name]()


def _reasons_given(verdicts):
    bare = [v.line() for v in verdicts if v.outcome == "not_evaluated" and not v.note.strip()]
    assert not bare, bare


@pytest.mark.parametrize("name", sorted(TABLE))
def test_nominal_instance_meets_every_assumption(name):
    row = TABLE[name]
    if row.nominal is None:
        pytest.skip(row.why_not)
    verdicts = _theorem(name).check(row.nominal())
    _reasons_given(verdicts)
    bad = [v.line() for v in verdicts if v.kind == "assumption" and v.outcome != "holds"]
    assert not bad, bad
    assert any(v.kind == "prediction" for v in verdicts)


@pytest.mark.parametrize("name, k", [(n, k) for n in sorted(TABLE) for k in range(max(1, len(TABLE[n].breaks)))])
def test_breaking_an_assumption_puts_every_prediction_outside_scope(name, k):
    row = TABLE[name]
    if row.nominal is None:
        pytest.skip(row.why_not)
    assert row.breaks, f"{name}: no assumption-breaking input"
    fragment, brk = row.breaks[k]
    verdicts = _theorem(name).check(brk(row.nominal()))
    _reasons_given(verdicts)
    broken = [v for v in verdicts if v.kind == "assumption" and fragment in v.statement and v.outcome == "fails"]
    assert broken, [v.line() for v in verdicts if v.kind == "assumption"]
    leaked = [v.line() for v in verdicts if v.kind == "prediction" and v.outcome in ("holds", "fails")]
    assert not leaked, leaked


def test_a_not_evaluated_verdict_must_say_why():
    from implicitbias.theorems.base import Verdict, compare

    with pytest.raises(ValueError, match="must say why"):
        Verdict("T", "prediction", "x", None, "<=", 1.0, "not_evaluated", "")
    v = compare("T", "prediction", "x", math.nan, "<=", 1.0)
    assert v.outcome == "not_evaluated" and v.note.startswith("measured value is NaN")
    v = compare("T", "prediction", "x", 1.0, "<=", None, "the bound needs a converged run")
    assert v.note == "bound not available: the bound needs a converged run"


def test_gaussian_mixture_is_not_a_teacher():  # the Chistikov rows' labels check reads info["v_star"]
    assert GaussianMixture(n=4, d=3).generate(0).info.get("v_star") is None
