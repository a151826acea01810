"""The layout of src/implicitbias: no import cycle, no layer importing one above it, modules of a readable size,
and imports inside functions only where `implicitbias._deferred` lists them (a heavy dependency deferred on
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
          "sweeps": 6, "reports": 6, "pipeline": 7, "cli": 8, "cli_parser": 8, "__main__": 8}
PAPER_PACKAGES = ("theorems", "experiments")
MAX_LINES, MAX_PAPER_LINES = 600, 450


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(path: Path, *, inside_functions: bool) -> list[tuple[str, int]]:
    """(imported implicitbias module, line) for every import statement (or only those inside functions)."""
    tree = ast.parse(path.read_text())
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
              for n in ast.walk(f) if n is not f}
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING" for n in ast.walk(block)}
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only or (inside_functions and id(node) not in nested):
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
            out += [(s, node.lineno) for s in subs]
            if len(subs) < len(node.names):
                out.append((node.module, node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    return {m: {d for d, _ in _imports(p, inside_functions=False) if d in MODULES and d != m}
            for m, p in MODULES.items()}


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else 0


def test_every_top_level_name_has_a_layer():
    assert not [m for m in MODULES if len(m.split(".")) > 1 and m.split(".")[1] not in LAYERS]


def test_no_import_cycle():
    graph = _graph()
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
    assert not cycles, f"import cycles: {cycles}"


def test_no_layer_imports_one_above_it():
    bad = [f"{m} (layer {_layer(m)}) imports {d} (layer {_layer(d)})" for m, deps in _graph().items() if m != "implicitbias"
           for d in deps if _layer(d) > _layer(m)]
    assert not bad, bad


def test_lower_layers_import_no_upper_one_even_inside_functions():
    lower = ("training", "models", "data", "metrics", "reference")
    upper = ("storage", "sweeps", "experiments", "reports", "cli", "pipeline", "runs", "theorems")
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
