"""The imports that stay inside functions, each deferring a heavy dependency on purpose.

Everywhere else an import sits at the top of its module.  `tests/test_layout.py` holds the code to this list: an
import inside a function that is not listed here fails the suite, and so does a listed one that is gone.  The
format of a line is "- module: imported name, imported name (why)".

- implicitbias.cli: implicitbias.experiments, implicitbias.experiments.runtimes, implicitbias.pipeline,
  implicitbias.pipeline.checks, implicitbias.pipeline.describe, implicitbias.reports (`implicitbias --help` and
  `implicitbias list` answer without loading JAX's programs, Dask and matplotlib: each command imports what it
  uses)
- implicitbias.data.classification: scipy.stats (about 0.3 s to import, in every process that loads the data
  package, a Dask worker's included; only the "condition" draw of linearly separable data uses it)
- implicitbias.data.real: sklearn.datasets (scikit-learn loads in about a second, and only the digits data set
  needs it)
- implicitbias.experiments.base: implicitbias.experiments.figures (matplotlib loads only when a figure is drawn:
  an experiment is defined, validated and run without it)
- implicitbias.metrics.fits: scipy.optimize, scipy.stats (each used by one fit only; scipy.optimize costs about
  0.3 s)
- implicitbias.reference._common: cvxpy (about 1.5 s to import; only the convex references solve with it)
- implicitbias.reference.greedy_low_rank: scipy.integrate (about 0.3 s to import; the package imports this module,
  so every process that loads the references paid it, a Dask worker's included, while only the greedy low-rank
  path of arora2019 integrates with it)
- implicitbias.reference.interpolators: cvxpy (as above)
- implicitbias.reference.multiclass_svm: cvxpy (as above)
- implicitbias.reference.svm: cvxpy (as above)
- implicitbias.reference.two_layer_min_norm: cvxpy (as above)
- implicitbias.storage.files: dask (only while a NetCDF file is read or written: dask's lock for netCDF4)
- implicitbias.sweeps.cluster: bokeh, dask_jobqueue (bokeh: a presence probe for the dashboard; dask-jobqueue:
  only for a SLURM or PBS cluster)
- implicitbias.theorems._small_init: scipy.stats (as implicitbias.data.classification; only the F-test bound of a
  small-init limit fit uses it)
- implicitbias.training.methods.gradient_flow: implicitbias.training.flow, implicitbias.training.sliding (diffrax,
  about 1 s, loads only when a gradient-flow run is stepped or, for kinks = "slide", its model checked, not when a
  config is validated)
- implicitbias.training.methods.mirror: implicitbias.reference (the reference solvers load scipy.optimize; only a
  mirror method's reference point needs them)
- implicitbias.training.train: tqdm.auto (only with a progress bar)
"""
