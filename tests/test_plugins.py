"""The extension points (implicitbias.plugins): implicitbias's own models, generators, methods, theorems and
experiments come from its entry points like a plugin's; a broken plugin is one warning line and the others load;
an unknown kind is refused with the installed ones and their packages."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from implicitbias import plugins
from implicitbias._spec import ConfigError
from implicitbias.data import GENERATORS
from implicitbias.models import MODELS, Model
from implicitbias.runs.spec import RunSpec
from implicitbias.training.methods import METHODS


def test_the_builtins_come_from_implicitbias_entry_points():
    for kind, classes in (("models", MODELS), ("data", GENERATORS), ("methods", METHODS)):
        mine = {p.name for p in plugins.installed(kind) if p.package == "implicitbias"}
        assert mine and mine <= set(classes), kind
    assert {"two_layer", "linear", "matrix_factorization"} <= set(MODELS)
    assert {"gd", "sgd", "gf"} <= set(METHODS)
    assert "arrays" in GENERATORS
    from implicitbias.experiments.registry import catalog, source
    from implicitbias.theorems import catalog as theorems

    assert source("frei2023-fig1") == "implicitbias" and len(catalog()) >= 22
    assert "KouTheorem" in theorems()


def test_a_broken_plugin_is_one_warning_line_and_the_others_still_load(monkeypatch, capsys):
    real = plugins.entry_points

    def with_a_broken_one(group):
        found = list(real(group=group))
        if group == plugins.GROUPS["models"]:
            found.append(EntryPoint("broken", "no_such_package.model:Net", group))
        return found

    monkeypatch.setattr(plugins, "entry_points", with_a_broken_one)
    monkeypatch.setattr(plugins, "_loaded", {})
    monkeypatch.setattr(plugins, "_failed", {})
    found = plugins.installed("models")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'broken'" in err[0] and "no_such_package.model:Net" in err[0] and "left out" in err[0]
    assert {p.name for p in found} >= {"two_layer", "linear"} and "broken" not in {p.name for p in found}
    assert plugins.failures("models") == err
    assert len(plugins.classes("models", Model)) == len(MODELS)


def test_a_group_without_implicitbias_entries_says_to_install_the_package(monkeypatch):
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    monkeypatch.setattr(plugins, "_loaded", {})
    monkeypatch.setattr(plugins, "_failed", {})
    with pytest.raises(ImportError, match="pip install -e"):
        plugins.classes("methods", object)


def test_an_unknown_kind_is_refused_with_the_installed_kinds_and_their_packages():
    with pytest.raises(ConfigError) as info:
        RunSpec(model={"kind": "quadratic_netx"}, data={"name": "separable"}, method={"kind": "gd"})
    message = str(info.value)
    assert "model.kind = 'quadratic_netx' is not allowed" in message
    assert "'two_layer' (implicitbias)" in message and "'linear' (implicitbias)" in message
    with pytest.raises(ConfigError, match=r"data.name = 'nope' is not allowed: expected one of .*'separable' \(implicitbias\)"):
        RunSpec(model={"kind": "linear"}, data={"name": "nope"}, method={"kind": "gd"})
