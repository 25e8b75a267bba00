#!/usr/bin/env python3
"""Writes hostile HDF5 checkpoints into OUTDIR, one file per case, and prints
"<file>: <what it is>" for each.

    python tests/hostile/make_hostile_h5.py OUTDIR

refuse-<case>.h5 must be refused cleanly by every h5dcp command (inspect,
verify, diff, convert) and library call: an h5dcp error naming what is
wrong, no signal, bounded memory and time. accept-<case>.h5 are legitimate
but unusual checkpoints that must be read. The files are deterministic (no
dates, fixed content) and a few KB to a few hundred KB each; the sizes they
claim are what make them hostile. Each one is what a crash, a bad disk or an
attacker could hand h5dcp; the format is docs/FORMAT.md.

Needs h5py, numpy and xxhash (the project's virtual environment).
"""
import os
import sys

import h5py
import numpy as np
import xxhash

# Files readable by HDF5 1.10 (Debian's): the 1.8 object format, as h5dcp writes.
LIBVER = ("v108", "v108")


def new_file(path, libver=LIBVER):
    f = h5py.File(path, "w", libver=libver, track_order=False)
    f.attrs["h5dcp.format_version"] = np.array([1, 1], dtype="<i8")
    f.attrs["h5dcp.library_version"] = "0.1.0"
    f.attrs["h5dcp.world_size"] = np.array([1], dtype="<i8")
    f.attrs["h5dcp.created"] = "2026-01-01T00:00:00Z"
    f.attrs["h5dcp.checksum_algorithm"] = "xxh3-64"
    return f


def group(parent, name, kind="dict"):
    g = parent.create_group(name)
    g.attrs["h5dcp.key"] = name
    g.attrs["h5dcp.container"] = kind
    return g


def tensor_attrs(d, name, dtype, offsets, sizes):
    d.attrs["h5dcp.key"] = name
    d.attrs["h5dcp.kind"] = "tensor"
    d.attrs["h5dcp.dtype"] = dtype
    if offsets is not None:
        d.attrs["h5dcp.chunk_offsets"] = np.array(offsets, dtype="<i8")
        d.attrs["h5dcp.chunk_sizes"] = np.array(sizes, dtype="<i8")


def tensor(parent, name, data, chunks=None, dtype="float32", checksums=True):
    """A tensor dataset; chunks: [(offsets, sizes)], default one chunk of it all.
    With checksums, each chunk is one slab whose digest is of the data there."""
    data = np.ascontiguousarray(data)
    d = parent.create_dataset(name, data=data)
    if chunks is None:
        chunks = [([0] * data.ndim, list(data.shape))]
    tensor_attrs(d, name, dtype, [c[0] for c in chunks], [c[1] for c in chunks])
    if checksums:
        digests = []
        for off, size in chunks:
            block = data[tuple(slice(o, o + s) for o, s in zip(off, size))]
            digests.append(xxhash.xxh3_64_intdigest(np.ascontiguousarray(block).tobytes()))
        rows = [max(1, size[0]) for _, size in chunks]
        d.attrs["h5dcp.checksum_rows"] = np.array(rows, dtype="<i8")
        d.attrs["h5dcp.checksums"] = np.array(digests, dtype="<u8")
    return d


def value(parent, name, encoding, data):
    d = parent.create_dataset(name, data=data)
    d.attrs["h5dcp.key"] = name
    d.attrs["h5dcp.kind"] = encoding
    return d


CASES = []


def case(name, what, libver=LIBVER):
    def register(fn):
        CASES.append((name, what, fn, libver))
        return fn
    return register


@case("refuse-self-link.h5", "group /g holds a hard link 'g' to itself: an endless container walk")
def _(f):
    g = group(f, "g")
    g["g"] = g


@case("refuse-link-to-ancestor.h5", "/a/b/a is a hard link back to /a (a cycle two levels deep)")
def _(f):
    a = group(f, "a")
    b = group(a, "b")
    b["a"] = a


@case("refuse-soft-link-loop.h5", "/g/g is a soft link to /g (h5dcp writes only hard links)")
def _(f):
    g = group(f, "g")
    g["g"] = h5py.SoftLink("/g")


