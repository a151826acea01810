"""The catalogue of named experiments, from the entry-point group `implicitbias.experiments` (see
`implicitbias.plugins`).  An entry names a module with a list `EXPERIMENTS`, an `Experiment`, a list of them, or a
function returning them.  The built-in papers register the same way, one entry per package of
`implicitbias.papers` (its `experiments` module), so the core names no paper."""

from __future__ import annotations

import difflib
import sys
import types

from implicitbias import plugins
from implicitbias._spec import ConfigError
from implicitbias.experiments.base import Experiment


def _experiments_of(obj) -> list:
    if isinstance(obj, types.ModuleType):
        return list(getattr(obj, "EXPERIMENTS", []))
    if isinstance(obj, Experiment):
        return [obj]
    if callable(obj):
        return list(obj())
    return list(obj)


#: the package that holds the built-in papers, one subpackage each
PAPERS = "implicitbias.papers"


def home_of(target: str) -> str:
    """The Python package that holds an entry point's target ("implicitbias.papers.chistikov2023.experiments" ->
    "implicitbias.papers.chistikov2023", "my_plugin.experiment:EXPERIMENTS" -> "my_plugin")."""
    parts = target.split(":")[0].split(".")
    depth = len(PAPERS.split(".")) + 1 if target.startswith(PAPERS + ".") else 1
    return ".".join(parts[:depth])


def short_home(home: str) -> str:
    """A home package as `implicitbias list` shows it: a built-in paper's own name ("chistikov2023"), a plugin's
    package as it is."""
    return home.removeprefix(PAPERS + ".")


def _catalogue() -> tuple[dict[str, Experiment], dict[str, str], dict[str, str]]:
    """Every installed experiment by name, the distribution package of each and the Python package that holds it
    (one pass over the entry points)."""
    out: dict[str, Experiment] = {}
    sources: dict[str, str] = {}
    homes: dict[str, str] = {}
    for plugin in plugins.installed("experiments"):
        try:
            found = _experiments_of(plugin.obj)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the catalogue
            print(f"warning: the experiments plugin {plugin.name!r} of package {plugin.package!r} failed "
                  f"({type(exc).__name__}: {exc}); left out", file=sys.stderr)
            continue
        for exp in found:
            if not isinstance(exp, Experiment):
                continue
            if exp.name in out:
                print(f"warning: experiment {exp.name!r} of package {plugin.package!r} repeats a name of package "
                      f"{sources[exp.name]!r}; left out", file=sys.stderr)
                continue
            out[exp.name], sources[exp.name], homes[exp.name] = exp, plugin.package, home_of(plugin.target)
    return out, sources, homes


def catalog() -> dict[str, Experiment]:
    """Every installed experiment by name: implicitbias's own, then the plugins' (a plugin's experiment whose
    name is taken is left out, with a warning)."""
    return _catalogue()[0]


def sources() -> dict[str, str]:
    """The package that provides each catalogued experiment, by name."""
    return _catalogue()[1]


def homes() -> dict[str, str]:
    """The Python package that holds each catalogued experiment, by name: a built-in paper's package
    ("implicitbias.papers.chistikov2023") or a plugin's ("implicitbias_quadratic")."""
    return _catalogue()[2]


def source(name: str) -> str:
    """The package that provides the catalogued experiment `name` (KeyError when it is not catalogued)."""
    return sources()[name]


def nearest_names(name: str, names, n: int = 3) -> list[str]:
    """The (at most n) names nearest to a mistyped `name`: those containing it (case aside: "kou" finds
    kou2023-rates), then difflib's closest spellings ("chistikov-fig1" finds chistikov2023-fig1)."""
    names = sorted(names)
    inside = [m for m in names if len(name) >= 3 and name.lower() in m.lower()]
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
    return list(dict.fromkeys(inside + close))[:n]


def get(name: str) -> Experiment:
    """The catalogued experiment of this name (refused in one line with the nearest names, if any)."""
    experiments = catalog()
    if name not in experiments:
        near = nearest_names(str(name), experiments)
        guess = f": did you mean {' or '.join([', '.join(near[:-1]), near[-1]] if len(near) > 1 else near)}?" \
            if near else ""
        raise ConfigError(f"unknown experiment {name!r}{guess} (`implicitbias list` lists all {len(experiments)})")
    return experiments[name]
