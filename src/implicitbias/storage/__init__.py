"""Storage of results: xarray Datasets in NetCDF; a store of finished runs; `results.nc`."""

from implicitbias.storage.results import load, load_results, save, save_results, theta_of, to_dataset
from implicitbias.storage.store import RunStore

__all__ = ["RunStore", "load", "load_results", "save", "save_results", "theta_of", "to_dataset"]
