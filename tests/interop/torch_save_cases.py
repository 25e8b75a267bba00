"""torch.save files for h5dcp's interop tests, written and checked by real
PyTorch 2.13. Run with the python of
the project's virtual environment (~/.cache/h5dcp/venv-torch-2.13.0/bin/python, made by scripts/install-deps.sh).

usage:
  torch_save_cases.py make DIR
      writes DIR/matrix.pt (the conversion matrix: nested dicts and lists,
      every dtype, views, shared storages, single-entry dicts at every depth,
      non-tensor values, a module's and an optimizer's state dicts),
      DIR/proto4.pt (the same with pickle protocol 4), DIR/deflated.pt (the
      same archive with compressed records), DIR/load.pt (tensors
      for loading onto ranks), DIR/legacy.pt (the legacy format),
      DIR/tensor.pt (a lone tensor), DIR/set.pt (an unsupported object),
      DIR/float4.pt (an unsupported dtype), DIR/plain.h5 (HDF5, not h5dcp)
  torch_save_cases.py compare ORIGINAL RESULT [--sharing]
      torch.load both; RESULT must equal ORIGINAL after h5dcp's documented
      mapping (tuples -> lists, int/bool keys -> str, OrderedDict -> dict):
      same structure, types, dtypes, shapes, and bit-identical values.
      --sharing: RESULT must also keep ORIGINAL's storage sharing.
      Every record of RESULT must match its CRC-32 (Python's zipfile).
"""
import math
import os
import struct
import sys
import zipfile

import torch

# complex32 tensors are part of the cases; PyTorch warns that few operators support them.
import warnings  # noqa: E402
warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")

FLOATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
# PyTorch 2.x's dtypes with few CPU kernels: their reference is a pattern of bytes.
BIT_PATTERNS = [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2,
                torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu, torch.complex32,
                torch.complex64, torch.complex128]


def reference(shape, dtype):
    """tests/support/test_support.cpp's reference_tensor (seed 0), in Python."""
    n = 1
    for s in shape:
        n *= s
    idx = torch.arange(n, dtype=torch.int64)
    if dtype in BIT_PATTERNS:
        size = torch.empty(0, dtype=dtype).element_size()
        if n == 0:
            return torch.empty(shape, dtype=dtype)
        raw = ((torch.arange(n * size, dtype=torch.int64) * 151 + 7) % 256).to(torch.uint8)
        return raw.view(dtype).reshape(shape).contiguous()
    if dtype == torch.bool:
        t = (idx % 3) == 0
    elif dtype in FLOATS:
        t = ((idx % 509) - 254).to(torch.float64).div(4.0).to(dtype)
        if n >= 5:
            t[0] = -0.0
            t[1] = math.inf
            t[2] = -math.inf
            t[3] = math.nan
            tiny = torch.zeros(1, dtype=dtype)
            tiny.view(torch.uint8)[0] = 1  # the smallest subnormal
            t[4] = tiny[0]
    else:
        span = 256 if dtype in (torch.uint8, torch.int8) else 65536
        low = 0 if dtype == torch.uint8 else -span // 2
        t = ((idx * 7919) % span + low).to(dtype)
        if dtype == torch.int64 and n >= 2:
            t[0] = -(2**63)
            t[1] = 2**63 - 1
    return t.reshape(shape).contiguous()


