"""The documentation site (mkdocs.yml, docs/): every citation of the science in the source resolves to a page,
every recorded metric has its equation in the quantity table, and the gallery's subsets are well defined.

The fast tests read files only (no docs build, no mkdocs needed); the build itself and the extension contract's
examples run under `-m slow`."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "implicitbias"
DOCS = ROOT / "docs"
SCIENCE = DOCS / "science"


def _cited_systems() -> dict[int, list[str]]:
    """{k: files citing "S<k>"} over every Python file of the package."""
    cited: dict[int, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for k in set(re.findall(r"\bS(\d{1,2})\b", path.read_text(encoding="utf-8"))):
            cited.setdefault(int(k), []).append(str(path.relative_to(ROOT)))
    return cited


def test_every_system_cited_in_the_source_has_its_science_page():
    cited = _cited_systems()
    assert cited, "no S<k> citation found in src/: the pattern or the layout changed"
    for k, files in sorted(cited.items()):
        page = SCIENCE / f"s{k}.md"
        assert page.is_file(), f"S{k} is cited in {files[:3]} but docs/science/s{k}.md does not exist"
        title = page.read_text(encoding="utf-8").splitlines()[0]
        expected = "# Section 0:" if k == 0 else f"# S{k}:"
        assert title.startswith(expected), f"docs/science/s{k}.md must be titled {expected[2:]!r} ..., not {title!r}"


def test_section_0_and_the_citation_page_resolve():
    text = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    assert "section 0" in text  # the docstrings cite it ...
    assert (SCIENCE / "s0.md").read_text(encoding="utf-8").startswith("# Section 0")  # ... and it has its page
    citations = (SCIENCE / "citations.md").read_text(encoding="utf-8")
    for k in range(1, 13):
        assert f"[S{k}](s{k}.md)" in citations
    for target in ("s0.md", "quantities.md", "checking.md"):
        assert f"({target})" in citations


def _recorder_metric_names() -> set[str]:
    """Every metric name the recorder writes: string keys stored into `out`, keys of dicts assigned to `out` or
    returned, the spectral metrics of each weight matrix as '<M>.name', and the deep-linear layer alignment."""
    tree = ast.parse((SRC / "training" / "recorder.py").read_text(encoding="utf-8"))
    names: set[str] = set()

    def dict_keys(node) -> set[str]:
        return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                        and target.value.id == "out" and isinstance(target.slice, ast.Constant)):
                    names.add(target.slice.value)
                if isinstance(target, ast.Name) and target.id == "out" and isinstance(node.value, ast.Dict):
                    names |= dict_keys(node.value)
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            names |= dict_keys(node.value)
    spectral = ast.parse((SRC / "metrics" / "spectral.py").read_text(encoding="utf-8"))
    summary = next(n for n in ast.walk(spectral) if isinstance(n, ast.FunctionDef) and n.name == "spectral_summary")
    for node in ast.walk(summary):
        if isinstance(node, ast.Dict):
            names |= {f"<M>.{k}" for k in dict_keys(node)}
        if isinstance(node, ast.JoinedStr) and "ratio" in ast.unparse(node):
            names |= {"<M>.sigma2_ratio", "<M>.sigma3_ratio"}  # f"sigma{k}_ratio" for k in (2, 3)
    if "alignment_W" in (SRC / "training" / "recorder.py").read_text(encoding="utf-8"):
        names.add("alignment_W{i+1}_W{i}")
    return names


def test_every_recorded_metric_has_its_equation_in_the_quantity_table():
    names = _recorder_metric_names()
    assert {"loss", "normalized_margin", "kkt_stationarity", "<M>.stable_rank", "max_angle"} <= names, names
    table = {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", (SCIENCE / "quantities.md").read_text(encoding="utf-8"),
                                              flags=re.M)}
    missing = sorted(names - table)
    assert not missing, f"recorded metrics missing from the table of docs/science/quantities.md: {missing}"


def _gallery():
    spec = importlib.util.spec_from_file_location("docs_gallery", DOCS / "_gen" / "gallery.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_fast_gallery_is_the_two_fastest_measured_quick_variants(monkeypatch):
    gallery = _gallery()
    names = ["a", "b", "c", "d"]
    measured = {"a": {"quick": {"wall_s": 30.0}}, "b": {"quick": {"wall_s": 8.0}}, "c": {"quick": {"wall_s": 12.0}}}
    monkeypatch.setenv(gallery.ENV_MODE, "fast")
    assert gallery.selected(names, measured) == ["b", "c"]
    monkeypatch.setenv(gallery.ENV_MODE, "none")
    assert gallery.selected(names, measured) == []
    monkeypatch.setenv(gallery.ENV_MODE, "c,a")
    assert gallery.selected(names, measured) == ["a", "c"]
    monkeypatch.delenv(gallery.ENV_MODE)
    assert gallery.selected(names, measured) == names
    monkeypatch.setenv(gallery.ENV_MODE, "nope")
    with pytest.raises(SystemExit, match="nope"):
        gallery.selected(names, measured)


def test_the_hand_written_pages_are_in_the_navigation():
    pages = ast.parse((DOCS / "_gen" / "pages.py").read_text(encoding="utf-8"))
    nav = next(n for n in pages.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "STATIC_NAV")
    constants = [str(c.value) for c in ast.walk(nav.value) if isinstance(c, ast.Constant)]
    listed = {c for c in constants if c.endswith(".md") and not c.startswith(".")}
    listed |= {f"science/s{k}.md" for k in range(1, 13)}  # listed by a comprehension
    written = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "_gen" not in p.parts}
    assert written == listed, f"not in the navigation: {sorted(written - listed)}; missing: {sorted(listed - written)}"


@pytest.mark.slow
def test_the_strict_docs_build_passes_without_the_gallery(tmp_path):
    if shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    env = dict(os.environ, IMPLICITBIAS_DOCS_GALLERY="none", DISABLE_MKDOCS_2_WARNING="true", NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    page = (tmp_path / "site" / "experiments" / "frei2023-fig1.html").read_text(encoding="utf-8")
    assert "computed by the full" in page and "<img" not in page.split("Figures of the quick variant")[1][:2000]


@pytest.mark.slow
def test_the_extension_contract_examples_run(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    doc = DOCS / "extending" / "index.md"
    for block in re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
        exec(compile(block, str(doc), "exec", dont_inherit=True), namespace)  # noqa: S102 - the documented examples
    outcomes = {(c["kind"], c["outcome"]) for c in namespace["results"].checks}
    assert outcomes == {("assumption", "holds"), ("prediction", "holds")}, namespace["results"].checks