@case("refuse-external-link.h5", "/g/g is an external link to /g of the same file")
def _(f):
    g = group(f, "g")
    g["g"] = h5py.ExternalLink("refuse-external-link.h5", "/g")


# --- reads outside the input (issue 48): the raw data of a dataset in another file ---

# A file outside every input: a relative external-storage path or a VDS names it.
OUTSIDE_SECRET = "outside-secret.bin"
SECRET_BYTES = bytes(range(256)) * 4


def outside_file(f, name, data):
    """Writes `data` as the file `name` beside the checkpoint `f` (not itself an input: no refuse-/accept- name)."""
    path = os.path.join(os.path.dirname(os.path.abspath(f.filename)), name)
    with open(path, "wb") as out:
        out.write(data)
    return path


def external_tensor(parent, name, external, content):
    """A valid uint8 tensor of len(content) elements whose raw data lives in `external` (h5py's external=:
    [(file, offset, size)]); its checksum is of `content`, the bytes there, so only the layout is wrong."""
    n = len(content)
    d = parent.create_dataset(name, shape=(n,), dtype="u1", external=external)
    tensor_attrs(d, name, "uint8", [[0]], [[n]])
    d.attrs["h5dcp.checksum_rows"] = np.array([n], dtype="<i8")
    d.attrs["h5dcp.checksums"] = np.array([xxhash.xxh3_64_intdigest(content)], dtype="<u8")
    return d


def system_file():
    """An absolute path outside the input that every Unix has, and its first 64 bytes."""
    for path in ("/etc/passwd", "/etc/hostname", "/etc/os-release"):
        try:
            with open(path, "rb") as fh:
                head = fh.read(64)
        except OSError:
            continue
        if len(head) == 64:
            return path, head
    raise SystemExit("make_hostile_h5: no readable system file of 64 bytes for the external-storage case")


@case("refuse-external-storage.h5",
      "a valid uint8 tensor whose raw data is external storage: the first 64 bytes of /etc/passwd, by absolute path")
def _(f):
    path, head = system_file()
    external_tensor(f, "w", [(path, 0, len(head))], head)


@case("refuse-external-storage-relative.h5",
      "a valid uint8 tensor whose raw data is external storage in '" + OUTSIDE_SECRET + "', a file beside the input, "
      "by relative path")
def _(f):
    outside_file(f, OUTSIDE_SECRET, SECRET_BYTES)
    external_tensor(f, "w", [(OUTSIDE_SECRET, 0, 256)], SECRET_BYTES[:256])


@case("refuse-external-storage-value.h5",
      "a 'bytes' value dataset whose bytes are external storage in '" + OUTSIDE_SECRET + "' (relative path)")
def _(f):
    outside_file(f, OUTSIDE_SECRET, SECRET_BYTES)
    tensor(f, "w", np.arange(4, dtype="<f4"))
    d = f.create_dataset("blob", shape=(128,), dtype="u1", external=[(OUTSIDE_SECRET, 128, 128)])
    d.attrs["h5dcp.key"] = "blob"
    d.attrs["h5dcp.kind"] = "bytes"


@case("refuse-virtual-dataset.h5",
      "a valid float32 tensor that is a virtual dataset (VDS) sourcing /data of 'outside-vds-source.h5', "
      "a file beside the input", libver=("v110", "v110"))
def _(f):
    data = np.arange(64, dtype="<f4")
    source = os.path.join(os.path.dirname(os.path.abspath(f.filename)), "outside-vds-source.h5")
    with h5py.File(source, "w", libver=LIBVER) as s:
        s.create_dataset("data", data=data)
    layout = h5py.VirtualLayout(shape=data.shape, dtype="<f4")
    layout[:] = h5py.VirtualSource("outside-vds-source.h5", "data", shape=data.shape)
    d = f.create_virtual_dataset("w", layout)
    tensor_attrs(d, "w", "float32", [[0]], [[64]])
    d.attrs["h5dcp.checksum_rows"] = np.array([64], dtype="<i8")
    d.attrs["h5dcp.checksums"] = np.array([xxhash.xxh3_64_intdigest(data.tobytes())], dtype="<u8")