def matrix():
    base = reference((6, 8), torch.float32)
    shared = reference((20,), torch.int64)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    # A real torch.nn model with AdamW state (PyTorch 2.x: 'step' is a tensor,
    # param_groups carry the 2.x options: foreach, fused, capturable, ...).
    transformer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
    adamw = torch.optim.AdamW(transformer.parameters(), lr=1e-3, weight_decay=0.01)
    for _ in range(2):
        transformer(torch.ones(3, 2, 8)).square().mean().backward()
        adamw.step()
    return {
        "dtypes": {str(d).replace("torch.", ""): reference((3, 5), d)
                   for d in FLOATS + INTS + [torch.bool] + BIT_PATTERNS},
        "views": {
            "base": base,
            "transposed": base.t(),
            "strided": base[::2, 1::3],
            "narrow": base[2:5],
            "expanded": torch.arange(3, dtype=torch.float32).expand(4, 3),
            "scalar": torch.tensor(3.5, dtype=torch.float64),
            "empty": torch.zeros(0, 4, dtype=torch.float16),
        },
        "shared": {"whole": shared, "tail": shared[5:], "again": shared},
        "nested": {"a": {"b": {"c": reference((2,), torch.bfloat16)}}},
        "one": {"only": 1},
        "lists": [reference((2,), torch.int16), [1, [2, {"x": None}]], (1.5, "tuple")],
        "values": {
            "int": 7, "neg": -3, "big": 2**62, "float": 0.1, "nan": float("nan"), "minus_inf": float("-inf"),
            "str": "h\u00e9llo \u2713", "empty_str": "", "true": True, "false": False, "none": None,
            "bytes": b"\x00\x01\x7f\x80\xff", "empty_bytes": b"",
        },
        "empty_dict": {},
        "empty_list": [],
        "module": model.state_dict(),
        "optim": optimizer.state_dict(),
        "transformer": transformer.state_dict(),
        "adamw": adamw.state_dict(),
        "key with/slash": {"%": 1.25, ".": 2, "": "empty key"},
    }


def load_fixture():
    base = reference((7, 11), torch.float64)
    return {
        "model": {
            "w": reference((37, 11), torch.float32),
            "b": reference((13,), torch.bfloat16),
            "t": base.t(),
            "mask": reference((5, 5), torch.bool),
            "ids": reference((3, 4, 5), torch.int32),
            "big": reference((300, 40), torch.float32),
            "big3d": reference((4, 50, 30), torch.float32),
            "f8": reference((12, 6), torch.float8_e5m2),  # PyTorch 2.x: an UntypedStorage
            "c128": reference((8, 3), torch.complex128),
        },
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "step": 3,
        "lr": 0.1,
        "name": "x",
    }


def save_atomically(obj, path, **kwargs):
    """torch.save under a temporary name, then renamed: a reader never sees half a file."""
    temp = path + ".partial"
    torch.save(obj, temp, **kwargs)
    os.replace(temp, path)


