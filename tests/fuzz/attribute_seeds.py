"""The mutation scripts of the fuzz targets that damage a checkpoint file's
attributes (the format is described at the top of
tests/fuzz/attribute_mutations.hpp): make_checkpoint_seeds.py and
make_local_copy_seeds.py write their seeds with it. Plain Python."""
import os
import struct

DELETE, VSTRING, FSTRING, INTS = range(4)
TYPES = {"i8": (0, "b"), "u8": (1, "B"), "i16": (2, "h"), "u16": (3, "H"), "i32": (4, "i"), "u32": (5, "I"),
         "i64": (6, "q"), "u64": (7, "Q")}
SCALAR, NULL = "scalar", "null"
BIG = 2**63 - 1
# A checkpoint's attribute names without their "h5dcp." prefix, in the order of
# checkpoint_attribute_names() (attribute_mutations.hpp).
CHECKPOINT_NAMES = ["format_version", "library_version", "world_size", "created", "checksum_algorithm", "key",
                    "container", "kind", "dtype", "chunk_offsets", "chunk_sizes", "checksum_rows", "checksums"]


class Scripts:
    """Mutations of a file whose objects are `objects` ("/" first, then HDF5's
    name order, depth first) by attribute names of `names` (without their
    "h5dcp." prefix, in the target's order)."""

    def __init__(self, objects, names):
        self.objects, self.names = objects, names

    def head(self, obj, name, op):
        return bytes([self.objects.index(obj), 0x80 + self.names.index(name), op])

    def delete(self, obj, name):
        return self.head(obj, name, DELETE)

    def string(self, obj, name, value, fixed=False):
        b = value.encode() if isinstance(value, str) else value
        return self.head(obj, name, FSTRING if fixed else VSTRING) + bytes([len(b)]) + b

    def ints(self, obj, name, values, type="i64", shape=None):
        code, fmt = TYPES[type]
        if shape is None:
            shape = [len(values)]
        if shape == SCALAR:
            rank, dims = 0, []
        elif shape == NULL:
            rank, dims = 3, []
        else:
            rank, dims = len(shape), shape
        return self.head(obj, name, INTS) + bytes([code, rank] + dims) + b"".join(
            struct.pack("<" + fmt, v) for v in values)


def write_seeds(out, seeds):
    """Writes each script of `seeds` (name: bytes) to out/NAME.bin."""
    os.makedirs(out, exist_ok=True)
    for name, script in seeds.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(script)
    print("wrote", len(seeds), "seeds to", out)
