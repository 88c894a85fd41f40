"""HDF5 episode datasets (robomimic and ALOHA/ACT layouts) with LeRobot sample keys."""

from embodied_data.hdf5.dataset import Hdf5Dataset, build_hdf5_dataset, decode_jpeg
from embodied_data.hdf5.layouts import Hdf5Episode, Hdf5Index, Source, scan_hdf5

__all__ = ["Hdf5Dataset", "Hdf5Episode", "Hdf5Index", "Source", "build_hdf5_dataset", "decode_jpeg", "scan_hdf5"]
