"""The h5dcp container format as docs/FORMAT.md defines it: the root
attributes, the tree of groups and datasets, the element types, the chunk and
checksum attributes and the non-tensor values. Everything read from the file
is checked before it is used; nothing in it is executed."""

import dataclasses
import math
import struct

import h5py
import numpy as np
import torch

from ._errors import FormatError, PickledObject, reading

KNOWN_MAJOR = 1
# Format 1.2 packs small tensors saved whole (docs/FORMAT.md, "Packed tensors").
PACKS = "%packs"
PACK_MAX_DIMS = 8

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


def unescape_key(name):
    """The dict key or list position of a link name (the inverse of escape_key);
    FormatError for a name escape_key never makes."""
    key = "" if name == "%" else "." if name == "%2E" else name.replace("%2F", "/").replace("%25", "%")
    if escape_key(key) != name:
        raise FormatError("h5dcp: '%s' is not a link name h5dcp writes" % name)
    return key


def escape_key(key):
    """The link name of a dict key or list position (docs/FORMAT.md, "Key escaping")."""
    if key == "":
        return "%"
    if key == ".":
        return "%2E"
    return key.replace("%", "%25").replace("/", "%2F")

INT64_MAX = 2**63 - 1
# Containers nest at most this deep, as in the C++ reader (kMaxContainerDepth,
# lib/src/base/key_escape.hpp): a container's fqn has at most 255 keys.
MAX_DEPTH = 256
# The tiling check's work per tensor, in chunk corners (see check_tiling).
MAX_CORNERS = 1 << 22


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
        version = attr(f, "h5dcp.format_version", "")
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


def attr(obj, name, fqn):
    """The attribute `name` of `obj`, or None when it has none. HDF5 decodes
    an attribute when it opens it, and one whose dataspace claims more than is
    stored fails there with a KeyError (which h5py's attrs.get would take for
    a missing attribute, silently skipping e.g. the checksums); one declaring
    more bytes than the whole file holds is refused before it is read."""
    with reading(fqn):
        bname = name.encode()
        try:
            if not h5py.h5a.exists(obj.id, bname):
                return None
            aid = h5py.h5a.open(obj.id, bname)
        except (KeyError, OSError, RuntimeError) as e:
            raise FormatError("h5dcp: '%s' has attributes HDF5 cannot decode (a dataspace or type claiming more than "
                              "is stored?), met looking for %s (HDF5: %s): the checkpoint is damaged"
                              % (fqn or "/", name, str(e).strip("'\""))) from None
        declared = math.prod(aid.shape or ()) * aid.get_type().get_size()
        if declared > obj.file.id.get_filesize():
            raise FormatError("h5dcp: '%s' has an attribute %s of %d bytes, more than the file holds: the checkpoint "
                              "is damaged" % (fqn or "/", name, declared))
        return obj.attrs[name]


def text_attr(obj, name, fqn):
    """The string attribute `name` of `obj`; FormatError naming `fqn` when it is missing or not text."""
    value = attr(obj, name, fqn)
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            value = None
    if not isinstance(value, str):
        raise FormatError("h5dcp: '%s' has %s attribute %s" % (fqn or "/", "no" if value is None else "a malformed", name))
    return value


def int_matrix_attr(obj, name, fqn, shape):
    """The integer attribute `name` as nested lists of Python ints of `shape`
    (Python ints: offset + size of int64s must not wrap around)."""
    value = attr(obj, name, fqn)
    if value is None:
        raise FormatError("h5dcp: tensor '%s' has no %s attribute" % (fqn, name))
    value = np.asarray(value)
    if value.dtype.kind not in "iu" or value.shape != shape:
        raise FormatError("h5dcp: tensor '%s' has a malformed %s attribute (%s %s, expected shape %s)"
                          % (fqn, name, value.dtype, value.shape, shape))
    return value.tolist()


