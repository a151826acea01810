"""Storage of results, one module per job:

- `files`: atomic, interrupt-safe writes; one `xarray.Dataset` saved to and loaded from NetCDF (`save`, `load`);
- `store`: the run files of a sweep (`RunStore`: one file per finished run, its data sets, its failures);
- `datasets`: data sets as xarray (`data_to_xarray`, `data_from_xarray`);
- `stacked`: the stacked results file, results.nc (`save_results`, `load_results`);
- `lock`: one command at a time in an output directory.

Attribute encoding (configs and metadata as YAML/JSON text) is `implicitbias.attributes`, shared with training.
"""

from implicitbias.storage.datasets import data_from_xarray, data_to_xarray
from implicitbias.storage.files import DiskFull, atomic_file, load, save
from implicitbias.storage.stacked import load_results, save_results
from implicitbias.storage.store import RunStore

__all__ = ["DiskFull", "RunStore", "atomic_file", "data_from_xarray", "data_to_xarray", "load", "load_results",
           "save", "save_results"]
