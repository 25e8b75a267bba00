"""Reads a checkpoint written by h5dcp-example with h5py alone (no h5dcp) and
checks every dataset's shape, dtype, attributes and every value against the
example's formulas. Run with the python of
the project's virtual environment (~/.cache/h5dcp/venv-torch-2.13.0/bin/python, made by scripts/install-deps.sh).

Tensors saved whole and small are packed (format 1.2): they are read by the
two lines docs/FORMAT.md shows, and this script checks that the document
shows these two.

usage: check_h5py.py FILE WORLD_SIZE FORMAT.md
"""
import sys

import h5py
import numpy as np

EXPECTED = {
    # path: (shape, torch dtype, numpy dtype h5py gives, chunks along dim 0 or None)
    "model/embedding.weight": ((64, 16), "float32", np.float32, "rows"),
    "model/proj.weight": ((24, 20), "bfloat16", np.float32, "rows"),
    "model/proj.bias": ((24,), "float16", np.float16, None),
    "model/norm.scale": ((16,), "float64", np.float64, None),
    "model/mask": ((5, 7), "bool", np.bool_, None),
    "data/tokens": ((9, 3), "int32", np.int32, None),
    "optim/step": ((), "int64", np.int64, None),
}
VALUES = {
    # path: (h5dcp.kind, value as h5py returns it)
    "epoch": ("int", 3),
    "note": ("str", b"saved by h5dcp-example"),
    "optim/param_groups/0/lr": ("float", 0.001),
    "optim/param_groups/0/name": ("str", b"adam"),
    "optim/param_groups/0/betas/0": ("float", 0.9),
    "optim/param_groups/0/betas/1": ("float", 0.999),
}
CONTAINERS = {"model": "dict", "data": "dict", "optim": "dict", "optim/param_groups": "list",
              "optim/param_groups/0": "dict", "optim/param_groups/0/betas": "list"}


def reference(shape, torch_dtype):
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    if torch_dtype == "bool":
        v = i % 3 == 0
    elif torch_dtype.startswith("float") or torch_dtype == "bfloat16":
        v = ((i % 509) - 254) / 4.0
    else:
        v = (i * 7919) % 251 - 125
    return v.reshape(shape)


# docs/FORMAT.md's two lines for a packed tensor, as read_packed runs them.
PACKED_LINES = (
    'i = f["%packs/index"][...]; r = i[i["fqn"] == b"model/norm.weight"][0]',
    't = f["%packs/" + r["dtype"].decode()][r["offset"]:r["offset"] + r["count"]].reshape(r["shape"][:r["ndim"]])')


def read_packed(f, fqn):
    """The packed tensor `fqn` as h5py gives it, and its index row: PACKED_LINES with its own name."""
    i = f["%packs/index"][...]; r = i[i["fqn"] == fqn.encode()][0]  # noqa: E702
    t = f["%packs/" + r["dtype"].decode()][r["offset"]:r["offset"] + r["count"]].reshape(r["shape"][:r["ndim"]])
    return t, r


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def main(path, world_size, format_md):
    failures = []

    def check(condition, message):
        if not condition:
            failures.append(message)

    with open(format_md) as doc:
        shown = doc.read()
    for line in PACKED_LINES:
        check(line in shown, "docs/FORMAT.md does not show the line %r" % line)
    with h5py.File(path, "r") as f:
        check(list(f.attrs["h5dcp.format_version"]) == [1, 2], "format version")
        check(text(f.attrs["h5dcp.library_version"]).count(".") == 2, "library version")
        check(int(f.attrs["h5dcp.world_size"][0]) == world_size, "world size")
        check(text(f.attrs["h5dcp.created"]).endswith("Z"), "creation time")
        check(sorted(f.keys()) == ["%packs", "data", "epoch", "model", "note", "optim"], "keys: %s" % sorted(f.keys()))
        for path, kind in CONTAINERS.items():
            check(isinstance(f[path], h5py.Group), "%s: not a group" % path)
            check(text(f[path].attrs["h5dcp.container"]) == kind, "%s: container kind" % path)
        for path, (kind, value) in VALUES.items():
            check(text(f[path].attrs["h5dcp.kind"]) == kind, "%s: kind" % path)
            check(f[path][()] == value, "%s: %r != %r" % (path, f[path][()], value))
        for key, (shape, torch_dtype, np_dtype, sharding) in EXPECTED.items():
            expected = reference(shape, torch_dtype).astype(np_dtype)
            if sharding is None:  # saved whole, and small: packed
                check(key not in f, "%s: a dataset, not packed" % key)
                data, row = read_packed(f, key)
                check(data.shape == shape, "%s: shape %s" % (key, data.shape))
                check(data.dtype == np_dtype, "%s: h5py dtype %s, wanted %s" % (key, data.dtype, np_dtype))
                check(row["dtype"].decode() == torch_dtype, "%s: dtype column" % key)
                check(np.array_equal(data, expected), "%s: values differ from the formula" % key)
                continue
            d = f[key]
            data = d[()]
            check(d.shape == shape, "%s: shape %s" % (key, d.shape))
            check(data.dtype == np_dtype, "%s: h5py dtype %s, wanted %s" % (key, data.dtype, np_dtype))
            check(text(d.attrs["h5dcp.dtype"]) == torch_dtype, "%s: dtype attribute" % key)
            check(text(d.attrs["h5dcp.key"]) == key.split("/")[-1], "%s: key attribute" % key)
            check(text(d.attrs["h5dcp.kind"]) == "tensor", "%s: kind attribute" % key)
            check(np.array_equal(data, expected), "%s: values differ from the formula" % key)
            if shape:
                offsets = d.attrs["h5dcp.chunk_offsets"]
                sizes = d.attrs["h5dcp.chunk_sizes"]
                want_chunks = world_size if sharding == "rows" else 1
                check(offsets.shape == (want_chunks, len(shape)), "%s: chunk offsets %s" % (key, offsets.shape))
                check(int(np.prod(sizes, axis=1).sum()) == int(np.prod(shape)), "%s: chunks do not cover" % key)
    for failure in failures:
        print("FAIL:", failure)
    print("%d passed, %d failed" % (0 if failures else 1, 1 if failures else 0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
