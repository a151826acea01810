"""The documentation agrees with the code: each experiment page states its quick variant as generated from the two
resolved configs (`implicitbias.experiments.variants`), no hand-written "Quick:" text states a number its quick
config contradicts, the pages cite the site's science pages (never "SCIENCE.md"), the getting-started page runs the
tests with the README's command, and the page "Where each public name lives" lists every public name with the
module a plugin imports it from.

The pages are rendered by docs/_gen/pages.py itself (its page functions, without mkdocs: `mkdocs_gen_files` is
replaced by an in-memory stand-in), so these tests need neither the docs extras nor a build."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import re
import sys
import types
from pathlib import Path

import pytest

from implicitbias.experiments.registry import catalog
from implicitbias.experiments.runtimes import load_runtimes
from implicitbias.experiments.variants import ABSENT, describe_quick, format_value, quick_differences

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXPERIMENTS = catalog()


class _Files:
    """A stand-in for `mkdocs_gen_files`: `open(path, mode)` writes into `written[path]`."""

    def __init__(self):
        self.written: dict[str, str] = {}

    @contextlib.contextmanager
    def open(self, path, mode="w"):
        buffer = io.BytesIO() if "b" in mode else io.StringIO()
        yield buffer
        if "b" not in mode:
            self.written[path] = (self.written.get(path, "") if "a" in mode else "") + buffer.getvalue()


@pytest.fixture(scope="module")
def pages():
    """docs/_gen/pages.py imported as a module (its `main()` runs only under mkdocs-gen-files)."""
    files = _Files()
    saved = sys.modules.get("mkdocs_gen_files")
    sys.modules["mkdocs_gen_files"] = types.SimpleNamespace(open=files.open)
    try:
        spec = importlib.util.spec_from_file_location("docs_pages_under_test", DOCS / "_gen" / "pages.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("mkdocs_gen_files", None)
        else:
            sys.modules["mkdocs_gen_files"] = saved
    module.files = files
    return module


@pytest.fixture(scope="module")
def rendered(pages) -> dict[str, str]:
    """{experiment name: its generated page}, without the gallery's figures and without API links."""
    measurements = load_runtimes()
    return {name: pages.experiment_page(e, {}, measurements, None, False) for name, e in EXPERIMENTS.items()}


# -- the quick variant, generated from the configs -----------------------------------------------------------
def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if key == "grid" and not prefix:
            out.update({f"grid.{axis}": values for axis, values in value.items()})
        elif isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _effective(config) -> dict[str, dict]:
    """{part name ("" without parts): the flattened config its runs see}."""
    if not config.parts:
        return {"": _flat(config.model_dump(exclude={"parts"}))}
    return {name: _flat(config.part(name).model_dump(exclude={"parts"})) for name in config.parts}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_the_generated_quick_variant_agrees_with_the_resolved_configs(name, rendered):
    experiment = EXPERIMENTS[name]
    full, quick = experiment.resolve(quick=False), experiment.resolve(quick=True)
    differences = quick_differences(experiment)
    a, b = _effective(full), _effective(quick)
    shared = sorted(set(a) & set(b))
    if shared == [""] or not (set(full.parts) & set(quick.parts)):
        a = {"": _flat(full.model_dump(exclude={"parts"}))}
        b = {"": _flat(quick.model_dump(exclude={"parts"}))}
        shared = [""]
    covered: set[tuple[str, str]] = set()
    for d in differences:
        if d.only_in:
            (part,) = d.parts
            assert part in (full.parts if d.only_in == "full" else quick.parts)
            assert part not in (quick.parts if d.only_in == "full" else full.parts)
            continue
        for part in d.parts or shared:
            assert a[part].get(d.path, ABSENT) == d.full, (part, d)
            assert b[part].get(d.path, ABSENT) == d.quick, (part, d)
            covered.add((part, d.path))
    # complete: every field on which a part's runs differ between the variants is stated
    for part in shared:
        for path in set(a[part]) | set(b[part]):
            if a[part].get(path, ABSENT) != b[part].get(path, ABSENT):
                assert (part, path) in covered, f"{name}: {path} differs in part {part!r} but is not stated"
    sentence = describe_quick(experiment)
    assert sentence.startswith("Quick variant: ")
    for d in differences:
        assert d.text() in sentence
    # the experiment page states it, from the same function, beside the settings (labelled as the full variant's)
    page = rendered[name]
    row = next(line for line in page.splitlines() if line.startswith("| quick variant"))
    for d in differences:
        if not d.only_in:
            assert format_value(d.quick).replace("[", "\\[").replace("]", "\\]") in row, (d, row)
    assert "| settings (full variant) |" in page


