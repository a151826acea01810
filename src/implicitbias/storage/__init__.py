"""Storage of results: xarray Datasets in NetCDF."""

from implicitbias.storage.results import config_of, load, save, theta_of, to_dataset

__all__ = ["config_of", "load", "save", "theta_of", "to_dataset"]
