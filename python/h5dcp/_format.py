"""The h5dcp container format as docs/FORMAT.md defines it: the root
attributes, the tree of groups and datasets, the element types, the chunk and
checksum attributes and the non-tensor values. Everything read from the file
is checked before it is used; nothing in it is executed."""

import dataclasses
import struct

import h5py
import numpy as np
import torch

from ._errors import FormatError, PickledObject

KNOWN_MAJOR = 1

# h5dcp.dtype -> (torch dtype, numpy dtype the stored bytes are read into,
# HDF5 type class). numpy has no bfloat16, float8 or complex32: those are read
# as integers of their size and viewed as the torch dtype, so no conversion
# ever touches a value (NaN payloads, float8's special codes, signed zeros).
_F, _I, _E, _C = h5py.h5t.FLOAT, h5py.h5t.INTEGER, h5py.h5t.ENUM, h5py.h5t.COMPOUND
DTYPES = {
    "float64": (torch.float64, np.float64, _F),
    "float32": (torch.float32, np.float32, _F),
    "float16": (torch.float16, np.float16, _F),
    "bfloat16": (torch.bfloat16, np.int16, _F),
    "int64": (torch.int64, np.int64, _I),
    "int32": (torch.int32, np.int32, _I),
    "int16": (torch.int16, np.int16, _I),
    "int8": (torch.int8, np.int8, _I),
    "uint8": (torch.uint8, np.uint8, _I),
    "bool": (torch.bool, np.int8, _E),
    "uint16": (torch.uint16, np.uint16, _I),
    "uint32": (torch.uint32, np.uint32, _I),
    "uint64": (torch.uint64, np.uint64, _I),
    "float8_e4m3fn": (torch.float8_e4m3fn, np.uint8, _F),
    "float8_e5m2": (torch.float8_e5m2, np.uint8, _F),
    "float8_e4m3fnuz": (torch.float8_e4m3fnuz, np.uint8, _F),
    "float8_e5m2fnuz": (torch.float8_e5m2fnuz, np.uint8, _F),
    "float8_e8m0fnu": (torch.float8_e8m0fnu, np.uint8, _I),
    "complex32": (torch.complex32, np.int32, _C),
    "complex64": (torch.complex64, np.complex64, _C),
    "complex128": (torch.complex128, np.complex128, _C),
}
DTYPE_NAMES = {torch_dtype: name for name, (torch_dtype, _, _) in DTYPES.items()}

VALUE_KINDS = ("none", "int", "float", "bool", "str", "bytes", "pickle")


def escape_key(key):
    """The link name of a dict key or list position (docs/FORMAT.md, "Key escaping")."""
    if key == "":
        return "%"
    if key == ".":
        return "%2E"
    return key.replace("%", "%25").replace("/", "%2F")


def open_checkpoint(path):
    """The h5py file at `path`, read-only, after checking it is an h5dcp
    checkpoint of a format version this package reads."""
    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FormatError("h5dcp: '%s' is not an HDF5 file (%s)" % (path, e)) from None
    try:
        version = f.attrs.get("h5dcp.format_version")
        if version is None:
            raise FormatError("h5dcp: '%s' is not an h5dcp checkpoint (no h5dcp.format_version at its root)" % path)
        version = np.asarray(version)
        if version.shape != (2,) or version.dtype.kind not in "iu":
            raise FormatError("h5dcp: '%s' has a malformed h5dcp.format_version" % path)
        major, minor = int(version[0]), int(version[1])
        if major != KNOWN_MAJOR:
            raise FormatError("h5dcp: '%s' has format version %d.%d; this h5dcp package reads %d.x: upgrade it"
                              % (path, major, minor, KNOWN_MAJOR))
    except BaseException:
        f.close()
        raise
    return f


def text_attr(obj, name, fqn):
    """The string attribute `name` of `obj`; FormatError naming `fqn` when it is missing or not text."""
    value = obj.attrs.get(name)
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            value = None
    if not isinstance(value, str):
        raise FormatError("h5dcp: '%s' has %s attribute %s" % (fqn or "/", "no" if value is None else "a malformed", name))
    return value


def int_matrix_attr(obj, name, fqn, shape):
    """The integer attribute `name` as an int64 array of `shape`."""
    value = obj.attrs.get(name)
    if value is None:
        raise FormatError("h5dcp: tensor '%s' has no %s attribute" % (fqn, name))
    value = np.asarray(value)
    if value.dtype.kind not in "iu" or value.shape != shape:
        raise FormatError("h5dcp: tensor '%s' has a malformed %s attribute (%s %s, expected shape %s)"
                          % (fqn, name, value.dtype, value.shape, shape))
    return value.astype(np.int64)


