#!/usr/bin/env python3
"""Writes hostile torch.save (.pt) files into OUTDIR, one line per case on stdout.

    ~/.cache/h5dcp/venv-torch-2.13.0/bin/python tests/hostile/make_hostile_pt.py OUTDIR [--pickles DIR]

refuse-<case>.pt must be refused cleanly (exit 3, a message starting with
"h5dcp") by `h5dcp diff F F`, `h5dcp convert F x.h5` and `h5dcp convert --to
torch F y.pt`, in bounded memory and time; accept-<case>.pt are legitimate
but nasty files that must convert in bounded memory. Every file is small (a
few hundred KB at most) and written deterministically. Classes (issue 15):
shared containers expanded along every path ("billion laughs"), deep nesting,
long opcode streams, memo abuse, lengths past the input, compressed records
(zip bombs), zip central directories that lie, sizes and strides that
overflow or reach past their storage, expanded (stride-0) views, legacy
formats and truncated archives.

--pickles DIR also writes the data.pkl of every pickle-level case into DIR
(the torch_pickle fuzzer's corpus: tests/fuzz/corpus/torch_pickle).
"""
import io
import os
import struct
import sys
import zipfile
import zlib

# --- pickle opcodes (protocol 2, as torch.save writes) ------------------------

PROTO2 = b"\x80\x02"
STOP = b"."
MARK = b"("
EMPTY_DICT = b"}"
EMPTY_LIST = b"]"
EMPTY_TUPLE = b")"
SETITEM = b"s"
SETITEMS = b"u"
APPENDS = b"e"
TUPLE = b"t"
LIST = b"l"
NONE = b"N"
NEWFALSE = b"\x89"
REDUCE = b"R"
BINPERSID = b"Q"
POP = b"0"


def s(text):
    """BINUNICODE."""
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def i(value):
    """The smallest int opcode, as pickle writes it."""
    if 0 <= value < 256:
        return b"K" + bytes([value])
    if 0 <= value < 65536:
        return b"M" + struct.pack("<H", value)
    if -2**31 <= value < 2**31:
        return b"J" + struct.pack("<i", value)
    return b"\x8a\x08" + struct.pack("<q", value)


def put(n):
    return b"r" + struct.pack("<I", n)  # LONG_BINPUT


def get(n):
    return b"j" + struct.pack("<I", n)  # LONG_BINGET


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def top(items):
    """{key: value_pickle, ...} as a whole pickle."""
    body = b"".join(s(k) + v for k, v in items)
    return PROTO2 + EMPTY_DICT + MARK + body + SETITEMS + STOP


def tensor(key, numel, offset, sizes, strides, storage="FloatStorage"):
    """torch._utils._rebuild_tensor_v2(storage, offset, sizes, strides, False, OrderedDict())."""
    pid = MARK + s("storage") + glob("torch", storage) + s(key) + s("cpu") + i(numel) + TUPLE + BINPERSID
    ints = lambda xs: MARK + b"".join(i(x) for x in xs) + TUPLE
    args = MARK + pid + i(offset) + ints(sizes) + ints(strides) + NEWFALSE + glob("collections", "OrderedDict") + \
        EMPTY_TUPLE + REDUCE + TUPLE
    return glob("torch._utils", "_rebuild_tensor_v2") + args + REDUCE


# --- zip archives -------------------------------------------------------------