@case("refuse-dangling-soft-link.h5", "/w is a soft link to nothing")
def _(f):
    f["w"] = h5py.SoftLink("/nowhere")


@case("refuse-deep-nesting.h5", "1,000 nested dicts, each a valid group (a stack-depth bomb)")
def _(f):
    g = f
    for _ in range(1000):
        g = group(g, "d")


@case("refuse-shared-groups.h5", "40 levels where two groups link the same child: 2^40 paths to walk")
def _(f):
    nxt = group(f, "top")
    level = nxt
    for i in range(40):
        child = f.create_group(f"level{i}")  # made under the root, then linked twice
        child.attrs["h5dcp.key"] = "x"
        child.attrs["h5dcp.container"] = "dict"
        p = group(level, "p")
        q = group(level, "q")
        p["x"] = child
        q["x"] = child
        del f[f"level{i}"]
        level = child


@case("refuse-dataset-linked-twice.h5", "one tensor dataset reached from two groups")
def _(f):
    a = group(f, "a")
    b = group(f, "b")
    tensor(a, "w", np.arange(4, dtype="<f4"))
    b["w"] = a["w"]


@case("refuse-slab-count-bomb.h5", "an unallocated uint8 tensor of 2^31 elements, 1 row per checksum slab")
def _(f):
    d = f.create_dataset("w", shape=(2**31,), dtype="u1")
    tensor_attrs(d, "w", "uint8", [[0]], [[2**31]])
    d.attrs["h5dcp.checksum_rows"] = np.array([1], dtype="<i8")
    d.attrs["h5dcp.checksums"] = np.array([0], dtype="<u8")


@case("refuse-slab-rows-tiny.h5", "a 64-row tensor whose checksum rows claim 2^40 slabs' worth (rows 1 of a huge first dim)")
def _(f):
    d = f.create_dataset("w", shape=(2**40, 1), dtype="u1", chunks=(1, 1))
    tensor_attrs(d, "w", "uint8", [[0, 0]], [[2**40, 1]])
    d.attrs["h5dcp.checksum_rows"] = np.array([1], dtype="<i8")
    d.attrs["h5dcp.checksums"] = np.arange(64, dtype="<u8")


@case("refuse-unallocated-value.h5", "a 'bytes' value dataset of 4 GiB never written (the file is a few KB)")
def _(f):
    d = f.create_dataset("blob", shape=(2**32,), dtype="u1")
    d.attrs["h5dcp.key"] = "blob"
    d.attrs["h5dcp.kind"] = "bytes"


@case("refuse-unallocated-tensor.h5", "a float32 tensor of 1 GiB never written")
def _(f):
    d = f.create_dataset("w", shape=(2**28,), dtype="<f4")
    tensor_attrs(d, "w", "float32", [[0]], [[2**28]])


@case("refuse-huge-shape.h5", "a tensor of shape [2^32, 2^32] (2^64 elements: volume wraps to 0)")
def _(f):
    d = f.create_dataset("w", shape=(2**32, 2**32), dtype="u1", chunks=(1, 1))
    tensor_attrs(d, "w", "uint8", [[0, 0]], [[2**32, 2**32]])


@case("refuse-huge-shape-no-chunks.h5", "a tensor of shape [2^62, 4] float64 (bytes overflow int64)")
def _(f):
    d = f.create_dataset("w", shape=(2**62, 4), dtype="<f8", chunks=(1, 4))
    tensor_attrs(d, "w", "float64", [[0, 0]], [[2**62, 4]])


@case("refuse-overlapping-chunks.h5", "chunks [0:2, 0:2] and [1:3, 0:2] of a [4, 2] tensor: volumes add up, row 3 has no chunk")
def _(f):
    data = np.arange(8, dtype="<f4").reshape(4, 2)
    tensor(f, "w", data, chunks=[([0, 0], [2, 2]), ([1, 0], [2, 2])])


@case("refuse-duplicate-chunk.h5", "the same chunk listed twice, the other half missing")
def _(f):
    data = np.arange(8, dtype="<f4").reshape(4, 2)
    tensor(f, "w", data, chunks=[([0, 0], [2, 2]), ([0, 0], [2, 2])])


