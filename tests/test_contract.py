"""The extension contract, validated where it is declared (issue 42, item 4): `compare`'s relations and kinds, a
declared threshold that names no field of its theorem, the public face of `dir(implicitbias)`, the keys of
`Results.group_by`, and an empty selection stacked.  Every refusal has its valid form beside it."""

import math
import subprocess
import sys

import numpy as np
import pydantic
import pytest
import xarray as xr

import implicitbias
from implicitbias import ConfigError
from implicitbias.experiments.registry import get
from implicitbias.runs.execute import dataset_of
from implicitbias.runs.results import Results, stack_runs
from implicitbias.status import Status
from implicitbias.theorems import catalog
from implicitbias.theorems.base import RELATIONS, Theorem, Verdict, assumption, compare, prediction


# -- compare: relations and kinds ----------------------------------------------------------------------------
@pytest.mark.parametrize("relation, measured, bound, outcome", [
    (">=", 2.0, 1.0, "holds"), (">=", 1.0, 1.0, "holds"), (">=", 0.5, 1.0, "fails"),
    ("<=", 1.0, 1.0, "holds"), ("<=", 2.0, 1.0, "fails"),
    (">", 1.0, 1.0, "fails"), (">", 2.0, 1.0, "holds"),
    ("<", 1.0, 1.0, "fails"), ("<", 0.5, 1.0, "holds"),
])
def test_compare_decides_each_relation(relation, measured, bound, outcome):
    v = compare("T", "prediction", "x", measured, relation, bound)
    assert (v.outcome, v.relation) == (outcome, relation)


@pytest.mark.parametrize("alias, ascii_form", [("≤", "<="), ("≥", ">="), ("=<", "<="), ("=>", ">=")])
def test_another_spelling_of_a_relation_is_refused_with_its_ascii_form(alias, ascii_form):
    # not read as the ASCII form: fitting.over_runs picks the worst run by the ASCII string, and a "≥" taken there
    # for an upper bound would report the best run's verdict
    with pytest.raises(ValueError, match=f"compare: relation={alias!r} is not allowed .*\\(write {ascii_form!r}\\)"):
        compare("T", "prediction", "x", 1.0, alias, 1.0)
    with pytest.raises(ValueError, match=f"Verdict: relation={alias!r} is not allowed"):
        Verdict("T", "prediction", "x", 1.0, alias, 1.0, "holds")
    assert compare("T", "prediction", "x", 1.0, ascii_form, 1.0).outcome == "holds"


@pytest.mark.parametrize("relation", ["==", "=", "!=", "≈", "lt", "", "~=", " <= ", None])
def test_an_unknown_relation_is_refused_with_the_allowed_ones(relation):
    with pytest.raises(ValueError) as err:
        compare("T", "prediction", "margin spread", 1.0, relation, 1.0)
    msg = str(err.value)
    assert f"relation={relation!r}" in msg and "'margin spread'" in msg
    assert all(repr(r) in msg for r in (*RELATIONS, "~")), msg
    assert "KeyError" not in msg and "\n" not in msg
    if relation in ("==", "=", "!="):
        assert "tolerance" in msg  # what to write instead of an equality of floats
    # refused even when the value cannot be evaluated: a typo shows on the first run, not only on a good one
    with pytest.raises(ValueError, match="relation="):
        compare("T", "prediction", "margin spread", None, relation, 1.0)


def test_about_labels_only_a_verdict_compare_cannot_evaluate():
    v = compare("T", "prediction", "exponent p", None, "~", 1.0, "not recorded")
    assert (v.outcome, v.relation) == ("not_evaluated", "~")
    assert v.note == "measured value not available: not recorded"
    assert compare("T", "prediction", "exponent p", math.nan, "~", None).outcome == "not_evaluated"
    with pytest.raises(ValueError, match=r"relation='~' cannot decide 0.9 against 1.*rate_verdict"):
        compare("T", "prediction", "exponent p", 0.9, "~", 1.0)


def test_compare_documents_every_relation():
    doc = compare.__doc__
    for relation in (*RELATIONS, "~", "≥", "≤"):
        assert f'"{relation}"' in doc, relation
    assert "equality" in doc


@pytest.mark.parametrize("kind, guess", [("predction", "prediction"), ("Assumption", "assumption"),
                                         ("claim", None), ("", None)])
