"""Reading a block of a tensor (any box of its global shape) as it is stored,
optionally checking the XXH3-64 of every checksum slab the block touches:
those slabs are read whole, hashed, and the block is cut out of them, as the
C++ library's verified reads do (docs/FORMAT.md, "Checksums")."""

import math

import h5py
import numpy as np
import torch

from ._errors import ChecksumError, FormatError, MissingDependencyError
from ._format import check_storage


def xxh3():
    """xxhash's XXH3-64 (seed 0) as a function of bytes to int."""
    try:
        import xxhash
    except ImportError:
        raise MissingDependencyError(
            "h5dcp: checking checksums needs the xxhash package, which is not installed: "
            "pip install xxhash (or pip install 'h5dcp[verify]'), or pass verify=False") from None
    return xxhash.xxh3_64_intdigest


def read_raw(ds, info, start, count):
    """The stored elements of the box [start, start + count) as a numpy array
    of info.numpy_dtype, copied without conversion."""
    out = np.empty(tuple(count), info.numpy_dtype)
    if out.size == 0:
        return out
    ftype = ds.id.get_type()
    if info.pack_offset is not None:
        # A packed tensor (format 1.2): its elements are one range of `ds`, its
        # dtype's pack; it is small, so it is read whole and the box cut out.
        n = math.prod(info.shape)
        whole = np.empty((n,), info.numpy_dtype)
        file_space = ds.id.get_space()
        file_space.select_hyperslab((info.pack_offset,), (n,))
        ds.id.read(h5py.h5s.create_simple((n,)), file_space, whole, ftype)
        box = tuple(slice(int(s), int(s) + int(c)) for s, c in zip(start, count))
        out[...] = whole.reshape(info.shape)[box]
        return out
    if not info.shape:
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, ftype)
        return out
    file_space = ds.id.get_space()
    file_space.select_hyperslab(tuple(int(x) for x in start), tuple(int(x) for x in count))
    ds.id.read(h5py.h5s.create_simple(tuple(count)), file_space, out, ftype)
    return out


def slabs(info):
    """Every checksum slab of a tensor: (start, count, digest), chunk after chunk."""
    for chunk in info.chunks:
        rows = chunk.sizes[0]
        for s, digest in enumerate(chunk.checksums):
            r0 = s * chunk.slab_rows
            r1 = min(r0 + chunk.slab_rows, rows)
            yield (chunk.offsets[0] + r0,) + chunk.offsets[1:], (r1 - r0,) + chunk.sizes[1:], digest


def _mismatch(info, start, path):
    return ChecksumError("h5dcp: '%s': tensor '%s': the slab at %s does not match its checksum (the file is damaged)"
                         % (path, info.fqn, list(start)), [(info.fqn, "slab at %s" % list(start))])


def read_block(ds, info, start, count, verify=False, path=""):
    """The box [start, start + count) of the tensor `info` (dataset `ds`) as
    stored. With verify, every slab it touches is checked (files without
    checksums are read unchecked); ChecksumError names the tensor and slab."""
    start, count = tuple(start), tuple(count)
    check_storage(ds, info.fqn)  # the file may have changed since the tree was checked (DCPReader reopens it)
    if any(s < 0 or c < 0 or s + c > n for s, c, n in zip(start, count, info.shape)) or len(start) != len(info.shape):
        raise FormatError("h5dcp: tensor '%s': the block at %s of size %s lies outside its shape %s"
                          % (info.fqn, list(start), list(count), list(info.shape)))
    if not verify or not info.checksummed or 0 in count:
        return read_raw(ds, info, start, count)
    hash_of = xxh3()
    if not info.shape:
        out = read_raw(ds, info, start, count)
        if hash_of(out.tobytes()) != info.scalar_checksum:
            raise _mismatch(info, start, path)
        return out
    out = np.empty(count, info.numpy_dtype)
    for slab_start, slab_count, digest in slabs(info):
        low = [max(a, b) for a, b in zip(slab_start, start)]
        high = [min(a + n, b + m) for a, n, b, m in zip(slab_start, slab_count, start, count)]
        if any(lo >= hi for lo, hi in zip(low, high)):
            continue
        slab = read_raw(ds, info, slab_start, slab_count)
        if hash_of(slab.tobytes()) != digest:
            raise _mismatch(info, slab_start, path)
        into = tuple(slice(lo - s, hi - s) for lo, hi, s in zip(low, high, start))
        outof = tuple(slice(lo - s, hi - s) for lo, hi, s in zip(low, high, slab_start))
        out[into] = slab[outof]
    return out


def as_tensor(raw, info):
    """A numpy array read by read_raw as a torch tensor of the stored dtype,
    sharing its memory. bool tensors must hold only 0 and 1."""
    if info.name == "bool" and raw.size and not np.all((raw == 0) | (raw == 1)):
        raise FormatError("h5dcp: bool tensor '%s' holds values other than 0 and 1" % info.fqn)
    tensor = torch.from_numpy(raw)
    return tensor if tensor.dtype == info.dtype else tensor.view(info.dtype)
