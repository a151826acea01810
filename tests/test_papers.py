"""The built-in papers (issue 41): one package per paper under `implicitbias.papers`, each saying in its docstring
what of the paper it reproduces, each registered through the entry points as a plugin package is, and each
catalogued built-in experiment held by one of them."""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
from pathlib import Path

import pytest

import implicitbias.papers
from implicitbias.experiments.registry import catalog, home_of, homes, short_home, source
from implicitbias.theorems import catalog as theorem_catalog

ROOT = Path(__file__).resolve().parents[1]
PAPERS = sorted(m.name for m in pkgutil.iter_modules(implicitbias.papers.__path__) if m.ispkg)
ENTRIES = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]


def test_every_paper_package_registers_its_experiments_and_only_those():
    assert set(ENTRIES["implicitbias.experiments"]) == set(PAPERS)
    where = homes()
    for name in catalog():
        if source(name) == "implicitbias":
            assert short_home(where[name]) in PAPERS, name
    assert {short_home(where[n]) for n in catalog() if source(n) == "implicitbias"} == set(PAPERS)


@pytest.mark.parametrize("paper", PAPERS)
def test_the_docstring_says_what_the_package_reproduces(paper):
    """The docstring names the paper (its first author and year) and every experiment the package registers."""
    doc = importlib.import_module(f"implicitbias.papers.{paper}").__doc__ or ""
    author, year = paper.split("_")[0][:-4], paper.split("_")[0][-4:]
    assert author.lower() in doc.lower() and year in doc, doc[:200]
    mine = [n for n, h in homes().items() if h == f"implicitbias.papers.{paper}"]
    assert mine and all(n in doc for n in mine), (paper, [n for n in mine if n not in doc])


def test_the_registered_theorems_and_data_come_from_the_paper_packages():
    theorems = theorem_catalog()
    for paper, target in ENTRIES["implicitbias.theorems"].items():
        if paper != "implicitbias":
            assert home_of(target) == f"implicitbias.papers.{paper}"
            module, attr = target.split(":")
            assert all(theorems[cls.__name__] is cls for cls in getattr(importlib.import_module(module), attr))
    data_targets = [t for t in ENTRIES["implicitbias.data"].values() if t.startswith("implicitbias.papers.")]
    assert {home_of(t).rsplit(".", 1)[1] for t in data_targets} == {"chistikov2023", "boursier2022", "vardi2021"}


def test_the_home_of_an_entry_point():
    assert home_of("implicitbias.papers.chistikov2023.experiments") == "implicitbias.papers.chistikov2023"
    assert home_of("implicitbias.papers.kou2023.theorems:THEOREMS") == "implicitbias.papers.kou2023"
    assert home_of("implicitbias_quadratic.experiment") == "implicitbias_quadratic"
    assert short_home("implicitbias.papers.frei2023") == "frei2023" and short_home("my_plugin") == "my_plugin"