def test_an_unknown_kind_is_refused_with_a_suggestion(kind, guess):
    with pytest.raises(ValueError) as err:
        compare("T", kind, "x", 1.0, "<=", 2.0)
    msg = str(err.value)
    assert f"kind={kind!r}" in msg and "'assumption', 'prediction'" in msg
    assert (f"did you mean {guess!r}" in msg) if guess else "did you mean" not in msg
    for good in ("assumption", "prediction"):
        assert compare("T", good, "x", 1.0, "<=", 2.0).kind == good


def test_a_verdict_checks_its_kind_outcome_and_relation():
    for relation in (*RELATIONS, "~", ""):
        Verdict("T", "prediction", "x", None, relation, None, "not_evaluated", "why")
    with pytest.raises(ValueError, match=r"Verdict: kind='predction' .*did you mean 'prediction'"):
        Verdict("T", "predction", "x", 1.0, "<=", 2.0, "holds")
    with pytest.raises(ValueError, match=r"Verdict: outcome='pass' .*'holds', 'fails'"):
        Verdict("T", "prediction", "x", 1.0, "<=", 2.0, "pass")
    with pytest.raises(ValueError, match=r"Verdict: relation='==' .*tolerance"):
        Verdict("T", "prediction", "x", 1.0, "==", 1.0, "holds")


# -- a declared threshold names fields of the theorem --------------------------------------------------------
def _theorem(threshold, **fields):
    namespace = {"__annotations__": {k: type(v) for k, v in fields.items()}, **fields,
                 "title": property(lambda self: "Example")}

    def spread(self, run):
        return compare(self.title, "prediction", "spread", 1.0, "<=", 2.0)

    namespace["spread"] = prediction("spread -> 1", threshold=threshold, source="ours")(spread)
    return type("SpreadTheorem", (Theorem,), namespace)


def test_a_misspelt_threshold_is_refused_when_the_class_is_defined():
    with pytest.raises(ValueError) as err:
        _theorem("spread_tl", spread_tol=0.01, min_runs=2)
    msg = str(err.value)
    assert msg.startswith("SpreadTheorem.spread: threshold='spread_tl' is not a field of SpreadTheorem")
    assert "did you mean 'spread_tol'?" in msg and "its fields: min_runs, spread_tol" in msg
    with pytest.raises(ValueError, match=r"threshold='tol_typo' is not a field.*its fields: min_runs, spread_tol"):
        _theorem("min_runs, tol_typo", spread_tol=0.01, min_runs=2)  # the second of two names
    with pytest.raises(ValueError, match=r"SpreadTheorem.spread: threshold='tol' .*it has no fields"):
        _theorem("tol")
    with pytest.raises(ValueError, match=r"threshold=\['spread_tol'\] is not allowed: .*as one string"):
        prediction("spread -> 1", threshold=["spread_tol"], source="ours")


def test_declared_thresholds_that_are_fields_are_accepted():
    cls = _theorem("spread_tol, min_runs", spread_tol=0.01, min_runs=2)
    assert _theorem("", spread_tol=0.01).declarations()[0].threshold == ""
    row = cls.declarations()[0].row(cls())
    assert row["threshold"] == "spread_tol = 0.01, min_runs = 2"

    class Subclass(cls):  # an inherited declaration is checked against the subclass's fields, which include it
        extra: float = pydantic.Field(1.0, ge=0.0)

        @assumption("extra >= 0", threshold="extra, spread_tol", source="ours")
        def positive(self, run):
            return compare(self.title, "assumption", "extra >= 0", self.extra, ">=", 0.0)

    assert [d.name for d in Subclass.declarations()] == ["spread", "positive"]


def test_every_installed_theorem_declares_thresholds_that_are_its_fields():
    theorems = catalog()
    assert len(theorems) >= 20  # the built-in ones, and the example plugin's when it is installed
    for name, cls in theorems.items():
        for declared in cls.declarations():
            for field in declared.threshold.replace(",", " ").split():
                assert field in cls.model_fields, f"{name}.{declared.name}: {field}"


