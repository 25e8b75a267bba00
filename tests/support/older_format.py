"""A checkpoint rewritten as format 1.1 wrote it (docs/FORMAT.md, "Versions"):
each packed tensor a dataset of its own with its attributes, every string
attribute variable-length, the version [1, 1]. The tests that format 1.0 and
1.1 files still load (the CLI's and the Python package's) make theirs so.
Needs h5py and numpy."""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from read_with_h5py import unescape  # noqa: E402  (docs/FORMAT.md's worked example)


def _text(value):
    return bytes(value).rstrip(b"\0").decode()


def _unpack(f):
    """Each row of `%packs/index` as the dataset 1.1 wrote: the same bytes,
    the same chunk and checksum attributes. Returns the rows unpacked."""
    if "%packs" not in f:
        return 0
    rows = f["%packs/index"][...]
    for row in rows:
        fqn, pack = _text(row["fqn"]), f["%packs/" + _text(row["dtype"])]
        shape = tuple(int(n) for n in row["shape"][:row["ndim"]])
        count, offset = int(row["count"]), int(row["offset"])
        element = pack.id.get_type()
        raw = np.empty(count, "V%d" % element.get_size())  # the stored bytes, unconverted
        if count:
            selected = pack.id.get_space()
            selected.select_hyperslab((offset,), (count,))
            pack.id.read(h5py.h5s.create_simple((count,)), selected, raw, element)
        space = h5py.h5s.create_simple(shape) if shape else h5py.h5s.create(h5py.h5s.SCALAR)
        dataset = h5py.Dataset(h5py.h5d.create(f.id, fqn.encode(), element, space))
        if count:
            dataset.id.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, element)
        dataset.attrs["h5dcp.key"] = unescape(fqn.rpartition("/")[2])
        dataset.attrs["h5dcp.kind"] = "tensor"
        dataset.attrs["h5dcp.dtype"] = _text(row["dtype"])
        if shape:
            dataset.attrs["h5dcp.chunk_offsets"] = np.zeros((1, len(shape)), "<i8")
            dataset.attrs["h5dcp.chunk_sizes"] = np.array([shape], "<i8")
        if count:
            dataset.attrs["h5dcp.checksum_rows"] = np.array([row["checksum_rows"]], "<i8")
            dataset.attrs["h5dcp.checksums"] = np.array([row["checksum"]], "<u8")
    del f["%packs"]
    return len(rows)


def _variable_length_strings(f):
    """Every fixed-length string attribute rewritten variable-length (as h5py
    writes a str). Returns how many."""
    rewritten = []

    def rewrite(_, obj):
        for name in [a for a in obj.attrs if obj.attrs.get_id(a).dtype.kind == "S"]:
            text = obj.attrs[name].decode()
            del obj.attrs[name]
            obj.attrs[name] = text
            rewritten.append(name)

    rewrite("/", f)
    f.visititems(rewrite)
    return len(rewritten)


def as_format_1_1(path):
    """Rewrites the checkpoint at `path` in place; returns (packed tensors
    unpacked, string attributes rewritten)."""
    with h5py.File(path, "r+") as f:
        unpacked = _unpack(f)
        strings = _variable_length_strings(f)
        f.attrs["h5dcp.format_version"] = np.array([1, 1], "<i8")
    return unpacked, strings