@dataclasses.dataclass
class Chunk:
    """One block a tensor was written in: global offsets and sizes, and its
    checksum slabs (rows per slab, and the digest of each slab)."""
    offsets: tuple
    sizes: tuple
    slab_rows: int
    checksums: list


@dataclasses.dataclass
class TensorInfo:
    """A tensor dataset, checked: where it is, its dtype and global shape, and
    the chunks it was saved in (empty for a file without chunk attributes)."""
    fqn: str
    name: str        # h5dcp.dtype
    dtype: torch.dtype
    numpy_dtype: type
    shape: tuple
    chunks: list
    checksummed: bool
    scalar_checksum: object = None  # a 0-d tensor's digest


def _check_type(ds, name, fqn):
    """Refuses a dataset whose HDF5 type is not the one FORMAT.md gives `name`:
    its bytes are copied as they are, so class, size and byte order must match."""
    _, numpy_dtype, type_class = DTYPES[name]
    ftype = ds.id.get_type()
    size = np.dtype(numpy_dtype).itemsize
    ok = ftype.get_class() == type_class and ftype.get_size() == size
    if ok and type_class in (_F, _I):
        ok = ftype.get_order() == h5py.h5t.ORDER_LE
    if ok and type_class == _I and name != "float8_e8m0fnu":
        signed = name.startswith("int")
        ok = (ftype.get_sign() == h5py.h5t.SGN_2) == signed
    if not ok:
        raise FormatError("h5dcp: tensor '%s' says dtype %s but its HDF5 type is %s (%d bytes)"
                          % (fqn, name, type(ftype).__name__, ftype.get_size()))


def tensor_info(ds, fqn):
    """The checked TensorInfo of the tensor dataset `ds`."""
    name = text_attr(ds, "h5dcp.dtype", fqn)
    if name not in DTYPES:
        raise FormatError("h5dcp: tensor '%s' has unknown dtype '%s'" % (fqn, name))
    _check_type(ds, name, fqn)
    shape = tuple(int(s) for s in (ds.shape or ()))
    torch_dtype, numpy_dtype, _ = DTYPES[name]
    info = TensorInfo(fqn, name, torch_dtype, numpy_dtype, shape, [], False)
    stored = ds.attrs.get("h5dcp.checksums")
    if not shape:
        if stored is not None:
            stored = np.asarray(stored)
            if stored.dtype.kind not in "iu" or stored.shape != (1,):
                raise FormatError("h5dcp: tensor '%s' has a malformed h5dcp.checksums attribute" % fqn)
            info.checksummed = True
            info.scalar_checksum = int(stored[0])
        return info
    if "h5dcp.chunk_offsets" not in ds.attrs:
        return info
    count = np.asarray(ds.attrs["h5dcp.chunk_offsets"]).shape[0] if np.ndim(ds.attrs["h5dcp.chunk_offsets"]) == 2 else -1
    if count < 0:
        raise FormatError("h5dcp: tensor '%s' has a malformed h5dcp.chunk_offsets attribute" % fqn)
    offsets = int_matrix_attr(ds, "h5dcp.chunk_offsets", fqn, (count, len(shape)))
    sizes = int_matrix_attr(ds, "h5dcp.chunk_sizes", fqn, (count, len(shape)))
    for c in range(count):
        for d in range(len(shape)):
            if offsets[c, d] < 0 or sizes[c, d] < 0 or offsets[c, d] + sizes[c, d] > shape[d]:
                raise FormatError("h5dcp: tensor '%s': chunk %d lies outside its shape %s" % (fqn, c, list(shape)))
    rows = [0] * count
    digests = [[] for _ in range(count)]
    if stored is not None:
        rows = int_matrix_attr(ds, "h5dcp.checksum_rows", fqn, (count,))
        stored = np.asarray(stored)
        if stored.dtype.kind not in "iu" or stored.ndim != 1:
            raise FormatError("h5dcp: tensor '%s' has a malformed h5dcp.checksums attribute" % fqn)
        at = 0
        for c in range(count):
            if int(np.prod(sizes[c])) == 0:
                continue
            if rows[c] <= 0:
                raise FormatError("h5dcp: tensor '%s': chunk %d has %d rows per checksum slab" % (fqn, c, rows[c]))
            slabs = -(-int(sizes[c, 0]) // int(rows[c]))
            digests[c] = [int(x) for x in stored[at:at + slabs]]
            at += slabs
        if at != stored.shape[0]:
            raise FormatError("h5dcp: tensor '%s' has %d checksums for %d slabs" % (fqn, stored.shape[0], at))
        info.checksummed = True
    info.chunks = [Chunk(tuple(int(x) for x in offsets[c]), tuple(int(x) for x in sizes[c]), int(rows[c]), digests[c])
                   for c in range(count)]
    return info


def check_tiling(info):
    """A message when the chunks of `info` do not tile its shape exactly (no
    gap, no overlap), else None. Chunks lie inside the shape (tensor_info checked)."""
    total = int(np.prod(info.shape)) if info.shape else 1
    covered = sum(int(np.prod(c.sizes)) for c in info.chunks)
    if covered != total:
        return "its chunks cover %d of %d elements" % (covered, total)
    boxes = [c for c in info.chunks if int(np.prod(c.sizes)) > 0]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if all(max(x, y) < min(x + s, y + t) for x, s, y, t in zip(a.offsets, a.sizes, b.offsets, b.sizes)):
                return "chunks at %s and %s overlap" % (list(a.offsets), list(b.offsets))
    return None


def value_of(ds, kind, fqn):
    """A non-tensor value as Python reads it, and its payload (the bytes its
    checksum covers): None, int, float, bool, str, bytes or PickledObject."""
    if kind not in VALUE_KINDS:
        raise FormatError("h5dcp: value '%s' has unknown kind '%s'" % (fqn, kind))
    if kind == "none":
        return None, b""
    if kind in ("int", "float", "bool"):
        fmt, size, type_class = {"int": ("<q", 8, _I), "float": ("<d", 8, _F), "bool": ("<B", 1, _E)}[kind]
        ftype = ds.id.get_type()
        if ds.shape != () or ftype.get_size() != size or ftype.get_class() != type_class:
            raise FormatError("h5dcp: value '%s' is not a scalar %s of %d bytes" % (fqn, kind, size))
        raw = np.empty((), {8: np.uint64, 1: np.uint8}[size])
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, ds.id.get_type())
        payload = raw.tobytes()
        value = struct.unpack(fmt, payload)[0]
        return (value != 0 if kind == "bool" else value), payload
    if kind == "str":
        if ds.shape != () or ds.id.get_type().get_class() != h5py.h5t.STRING:
            raise FormatError("h5dcp: value '%s' is not a scalar string" % fqn)
        payload = ds[()]
        payload = payload if isinstance(payload, bytes) else str(payload).encode()
        try:
            return payload.decode("utf-8"), payload
        except UnicodeDecodeError:
            raise FormatError("h5dcp: value '%s' is not UTF-8 text" % fqn) from None
    if ds.ndim != 1 or ds.id.get_type().get_size() != 1:
        raise FormatError("h5dcp: value '%s' is not a 1-D byte array" % fqn)
    payload = ds[()].tobytes() if ds.shape[0] else b""
    return (bytes(payload) if kind == "bytes" else PickledObject(payload)), payload