# -- the package's public face -------------------------------------------------------------------------------
def test_dir_shows_the_public_names_and_not_the_helper_modules():
    names = dir(implicitbias)
    assert names == sorted(implicitbias.__all__)
    assert {"run", "load", "report", "Results", "ConfigError", "__version__"} <= set(names)
    assert not {"os", "jax", "importlib", "version", "PackageNotFoundError"} & set(names)
    assert not any(hasattr(implicitbias, n) for n in ("os", "jax", "importlib", "version", "PackageNotFoundError"))
    assert implicitbias.load.__module__ == "implicitbias.pipeline.api"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        implicitbias.nope  # noqa: B018


def test_import_stays_light_and_enables_float64():
    code = ("import sys, implicitbias, jax.numpy as jnp; "
            "print(jnp.asarray(1.0).dtype, 'implicitbias.pipeline.api' in sys.modules, sorted(dir(implicitbias)) "
            "== sorted(implicitbias.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["float64", "False", "True"], out.stderr


# -- Results: group_by keys, empty selections ----------------------------------------------------------------
def _arrays(spec, status: Status = Status.CONVERGED, n: int = 3) -> xr.Dataset:
    ds = xr.Dataset({"loss": (("run", "checkpoint"), np.linspace(1.0, 0.1, n)[None]),
                     "status": (("run",), np.asarray([int(status)], dtype=np.int32))},
                    coords={"run": [0], "checkpoint": np.arange(n), "target": ("checkpoint", np.linspace(0, 1, n))})
    ds.attrs = {"spec": spec.to_json(), "key": spec.key(), "wall_time_s": 0.5}
    return ds


@pytest.fixture(scope="module")
def results():
    """The 12 runs of linear-regression-implicit-bias --quick (parts gd, sgd and four mirror potentials, init scales
    0 and 0.3), with synthetic arrays and the last run failed; nothing is trained."""
    exp = get("linear-regression-implicit-bias")
    specs = exp.runs(exp.resolve(quick=True))
    arrays = [_arrays(s, Status.DIVERGED if i == len(specs) - 1 else Status.CONVERGED) for i, s in enumerate(specs)]
    return Results(exp.name, {}, list(specs), arrays, {s.data_key(): dataset_of(s) for s in specs})


def test_group_by_one_field_has_plain_keys(results):
    by_scale = results.group_by("init_scale")
    assert set(by_scale) == {0.0, 0.3}
    assert sorted(i for v in by_scale.values() for i in v) == list(range(len(results) - 1))  # the failed run left out
    assert all(results.runs[i].init_scale == k for k, v in by_scale.items() for i in v)
    by_two = results.group_by("part", "init_scale")
    assert ("gd", 0.0) in by_two and all(isinstance(k, tuple) and len(k) == 2 for k in by_two)
    with pytest.raises(ValueError, match="at least one dotted run field"):
        results.group_by()
    with pytest.raises(ConfigError, match="data.dd is not a run field"):
        results.group_by("data.dd")


def test_a_selection_that_matches_nothing_says_which_criterion(results):
    gd = results.select(part="gd")
    assert len(gd) == 2 and results.stack(gd).sizes["run"] == 2  # the valid form stacks
    empty = results.select(part="gd", init_scale=0.5)
    assert empty == []  # empty, not an error: a claim over a part an override left out is `not_evaluated`
    with pytest.raises(ValueError) as err:
        results.stack(empty)
    msg = str(err.value)
    assert msg.startswith("stack: the selection is empty")
    assert "init_scale=0.5 matches no finished run (init_scale takes 0.0, 0.3)" in msg
    assert "part='gd' matches" not in msg and "1 failed run is never selected" in msg
    with pytest.raises(ValueError, match=r"part='ggd' matches no finished run \(part takes 'gd', 'sgd', "):
        results.stack(results.select(part="ggd"))
    with pytest.raises(ValueError, match=r"each criterion matches some finished run but none matches them all.*"
                                         r"method.kind takes 'gd', 'sgd', 'mirror_descent'"):
        results.stack(results.select(part="gd", **{"method.kind": "sgd"}))


def test_stacking_an_empty_list_names_the_fields_that_vary(results):
    with pytest.raises(ValueError, match=r"the selection is empty.*11 finished runs.*init_scale takes 0.0, 0.3"):
        results.stack([])
    with pytest.raises(ValueError, match="stack_runs: no runs to stack"):
        stack_runs([], [])
    assert results.stack([0, 1]).sizes["run"] == 2
