"""The layout of src/implicitbias: no import cycle (deferred and typing-only imports included), no layer importing
one above it, the core importing no paper package and naming no paper in its file names, modules of a readable
size, and imports inside functions only where `implicitbias._deferred` lists them (a heavy dependency deferred on
purpose)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "implicitbias"
#: the layers, bottom to top: a module imports only from its own layer or those below it
LAYERS = {"_spec": 0, "status": 0, "attributes": 0, "losses": 0, "_deferred": 0, "plugins": 0, "data": 1, "models": 1,
          "metrics": 2, "reference": 2, "training": 3, "runs": 4, "theorems": 5, "storage": 5, "experiments": 6,
          "sweeps": 6, "reports": 6, "papers": 7, "pipeline": 8, "cli": 9, "cli_parser": 9, "__main__": 9}
#: the packages whose modules hold a paper's claims and settings (a theorem, an experiment): at most
#: MAX_PAPER_LINES lines each, every module of a paper package included
PAPER_PACKAGES = ("theorems", "experiments", "papers")
MAX_LINES, MAX_PAPER_LINES = 600, 450
#: the papers' own packages, one per paper (or per family, named after each paper it holds)
PAPERS = SRC / "papers"
#: authors whose names a core file must not carry beside those of the paper packages (co-authors, companions)
MORE_AUTHORS = ("lyu", "telgarsky", "nacson", "cohen", "shamir", "englert", "lazic", "flammarion", "srebro")


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(path: Path | str, *, inside_functions: bool, typing: bool = False, modules=None) -> list[tuple[str, int]]:
    """(imported implicitbias module, line) for every import statement (or only those inside functions); those
    under `if TYPE_CHECKING:` too when `typing`.  `path`: a file, or source text."""
    modules = MODULES if modules is None else modules
    tree = ast.parse(path.read_text() if isinstance(path, Path) else path)
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
              for n in ast.walk(f) if n is not f}
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING" for n in ast.walk(block)}
    out = []
    for node in ast.walk(tree):
        if (id(node) in typing_only and not typing) or (inside_functions and id(node) not in nested):
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
            out += [(s, node.lineno) for s in subs]
            if len(subs) < len(node.names):
                out.append((node.module, node.lineno))
    return out


def _graph(*, typing: bool = False, sources: dict[str, Path | str] | None = None) -> dict[str, set[str]]:
    """{module: the implicitbias modules it imports}, at its top and inside its functions (and, with `typing`,
    under `if TYPE_CHECKING:`)."""
    sources = MODULES if sources is None else sources
    return {m: {d for d, _ in _imports(p, inside_functions=False, typing=typing, modules=sources)
                if d in sources and d != m} for m, p in sources.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                cycles.append(path[path.index(dep):] + [dep] if dep in path else [node, dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def _core(module: str) -> bool:
    return module.split(".")[1:2] != ["papers"]


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else 0


def test_every_top_level_name_has_a_layer():
    assert not [m for m in MODULES if len(m.split(".")) > 1 and m.split(".")[1] not in LAYERS]


def test_no_import_cycle():
    """No cycle among the modules, counting the imports deferred into functions and the typing-only ones: a
    module that imports another inside a function, or for its annotations, still depends on it."""
    cycles = _cycles(_graph(typing=True))
    assert not cycles, f"import cycles: {cycles}"


def test_a_cycle_through_a_deferred_and_a_typing_only_import_is_found():
    """The shape of the cycle training/flow.py -> training/methods -> training/methods/gradient_flow.py -> flow.py
    once was: a typing-only import one way, an import inside a function the other way."""
    sources = {
        "pkg.flow": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.methods import GradientFlow\n",
        "pkg.methods": "from pkg.methods.gradient_flow import GradientFlow\n",
        "pkg.methods.gradient_flow": "def stepper():\n    from pkg.flow import make_flow\n",
    }
    assert _cycles(_graph(typing=True, sources=sources)) == [
        ["pkg.flow", "pkg.methods", "pkg.methods.gradient_flow", "pkg.flow"]]
    assert not _cycles(_graph(sources={**sources, "pkg.flow": "import jax\n"}))


def test_the_core_imports_no_paper_package():
    """The core (every package but `implicitbias.papers`) imports no paper package, not even inside a function
    or for its annotations: the papers register through the entry points, as a plugin does."""
    bad = [f"{m}:{line} imports {d}" for m, p in MODULES.items() if _core(m)
           for d, line in _imports(p, inside_functions=False, typing=True) if d.startswith("implicitbias.papers")]
    assert not bad, bad


def _paper_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[1:2] == ["papers"] and len(parts) > 2 else None


def _cross_paper_imports(sources) -> list[str]:
    """Each import of one paper package's module by another paper package's (top level, functions, typing)."""
    return [f"{m}:{line} imports {d}" for m, p in sources.items() if _paper_of(m)
            for d, line in _imports(p, inside_functions=False, typing=True, modules=sources)
            if _paper_of(d) not in (None, _paper_of(m))]


def test_no_paper_package_imports_another():
    """A paper's folder is whole on the core: what two papers share is the core's (under a generic name), so one
    folder can be read, changed or copied on its own."""
    bad = _cross_paper_imports(MODULES)
    assert not bad, bad


def test_a_paper_importing_another_is_found():
    """The negative control of the test above: an import of another paper's module, inside a function too."""
    sources = {"implicitbias.papers.boursier2022.experiments":
               "from implicitbias.theorems.base import Theorem\n"
               "from implicitbias.papers.boursier2022.data import Orthogonal\n"
               "def f():\n    from implicitbias.papers.chistikov2023.experiments.fig1 import GF\n"}
    assert _cross_paper_imports(sources) == [
        "implicitbias.papers.boursier2022.experiments:4 imports implicitbias.papers.chistikov2023.experiments.fig1"]


