"""implicitbias: a laboratory for the implicit bias of gradient-based training.

Importing the package enables float64 in JAX: every number the tool reports is
computed in double precision unless a model or a run asks for float32 explicitly.
"""

import jax

jax.config.update("jax_enable_x64", True)

from implicitbias._spec import ConfigError, Spec  # noqa: E402

__version__ = "0.1.0"

__all__ = ["ConfigError", "Spec", "__version__"]
