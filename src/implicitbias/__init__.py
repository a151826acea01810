"""implicitbias: a laboratory for the implicit bias of gradient-based training.

Importing the package enables float64 in JAX: every number the tool reports is
computed in double precision unless a model or a run asks for float32 explicitly.
It also turns on JAX's persistent compilation cache (under ~/.cache/implicitbias, or
$IMPLICITBIAS_CACHE_DIR; set IMPLICITBIAS_JAX_CACHE=0 to disable it).  Programs that compile in under
0.5 s are not written to it; $IMPLICITBIAS_CACHE_MIN_COMPILE_S changes that threshold (the test suite
sets 0: its many processes compile the same small programs).
"""

# helper modules under private names: `dir(implicitbias)` and tab completion show the package's own names only
import time as _time

#: (wall clock, this process's CPU seconds) when the package was first imported: a run's start-up is measured
#: from them (`implicitbias.pipeline.api._startup_s`)
_IMPORTED_AT = (_time.perf_counter(), _time.process_time())

import importlib as _importlib  # noqa: E402
import os as _os  # noqa: E402
from importlib.metadata import PackageNotFoundError as _PackageNotFoundError  # noqa: E402
from importlib.metadata import version as _version  # noqa: E402

# equinox (under diffrax) raises its runtime errors through a host callback by default, and JAX never
# writes a program with a host callback to the persistent cache: every gradient-flow program would be
# recompiled in every process (~10 s each).  With "nan" a failed runtime check fills the outputs with NaN,
# which `train` reports as a diverged run with its step.  Set EQX_ON_ERROR=raise to debug.
_os.environ.setdefault("EQX_ON_ERROR", "nan")


def _xla_cpu_defaults() -> None:
    """XLA's newer CPU fusion emitters compile our programs (adaptive solvers: many small fused loops) slower
    and, for the two-layer GD runs, also run them slower.  Measured with jaxlib 0.10.2 on a 2-core CPU
    (`python benchmarks/bench_xla_flags.py`, medians of 2): XLA compile of a small gradient-flow run 3.4 s ->
    2.1 s; frei2023-kkt --quick 27.8 s -> 21.8 s, chistikov2023-fig1 --quick 15.0 s -> 13.4 s.  Set before JAX
    creates its CPU client, only for the jaxlib versions where the flag was measured (XLA aborts on a flag it
    does not know), and never over the user's own XLA_FLAGS choice; IMPLICITBIAS_XLA_DEFAULTS=0 turns it off."""
    flags = _os.environ.get("XLA_FLAGS", "")
    if _os.environ.get("IMPLICITBIAS_XLA_DEFAULTS", "1") == "0" or "xla_cpu_use_fusion_emitters" in flags:
        return
    try:
        major_minor = tuple(int(x) for x in _version("jaxlib").split(".")[:2])
    except (_PackageNotFoundError, ValueError):
        return
    if major_minor == (0, 10):
        _os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_use_fusion_emitters=false").strip()


_xla_cpu_defaults()

import jax as _jax  # noqa: E402

_jax.config.update("jax_enable_x64", True)
if _os.environ.get("IMPLICITBIAS_JAX_CACHE", "1") != "0":
    # compiled programs are cached on disk: a second run of the same experiment skips XLA compilation
    _cache = _os.environ.get("IMPLICITBIAS_CACHE_DIR", _os.path.join(_os.path.expanduser("~"), ".cache", "implicitbias"))
    _jax.config.update("jax_compilation_cache_dir", _os.path.join(_cache, "jax"))
    _jax.config.update("jax_persistent_cache_min_compile_time_secs",
                       float(_os.environ.get("IMPLICITBIAS_CACHE_MIN_COMPILE_S", "0.5")))

from implicitbias._spec import ConfigError, Spec  # noqa: E402

__version__ = "0.1.0"

#: names imported on first use: `import implicitbias` stays light (the command line starts in about a second)
_LAZY = {
    "run": "implicitbias.pipeline.api",
    "report": "implicitbias.pipeline.api",
    "load": "implicitbias.pipeline.api",
    "Experiment": "implicitbias.experiments.base",
    "Figure": "implicitbias.experiments.base",
    "ExperimentConfig": "implicitbias.experiments.config",
    "Results": "implicitbias.runs.results",
    "RunSpec": "implicitbias.runs.spec",
}


def __getattr__(name: str):
    """`implicitbias.run`, `implicitbias.load`, ... imported when first used."""
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'implicitbias' has no attribute {name!r}")


__all__ = ["ConfigError", "Experiment", "ExperimentConfig", "Figure", "Results", "RunSpec", "Spec", "__version__",
           "load", "report", "run"]


def __dir__() -> list[str]:
    """The public names (`__all__`), the lazily imported ones included, without the modules the package uses."""
    return sorted(__all__)