def check_storage(ds, fqn):
    """Refuses a dataset whose data is not in the checkpoint file: HDF5
    external storage (raw data kept in another file, by relative or absolute
    path) or a virtual dataset (data mapped from datasets of other files).
    h5dcp writes neither, and reading one reads a file the checkpoint does not
    contain (/etc/passwd, a neighbour's secret) into a tensor. Checked from
    the creation properties, before any data is read."""
    with reading(fqn):
        dcpl = ds.id.get_create_plist()
        if dcpl.get_layout() == h5py.h5d.VIRTUAL:
            source = dcpl.get_virtual_filename(0) if dcpl.get_virtual_count() else "?"
            raise FormatError("h5dcp: '%s' is a virtual dataset mapping data from '%s': h5dcp checkpoints hold their "
                              "data in the file itself, and no reader follows it out" % (fqn, source))
        if dcpl.get_external_count() > 0:
            source = dcpl.get_external(0)[0]
            source = source.decode(errors="replace") if isinstance(source, bytes) else source
            raise FormatError("h5dcp: '%s' keeps its raw data in the external file '%s': h5dcp checkpoints hold their "
                              "data in the file itself, and no reader follows it out" % (fqn, source))


class Budget:
    """What the datasets of a file may claim in all: the file's size, as the
    C++ reader's ByteBudget. h5dcp stores every tensor and value in the file
    once, contiguous and allocated in full, so a dataset declaring more bytes
    than the file has left (a 2 GB slab in a 10 KB file), more than 64 bits
    count, or more than HDF5 stored for it (never written), is refused before
    anything is allocated for it."""

    def __init__(self, f):
        self.left = f.id.get_filesize()

    def claim(self, ds, nbytes, what):
        if nbytes > INT64_MAX:
            raise FormatError("h5dcp: %s holds %d bytes, more than 64 bits count: the checkpoint is damaged"
                              % (what, nbytes))
        if nbytes > self.left:
            raise FormatError("h5dcp: %s holds %d bytes, more than the %d bytes left in the file for it: the "
                              "checkpoint is damaged" % (what, nbytes, self.left))
        self.left -= nbytes
        with reading(ds.name):
            contiguous = ds.id.get_create_plist().get_layout() == h5py.h5d.CONTIGUOUS
            stored = ds.id.get_storage_size()
        if nbytes and contiguous and stored < nbytes:
            raise FormatError("h5dcp: %s stores %d of its %d bytes: its data was never written, the checkpoint is "
                              "damaged" % (what, stored, nbytes))


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
    pack_offset: object = None      # format 1.2: its first element's offset in its dtype's pack


def _small_float(size, exponent_bits, bias):
    """An IEEE-style float type of `size` bytes, as lib/src/hdf5/types.cpp makes it."""
    t = h5py.h5t.IEEE_F32LE.copy()
    bits = 8 * size
    mantissa = bits - 1 - exponent_bits
    t.set_fields(bits - 1, mantissa, exponent_bits, 0, mantissa)
    t.set_precision(bits)
    t.set_size(size)
    t.set_ebias(bias)
    return t


def _complex(part):
    t = h5py.h5t.create(h5py.h5t.COMPOUND, 2 * part.get_size())
    t.insert(b"r", 0, part)
    t.insert(b"i", part.get_size(), part)
    return t


def hdf5_type(name):
    """The HDF5 type FORMAT.md gives the dtype `name` (the C++ library's hdf5_type)."""
    t = h5py.h5t
    if name == "bool":
        e = t.enum_create(t.STD_I8LE)
        e.enum_insert(b"FALSE", 0)
        e.enum_insert(b"TRUE", 1)
        return e
    fixed = {"float64": t.IEEE_F64LE, "float32": t.IEEE_F32LE, "int64": t.STD_I64LE, "int32": t.STD_I32LE,
             "int16": t.STD_I16LE, "int8": t.STD_I8LE, "uint8": t.STD_U8LE, "uint16": t.STD_U16LE,
             "uint32": t.STD_U32LE, "uint64": t.STD_U64LE, "float8_e8m0fnu": t.STD_U8LE,
             "complex64": _complex(t.IEEE_F32LE), "complex128": _complex(t.IEEE_F64LE)}
    small = {"float16": (2, 5, 15), "bfloat16": (2, 8, 127), "float8_e4m3fn": (1, 4, 7), "float8_e5m2": (1, 5, 15),
             "float8_e4m3fnuz": (1, 4, 8), "float8_e5m2fnuz": (1, 5, 16)}
    if name == "complex32":
        return _complex(_small_float(2, 5, 15))
    return fixed[name] if name in fixed else _small_float(*small[name])