def make(directory):
    # Deterministic content (seeded), written atomically, and outputs of
    # earlier runs removed: rerunning this while other tests read the files
    # changes nothing they see.
    torch.manual_seed(0)
    os.makedirs(directory, exist_ok=True)
    for stale in ("written.pt",):
        if os.path.exists(os.path.join(directory, stale)):
            os.remove(os.path.join(directory, stale))
    m = matrix()
    save_atomically(m, os.path.join(directory, "matrix.pt"))
    save_atomically(m, os.path.join(directory, "proto4.pt"), pickle_protocol=4)
    # The same archive re-zipped with deflate: torch.load reads it; records
    # are no longer readable in place.
    import zipfile
    with zipfile.ZipFile(os.path.join(directory, "matrix.pt")) as zin, \
            zipfile.ZipFile(os.path.join(directory, "deflated.pt.partial"), "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
    os.replace(os.path.join(directory, "deflated.pt.partial"), os.path.join(directory, "deflated.pt"))
    save_atomically(load_fixture(), os.path.join(directory, "load.pt"))
    save_atomically({"w": torch.ones(2)}, os.path.join(directory, "legacy.pt"), _use_new_zipfile_serialization=False)
    save_atomically(torch.ones(3), os.path.join(directory, "tensor.pt"))
    save_atomically({"s": {1, 2}}, os.path.join(directory, "set.pt"))
    # Two 4-bit floats per byte (MX formats): a dtype h5dcp does not store.
    save_atomically({"c": torch.zeros(2, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)},
                    os.path.join(directory, "float4.pt"))
    import h5py
    with h5py.File(os.path.join(directory, "plain.h5.partial"), "w") as f:
        f["x"] = [1, 2, 3]
    os.replace(os.path.join(directory, "plain.h5.partial"), os.path.join(directory, "plain.h5"))
    with open(os.path.join(directory, "text.txt"), "w") as f:
        f.write("not a checkpoint\n")
    print("wrote fixtures to", directory)
    return 0


def mapped(value):
    """ORIGINAL as h5dcp represents it."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else str(k)): mapped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mapped(v) for v in value]
    return value


def same_bits(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def compare(a, b, path, failures):
    where = path or "<top>"
    if isinstance(a, dict):
        if not isinstance(b, dict):
            failures.append("%s: dict became %s" % (where, type(b).__name__))
            return
        if set(a) != set(b):
            failures.append("%s: keys %s != %s" % (where, sorted(a), sorted(b)))
        for k in sorted(set(a) & set(b)):
            compare(a[k], b[k], path + "/" + k, failures)
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            failures.append("%s: list became %r" % (where, type(b).__name__))
            return
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, "%s/%d" % (path, i), failures)
    elif isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            failures.append("%s: tensor became %s" % (where, type(b).__name__))
        elif not same_bits(a, b):
            failures.append("%s: tensor %s %s != %s %s" % (where, a.dtype, tuple(a.shape), b.dtype, tuple(b.shape)))
    elif type(a) is not type(b):
        failures.append("%s: %s became %s" % (where, type(a).__name__, type(b).__name__))
    elif isinstance(a, float):
        if struct.pack("<d", a) != struct.pack("<d", b):
            failures.append("%s: %r != %r" % (where, a, b))
    elif a != b:
        failures.append("%s: %r != %r" % (where, a, b))


def storage_of(t):
    return t.storage().data_ptr()


def check_sharing(a, b, failures):
    """Tensors that share a storage in A share one in B, with the same offsets and strides."""
    pairs = [("views/base", "views/transposed"), ("views/base", "views/strided"), ("views/base", "views/narrow"),
             ("shared/whole", "shared/tail"), ("shared/whole", "shared/again")]

    def at(d, path):
        for k in path.split("/"):
            d = d[k]
        return d

    for p, q in pairs:
        if storage_of(at(a, p)) != storage_of(at(a, q)):
            failures.append("the original does not share %s and %s" % (p, q))
        if storage_of(at(b, p)) != storage_of(at(b, q)):
            failures.append("%s and %s no longer share a storage" % (p, q))
        if at(b, q).stride() != at(a, q).stride() or at(b, q).storage_offset() != at(a, q).storage_offset():
            failures.append("%s: strides or storage offset differ" % q)


def main(argv):
    if len(argv) >= 3 and argv[1] == "make":
        return make(argv[2])
    if len(argv) >= 4 and argv[1] == "compare":
        # The originals are this script's own fixtures (they hold bytes pickled
        # by Python, which only a full unpickler reads); what h5dcp wrote must
        # load with weights_only=True, PyTorch's default since 2.6.
        original = torch.load(argv[2], weights_only=False)
        result = torch.load(argv[3], weights_only=True)
        # Records aligned as PyTorch 2.x writes them: a memory-mapped load
        # needs every storage at a 64-byte boundary of the file.
        mapped_result = torch.load(argv[3], weights_only=True, mmap=True)
        failures = []
        # Every record's CRC-32, which torch.load does not check, as Python's zipfile computes it.
        with zipfile.ZipFile(argv[3]) as archive:
            damaged = archive.testzip()
        if damaged is not None:
            failures.append("record %s of %s does not match its CRC-32" % (damaged, argv[3]))
        compare(mapped(original), result, "", failures)
        compare(result, mapped_result, "<mmap>", failures)
        if "--sharing" in argv:
            check_sharing(original, result, failures)
        for f in failures:
            print("FAIL:", f)
        print("%s: %s" % (argv[3], "equal to " + argv[2] if not failures else "%d differences" % len(failures)))
        return 1 if failures else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