def value_checksum(ds, fqn):
    """The stored XXH3-64 of a value's payload, or None when the file has none."""
    stored = ds.attrs.get("h5dcp.checksums")
    if stored is None:
        return None
    stored = np.asarray(stored)
    if stored.dtype.kind not in "iu" or stored.shape != (1,):
        raise FormatError("h5dcp: value '%s' has a malformed h5dcp.checksums attribute" % fqn)
    return int(stored[0])


def children(group, fqn):
    """The children of a dict or list group as (key, link name, object), in
    file order for a dict and in position order for a list, with the container
    kind. Checks the keys against the link names and a list's positions."""
    kind = text_attr(group, "h5dcp.container", fqn) if fqn else "dict"
    if kind not in ("dict", "list"):
        raise FormatError("h5dcp: group '%s' has unknown container kind '%s'" % (fqn, kind))
    out = []
    for link, obj in group.items():
        child = link if not fqn else fqn + "/" + link
        key = text_attr(obj, "h5dcp.key", child)
        if escape_key(key) != link:
            raise FormatError("h5dcp: '%s' has key %r, which is not its link name" % (child, key))
        out.append((key, link, obj))
    if kind == "list":
        by_position = {entry[0]: entry for entry in out}
        if sorted(by_position) != sorted(str(i) for i in range(len(out))):
            raise FormatError("h5dcp: list '%s' does not hold the elements 0..%d" % (fqn, len(out) - 1))
        out = [by_position[str(i)] for i in range(len(out))]
    return kind, out


def leaf_kind(ds, fqn):
    """h5dcp.kind of a dataset: "tensor" or one of VALUE_KINDS."""
    kind = text_attr(ds, "h5dcp.kind", fqn)
    if kind != "tensor" and kind not in VALUE_KINDS:
        raise FormatError("h5dcp: '%s' has unknown kind '%s'" % (fqn, kind))
    return kind