def _check_type(ds, name, fqn):
    """Refuses a dataset whose HDF5 type is not exactly the one FORMAT.md
    gives `name` (as the C++ reader, H5Tequal): its bytes are copied as they
    are, so class, size, byte order, sign, fields and enum members must match."""
    ftype = ds.id.get_type()
    if not ftype.equal(hdf5_type(name)):
        raise FormatError("h5dcp: tensor '%s' says dtype %s but its HDF5 type is %s (%d bytes)"
                          % (fqn, name, type(ftype).__name__, ftype.get_size()))


def tensor_info(ds, fqn, budget):
    """The checked TensorInfo of the tensor dataset `ds`, its bytes claimed
    from `budget` (a Budget of its file) before anything is read."""
    name = text_attr(ds, "h5dcp.dtype", fqn)
    if name not in DTYPES:
        raise FormatError("h5dcp: tensor '%s' has unknown dtype '%s'" % (fqn, name))
    _check_type(ds, name, fqn)
    if ds.shape is None:
        raise FormatError("h5dcp: tensor '%s' has a null dataspace" % fqn)
    shape = tuple(int(s) for s in ds.shape)
    torch_dtype, numpy_dtype, _ = DTYPES[name]
    budget.claim(ds, math.prod(shape) * np.dtype(numpy_dtype).itemsize, "tensor '%s'" % fqn)
    info = TensorInfo(fqn, name, torch_dtype, numpy_dtype, shape, [], False)
    stored = attr(ds, "h5dcp.checksums", fqn)
    if not shape:
        if stored is not None:
            stored = np.asarray(stored)
            if stored.dtype.kind not in "iu" or stored.shape != (1,):
                raise FormatError("h5dcp: tensor '%s' has a malformed h5dcp.checksums attribute" % fqn)
            info.checksummed = True
            info.scalar_checksum = int(stored[0])
        return info
    table = attr(ds, "h5dcp.chunk_offsets", fqn)
    if table is None:
        return info
    count = np.shape(table)[0] if np.ndim(table) == 2 else -1
    if count < 0:
        raise FormatError("h5dcp: tensor '%s' has a malformed h5dcp.chunk_offsets attribute" % fqn)
    offsets = int_matrix_attr(ds, "h5dcp.chunk_offsets", fqn, (count, len(shape)))
    sizes = int_matrix_attr(ds, "h5dcp.chunk_sizes", fqn, (count, len(shape)))
    for c in range(count):
        for o, s, n in zip(offsets[c], sizes[c], shape):
            if o < 0 or s < 0 or o + s > n:
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
            if 0 in sizes[c]:
                continue
            if rows[c] <= 0:
                raise FormatError("h5dcp: tensor '%s': chunk %d has %d rows per checksum slab" % (fqn, c, rows[c]))
            slabs = -(-sizes[c][0] // rows[c])
            digests[c] = [int(x) for x in stored[at:at + slabs]]
            at += slabs
        if at != stored.shape[0]:
            raise FormatError("h5dcp: tensor '%s' has %d checksums for %d slabs" % (fqn, stored.shape[0], at))
        info.checksummed = True
    info.chunks = [Chunk(tuple(offsets[c]), tuple(sizes[c]), rows[c], digests[c]) for c in range(count)]
    problem = check_tiling(info)
    if problem:
        raise FormatError("h5dcp: tensor '%s': %s: the checkpoint's chunk attributes are damaged" % (fqn, problem))
    return info


def check_tiling(info):
    """A message when the chunks of `info` do not tile its shape exactly (no
    gap, no overlap), else None. Chunks lie inside the shape (tensor_info
    checked). Comparing chunks pairwise is quadratic (30,000 chunks took
    minutes); this is exact and near linear: boxes tile a box exactly if and
    only if the signed count of their corners (-1 for an odd number of upper
    bounds) is the box's own, since that count is the mixed difference of the
    sum of their indicator functions, which determines the sum."""
    boxes = [c for c in info.chunks if 0 not in c.sizes]
    total, covered = math.prod(info.shape), sum(math.prod(c.sizes) for c in boxes)
    if covered != total:
        return "its chunks cover %d of %d elements" % (covered, total)
    # Dimensions every chunk spans whole add nothing (and keep 2^dims small).
    dims = [d for d, n in enumerate(info.shape) if any(c.offsets[d] != 0 or c.sizes[d] != n for c in boxes)]
    if not dims:
        return None  # one chunk of it all (covered == total)
    if len(boxes) << len(dims) > MAX_CORNERS:
        return "its %d chunks split %d dimensions, more than h5dcp checks" % (len(boxes), len(dims))
    low = np.array([[c.offsets[d] for d in dims] for c in boxes], np.int64)
    high = low + np.array([[c.sizes[d] for d in dims] for c in boxes], np.int64)
    corners, signs = [], []
    for mask in range(1 << len(dims)):
        upper = np.array([(mask >> j) & 1 for j in range(len(dims))], bool)
        corners.append(np.where(upper, high, low))
        signs.append(np.full(len(boxes), -1 if bin(mask).count("1") % 2 else 1, np.int64))
    points, where = np.unique(np.concatenate(corners), axis=0, return_inverse=True)
    counts = np.zeros(len(points), np.int64)
    np.add.at(counts, where.ravel(), np.concatenate(signs))
    found = {tuple(p): n for p, n in zip(points[counts != 0].tolist(), counts[counts != 0].tolist())}
    expected = {tuple(info.shape[d] if (mask >> j) & 1 else 0 for j, d in enumerate(dims)):
                -1 if bin(mask).count("1") % 2 else 1 for mask in range(1 << len(dims))}
    if found != expected:
        return ("its chunks overlap (their elements add up to the shape's, but some are covered twice, others not "
                "at all)")
    return None


# The HDF5 type of each fixed-size value encoding, and its bytes.
_VALUE_TYPES = {"int": (h5py.h5t.STD_I64LE, "<q"), "float": (h5py.h5t.IEEE_F64LE, "<d"), "bool": (None, "<B")}


def value_bytes(ds, kind, fqn):
    """The bytes the value dataset `ds` declares, after checking its shape
    and type are those of encoding `kind` (as the C++ reader's read_value):
    what must be claimed from the file's budget before it is read."""
    if kind not in VALUE_KINDS:
        raise FormatError("h5dcp: value '%s' has unknown kind '%s'" % (fqn, kind))
    with reading(fqn):
        ftype, space = ds.id.get_type(), ds.id.get_space().get_simple_extent_type()
    if kind == "none":
        if space != h5py.h5s.NULL:
            raise FormatError("h5dcp: value '%s' is marked none but holds data" % fqn)
        return 0
    if kind in _VALUE_TYPES:
        expected = _VALUE_TYPES[kind][0] or hdf5_type("bool")
        if space != h5py.h5s.SCALAR or not ftype.equal(expected):
            raise FormatError("h5dcp: value '%s' is not a scalar %s of %d bytes" % (fqn, kind, expected.get_size()))
        return expected.get_size()
    if kind == "str":
        if space != h5py.h5s.SCALAR or ftype.get_class() != h5py.h5t.STRING:
            raise FormatError("h5dcp: value '%s' is not a scalar string" % fqn)
        return 0 if ftype.is_variable_str() else ftype.get_size()  # a variable one lies in the file's heap
    if ds.ndim != 1 or not ftype.equal(h5py.h5t.STD_U8LE):
        raise FormatError("h5dcp: value '%s' is not a 1-D byte array" % fqn)
    return ds.shape[0]


def value_of(ds, kind, fqn):
    """A non-tensor value as Python reads it, and its payload (the bytes its
    checksum covers): None, int, float, bool, str, bytes or PickledObject.
    The dataset was checked by value_bytes (the tree walk does it)."""
    value_bytes(ds, kind, fqn)
    if kind == "none":
        return None, b""
    with reading(fqn):
        if kind in _VALUE_TYPES:
            raw = np.empty((), np.uint64 if kind != "bool" else np.uint8)
            ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, ds.id.get_type())
            payload = raw.tobytes()
            value = struct.unpack(_VALUE_TYPES[kind][1], payload)[0]
            if kind == "bool" and value not in (0, 1):
                raise FormatError("h5dcp: bool value '%s' holds the byte %d (only 0 and 1 are booleans)" % (fqn, value))
            return (bool(value) if kind == "bool" else value), payload
        if kind == "str":
            payload = ds[()]
            payload = payload if isinstance(payload, bytes) else str(payload).encode()
            try:
                return payload.decode("utf-8"), payload
            except UnicodeDecodeError:
                raise FormatError("h5dcp: value '%s' is not UTF-8 text" % fqn) from None
        payload = ds[()].tobytes() if ds.shape[0] else b""
    return (bytes(payload) if kind == "bytes" else PickledObject(payload)), payload


