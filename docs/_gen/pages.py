"""Generated pages of the documentation site (run by mkdocs-gen-files during `mkdocs build`).

- experiments/NAME.md, one per catalogued experiment (`implicitbias.experiments.registry.catalog()`): paper,
  systems, summary, settings and their source, how the quick variant differs from the full one (generated from
  the two resolved configs by `implicitbias.experiments.variants`), measured run times, the theorems checked on
  its cells with each declared assumption and prediction (statement, threshold values, source), its cross-cell
  claims, and the figures and verdicts of its quick variant, computed by this build (docs/_gen/gallery.py);
- experiments/index.md: the catalogue, by system;
- papers/NAME.md, one per built-in paper package (`implicitbias.papers.NAME`): its docstring (what of the paper it
  reproduces and where), its experiments, its modules, and a page per theorem, claim, data generator and
  reference it defines; papers/index.md: the packages;
- api/*.md: the API reference, one page per package, one entry per name of the package's `__all__`;
- api/where.md: every public name of the packages' `__all__` and the leaf module a plugin imports it from;
- SUMMARY.md: the navigation (mkdocs-literate-nav).

Citations of the specification in the rendered text ("SCIENCE.md S2", "S2") become links to the science pages
(`cite`).

Nothing here is committed output: every page and figure is written into the build only.
"""

from __future__ import annotations

import html
import importlib
import inspect
import logging
import os
import pkgutil
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import mkdocs_gen_files

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import gallery  # noqa: E402

log = logging.getLogger("mkdocs.plugins.implicitbias_docs")

#: the systems of the science pages S1..S12, in a few words (their titles in the navigation)
SYSTEMS = ["leaky ReLU networks, gradient flow", "rank drop under GD", "ReLU networks under GD",
           "linear logistic regression", "deep linear networks", "diagonal linear networks",
           "regression and mirror descent", "matrix factorisation", "a single neuron", "homogeneous networks, KKT",
           "learning a neuron", "orthogonal inputs"]

#: the hand-written pages, in navigation order: (title, path) or (section, [(title, path), ...])
STATIC_NAV = [
    ("Home", "index.md"),
    ("Getting started", "getting-started.md"),
    ("Concepts", "concepts.md"),
    ("The science", [
        ("Overview", "science/index.md"),
        ("Citations in docstrings", "science/citations.md"),
        ("Section 0: common machinery", "science/s0.md"),
        ("Measured quantities", "science/quantities.md"),
        ("Checking a theorem", "science/checking.md"),
    ] + [(f"S{k}: {short}", f"science/s{k}.md") for k, short in enumerate(SYSTEMS, start=1)]),
    ("Extending the lab", [
        ("The extension contract", "extending/index.md"),
    ]),
    ("How-tos", [
        ("Run on a SLURM or PBS cluster", "howto/cluster.md"),
        ("Resume a sweep", "howto/resume.md"),
        ("Analyse results in a notebook", "notebook.md"),
        ("Write a plugin", "howto/plugin.md"),
    ]),
]


def say(message: str) -> None:
    log.info(message)


# -- markdown helpers ---------------------------------------------------------------------------------------
def esc(text) -> str:
    """Text for a markdown table cell or paragraph: HTML-escaped, markdown's inline markers and pipes escaped."""
    text = html.escape(" ".join(str(text).split()), quote=False)
    for ch in ("\\", "|", "*", "_", "[", "]", "`"):
        text = text.replace(ch, "\\" + ch)
    return text


def code(text) -> str:
    """Inline code that survives a table cell (backticks and pipes made harmless)."""
    text = " ".join(str(text).split()).replace("`", "'")
    return "<code>" + html.escape(text, quote=False).replace("|", "&#124;") + "</code>"


#: "SCIENCE.md S2", "SCIENCE.md section 0", 'SCIENCE.md, "What checking a theorem means"', a bare "SCIENCE.md" and
#: a bare "S2": citations of the project's specification, which readers have as the science pages of this site
#: (docs/science/citations.md)
_CITATION = re.compile(r'SCIENCE\.md(?:,? (?:S(\d{1,2})\b|(section 0)\b|"(What checking a theorem means)"))?'
                       r"|\bS(\d{1,2})\b")


