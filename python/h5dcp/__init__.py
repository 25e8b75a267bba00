"""h5dcp for Python: read checkpoints written by the h5dcp C++ library (one
HDF5 file, docs/FORMAT.md) with h5py and torch, no compiled part.

    import h5dcp
    state = h5dcp.load_state_dict("ckpt.h5")                 # nested dict, bit for bit
    model.load_state_dict(h5dcp.load_state_dict("ckpt.h5", prefix="model"))
    h5dcp.verify("ckpt.h5")                                  # every XXH3 checksum
    dcp.load(state_dict, storage_reader=h5dcp.DCPReader("ckpt.h5"))  # DTensor/FSDP, any ranks

DCPReader is imported on first use, so that load_state_dict and verify work
where torch.distributed is not built.
"""

from ._errors import ChecksumError, FormatError, MissingDependencyError, PickledObject
from ._state_dict import load_state_dict
from ._verify import VerifyReport, verify

__version__ = "0.1.0"
__all__ = ["load_state_dict", "verify", "VerifyReport", "DCPReader", "FormatError", "ChecksumError",
           "MissingDependencyError", "PickledObject", "__version__"]


def __getattr__(name):
    if name == "DCPReader":
        from ._dcp_reader import DCPReader
        return DCPReader
    raise AttributeError("module 'h5dcp' has no attribute %r" % name)
