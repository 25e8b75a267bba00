"""The bytes of a checkpoint on disk, for the Python tests that damage one
(the counterpart of file_bytes.hpp). Needs h5py."""
import h5py


def data_offset(path, fqn):
    """The file offset of the first byte of tensor or value `fqn`: its
    dataset's, or its place in its dtype's pack (format 1.2, docs/FORMAT.md,
    "Packed tensors"); None when it has no data in the file."""
    with h5py.File(path, "r") as f:
        if fqn in f:
            return f[fqn].id.get_offset()
        if "%packs/index" not in f:
            return None
        for row in f["%packs/index"][...]:
            if bytes(row["fqn"]).rstrip(b"\0").decode() == fqn:
                pack = f["%packs/" + bytes(row["dtype"]).rstrip(b"\0").decode()]
                return pack.id.get_offset() + int(row["offset"]) * pack.dtype.itemsize
    return None