def cite(text: str, prefix: str = "../science/") -> str:
    """Markdown (already escaped by `esc`) with each citation of the specification turned into a link to its science
    page under `prefix`: "SCIENCE.md S2" and "S2" -> [S2](prefix/s2.md), "SCIENCE.md section 0" -> section 0,
    "SCIENCE.md" alone -> the science section.  An S<k> without a page stays text."""

    def link(match: re.Match) -> str:
        k = match.group(1) or match.group(4)
        if k is not None:
            page = REPO / "docs" / "science" / f"s{int(k)}.md"
            return f"[S{k}]({prefix}s{int(k)}.md)" if page.is_file() else f"S{k}"
        if match.group(2):
            return f"[section 0]({prefix}s0.md)"
        if match.group(3):
            return f"[{match.group(3)}]({prefix}checking.md)"
        return f"[the science pages]({prefix}index.md)"

    return _CITATION.sub(link, text)


def prose(text, prefix: str = "../science/") -> str:
    """`esc(text)` with its citations of the specification linked (`cite`)."""
    return cite(esc(text), prefix)


def fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# -- API reference ------------------------------------------------------------------------------------------
def public_packages() -> list[str]:
    """`implicitbias` and every subpackage (or module) of it that declares `__all__`."""
    import implicitbias

    names = ["implicitbias"]
    for info in pkgutil.walk_packages(implicitbias.__path__, prefix="implicitbias."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        if not info.ispkg and info.name.count(".") > 1:
            continue  # modules of subpackages are reached through their package's __all__
        module = importlib.import_module(info.name)
        if hasattr(module, "__all__"):
            names.append(info.name)
    return names


def canonical(package: str, name: str, obj) -> str:
    """The path mkdocstrings renders for the public name `package.name`: where a class or function is defined,
    or the package attribute itself (constants, type aliases)."""
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", "").startswith("implicitbias"):
        qualname = getattr(obj, "__qualname__", name)
        if "<" not in qualname:
            return f"{obj.__module__}.{qualname}"
    if inspect.ismodule(obj):
        return obj.__name__
    return f"{package}.{name}"


def api_page(package: str) -> str:
    return "api/" + ("index" if package == "implicitbias" else package.removeprefix("implicitbias.")) + ".md"


def name_page(package: str, name: str) -> str:
    """The page of one public name, under the page of the package that renders it."""
    return api_page(package).removesuffix(".md").replace("api/index", "api/implicitbias") + f"/{name}.md"


def primary_package(path: str, exporters: list[str]) -> str:
    """The package whose page renders an object exported by several: the exporter nearest to where it is
    defined (the longest package prefix of its path), so that each object is rendered once and linked elsewhere."""
    return max(exporters, key=lambda p: (path.startswith(p + "."), len(p)))


#: modules documented whole, on one page, without an `__all__`
WHOLE_MODULES = ["implicitbias.losses"]


def constant_comment(name: str) -> str:
    """The `#:` comment above the module-level assignment of the constant `name` in the package's source."""
    import re

    pattern = re.compile(rf"((?:^[ \t]*#:.*\n)+)^{re.escape(name)}\s*[:=]", re.M)
    for path in sorted((REPO / "src" / "implicitbias").rglob("*.py")):
        match = pattern.search(path.read_text(encoding="utf-8"))
        if match:
            return " ".join(line.strip()[2:].strip() for line in match.group(1).splitlines())
    return ""


def derived_description(obj) -> str:
    """What a public name without a docstring is, read off the object itself (a discriminated union, an enum, a
    constant), for the API pages; marked there as written by the docs build."""
    import enum
    import typing

    if typing.get_origin(obj) is typing.Annotated:
        union, *extras = typing.get_args(obj)
        members = [getattr(c, "__name__", str(c)) for c in typing.get_args(union)]
        field = next((getattr(e, "discriminator", None) for e in extras if getattr(e, "discriminator", None)), None)
        told = f", told apart by their `{field}` field" if field else ""
        return f"A pydantic union of {len(members)} classes{told}: " + ", ".join(f"`{m}`" for m in members) + "."
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        return "An enumeration: " + ", ".join(f"`{m.name}` = {m.value!r}" for m in obj) + "."
    if isinstance(obj, tuple | list | str | int | float):
        return f"A constant: `{obj!r}`."
    return ""


def _first_paragraph(obj) -> str:
    from plain_docstrings import plain

    doc = (inspect.getdoc(obj) or "").split("\n\n")[0].strip()
    return " ".join(plain(doc).split())


def write_api() -> tuple[dict[str, str], list, list[str]]:
    """The API reference: a page per package (`__all__` as a table) and a page per public name, rendered by
    mkdocstrings where the name is defined.  Returns {canonical path: page}, the navigation entries and the
    public names without a docstring of their own (named in the build log)."""
    packages = public_packages()
    exported: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for package in packages:
        module = importlib.import_module(package)
        for name in module.__all__:
            if name != "__version__":
                exported[canonical(package, name, getattr(module, name))].append((package, name))
    targets: dict[str, str] = {}
    for path, exporters in exported.items():
        package = primary_package(path, [p for p, _ in exporters])
        name = next(n for p, n in exporters if p == package)
        targets[path] = name_page(package, name)
    nav: list = []
    undocumented: list[str] = []
    for package in packages + WHOLE_MODULES:
        module = importlib.import_module(package)
        page = api_page(package)
        lines = [f"# `{package}`", ""]
        first = _first_paragraph(module)
        if first:
            lines += [first, ""]
        children = []
        if package in WHOLE_MODULES:
            lines += [f"::: {package}", "    options:", "      show_root_heading: false", ""]
        else:
            lines += [f"The public names of `{package}` (its `__all__`), each with its docstring on its own page.", "",
                      "| name | what it is |", "| --- | --- |"]
        for name in sorted(getattr(module, "__all__", []) if package not in WHOLE_MODULES else [], key=str.lower):
            obj = getattr(module, name)
            if name == "__version__":
                lines.append(f"| `__version__` | the version of the installed package, a string (`{obj}`) |")
                continue
            path = canonical(package, name, obj)
            own_doc = callable(obj) and bool(obj.__doc__) and obj.__doc__ != type(obj).__doc__
            summary = _first_paragraph(obj) if own_doc else constant_comment(name)
            derived = "" if summary else derived_description(obj)
            if not summary:
                undocumented.append(f"{package}.{name}")
                summary = derived
            target = targets[path]
            where = "" if target == name_page(package, name) else f" (defined in `{path.rsplit('.', 1)[0]}`)"
            link = os.path.relpath(target, os.path.dirname(page))
            lines.append(f"| [`{name}`]({link}) | {summary or '—'}{where} |")
            if target == name_page(package, name):
                children.append((name, target))
                note = ["", f"{derived} *(Described by the documentation build: the source gives `{name}` no "
                            "docstring.)*", ""] if derived else []
                with mkdocs_gen_files.open(target, "w") as f:
                    f.write("\n".join([f"::: {path}", "    options:", f'      heading: "{package}.{name}"',
                                       f'      toc_label: "{name}"', "      heading_level: 1", ""] + note))
        with mkdocs_gen_files.open(page, "w") as f:
            f.write("\n".join(lines) + "\n")
        nav.append((package, page, children))
    return targets, nav, undocumented


def defining_module(package: str, name: str, obj) -> str:
    """The module that defines the public name `package.name`: a class's or function's `__module__` (through a
    `jax.jit` or other wrapper), a module's own name, else the module under the package whose source assigns the
    name at its top level (a constant, a type alias, a registry)."""
    inner = getattr(obj, "__wrapped__", obj)
    if inspect.ismodule(obj):
        return obj.__name__
    if (inspect.isclass(inner) or inspect.isfunction(inner)) and getattr(inner, "__module__", "").startswith(
            "implicitbias"):
        return inner.__module__
    root = Path(importlib.import_module(package).__file__).parent
    pattern = re.compile(rf"^{re.escape(name)}\s*(?::[^=\n]*)?=", re.M)
    found = [path for path in sorted(root.rglob("*.py")) if pattern.search(path.read_text(encoding="utf-8"))]
    if not found:
        return package
    parts = found[0].relative_to(REPO / "src").with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def where_rows() -> list[dict]:
    """One row per public object of the packages' `__all__` (an object that several packages export, once): its
    name, the canonical path of its API page (`canonical`), the module it is defined in, the module a plugin
    imports it from, the packages that export it, and whether that module is a package (`package_level`: a name
    defined in a package's `__init__`, such as the registry `AnyModel`, which a plugin's model, data or method
    module cannot import at its top level, the package being still loading then).  A name defined in a private
    module (`implicitbias._spec`) is imported from the nearest package above it that exports it."""
    rows: dict[tuple[str, str], dict] = {}
    for package in public_packages():
        module = importlib.import_module(package)
        for name in module.__all__:
            if name == "__version__":
                continue
            obj = getattr(module, name)
            defined = defining_module(package, name, obj)
            key = (name, defined)
            if key in rows:
                rows[key]["exported_by"].append(package)
                continue
            rows[key] = {"name": name, "path": canonical(package, name, obj), "defined": defined,
                         "exported_by": [package]}
    for row in rows.values():
        defined = row["defined"]
        if any(part.startswith("_") for part in defined.split(".")):
            above = [p for p in row["exported_by"] if defined.startswith(p + ".")]
            row["leaf"] = max(above, key=len) if above else defined
        else:
            row["leaf"] = defined
        leaf = importlib.import_module(row["leaf"])
        row["package_level"] = hasattr(leaf, "__path__") and row["leaf"] == row["defined"]
    return sorted(rows.values(), key=lambda r: (r["name"].lower(), r["leaf"]))


def where_page(api: dict[str, str]) -> str:
    """api/where.md: every public name and the module a plugin imports it from (`where_rows`)."""
    lines = ["# Where each public name lives", "",
             "A plugin's modules import what they use from the module that defines it, the *leaf module*, rather "
             "than from a package such as `implicitbias.models`: `implicitbias` loads the plugins' entry points while "
             "it builds its registries (`AnyModel`, `AnyData`, `AnyMethod`), so those packages are still being "
             "imported when a plugin's modules are, and hold only the names bound so far ([why](../howto/plugin.md"
             "#the-worked-example-examplesquadratic-net)). A leaf module is complete once imported: `from "
             "implicitbias.models.base import Model` never depends on how far `implicitbias.models` has loaded.",
             "",
             "This table is generated from the `__all__` of every package (the [API reference](index.md)): each "
             "public name, the statement a plugin imports it with, and the packages that also export it (what a "
             "script or a notebook, which runs after everything is loaded, may import it from).", "",
             "| name | a plugin imports it with | also exported by |", "| --- | --- | --- |"]
    for row in where_rows():
        target = api.get(row["path"])
        name = f"[`{row['name']}`]({os.path.relpath(target, 'api')})" if target else f"`{row['name']}`"
        statement = code(f"from {row['leaf']} import {row['name']}")
        if row["leaf"] != row["defined"]:
            statement += f" (defined in `{row['defined']}`)"
        if row["package_level"]:
            statement += (" — defined by the package itself, not by a leaf module: a plugin's modules use it "
                          "inside their functions only")
        exporters = ", ".join(f"`{p}`" for p in row["exported_by"] if p != row["leaf"]) or "—"
        lines.append(f"| {name} | {statement} | {exporters} |")
    return "\n".join(lines) + "\n"


#: the generated page of where each public name lives (linked from extending/index.md and howto/plugin.md)
WHERE_PAGE = "api/where.md"


# -- papers -------------------------------------------------------------------------------------------------
def paper_packages() -> list[str]:
    """The built-in paper packages, `implicitbias.papers.NAME`, by name."""
    import implicitbias.papers

    return sorted(f"implicitbias.papers.{m.name}" for m in pkgutil.iter_modules(implicitbias.papers.__path__) if m.ispkg)


def paper_modules(package: str) -> list[str]:
    """Every module of a paper package (the package itself first)."""
    root = importlib.import_module(package)
    return [package] + sorted(m.name for m in pkgutil.walk_packages(root.__path__, prefix=package + "."))


def paper_objects(package: str) -> list[tuple[str, str, object]]:
    """(name, canonical path, object) of what a paper package defines for a reader: its theorems and claims, its
    data generators and the public names of its `reference` module, each once, module by module."""
    from implicitbias.data.dataset import DataSpec
    from implicitbias.theorems.base import CellsTheorem, Theorem

    out = []
    for name in paper_modules(package):
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != name:
                continue
            kept = inspect.isclass(obj) and issubclass(obj, Theorem | CellsTheorem | DataSpec)
            kept |= name.rsplit(".", 1)[-1] == "reference" and (inspect.isclass(obj) or inspect.isfunction(obj))
            if kept:
                out.append((attr, f"{name}.{obj.__qualname__}", obj))
    return out


def paper_page(package: str) -> str:
    return f"papers/{package.rsplit('.', 1)[-1]}.md"


def write_papers(api: dict[str, str]) -> list:
    """The pages of the built-in papers (`paper_page`), each from its package: the package's docstring, its
    experiments (from the catalogue), its modules, and one page per object of `paper_objects`, added to `api` so
    that the experiment pages and the science pages link to them.  Returns the navigation entries."""
    from implicitbias.experiments.registry import catalog, homes

    experiments, where = catalog(), homes()
    nav = []
    index = ["# Papers", "",
             "The built-in papers, one package each under `implicitbias.papers` (a family of short systems shares one, "
             "named after every paper it holds). A package holds its paper's data generators, references, theorems, "
             "the metrics only it uses and its experiments, and registers them through the entry points, exactly as "
             "a plugin package does ([write a plugin](../howto/plugin.md)).", "",
             "| package | what it reproduces | experiments |", "| --- | --- | --- |"]
    for package in paper_packages():
        module = importlib.import_module(package)
        short = package.rsplit(".", 1)[-1]
        page = paper_page(package)
        mine = [e for name, e in experiments.items() if where.get(name) == package]
        children, objects = [], []
        for name, path, obj in paper_objects(package):
            objects.append(obj)
            target = f"papers/{short}/{name}.md"
            api.setdefault(path, target)
            children.append((name, target))
            with mkdocs_gen_files.open(target, "w") as f:
                f.write("\n".join([f"::: {path}", "    options:", f'      heading: "{path}"',
                                   f'      toc_label: "{name}"', "      heading_level: 1", ""]))
        lines = [f"# `{package}`", "", f"::: {package}", "    options:", "      show_root_heading: false",
                 "      members: false", "", "## Experiments", ""]
        lines += [f"- [{e.name}](../experiments/{e.name}.md): {prose(e.paper)}" for e in mine] or ["None."]
        lines += ["", "## Modules", "", "| module | what it holds |", "| --- | --- |"]
        lines += [f"| `{m}` | {_first_paragraph(importlib.import_module(m)) or '—'} |"
                  for m in paper_modules(package)]
        if children:
            lines += ["", "## Theorems, claims, data and references", "", "| name | what it is |", "| --- | --- |"]
            lines += [f"| [`{name}`]({os.path.relpath(target, 'papers')}) | {_first_paragraph(obj) or '—'} |"
                      for (name, target), obj in zip(children, objects)]
        with mkdocs_gen_files.open(page, "w") as f:
            f.write("\n".join(lines) + "\n")
        index.append(f"| [`{short}`]({short}.md) | {_first_paragraph(module)} | "
                     f"{', '.join(f'[{e.name}](../experiments/{e.name}.md)' for e in mine) or '—'} |")
        nav.append((short, page, children))
    with mkdocs_gen_files.open("papers/index.md", "w") as f:
        f.write("\n".join(index) + "\n")
    return nav


# -- experiments --------------------------------------------------------------------------------------------
def cells_of(experiment, quick: bool):
    """The cells of a variant, without training (as `implicitbias describe` builds them)."""
    from implicitbias.runs.results import Cell, cell_indices, name_cells

    runs = experiment.runs(experiment.resolve(quick=quick))
    cells = [Cell([runs[i] for i in idx], None, [], idx) for idx in cell_indices(runs)]
    name_cells(cells)
    return runs, cells


def theorem_section(theorem, api: dict[str, str], page_dir: str, cells: list[str] | None) -> list[str]:
    cls = type(theorem)
    path = f"{cls.__module__}.{cls.__qualname__}"
    ref = f"[`{cls.__name__}`](../{api[path]}#{path})" if path in api else f"`{path}`"
    lines = [f"### {esc(theorem.title)}", "", f"Checked by {ref}."]
    fields = theorem.model_dump() if hasattr(theorem, "model_dump") else {}
    if fields:
        lines[-1] += " Its constants here: " + ", ".join(code(f"{k} = {v}") for k, v in fields.items()) + "."
    if cells:
        shown = ", ".join(code(c) for c in cells[:6]) + (f" and {len(cells) - 6} more" if len(cells) > 6 else "")
        lines[-1] += f" Cells: {shown}."
    lines.append("")
    declarations = cls.declarations() if hasattr(cls, "declarations") else ()
    if declarations:
        lines += ["| kind | statement | threshold | source |", "| --- | --- | --- | --- |"]
        for d in declarations:
            row = d.row(theorem)
            lines.append(f"| {row['kind']} | {prose(row['statement'])} | {prose(row['threshold']) or '—'} | "
                         f"{prose(row['source'])} |")
    else:
        doc = inspect.getdoc(cls) or ""
        lines += ["This theorem declares no assumption or prediction with `@assumption`/`@prediction` yet; "
                  "its `check` evaluates what its docstring says:", ""]
        lines += ["> " + prose(p) for p in doc.split("\n\n")[:2] if p.strip()] or ["> (no docstring)"]
    lines.append("")
    return lines


def checks_section(outcome) -> list[str]:
    from collections import Counter

    if not outcome.checks:
        return ["The quick run wrote no checks.", ""]
    counts = Counter((c.get("kind"), c.get("outcome")) for c in outcome.checks)
    tally = "; ".join(f"{kind}s: " + ", ".join(f"{n} {o.replace('_', ' ')}" for (k, o), n in sorted(counts.items())
                                               if k == kind)
                      for kind in ("assumption", "prediction") if any(k == kind for k, _ in counts))
    lines = [f"Verdicts of this build's quick run ({tally}):", "", '??? note "Every verdict of the quick run"', ""]
    lines += ["    | cell | kind | theorem | statement | measured | bound | outcome |",
              "    | --- | --- | --- | --- | --- | --- | --- |"]
    for c in outcome.checks:
        bound = f"{c.get('relation', '')} {fmt(c.get('bound'))}" if c.get("bound") is not None else ""
        lines.append(f"    | {esc(c.get('cell', ''))} | {c.get('kind', '')} | {esc(c.get('theorem', ''))} | "
                     f"{prose(c.get('statement', ''))} | {fmt(c.get('measured'))} | {esc(bound)} | "
                     f"**{esc(str(c.get('outcome', '')).replace('_', ' '))}** |")
    return lines + [""]


def system_link(system: str, prefix: str = "../science/") -> str:
    """A link to the science page of a system ("S3"); a name without a page (a plugin's own) stays text."""
    page = REPO / "docs" / "science" / f"{system.lower()}.md"
    return f"[{system}]({prefix}{system.lower()}.md)" if system[:1] == "S" and page.is_file() else esc(system)


def experiment_page(experiment, api, measurements, outcome, ran_gallery: bool) -> str:
    from implicitbias.experiments import registry
    from implicitbias.experiments.runtimes import runtime
    from implicitbias.experiments.variants import describe_quick

    name = experiment.name
    systems = ", ".join(system_link(s) for s in experiment.systems) or "—"
    try:
        quick = esc(describe_quick(experiment).removeprefix("Quick variant: "))
    except Exception as exc:  # a quick variant that does not resolve is a bug: fail the strict build
        log.warning(f"experiment {name}: its quick variant could not be compared ({type(exc).__name__}: {exc})")
        quick = "—"
    lines = [f"# {name}", "", prose(experiment.summary), "",
             "| about | |", "| --- | --- |",
             f"| paper | {prose(experiment.paper)} |",
             f"| systems | {systems} |",
             f"| settings (full variant) | {prose(experiment.settings_source) or '—'} |",
             f"| quick variant (`--quick`) | {quick[:1].upper() + quick[1:]} (generated from the two resolved "
             "configs) |",
             f"| run time, quick variant | {esc(runtime(name, 'quick', measurements))} |",
             f"| run time, full variant | {esc(runtime(name, 'full', measurements))} |"]
    try:
        full_runs, full_cells = cells_of(experiment, quick=False)
        quick_runs, quick_cells = cells_of(experiment, quick=True)
        lines.append(f"| runs | full variant: {len(full_runs)} runs in {len(full_cells)} cells; quick variant: "
                     f"{len(quick_runs)} runs in {len(quick_cells)} cells |")
    except Exception as exc:  # an experiment that cannot expand its runs is a bug: fail the strict build
        log.warning(f"experiment {name}: its runs could not be expanded ({type(exc).__name__}: {exc})")
        full_cells = []
    source = getattr(registry, "source", None)
    package = source(name) if source is not None else "implicitbias"
    home = registry.homes().get(name, "") if hasattr(registry, "homes") else ""
    if home.startswith("implicitbias.papers."):
        lines.append(f"| package | [`{home}`](../{paper_page(home)}), the paper's own package |")
    elif package and package != "implicitbias":
        lines.append(f"| package | `{package}`, a plugin ([how plugins work](../howto/plugin.md)) |")
    lines += ["", "Run its quick variant (without `--quick`: the paper's scale), or print its resolved config, runs, cells "
              "and checks without training:", "", "```bash",
              f"implicitbias run {name} --quick", f"implicitbias describe {name} --quick", "```", ""]

    lines += ["## Figures of the quick variant", ""]
    if outcome is not None and outcome.figures:
        if outcome.exit_code == 3:
            lines += ['!!! warning "Some runs of this build\'s quick run diverged or failed"', "",
                      "    They are left out of the figures (exit code 3 of `implicitbias run`).", ""]
        titles = {f.name: f.title for f in experiment.figures}
        for stem in outcome.figures:
            title = titles.get(stem, stem)
            lines += [f"![{esc(title)}]({name}/{stem}.png)", "", f"*{esc(title)}* (`figures/{stem}.png`)", ""]
        missing = [f for f in experiment.figures if f.name not in outcome.figures]
        for f in missing:
            lines += [f"*{esc(f.title)}* (`{f.name}`) is not drawn from the quick variant's runs.", ""]
        lines += [f"Computed by this build in {outcome.wall_s:.0f} s (`implicitbias run {name} --quick`).", ""]
    elif outcome is not None:
        lines += ['!!! failure "The quick run of this build drew no figure"', "",
                  f"    `implicitbias run {name} --quick` ended with exit code {outcome.exit_code}.", ""]
    else:
        why = (f"this build ran the gallery's fast subset only (`{gallery.ENV_MODE}={gallery.mode()}`)" if ran_gallery
               else f"this build ran without the gallery (`{gallery.ENV_MODE}={gallery.mode()}`)")
        declared = ", ".join(f"`{f.name}`" for f in experiment.figures) or "none declared"
        lines += ['!!! info "Figures computed by the full build"', "",
                  f"    The figures of this experiment's quick variant ({declared}) are computed by the full "
                  f"documentation build; {why}. The full build:", "",
                  "    ```bash", f"    {gallery.FULL_COMMAND}", "    ```", ""]

    lines += ["## Theorems checked on each cell", "",
              "Each theorem's declared assumptions and predictions, with the values of their thresholds in this "
              "experiment (full variant) and where each comes from. A prediction whose theorem's assumption fails "
              "on a cell is reported *outside scope* there ([verdicts](../concepts.md#verdicts)).", ""]
    seen: dict[str, tuple] = {}
    for cell in full_cells:
        for theorem in experiment.theorems(cell):
            key = f"{type(theorem).__qualname__}:{theorem.model_dump() if hasattr(theorem, 'model_dump') else ''}"
            seen.setdefault(key, (theorem, []))[1].append(cell.label)
    if not seen:
        lines += ["No theorem is checked cell by cell in this experiment; its claims are checked across cells "
                  "(below).", ""]
    for theorem, labels in seen.values():
        lines += theorem_section(theorem, api, "experiments", labels)
    if experiment.claims:
        lines += ["## Claims across cells", "",
                  "Claims of the paper that compare cells (`CellsTheorem`s), checked once on all the cells.", ""]
        for claim in experiment.claims:
            lines += theorem_section(claim, api, "experiments", None)
    if outcome is not None:
        lines += ["## Checks of this build's quick run", ""] + checks_section(outcome)
    return "\n".join(lines)


def write_experiments(api) -> list[tuple[str, str]]:
    from implicitbias.experiments.registry import catalog
    from implicitbias.experiments.runtimes import load_runtimes

    experiments = catalog()
    report_plugin_failures()
    if not experiments:
        log.warning("the catalogue of experiments is empty: no experiment page can be written")
    measurements = load_runtimes()
    chosen = gallery.selected(list(experiments), measurements)
    kept = os.environ.get("IMPLICITBIAS_DOCS_GALLERY_DIR")
    root = Path(kept) if kept else Path(tempfile.mkdtemp(prefix="implicitbias-docs-gallery-"))
    say(f"gallery ({gallery.ENV_MODE}={gallery.mode()}): {len(chosen)} of {len(experiments)} quick variants "
        f"under {root}: {', '.join(chosen) or 'none'}")
    outcomes = gallery.run_gallery(chosen, root, REPO, say) if chosen else {}
    if not kept:
        shutil.rmtree(root, ignore_errors=True)
    for name, outcome in outcomes.items():
        if not outcome.ok or not outcome.figures:
            log.warning(f"gallery: `implicitbias run {name} --quick` ended with exit code {outcome.exit_code} and "
                        f"{len(outcome.figures)} figures; its log ends:\n{outcome.log_tail}")

    nav = []
    by_system = defaultdict(list)
    for name, experiment in experiments.items():
        page = f"experiments/{name}.md"
        outcome = outcomes.get(name)
        with mkdocs_gen_files.open(page, "w") as f:
            f.write(experiment_page(experiment, api, measurements, outcome, bool(chosen)))
        if outcome is not None:
            for stem, data in outcome.figures.items():
                with mkdocs_gen_files.open(f"experiments/{name}/{stem}.png", "wb") as f:
                    f.write(data)
        nav.append((name, page))
        for s in experiment.systems:
            by_system[s].append(experiment)

    write_system_sections(experiments, by_system, api)

    lines = ["# Experiments", "",
             "Every experiment of the catalogue (`implicitbias list`), generated from "
             "`implicitbias.experiments.registry.catalog()`. Each page gives the paper, the systems, the theorems "
             "checked with their thresholds and sources, the measured run times, and the figures of the quick "
             "variant, computed by the documentation build.", ""]
    if len(chosen) < len(experiments):
        lines += ['!!! info "This build computed the figures of a subset"', "",
                  f"    `IMPLICITBIAS_DOCS_GALLERY={gallery.mode()}`: figures of {', '.join(chosen) or 'no experiment'}. "
                  "The full build computes every experiment's figures:", "",
                  "    ```bash", f"    {gallery.FULL_COMMAND}", "    ```", ""]
    for system in sorted(by_system, key=lambda s: int(s[1:]) if s[1:].isdigit() else 99):
        lines += [f"## {system_link(system)}", "", "| experiment | paper | what it shows |",
                  "| --- | --- | --- |"]
        for e in by_system[system]:
            lines.append(f"| [{e.name}]({e.name}.md) | {prose(e.paper)} | {prose(e.summary)} |")
        lines.append("")
    with mkdocs_gen_files.open("experiments/index.md", "w") as f:
        f.write("\n".join(lines))
    return nav


def report_plugin_failures() -> None:
    """A contribution that failed to import (its warning went to standard error) fails the strict build: its pages
    would be missing without a word."""
    try:
        from implicitbias import plugins
    except ImportError:
        return
    for kind in getattr(plugins, "GROUPS", {}):
        for line in plugins.failures(kind):
            log.warning(f"plugins: {line}")


def write_system_sections(experiments, by_system, api) -> None:
    """Append to each science page S<k> the catalogued experiments of that system and the theorems they check."""
    for k in range(1, 13):
        system = f"S{k}"
        page = f"science/s{k}.md"
        lines = ["", "## In the catalogue", ""]
        chosen = by_system.get(system, [])
        if not chosen:
            lines += ["No catalogued experiment declares this system yet.", ""]
        else:
            lines += ["Experiments (generated from the catalogue when these pages were built):", ""]
            lines += [f"- [{e.name}](../experiments/{e.name}.md): {prose(e.summary, '')}" for e in chosen]
            theorems: dict[str, str] = {}
            for e in chosen:
                try:
                    _, cells = cells_of(e, quick=False)
                    found = [t for c in cells for t in e.theorems(c)] + list(e.claims)
                except Exception:  # reported on the experiment's own page
                    found = []
                for t in found:
                    cls = type(t)
                    path = f"{cls.__module__}.{cls.__qualname__}"
                    link = f"[`{cls.__name__}`](../{api[path]}#{path})" if path in api else f"`{cls.__name__}`"
                    theorems.setdefault(path, f"- {link}: {prose(t.title, '')}")
            if theorems:
                lines += ["", "Theorems and claims they check:", ""] + list(theorems.values())
            lines.append("")
        with mkdocs_gen_files.open(page, "a") as f:
            f.write("\n".join(lines))


# -- navigation ---------------------------------------------------------------------------------------------
def write_nav(experiment_nav, api_nav, paper_nav=()) -> None:
    lines = []
    for title, target in STATIC_NAV:
        if isinstance(target, str):
            lines.append(f"* [{title}]({target})")
        else:
            lines.append(f"* {title}")
            lines += [f"    * [{t}]({p})" for t, p in target]
    lines.append("* [Experiments](experiments/index.md)")
    lines += [f"    * [{t}]({p})" for t, p in experiment_nav]
    lines.append("* [Papers](papers/index.md)")
    for title, page, children in paper_nav:
        lines.append(f"    * [{title}]({page})")
        lines += [f"        * [{t}]({p})" for t, p in children]
    lines.append("* API reference")
    lines.append(f"    * [Where each public name lives]({WHERE_PAGE})")
    for title, page, children in api_nav:
        lines.append(f"    * [{title}]({page})")
        lines += [f"        * [{t}]({p})" for t, p in children]
    with mkdocs_gen_files.open("SUMMARY.md", "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    api, api_nav, undocumented = write_api()
    with mkdocs_gen_files.open(WHERE_PAGE, "w") as f:
        f.write(where_page(api))
    if undocumented:
        say(f"API: {len(undocumented)} public names have no docstring of their own: {', '.join(undocumented)}")
    paper_nav = write_papers(api)
    experiment_nav = write_experiments(api)
    write_nav(experiment_nav, api_nav, paper_nav)


# mkdocs-gen-files runs this file with runpy.run_path ("<run_path>"); a test imports it to render one page
if __name__ in ("<run_path>", "__main__"):
    main()