def value_checksum(ds, fqn):
    """The stored XXH3-64 of a value's payload, or None when the file has none."""
    stored = attr(ds, "h5dcp.checksums", fqn)
    if stored is None:
        return None
    stored = np.asarray(stored)
    if stored.dtype.kind not in "iu" or stored.shape != (1,):
        raise FormatError("h5dcp: value '%s' has a malformed h5dcp.checksums attribute" % fqn)
    return int(stored[0])


def container_kind(group, fqn):
    """h5dcp.container of a group ("dict" for the root): "dict" or "list"."""
    kind = text_attr(group, "h5dcp.container", fqn) if fqn else "dict"
    if kind not in ("dict", "list"):
        raise FormatError("h5dcp: group '%s' has unknown container kind '%s'" % (fqn, kind))
    return kind


def check_key(obj, link, fqn):
    """The h5dcp.key of `obj`, checked against its link name."""
    key = text_attr(obj, "h5dcp.key", fqn)
    if escape_key(key) != link:
        raise FormatError("h5dcp: '%s' has key %r, which is not its link name" % (fqn, key))
    return key


def in_position_order(entries, fqn):
    """The entries (key, ...) of a list group by position, checking they are 0..n-1."""
    by_position = {entry[0]: entry for entry in entries}
    if sorted(by_position) != sorted(str(i) for i in range(len(entries))):
        raise FormatError("h5dcp: list '%s' does not hold the elements 0..%d" % (fqn, len(entries) - 1))
    return [by_position[str(i)] for i in range(len(entries))]


