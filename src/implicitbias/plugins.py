"""Extension points: models, data generators, methods, theorems and experiments come from package entry points.

Each kind has an entry-point group; a package (implicitbias itself included) declares its contributions in its
`pyproject.toml`, e.g.

    [project.entry-points."implicitbias.models"]
    quadratic = "my_package.model:QuadraticNet"          # a Model subclass whose `kind` is "quadratic"

    [project.entry-points."implicitbias.experiments"]
    my-study = "my_package.experiment"                   # a module with a list EXPERIMENTS, or an Experiment

The built-in models, generators and methods register the same way, so the core uses its own mechanism: the
pydantic unions `AnyModel`, `AnyData` and `AnyMethod` are built, when their package is imported, from every
installed entry of their group, and a config naming a kind nobody installed is refused with the installed
kinds and the package each comes from.  An entry that fails to import is named in one warning line on
standard error and left out; the others still load.
"""

from __future__ import annotations

import dataclasses
import sys
from importlib.metadata import entry_points
from typing import Any

#: the entry-point group of each kind
GROUPS = {
    "models": "implicitbias.models",
    "data": "implicitbias.data",
    "methods": "implicitbias.methods",
    "theorems": "implicitbias.theorems",
    "experiments": "implicitbias.experiments",
}
#: the discriminator field of each kind whose classes enter a config union
TAGS = {"models": "kind", "data": "name", "methods": "kind"}


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One installed contribution: its kind, entry name, the object it names, and the package that provides it."""

    kind: str
    name: str
    target: str
    package: str
    obj: Any


_loaded: dict[str, list[Plugin]] = {}
_failed: dict[str, list[str]] = {}


def installed(kind: str) -> list[Plugin]:
    """Every contribution of one kind (models, data, methods, theorems, experiments), loaded once per process,
    implicitbias's own first; an entry that fails to import is reported once and left out."""
    if kind not in GROUPS:
        raise KeyError(f"{kind!r} is not a kind of plugin: expected one of {', '.join(GROUPS)}")
    if kind not in _loaded:
        found, failed = [], []
        for ep in sorted(entry_points(group=GROUPS[kind]),
                         key=lambda e: (_package(e) != "implicitbias", _package(e), e.name)):
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
                line = (f"warning: the {kind} plugin {ep.name!r} ({ep.value}) of package {_package(ep)!r} failed to "
                        f"import and is left out ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
                print(line, file=sys.stderr)
                failed.append(line)
                continue
            found.append(Plugin(kind, ep.name, ep.value, _package(ep), obj))
        _loaded[kind], _failed[kind] = found, failed
    return list(_loaded[kind])


def failures(kind: str) -> list[str]:
    """The warning lines of the entries of `kind` that failed to import."""
    installed(kind)
    return list(_failed[kind])


def classes(kind: str, base: type) -> tuple[type, ...]:
    """The installed classes of a config kind (models, data, methods), checked against their base class and
    their discriminator; refuses to go on when implicitbias's own entries are missing (an uninstalled tree)."""
    tag = TAGS[kind]
    out, seen = [], {}
    for plugin in installed(kind):
        cls = plugin.obj
        if not (isinstance(cls, type) and issubclass(cls, base)):
            print(f"warning: the {kind} plugin {plugin.name!r} of package {plugin.package!r} names {cls!r}, not a "
                  f"{base.__name__} subclass; left out", file=sys.stderr)
            continue
        value = cls.model_fields[tag].default if tag in cls.model_fields else None
        if value in seen:
            print(f"warning: the {kind} plugin {plugin.name!r} of package {plugin.package!r} repeats {tag} = "
                  f"{value!r} of package {seen[value]!r}; left out", file=sys.stderr)
            continue
        seen[value] = plugin.package
        out.append(cls)
    if not any(p.package == "implicitbias" for p in installed(kind)):
        raise ImportError(f"implicitbias's own {kind} are not registered (entry-point group {GROUPS[kind]!r} is "
                          "empty): install the package, e.g. `pip install -e .` in the repository")
    return tuple(out)


def origins(kind: str) -> dict[str, str]:
    """{discriminator value: package} of the installed classes of a config kind."""
    tag = TAGS[kind]
    return {p.obj.model_fields[tag].default: p.package for p in installed(kind)
            if isinstance(p.obj, type) and tag in getattr(p.obj, "model_fields", {})}


def describe_tags(tags: list[str] | str) -> str:
    """'a (pkg), b (pkg)' for the tags of a refused union value: the installed kinds and their packages."""
    names = [t.strip(" '\"") for t in (tags.split(",") if isinstance(tags, str) else tags)]
    for kind in TAGS:
        if kind not in _loaded:
            continue
        where = origins(kind)
        if names and all(n in where for n in names):
            return ", ".join(f"{n!r} ({where[n]})" for n in names)
    return ", ".join(repr(n) for n in names)


def _package(ep) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "?"

