"""The built-in papers: one package per reproduced paper (or per family of short systems, named after every
paper it holds), each with that paper's data generators, references, theorems, the metrics only it uses and its
experiments, registered through the same entry-point groups as a plugin package (`implicitbias.data`,
`implicitbias.theorems`, `implicitbias.experiments`; see `implicitbias.plugins` and examples/quadratic-net).

The core (models, data, training, metrics, reference, theorems, experiments, runs, storage, sweeps, pipeline,
reports) names no paper and imports no paper package; a paper package imports the core, and may build on another
paper's package (Boursier et al. on Chistikov et al.'s network, Ji & Telgarsky on Soudry et al.'s data checks).
"""

# the core's registries first: a paper module imported before them (`from implicitbias.papers.chistikov2023.data
# import TeacherNeuron` in a fresh process) would otherwise be loaded as an entry point while half-initialised
import implicitbias.data  # noqa: E402, F401
import implicitbias.models  # noqa: E402, F401
