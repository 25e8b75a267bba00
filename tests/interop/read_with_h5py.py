"""Reads an h5dcp checkpoint into torch tensors with h5py and torch alone (no
h5dcp), and checks it against the torch.save file it was converted from:
same structure, dtypes (bfloat16 included), shapes and bit-identical values.
as_torch, attribute, unescape and read_checkpoint below are the worked example of
docs/FORMAT.md, and this script checks that the two are the same text. Run with the python of
the project's virtual environment (~/.cache/h5dcp/venv-torch-2.13.0/bin/python, made by scripts/install-deps.sh).

usage: read_with_h5py.py CHECKPOINT ORIGINAL.pt FORMAT.md
"""
import inspect
import struct
import sys

import h5py
import numpy as np
import torch

# complex32 tensors are part of the cases; PyTorch warns that few operators support them.
import warnings  # noqa: E402
warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")


def as_torch(obj, dtype):
    """The h5py dataset `obj` as a torch tensor of the h5dcp dtype `dtype`, bit for bit."""
    if dtype == "bfloat16" or dtype.startswith("float8") or dtype == "complex32":
        # No numpy dtype: h5py would convert (bfloat16 and float8 to float32,
        # losing NaN payloads). Read the stored bytes as they are and view
        # them as the torch dtype.
        size = obj.id.get_type().get_size()
        raw = np.empty(obj.shape, {1: np.uint8, 2: np.int16, 4: np.int32}[size])
        if raw.size:
            obj.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, obj.id.get_type())
        return torch.from_numpy(raw).view(getattr(torch, dtype))
    return torch.from_numpy(np.asarray(obj[()])).to(getattr(torch, dtype))


def attribute(obj, name):
    """An h5dcp string attribute as text (format 1.2 stores fixed-length strings, which h5py gives as bytes)."""
    value = obj.attrs[name]
    return value.decode() if isinstance(value, bytes) else value


def unescape(name):
    """A link name's dict key or list position (FORMAT.md, "Key escaping")."""
    return {"%": "", "%2E": "."}.get(name, name.replace("%2F", "/").replace("%25", "%"))


def read_checkpoint(group, packed=None):
    """The nested state dict under an h5dcp group: dicts, lists, torch tensors, Python values."""
    if packed is None:  # format 1.2: the packed tensors, by the fqn of their parent
        packed = {}
        if "%packs" in group.file:
            packs = group.file["%packs"]
            whole = {name: as_torch(packs[name], name) for name in packs if name != "index"}
            for row in packs["index"][...]:
                start, count = int(row["offset"]), int(row["count"])
                tensor = whole[row["dtype"].decode()][start:start + count].reshape(tuple(row["shape"][:row["ndim"]]))
                parent, _, name = row["fqn"].decode().rpartition("/")
                packed.setdefault(parent, {})[unescape(name)] = tensor.clone()
    out = dict(packed.get(group.name.strip("/"), {}))
    for name, obj in group.items():
        if name == "%packs":
            continue
        key = attribute(obj, "h5dcp.key")  # the dict key or list position, unescaped
        if isinstance(obj, h5py.Group):
            child = read_checkpoint(obj, packed)
            if attribute(obj, "h5dcp.container") == "list":
                child = [child[str(i)] for i in range(len(child))]
            out[key] = child
            continue
        kind = attribute(obj, "h5dcp.kind")
        if kind == "tensor":
            out[key] = as_torch(obj, attribute(obj, "h5dcp.dtype"))  # "float32", "bfloat16", "bool", ...
        elif kind == "none":
            out[key] = None
        elif kind == "str":
            out[key] = obj[()].decode()
        elif kind in ("bytes", "pickle"):
            out[key] = obj[()].tobytes()
        else:  # int, float, bool: numpy scalars
            out[key] = obj[()].item()
    return out


def mapped(value):
    """A torch.load result as h5dcp stores it: tuples as lists, int keys as text."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else str(k)): mapped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mapped(v) for v in value]
    return value


def same(a, b, path, failures):
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            failures.append("%s: keys differ" % path)
            return
        for k in a:
            same(a[k], b[k], path + "/" + k, failures)
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            failures.append("%s: lists differ" % path)
            return
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s/%d" % (path, i), failures)
    elif isinstance(a, torch.Tensor):
        ok = isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        if ok and a.numel() > 0:
            ok = torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))
        if not ok:
            failures.append("%s: tensor %s %s read as %s" % (path, a.dtype, tuple(a.shape), getattr(b, "dtype", b)))
    elif type(a) is not type(b) or (struct.pack("<d", a) != struct.pack("<d", b) if isinstance(a, float) else a != b):
        failures.append("%s: %r read as %r" % (path, a, b))


def main(checkpoint, original, format_md):
    failures = []
    with open(format_md) as f:
        text = f.read()
        for function in (as_torch, attribute, unescape, read_checkpoint):
            if inspect.getsource(function) not in text:
                failures.append("docs/FORMAT.md's worked example is not %s of this script" % function.__name__)
    with h5py.File(checkpoint, "r") as f:
        if list(f.attrs["h5dcp.format_version"]) != [1, 2]:
            failures.append("format version %s" % list(f.attrs["h5dcp.format_version"]))
        state = read_checkpoint(f)
    same(mapped(torch.load(original, weights_only=False)), state, "", failures)
    tensors = []

    def count(v):
        if isinstance(v, dict):
            [count(x) for x in v.values()]
        elif isinstance(v, list):
            [count(x) for x in v]
        elif isinstance(v, torch.Tensor):
            tensors.append(v.dtype)

    count(state)
    if torch.bfloat16 not in tensors:
        failures.append("no bfloat16 tensor was read")
    for failure in failures:
        print("FAIL:", failure)
    print("%s: %d tensors read with h5py, %s" % (checkpoint, len(tensors),
                                                  "equal to " + original if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