def leaf_kind(ds, fqn):
    """h5dcp.kind of a dataset: "tensor" or one of VALUE_KINDS."""
    kind = text_attr(ds, "h5dcp.kind", fqn)
    if kind != "tensor" and kind not in VALUE_KINDS:
        raise FormatError("h5dcp: '%s' has unknown kind '%s'" % (fqn, kind))
    return kind


def packs_known(f):
    """Whether the file's format has packs (1.2 and later; open_checkpoint checked the version)."""
    major, minor = (int(x) for x in np.asarray(f.attrs["h5dcp.format_version"]))
    return (major, minor) >= (1, 2)


_INDEX_COLUMNS = ("fqn", "dtype", "ndim", "shape", "offset", "count", "checksum_rows", "checksum")


def _index_hash():
    """XXH3-64 for the packs' index, or None without the xxhash package: the
    index is metadata, checked on every read as the C++ reader does, not only
    by verify; without xxhash its rows are still checked one by one."""
    try:
        import xxhash
    except ImportError:
        return None
    return xxhash.xxh3_64_intdigest


def packed_tensors(f, budget):
    """The packed tensors of a 1.2 file, checked as the C++ reader's
    read_pack_index checks them: {fqn: (pack dataset, TensorInfo)}; {} when
    the file has no packs."""
    if not packs_known(f) or not f.id.links.exists(PACKS.encode()):
        return {}
    if f.id.links.get_info(PACKS.encode()).type != h5py.h5l.TYPE_HARD:
        raise FormatError("h5dcp: '%s' is not a hard link" % PACKS)
    packs = f[PACKS]
    if not packs.id.links.exists(b"index") or packs.id.links.get_info(b"index").type != h5py.h5l.TYPE_HARD:
        raise FormatError("h5dcp: the packs have no index (or it is a link elsewhere): the checkpoint is damaged")
    index = packs["index"]
    where = "%s/index" % PACKS
    check_storage(index, where)
    fields = index.dtype.names or ()
    if index.ndim != 1 or any(c not in fields for c in _INDEX_COLUMNS):
        raise FormatError("h5dcp: %s is not the table h5dcp writes (columns %s)" % (where, list(fields)))
    budget.claim(index, index.shape[0] * index.dtype.itemsize, where)
    with reading(where):
        rows = index[...]
    hash_of = _index_hash()
    if hash_of is not None:
        stored = attr(index, "h5dcp.checksums", where)
        if stored is None or np.asarray(stored).shape != (1,) or int(np.asarray(stored)[0]) != hash_of(rows.tobytes()):
            raise FormatError("h5dcp: checksum mismatch in %s: the checkpoint is damaged" % where)
    out, pack_sets = {}, {}
    for i, row in enumerate(rows):
        fqn = bytes(row["fqn"]).rstrip(b"\0").decode("utf-8", "surrogateescape")
        name = bytes(row["dtype"]).rstrip(b"\0").decode("ascii", "replace")
        what = "row %d ('%s') of %s" % (i, fqn, where)
        if name not in DTYPES:
            raise FormatError("h5dcp: %s has unknown dtype '%s'" % (what, name))
        ndim = int(row["ndim"])
        if not 0 <= ndim <= PACK_MAX_DIMS:
            raise FormatError("h5dcp: %s has %d dimensions" % (what, ndim))
        shape = tuple(int(n) for n in row["shape"][:ndim])
        offset, count, slab_rows = int(row["offset"]), int(row["count"]), int(row["checksum_rows"])
        if any(n < 0 for n in shape) or math.prod(shape) != count:
            raise FormatError("h5dcp: %s has %d elements for the shape %s" % (what, count, list(shape)))
        if name not in pack_sets:
            link = name.encode()
            if not packs.id.links.exists(link) or packs.id.links.get_info(link).type != h5py.h5l.TYPE_HARD:
                raise FormatError("h5dcp: %s names the pack of %s, which is missing" % (what, name))
            pack = packs[name]
            check_storage(pack, "%s/%s" % (PACKS, name))
            _check_type(pack, name, "%s/%s" % (PACKS, name))
            if pack.ndim != 1:
                raise FormatError("h5dcp: the pack of %s is not 1-D" % name)
            pack_sets[name] = (pack, [])
        pack, taken = pack_sets[name]
        if offset < 0 or offset + count > pack.shape[0]:
            raise FormatError("h5dcp: %s lies outside its pack: the checkpoint is damaged" % what)
        if fqn in out:
            raise FormatError("h5dcp: %s repeats an fqn of the index" % what)
        torch_dtype, numpy_dtype, _ = DTYPES[name]
        budget.claim(pack, count * np.dtype(numpy_dtype).itemsize, "packed tensor '%s'" % fqn)
        info = TensorInfo(fqn, name, torch_dtype, numpy_dtype, shape, [], count > 0, pack_offset=offset)
        if count:
            taken.append((offset, count, fqn))
            rows_total = shape[0] if shape else 1
            if slab_rows <= 0 or (shape and slab_rows < rows_total):
                raise FormatError("h5dcp: %s has a malformed checksum layout" % what)
            if shape:
                info.chunks = [Chunk((0,) * ndim, shape, slab_rows, [int(row["checksum"])])]
            else:
                info.scalar_checksum = int(row["checksum"])
        elif shape:
            info.chunks = [Chunk((0,) * ndim, shape, 0, [])]
        out[fqn] = (pack, info)
    for name, (_, taken) in pack_sets.items():
        taken.sort()
        for (o1, c1, f1), (o2, _, f2) in zip(taken, taken[1:]):
            if o2 < o1 + c1:
                raise FormatError("h5dcp: '%s' and '%s' share elements of the pack of %s: the checkpoint is damaged"
                                  % (f1, f2, name))
    return out