def test_the_two_reported_quick_variants_are_stated_with_their_actual_values():
    chistikov = describe_quick(EXPERIMENTS["chistikov2023-fig1"])
    assert "model.width 200 -> 50" in chistikov and "trials 5 -> 3" in chistikov
    frei = describe_quick(EXPERIMENTS["frei2023-fig1"])
    assert "model.width 128 -> 64" in frei and "data.n 100 -> 50" in frei
    # their settings texts give the full variant's values, which is what the page labels them as
    assert EXPERIMENTS["chistikov2023-fig1"].resolve().model.width == 200
    assert EXPERIMENTS["chistikov2023-fig1"].resolve().trials == 5
    frei_full = EXPERIMENTS["frei2023-fig1"].resolve()
    assert frei_full.model.width == 128 and frei_full.data.n == 100
    for text, config in ((EXPERIMENTS["chistikov2023-fig1"].settings_source, EXPERIMENTS["chistikov2023-fig1"]),
                         (EXPERIMENTS["frei2023-fig1"].settings_source, EXPERIMENTS["frei2023-fig1"])):
        before = _quick_clause(text)[0]
        widths = {int(m) for m in re.findall(r"\bm = (\d+)", before)}
        assert widths <= {config.resolve().model.width}, before


def test_format_value_writes_numbers_as_the_settings_texts_do():
    assert [format_value(v) for v in (4.0**-4, 0.25, 1e-6, 0.16, 20_000_000, 50_000, 128, 10_000.0)] == \
        ["4^-4", "0.25", "1e-6", "0.16", "2e7", "5e4", "128", "1e4"]
    assert format_value(list(range(20))) == "[20 values, 0 .. 19]" and format_value(ABSENT) == ABSENT


# -- hand-written quick claims against the quick config -------------------------------------------------------
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def _quick_clause(text: str) -> tuple[str, str]:
    """(the text before its "Quick:" / "Quick variant:" clause, the clause to the end), or (text, "")."""
    match = re.search(r"\bQuick(?: variant)?:", text)
    return (text[:match.start()], text[match.end():]) if match else (text, "")


def _number(token: str) -> float:
    token = token.strip(".,;)(")
    if token in _WORDS:
        return float(_WORDS[token])
    if "^" in token:
        base, exponent = token.split("^")
        return float(base) ** float(exponent)
    return float(token)


#: what a "Quick:" clause states, as (pattern, config path): each group of a match is a value the path must take
_CLAIMS = [
    (r"\bm = (\d+)", "model.width"),
    (r"\bn = (\d+)(?: and (?:n = )?(\d+))?", "data.n"),
    (r"\bd = (\d+)", "data.d"),
    (r"\bk = (\d+)", "data.k"),
    (r"\brank (\d+)", "data.rank"),
    (r"\b(\d+|one|two|three|four|five)(?: and (\d+))? (?:\w+ )?(?:trials?|draws?|data sets?|seeds)\b", "trials"),
    (r"\b(\d+) checkpoints", "checkpoints"),
    (r"(?<!steps of )\b(4\^-?\d+)", "init_scale"),
    (r"\balpha = ([-\d.e]+)(?:, ([-\d.e]+))?(?:, ([-\d.e]+))?", "init_scale"),
    (r"\bt = ([\d.e^]+)", "stop.max_time"),
    (r"\b([\d.e^]+) steps", "stop.max_steps"),
    (r"\brtol (\d[\d.e-]*)", "method.rtol"),
    (r"\bdepths (\d+) and (\d+)", "model.depth"),
]


def _quick_values(experiment, path: str) -> set[float]:
    """Every value `path` takes in the quick variant's runs: over its parts and grid axes."""
    config = experiment.resolve(quick=True)
    configs = [config.part(n) for n in config.parts] if config.parts else [config]
    values: set[float] = set()
    for c in configs:
        flat = _flat(c.model_dump(exclude={"parts"}))
        grid = flat.get(f"grid.{path}")
        for v in grid if grid is not None else [flat.get(path)]:
            if isinstance(v, int | float) and not isinstance(v, bool):
                values.add(float(v))
    return values


def _stated(clause: str) -> list[tuple[str, float]]:
    found = []
    for pattern, path in _CLAIMS:
        for match in re.finditer(pattern, clause):
            found += [(path, _number(g)) for g in match.groups() if g]
    return found


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_no_hand_written_quick_claim_contradicts_the_quick_config(name):
    experiment = EXPERIMENTS[name]
    for text in (experiment.settings_source, experiment.summary):
        _, clause = _quick_clause(text)
        for path, value in _stated(clause):
            values = _quick_values(experiment, path)
            assert any(v == pytest.approx(value, rel=1e-9) for v in values), (
                f"{name}: its text says the quick variant has {path} = {value:g} ({clause!r}), but its quick config "
                f"gives {sorted(values)}")


