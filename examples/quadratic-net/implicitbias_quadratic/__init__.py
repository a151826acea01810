"""implicitbias-quadratic: an example plugin for implicitbias.

It adds a two-layer network with quadratic activation (`model.QuadraticNet`), its teacher data
(`data.QuadraticTeacher`), the small-initialisation bias toward low nuclear norm of Li, Ma & Zhang 2018
(`theorem.LiMaZhang2018`) and one experiment (`experiment.EXPERIMENTS`), all registered through entry points.
The package imports nothing here: implicitbias loads each entry point while it builds its own registries, so a
module of the plugin must import only implicitbias's leaf modules (e.g. `implicitbias.data.dataset`, not
`implicitbias.data`)."""

# implicitbias's registries first: a plugin module imported before them (`from implicitbias_quadratic.data import
# QuadraticTeacher` in a fresh process) would otherwise be loaded as an entry point while half-initialised
import implicitbias.data  # noqa: E402, F401
import implicitbias.models  # noqa: E402, F401