def _paper_names() -> set[str]:
    """The name of each paper package ("chistikov2023"), each of its authors ("chistikov"; a name shorter than three
    letters with its year, "ji2019", "li2021", so that no common word is flagged), and `MORE_AUTHORS`."""
    names = set(MORE_AUTHORS)
    for package in (p for p in PAPERS.iterdir() if (p / "__init__.py").exists()):
        for author, year in re.findall(r"([a-z]+)(\d{4})", package.name):
            names |= {author + year, author if len(author) >= 3 else author + year}
    return names


def test_the_paper_names_cover_the_packages():
    names = _paper_names()
    assert {"chistikov", "frei", "kou", "soudry", "gunasekar", "woodworth", "razin", "arora", "li2021", "vardi",
            "boursier", "ji2019", "lyu"} <= names
    assert not {"li", "ji", "linear", "limit"} & names


def test_no_core_file_carries_a_paper_name():
    """A paper's modules live in its package under `implicitbias.papers`; no core file's name names one."""
    names = _paper_names()
    bad = [str(p.relative_to(SRC)) for p in SRC.rglob("*") if p.is_file() and "__pycache__" not in p.parts
           and p.parts[len(SRC.parts)] != "papers" and any(n in p.name.lower() for n in names)]
    assert not bad, bad


def test_no_layer_imports_one_above_it():
    bad = [f"{m} (layer {_layer(m)}) imports {d} (layer {_layer(d)})" for m, deps in _graph().items()
           if m != "implicitbias"
           for d in deps if _layer(d) > _layer(m)]
    assert not bad, bad


def test_lower_layers_import_no_upper_one_even_inside_functions():
    lower = ("training", "models", "data", "metrics", "reference")
    upper = ("storage", "sweeps", "experiments", "reports", "cli", "pipeline", "runs", "theorems", "papers")
    bad = [f"{m}:{line} imports {d}" for m, p in MODULES.items() if m.split(".")[1:2] and m.split(".")[1] in lower
           for d, line in _imports(p, inside_functions=True) if d.split(".")[1:2] and d.split(".")[1] in upper]
    assert not bad, bad


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    lines = len(MODULES[module].read_text().splitlines())
    limit = MAX_PAPER_LINES if module.split(".")[1:2] and module.split(".")[1] in PAPER_PACKAGES else MAX_LINES
    assert lines <= limit, f"{module}: {lines} lines, at most {limit}"


def _listed() -> set[tuple[str, str]]:
    """(module, imported name) pairs listed in implicitbias._deferred's docstring: "- module: name, name (why)"."""
    doc = " ".join((SRC / "_deferred.py").read_text().split())  # an item may wrap over several lines
    out = set()
    for module, names in re.findall(r"(?:^|\s)- `?([\w.]+)`?: ([^(]+)\(", doc):
        out |= {(module, n.strip(" `")) for n in names.split(",") if n.strip()}
    return out


def test_imports_inside_functions_are_listed_where_they_defer_a_heavy_dependency():
    listed, found = _listed(), set()
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        for f in ast.walk(tree):
            if not isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(f):
                if isinstance(node, ast.Import):
                    found |= {(module, a.name) for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module:
                    found.add((module, node.module))
    assert not found - listed, f"imports inside functions not listed in implicitbias/_deferred.py: {sorted(found - listed)}"
    assert not listed - found, f"listed in implicitbias/_deferred.py but no longer deferred: {sorted(listed - found)}"


def test_the_command_line_only_parses_and_prints():
    """cli.py is at most 150 lines and imports no training, storage or figure code at its top."""
    path = SRC / "cli.py"
    assert len(path.read_text().splitlines()) <= 150
    top = {d for d, _ in _imports(path, inside_functions=False)} - {d for d, _ in _imports(path, inside_functions=True)}
    assert not [d for d in top if d.split(".")[1:2] and d.split(".")[1] in ("training", "storage", "reports", "sweeps")]
