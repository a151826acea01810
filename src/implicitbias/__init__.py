"""implicitbias: a laboratory for the implicit bias of gradient-based training.

Importing the package enables float64 in JAX: every number the tool reports is
computed in double precision unless a model or a run asks for float32 explicitly.
It also turns on JAX's persistent compilation cache (under ~/.cache/implicitbias, or
$IMPLICITBIAS_CACHE_DIR; set IMPLICITBIAS_JAX_CACHE=0 to disable it).
"""

import os

import jax

jax.config.update("jax_enable_x64", True)
if os.environ.get("IMPLICITBIAS_JAX_CACHE", "1") != "0":
    # compiled programs are cached on disk: a second run of the same experiment skips XLA compilation
    _cache = os.environ.get("IMPLICITBIAS_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "implicitbias"))
    jax.config.update("jax_compilation_cache_dir", os.path.join(_cache, "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)

from implicitbias._spec import ConfigError, Spec  # noqa: E402

__version__ = "0.1.0"

__all__ = ["ConfigError", "Spec", "__version__"]