@case("refuse-chunk-gap.h5", "chunks [0:1] and [2:4] of a [4] tensor: element 1 has no chunk")
def _(f):
    tensor(f, "w", np.arange(4, dtype="<f4"), chunks=[([0], [1]), ([2], [2])])


@case("refuse-chunk-outside-shape.h5", "a chunk [2:6] of a [4] tensor")
def _(f):
    tensor(f, "w", np.arange(4, dtype="<f4"), chunks=[([0], [2]), ([2], [4])], checksums=False)


@case("refuse-chunk-negative.h5", "a chunk with a negative offset")
def _(f):
    tensor(f, "w", np.arange(4, dtype="<f4"), chunks=[([-2], [4]), ([2], [2])], checksums=False)


@case("refuse-chunk-overflow.h5", "a chunk offset + size that overflows int64")
def _(f):
    tensor(f, "w", np.arange(4, dtype="<f4"), chunks=[([2**62], [2**62])], checksums=False)


@case("refuse-many-chunks.h5", "4,000 empty chunks and one [0:3] of a [4] tensor: element 3 has no chunk")
def _(f):
    n = 4000
    d = f.create_dataset("w", data=np.arange(4, dtype="<f4"))
    tensor_attrs(d, "w", "float32", [[0]] * n, [[0]] * (n - 1) + [[3]])


@case("refuse-checksum-count.h5", "two chunks, three checksums")
def _(f):
    d = tensor(f, "w", np.arange(4, dtype="<f4"), chunks=[([0], [2]), ([2], [2])])
    d.attrs["h5dcp.checksums"] = np.array([1, 2, 3], dtype="<u8")


@case("refuse-checksum-rows-zero.h5", "checksum rows 0 (a division by zero, an endless slab loop)")
def _(f):
    d = tensor(f, "w", np.arange(4, dtype="<f4"))
    d.attrs["h5dcp.checksum_rows"] = np.array([0], dtype="<i8")


@case("refuse-attribute-types.h5", "chunk offsets stored as float64, the key as an integer")
def _(f):
    d = f.create_dataset("w", data=np.arange(4, dtype="<f4"))
    d.attrs["h5dcp.key"] = np.int64(7)
    d.attrs["h5dcp.kind"] = "tensor"
    d.attrs["h5dcp.dtype"] = "float32"
    d.attrs["h5dcp.chunk_offsets"] = np.array([[0.0]])
    d.attrs["h5dcp.chunk_sizes"] = np.array([[4.0]])


@case("refuse-format-version-string.h5", "the format version is a string")
def _(f):
    f.attrs["h5dcp.format_version"] = "1.1"
    tensor(f, "w", np.arange(4, dtype="<f4"))


@case("refuse-dtype-lies.h5", "a dataset of int8 marked float32")
def _(f):
    d = f.create_dataset("w", data=np.arange(4, dtype="i1"))
    tensor_attrs(d, "w", "float32", [[0]], [[4]])


@case("refuse-value-shape.h5", "an 'int' value stored as 1,000 int64s")
def _(f):
    value(f, "step", "int", np.arange(1000, dtype="<i8"))


@case("refuse-str-value-huge.h5", "a 'str' value of a fixed-length string type of 1 GiB, never written")
def _(f):
    t = h5py.h5t.C_S1.copy()
    t.set_size(2**30)
    space = h5py.h5s.create(h5py.h5s.SCALAR)
    dsid = h5py.h5d.create(f.id, b"name", t, space)
    d = h5py.Dataset(dsid)
    d.attrs["h5dcp.key"] = "name"
    d.attrs["h5dcp.kind"] = "str"


@case("refuse-truncated.h5", "a valid checkpoint cut to half its size")
def _(f):
    tensor(f, "w", np.arange(4096, dtype="<f4").reshape(64, 64))


@case("accept-nested-64.h5", "64 nested dicts holding one tensor (deep, but legitimate)")
def _(f):
    g = f
    for _ in range(64):
        g = group(g, "d")
    tensor(g, "w", np.arange(6, dtype="<f4").reshape(2, 3))