def test_the_quick_claim_parser_reads_the_named_experiments():
    _, clause = _quick_clause(EXPERIMENTS["chistikov2023-fig1"].settings_source)
    stated = _stated(clause)
    assert ("model.width", 50.0) in stated and ("trials", 3.0) in stated and ("data.d", 4.0) in stated
    assert {v for p, v in stated if p == "init_scale"} == {4.0**-4, 4.0**-10}
    assert _stated("Quick: m = 200, 5 trials") == [("model.width", 200.0), ("trials", 5.0)]


# -- citations: the science pages, never SCIENCE.md ----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_no_experiment_page_cites_science_md(name, rendered):
    assert "SCIENCE.md" not in rendered[name]


def test_citations_become_links_to_the_science_pages(pages, rendered):
    assert "from [S2](../science/s2.md) (secondary sources" in rendered["frei2023-fig1"]
    cite = pages.cite
    assert cite("SCIENCE.md S10; S4") == "[S10](../science/s10.md); [S4](../science/s4.md)"
    assert cite("SCIENCE.md section 0") == "[section 0](../science/s0.md)"
    assert cite("SCIENCE.md does not restate") == "[the science pages](../science/index.md) does not restate"
    assert cite("S99 and S3x") == "S99 and S3x"
    assert cite("SCIENCE.md S2", prefix="") == "[S2](s2.md)"


# -- the test command --------------------------------------------------------------------------------------------
def _test_command(text: str, heading: str) -> str:
    after = text.split(heading, 1)[1]
    return re.search(r"```bash\n(.*?)\n```", after, flags=re.S).group(1).strip()


def test_getting_started_runs_the_tests_with_the_readme_command():
    readme = _test_command((ROOT / "README.md").read_text(encoding="utf-8"), "**Run the tests**")
    guide = _test_command((DOCS / "getting-started.md").read_text(encoding="utf-8"), "## Run the tests")
    assert "-e examples/quadratic-net" in readme
    assert guide == readme


# -- where each public name lives ---------------------------------------------------------------------------------
def test_every_public_name_has_the_module_a_plugin_imports_it_from(pages):
    rows = pages.where_rows()
    listed = {(r["name"], p) for r in rows for p in r["exported_by"]}
    for package in pages.public_packages():
        module = importlib.import_module(package)
        for name in module.__all__:
            if name != "__version__":
                assert (name, package) in listed, f"{package}.{name} is missing from the page"
    for row in rows:
        leaf = importlib.import_module(row["leaf"])
        exported = getattr(importlib.import_module(row["exported_by"][0]), row["name"])
        assert getattr(leaf, row["name"]) is exported, row
        private = any(part.startswith("_") for part in row["defined"].split("."))
        if not (row["package_level"] or private):
            assert not hasattr(leaf, "__path__"), f"{row['name']}: {row['leaf']} is a package, not a leaf module"
    two_layer = next(r for r in rows if r["name"] == "TwoLayer")
    assert two_layer["leaf"] == "implicitbias.models.two_layer"
    assert next(r for r in rows if r["name"] == "AnyModel")["package_level"]


def test_the_where_page_is_in_the_navigation_and_linked_where_leaf_modules_are_explained(pages):
    page = pages.where_page({})
    assert page.startswith("# Where each public name lives")
    assert "<code>from implicitbias.models.two_layer import TwoLayer</code>" in page
    pages.write_nav([], [])
    assert f"({pages.WHERE_PAGE})" in pages.files.written["SUMMARY.md"]
    for doc in ("extending/index.md", "howto/plugin.md"):
        text = (DOCS / doc).read_text(encoding="utf-8")
        assert "leaf module" in text and "(../api/where.md)" in text, doc


def test_each_paper_package_has_a_page_from_its_docstring_and_experiments(pages):
    """Issue 41: the per-paper pages come from the packages: each package's docstring, its experiments (linked) and
    a page per theorem, claim and data generator it defines; the experiment pages link their package's page."""
    api: dict[str, str] = {}
    nav = pages.write_papers(api)
    where = __import__("implicitbias.experiments.registry", fromlist=["homes"]).homes()
    assert [title for title, _, _ in nav] == [p.rsplit(".", 1)[1] for p in pages.paper_packages()]
    for package in pages.paper_packages():
        page = pages.files.written[pages.paper_page(package)]
        assert f"::: {package}" in page
        for name in (n for n, h in where.items() if h == package):
            assert f"(../experiments/{name}.md)" in page, (package, name)
    assert api["implicitbias.papers.vardi2021.theorems.VardiReluNeuron"] == "papers/vardi2021/VardiReluNeuron.md"
    assert "papers/chistikov2023/TeacherNeuron.md" in api.values()
    fig1 = pages.experiment_page(EXPERIMENTS["chistikov2023-fig1"], {}, load_runtimes(), None, False)
    assert "[`implicitbias.papers.chistikov2023`](../papers/chistikov2023.md)" in fig1
