"""The pipeline: `run` an experiment from config to report, `report` a finished run directory again, `load` its
results.  The command line, a notebook and a cluster job call these same functions.

preflight: every check made before anything is written; definitions: catalogued and notebook-defined
experiments; checks: the verdicts of an experiment's theorems and claims; outputs: the files a run writes.
"""

from implicitbias.pipeline.api import RunRecord, load, report, run

__all__ = ["RunRecord", "load", "report", "run"]