@case("accept-many-chunks.h5", "a [2048, 2] tensor saved as 2,048 one-row chunks")
def _(f):
    data = np.arange(4096, dtype="<f4").reshape(2048, 2)
    tensor(f, "w", data, chunks=[([i, 0], [1, 2]) for i in range(2048)])


@case("accept-grid-chunks.h5", "a [6, 6] tensor saved as a 3 x 3 grid, chunks listed out of order")
def _(f):
    data = np.arange(36, dtype="<f8").reshape(6, 6)
    chunks = [([r, c], [2, 2]) for c in (4, 0, 2) for r in (2, 0, 4)]
    tensor(f, "w", data, chunks=chunks, dtype="float64")


@case("accept-empty-and-scalar.h5", "an empty [0, 3] tensor, a 0-d tensor, an empty list and dict")
def _(f):
    d = f.create_dataset("empty", shape=(0, 3), dtype="<f4")
    tensor_attrs(d, "empty", "float32", [[0, 0]], [[0, 3]])
    s = f.create_dataset("scalar", data=np.float64(2.5))
    tensor_attrs(s, "scalar", "float64", None, None)
    group(f, "nothing", "dict")
    group(f, "items", "list")


# --- format 1.2: small tensors packed into one dataset per dtype, with an index table ---

def index_dtype(fqn_bytes):
    """The packs' index row (docs/FORMAT.md, "Packed tensors"): packed, in this order."""
    return np.dtype([("fqn", h5py.string_dtype("utf-8", fqn_bytes)), ("dtype", h5py.string_dtype("ascii", 24)),
                     ("ndim", "<i8"), ("shape", "<i8", (8,)), ("offset", "<i8"), ("count", "<i8"),
                     ("checksum_rows", "<i8"), ("checksum", "<u8")])


def packed(f, tensors, rows=None, index_checksum=None, pack_type=None):
    """Version 1.2 with `tensors` ({fqn: numpy array}, float32 unless int64) packed
    in fqn order; rows: the index rows to write instead of the true ones (each a
    dict of the columns, the true ones' values where left out)."""
    f.attrs["h5dcp.format_version"] = np.array([1, 2], dtype="<i8")
    packs = f.create_group("%packs")
    data, true_rows = {}, []
    for fqn, array in sorted(tensors.items()):
        array = np.ascontiguousarray(array)
        name = "int64" if array.dtype == np.int64 else "float32"
        at = sum(a.size for a in data.get(name, []))
        data.setdefault(name, []).append(array.ravel())
        true_rows.append({"fqn": fqn, "dtype": name, "ndim": array.ndim,
                          "shape": list(array.shape) + [0] * (8 - array.ndim), "offset": at, "count": array.size,
                          "checksum_rows": (array.shape[0] if array.ndim else 1) if array.size else 0,
                          "checksum": xxhash.xxh3_64_intdigest(array.tobytes()) if array.size else 0})
    for name, arrays in data.items():
        packs.create_dataset(name, data=np.concatenate(arrays), dtype=pack_type or ("<i8" if name == "int64" else "<f4"))
    rows = true_rows if rows is None else [{**true_rows[min(i, len(true_rows) - 1)], **r} for i, r in enumerate(rows)]
    fqn_bytes = max(1, max(len(r["fqn"].encode()) for r in rows))
    table = np.array([tuple(r[c] for c in index_dtype(1).names) for r in rows], dtype=index_dtype(fqn_bytes))
    index = packs.create_dataset("index", data=table)
    index.attrs["h5dcp.checksums"] = np.array(
        [xxhash.xxh3_64_intdigest(table.tobytes()) if index_checksum is None else index_checksum], dtype="<u8")
    return packs


SMALL = {"w": np.arange(12, dtype="<f4").reshape(3, 4), "b": np.arange(5, dtype="<f4"),
         "step": np.array(7, dtype="<i8")}


@case("accept-packed.h5", "format 1.2: tensors packed at the root, in a dict and in a list, one empty, one 0-d, "
      "beside a tensor dataset")
