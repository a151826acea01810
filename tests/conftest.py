import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# no persistent compilation cache in tests: xdist workers would share one cache directory
os.environ["IMPLICITBIAS_JAX_CACHE"] = "0"

import jax  # noqa: E402
import pytest  # noqa: E402

import implicitbias  # noqa: E402,F401  (enables float64)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)