def archive(records, compress=()):
    """A torch.save-like zip: archive/data.pkl, archive/version, archive/data/<key>; records in
    `compress` are deflated (torch.save never does)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        records = dict({"version": b"3\n"}, **records)
        for name, data in [("data.pkl", records["data.pkl"])] + [(n, d) for n, d in records.items() if n != "data.pkl"]:
            info = zipfile.ZipInfo("archive/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED
            z.writestr(info, data, compresslevel=9 if name in compress else None)
    return buffer.getvalue()


def pt(pickle, storages=None, compress=()):
    records = {"data.pkl": pickle}
    records.update({"data/" + k: v for k, v in (storages or {}).items()})
    return archive(records, compress)


# --- the cases ----------------------------------------------------------------

cases = {}  # file name -> (bytes, description, data.pkl or None)


def case(name, description, data, pickle=None):
    cases[name] = (data, description, pickle)


def pickle_case(name, description, pickle, storages=None):
    case(name, description, pt(pickle, storages), pickle)


def shared_dict_bomb(levels, fanout):
    # {'x': d(levels)} where d0 = {'leaf': 1} and d(k+1) = {'a': dk, 'b': dk, ...}: each level is
    # built once, memoized, and referred to `fanout` times, so the tree has fanout**levels paths.
    body = EMPTY_DICT + put(0) + s("leaf") + i(1) + SETITEM + POP
    for level in range(1, levels + 1):
        body += EMPTY_DICT + put(level) + MARK
        body += b"".join(s(chr(ord("a") + k)) + get(level - 1) for k in range(fanout)) + SETITEMS
        if level < levels:
            body += POP
    return PROTO2 + EMPTY_DICT + s("x") + body + SETITEM + STOP


pickle_case("refuse-shared-dict-bomb.pt", "dicts sharing one sub-dict at 48 levels: 2**48 paths in 1.3 KB",
            shared_dict_bomb(48, 2))
pickle_case("refuse-shared-dict-wide.pt", "dicts sharing sub-dicts, 8 levels x 16 keys: 16**8 paths",
            shared_dict_bomb(8, 16))


def nested_lists_bomb():
    out = PROTO2 + EMPTY_DICT + s("x") + s("v" * 65536) + put(0) + POP
    out += EMPTY_LIST + put(1) + MARK + get(0) + get(0) + APPENDS
    for level in range(2, 22):
        out += POP + EMPTY_LIST + put(level) + MARK + get(level - 1) + get(level - 1) + APPENDS
    return out + SETITEM + STOP


pickle_case("refuse-shared-list-str-bomb.pt", "a 64 KiB str in lists shared 2**20 times (64 GiB expanded)",
            nested_lists_bomb())

depth = 100000
pickle_case("refuse-deep-nesting.pt", "lists nested 100000 deep through MARK ... LIST",
            PROTO2 + EMPTY_DICT + s("x") + MARK * depth + LIST * depth + SETITEM + STOP)
pickle_case("refuse-deep-tuples.pt", "None in 200000 nested 1-tuples",
            PROTO2 + EMPTY_DICT + s("x") + NONE + b"\x85" * 200000 + SETITEM + STOP)
pickle_case("refuse-long-opcode-stream.pt", "300000 one-byte EMPTY_LIST opcodes left on the stack",
            PROTO2 + EMPTY_DICT + EMPTY_LIST * 300000 + STOP)
pickle_case("refuse-many-marks.pt", "300000 MARKs never closed", PROTO2 + EMPTY_DICT + MARK * 300000 + STOP)
pickle_case("refuse-dup-stream.pt", "a list DUPlicated 300000 times on the stack",
            PROTO2 + EMPTY_DICT + EMPTY_LIST + b"2" * 300000 + STOP)
pickle_case("refuse-huge-memo-index.pt", "LONG_BINPUT at memo index 2**32-2",
            PROTO2 + EMPTY_DICT + s("x") + i(1) + b"r\xfe\xff\xff\xff" + SETITEM + STOP)
pickle_case("refuse-binget-missing.pt", "BINGET of a memo entry never put",
            PROTO2 + EMPTY_DICT + s("x") + b"h\x07" + SETITEM + STOP)
pickle_case("refuse-long-binget-missing.pt", "LONG_BINGET of memo index 2**32-1",
            PROTO2 + EMPTY_DICT + s("x") + b"j\xff\xff\xff\xff" + SETITEM + STOP)
pickle_case("refuse-huge-binunicode.pt", "BINUNICODE claiming 4 GiB in a 60-byte pickle",
            PROTO2 + EMPTY_DICT + s("x") + b"X\xff\xff\xff\xff" + b"abc" + SETITEM + STOP)
pickle_case("refuse-huge-binunicode8.pt", "BINUNICODE8 claiming 2**63 bytes",
            PROTO2 + EMPTY_DICT + s("x") + b"\x8d" + struct.pack("<Q", 2**63) + b"abc" + SETITEM + STOP)
pickle_case("refuse-huge-binbytes8.pt", "BINBYTES8 claiming 2**64-1 bytes",
            PROTO2 + EMPTY_DICT + s("x") + b"\x8e" + b"\xff" * 8 + b"abc" + SETITEM + STOP)
pickle_case("refuse-huge-long4.pt", "LONG4 claiming 2**31-1 bytes",
            PROTO2 + EMPTY_DICT + s("x") + b"\x8b\xff\xff\xff\x7f" + b"\x01" * 16 + SETITEM + STOP)
pickle_case("refuse-long-text-int.pt", "a LONG of 200000 decimal digits",
            PROTO2 + EMPTY_DICT + s("x") + b"L" + b"9" * 200000 + b"L\n" + SETITEM + STOP)
pickle_case("refuse-codecs-amplify.pt", "_codecs.encode of one 128 KiB str, called 4000 times",
            PROTO2 + EMPTY_DICT + glob("_codecs", "encode") + put(0) + POP + s("\u00e9" * 65536) + s("latin1") +
            b"\x86" + put(1) + POP + (get(0) + get(1) + REDUCE + POP) * 4000 + STOP)
sizes_tuple = MARK + i(1) * 64 + TUPLE
pickle_case("accept-rebuild-repeated.pt", "one tensor rebuilt 20000 times from a 64-d memoized size tuple (within the reader's memory budget)",
            PROTO2 + EMPTY_DICT + glob("torch._utils", "_rebuild_tensor_v2") + put(0) + POP +
            MARK + MARK + s("storage") + glob("torch", "FloatStorage") + s("0") + s("cpu") + i(1) + TUPLE +
            BINPERSID + i(0) + sizes_tuple + sizes_tuple + TUPLE + put(1) + POP +
            (get(0) + get(1) + REDUCE + POP) * 20000 + STOP,
            {"0": b"\0" * 4})

# --- sizes taken from the file ----------------------------------------------------
pickle_case("refuse-numel-overflow.pt", "a DoubleStorage of 2**62 elements (2**65 bytes)",
            top([("x", tensor("0", 2**62, 0, [2**62], [1], "DoubleStorage"))]), {"0": b"\0" * 64})
pickle_case("refuse-view-numel-overflow.pt", "a stride-0 view of shape [2**32, 2**32] (numel wraps to 0)",
            top([("x", tensor("0", 1, 0, [2**32, 2**32], [0, 0]))]), {"0": b"\0" * 4})
pickle_case("refuse-view-bytes-overflow.pt", "a stride-0 view of 2**62 float32 elements (2**64 bytes)",
            top([("x", tensor("0", 1, 0, [2**62], [0]))]), {"0": b"\0" * 4})
pickle_case("refuse-stride-overflow.pt", "sizes [2**40] and strides [2**40]: the last element's index wraps",
            top([("x", tensor("0", 16, 0, [2**40], [2**40]))]), {"0": b"\0" * 64})
pickle_case("refuse-offset-beyond-storage.pt", "storage offset 1000 in a storage of 16 elements",
            top([("x", tensor("0", 16, 1000, [4], [1]))]), {"0": b"\0" * 64})
pickle_case("refuse-offset-huge.pt", "storage offset 2**63-1",
            top([("x", tensor("0", 16, 2**63 - 1, [2], [1]))]), {"0": b"\0" * 64})
pickle_case("refuse-storage-beyond-record.pt", "a storage of 1000 floats whose record holds 16 bytes",
            top([("x", tensor("0", 1000, 0, [1000], [1])), ("y", tensor("1", 4, 0, [4], [1]))]),
            {"0": b"\0" * 16, "1": b"\0" * 8192})
pickle_case("refuse-storage-beyond-file.pt", "a storage of 2**40 floats in a 1 KB file",
            top([("x", tensor("0", 2**40, 0, [2**40], [1]))]), {"0": b"\0" * 64})
pickle_case("refuse-too-many-dims.pt", "a tensor of 100 dimensions",
            top([("x", tensor("0", 1, 0, [1] * 100, [1] * 100))]), {"0": b"\0" * 4})
pickle_case("refuse-negative-size.pt", "a tensor of size -1",
            top([("x", tensor("0", 4, 0, [-1], [1]))]), {"0": b"\0" * 16})

# --- zip containers ---------------------------------------------------------------
pickle_bomb = PROTO2 + EMPTY_DICT + EMPTY_LIST * (64 << 20) + STOP
case("refuse-deflated-pkl.pt", "data.pkl deflated: 64 MiB of EMPTY_LIST opcodes in ~70 KB",
     archive({"data.pkl": pickle_bomb}, compress={"data.pkl"}))
case("refuse-deflated-storage.pt", "a storage record deflated: 256 MiB of zeros in ~260 KB",
     pt(top([("x", tensor("0", 64 << 20, 0, [64 << 20], [1]))]), {"0": b"\0" * (256 << 20)}, compress={"data/0"}))
case("refuse-deflated-version.pt", "the version record deflated: 64 MiB of digits",
     archive({"data.pkl": top([("x", i(1))]), "version": b"3" + b" " * (64 << 20)}, compress={"version"}))


def many_entries(n):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("archive/data.pkl", top([("x", i(1))]))
        z.writestr("archive/version", b"3\n")
        for k in range(n):
            z.writestr("archive/e%d" % k, b"")
    return buffer.getvalue()


case("refuse-zip-many-entries.pt", "a zip whose end record claims 65535 entries and holds 3", None)
good = pt(top([("x", i(1))]))
eocd = good.rfind(b"PK\x05\x06")
lying = bytearray(good)
lying[eocd + 8:eocd + 12] = struct.pack("<HH", 65535, 65535)
cases["refuse-zip-many-entries.pt"] = (bytes(lying), cases["refuse-zip-many-entries.pt"][1], None)


def zip64_entry_count(count):
    # The end record points to a zip64 end record that claims `count` entries.
    data = bytearray(good)
    at = data.rfind(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack("<II", data[at + 12:at + 20])
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, at, 1)
    end = bytearray(data[at:])
    end[8:20] = struct.pack("<HHII", 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    return bytes(data[:at]) + z64 + locator + bytes(end)


case("refuse-zip64-entry-count.pt", "a zip64 end record claiming 2**40 entries", zip64_entry_count(2**40))
case("accept-zip-thousands-of-entries.pt", "{'x': 1} in a zip with 3000 empty records beside data.pkl",
     many_entries(3000))


def huge_names():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("archive/data.pkl", top([("x", i(1))]))
        z.writestr("archive/version", b"3\n")
        for k in range(3):
            z.writestr("archive/" + chr(ord("a") + k) * 60000, b"")
    return buffer.getvalue()


case("refuse-zip-huge-names.pt", "a zip with three record names of 60000 bytes", huge_names())
truncated_source = pt(top([("x", tensor("0", 4096, 0, [4096], [1]))]), {"0": b"\1" * 16384})
case("refuse-truncated-zip.pt", "a torch.save-like zip cut in the middle of its storage record",
     truncated_source[:len(truncated_source) // 2])
case("refuse-truncated-end.pt", "a zip cut 10 bytes before its end record ends", truncated_source[:-10])
case("refuse-no-end-record.pt", "a zip local header and nothing else", truncated_source[:200])
case("refuse-legacy-magic.pt", "the legacy (PyTorch < 1.6) pickle format with a magic number",
     PROTO2 + b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19." + b"\0" * 64)
case("refuse-legacy-tar.pt", "the PyTorch < 0.4 tar format", b"\0" * 257 + b"ustar" + b"\0" * 250)

# --- expanded tensors: legitimate, must stream ------------------------------------


def real_torch_save(obj):
    import torch
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def expanded_cases():
    import torch
    row = torch.arange(1024, dtype=torch.float32).reshape(1, 1024)
    case("accept-expanded-1gib.pt", "torch.save of a [1, 1024] float32 row expanded to [262144, 1024] (1 GiB, "
         "stride 0)", real_torch_save({"x": row.expand(262144, 1024), "row": row}))
    scalar = torch.tensor([2.5], dtype=torch.float64)
    case("accept-expanded-3d.pt", "torch.save of one float64 expanded to [512, 512, 256] (512 MiB, strides 0)",
         real_torch_save({"x": scalar.reshape(1, 1, 1).expand(512, 512, 256)}))


expanded_cases()


def main():
    args = sys.argv[1:]
    pickles = None
    if "--pickles" in args:
        at = args.index("--pickles")
        pickles = args[at + 1]
        del args[at:at + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    os.makedirs(out, exist_ok=True)
    for name, (data, description, pickle) in sorted(cases.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print("%s: %s" % (name, description))
        if pickles is not None and pickle is not None:
            os.makedirs(pickles, exist_ok=True)
            with open(os.path.join(pickles, "hostile-" + name[:-len(".pt")] + ".pkl"), "wb") as f:
                f.write(pickle)


if __name__ == "__main__":
    main()