def _(f):
    group(f, "layers", "list")
    group(f, "norm", "dict")
    tensor(f, "big", np.arange(6, dtype="<f4"))
    packed(f, {**SMALL, "layers/0": np.ones(3, "<f4"), "layers/1": np.zeros(3, "<f4"), "norm/weight": np.ones(2, "<f4"),
               "empty": np.zeros((0, 3), "<f4")})


@case("refuse-packed-outside.h5", "a packed tensor's row reaches past the end of its pack")
def _(f):
    packed(f, SMALL, rows=[{}, {"offset": 10}, {}])


@case("refuse-packed-overlap.h5", "two packed tensors share elements of the float32 pack")
def _(f):
    packed(f, SMALL, rows=[{}, {"fqn": "step"}, {"fqn": "w", "offset": 2}])


@case("refuse-packed-duplicate.h5", "the index names 'b' twice")
def _(f):
    packed(f, {"b": np.arange(5, dtype="<f4"), "c": np.arange(5, dtype="<f4")}, rows=[{}, {"fqn": "b"}])


@case("refuse-packed-also-dataset.h5", "the packed tensor 'big' is also a tensor dataset of the tree")
def _(f):
    tensor(f, "big", np.arange(6, dtype="<f4"))
    packed(f, {"big": np.arange(6, dtype="<f4")})


@case("refuse-packed-orphan.h5", "the packed tensor 'nowhere/w' lies in no container")
def _(f):
    packed(f, {"nowhere/w": np.arange(4, dtype="<f4")})


@case("refuse-packed-wrong-type.h5", "the float32 pack is stored as int32")
def _(f):
    packed(f, {"b": np.arange(5, dtype="<f4")}, pack_type="<i4")


@case("refuse-packed-index-checksum.h5", "the packs' index does not match its checksum")
def _(f):
    packed(f, SMALL, index_checksum=12345)


@case("refuse-packed-huge.h5", "a packed row claims a [2^31, 2^31] tensor in a pack of 17 elements")
def _(f):
    packed(f, SMALL, rows=[{"ndim": 2, "shape": [2**31, 2**31] + [0] * 6, "count": 2**62}, {}, {}])


@case("refuse-packed-shape-count.h5", "a packed row's count is not its shape's product")
def _(f):
    packed(f, SMALL, rows=[{"count": 4}, {}, {}])


@case("refuse-packs-in-1.1.h5", "a %packs group in a format 1.1 file (no h5dcp.key: not a container)")
def _(f):
    packed(f, SMALL)
    f.attrs["h5dcp.format_version"] = np.array([1, 1], dtype="<i8")


@case("refuse-external-packed.h5", "format 1.2: the float32 pack keeps its raw data in a file outside the input")
def _(f):
    f.attrs["h5dcp.format_version"] = np.array([1, 2], dtype="<i8")
    outside_file(f, OUTSIDE_SECRET, SECRET_BYTES)
    packs = f.create_group("%packs")
    packs.create_dataset("float32", shape=(4,), dtype="<f4", external=[(OUTSIDE_SECRET, 0, 16)])
    rows = [{"fqn": "b", "dtype": "float32", "ndim": 1, "shape": [4] + [0] * 7, "offset": 0, "count": 4,
             "checksum_rows": 4, "checksum": xxhash.xxh3_64_intdigest(SECRET_BYTES[:16])}]
    table = np.array([tuple(r[c] for c in index_dtype(1).names) for r in rows], dtype=index_dtype(1))
    index = packs.create_dataset("index", data=table)
    index.attrs["h5dcp.checksums"] = np.array([xxhash.xxh3_64_intdigest(table.tobytes())], dtype="<u8")


def write_all(out):
    os.makedirs(out, exist_ok=True)
    for name, what, fn, libver in CASES:
        path = os.path.join(out, name)
        with new_file(path, libver) as f:
            fn(f)
        if name == "refuse-truncated.h5":
            with open(path, "r+b") as fh:
                fh.truncate(os.path.getsize(path) // 2)
        print(f"{name}: {what}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_hostile_h5.py OUTDIR")
    write_all(sys.argv[1])
