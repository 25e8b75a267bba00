#!/usr/bin/env python3
"""Writes the seed corpus of the codec fuzz target: valid messages of each
decoder in lib/src/plan/codec.cpp, lib/src/formats/torch_save_index.cpp and
lib/src/training/param_agreement.cpp,
in their encoding (lib/src/base/byte_codec.hpp: little-endian fixed-width
integers; bools and enums one byte; strings and lists prefixed with a uint64
count; an optional a presence byte, then its value), each after
the byte that picks the decoder. Plain Python, no dependencies.

    python3 tests/fuzz/make_codec_seeds.py [tests/fuzz/corpus/codec]
"""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "codec")
os.makedirs(out, exist_ok=True)

SAVE_PLAN, GLOBAL_PLAN, METADATA, CHECKSUMS, INDEX, TORCH_INDEX, SIGNATURES = range(7)
F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL = range(10)
DICT, LIST = 0, 1
TENSOR, SHARD, VALUE = 0, 1, 2


def u8(v): return struct.pack("<B", v)
def i32(v): return struct.pack("<i", v)
def u32(v): return struct.pack("<I", v)
def i64(v): return struct.pack("<q", v)
def u64(v): return struct.pack("<Q", v)
def text(s): b = s.encode() if isinstance(s, str) else s; return u64(len(b)) + b
def ints(v): return u64(len(v)) + b"".join(i64(x) for x in v)
def digests(v): return u64(len(v)) + b"".join(u64(x) for x in v)
def chunk(offsets, sizes): return ints(offsets) + ints(sizes)
def containers(c): return u64(len(c)) + b"".join(text(f) + u8(k) for f, k in c)


def save_plan():
    items = [
        text("model/weight") + u8(1) + u64(0) + u8(SHARD) + u8(F32) + ints([6, 4]) + chunk([0, 0], [3, 4]) + text("") + text(""),
        text("model/bias") + u8(0) + u8(TENSOR) + u8(BF16) + ints([4]) + chunk([0], [4]) + text("") + text(""),
        text("step") + u8(0) + u8(VALUE) + u8(F32) + ints([]) + chunk([], []) + text("int") + text(i64(7)),
        text("name") + u8(0) + u8(VALUE) + u8(F32) + ints([]) + chunk([], []) + text("str") + text("adam"),
    ]
    return u64(len(items)) + b"".join(items) + containers([("model", DICT), ("optim/groups", LIST)])


def global_plan():
    tensors = [
        text("model/weight") + u8(F32) + ints([6, 4]) + u8(1) + u64(2)
        + chunk([0, 0], [3, 4]) + i32(0) + u64(0) + chunk([3, 0], [3, 4]) + i32(1) + u64(0),
        text("model/scalar") + u8(F64) + ints([]) + u8(0) + u64(1) + chunk([], []) + i32(1) + u64(0),
    ]
    values = [text("step") + text("int") + text(i64(7)) + i32(0), text("none") + text("none") + text("") + i32(1)]
    return (text("/ckpt/.ckpt.h5.h5dcp-partial.0123456789abcdef") + text("2026-11-22T00:00:00Z") + i32(2)
            + containers([("model", DICT)]) + u64(len(tensors)) + b"".join(tensors)
            + u64(len(values)) + b"".join(values))


def metadata():
    entries = [
        text("model/weight") + u8(0) + u8(F32) + ints([6, 4]) + u64(2) + chunk([0, 0], [3, 4]) + chunk([3, 0], [3, 4]),
        text("model/scalar") + u8(0) + u8(F64) + ints([]) + u64(1) + chunk([], []),
        text("model/empty") + u8(0) + u8(BOOL) + ints([0, 3]) + u64(1) + chunk([0, 0], [0, 3]),
        text("step") + u8(1) + text("int") + i64(8),
        text("blob") + u8(1) + text("bytes") + i64(3),
    ]
    return (i32(1) + i32(0) + text("0.1.0") + i32(2) + text("2026-11-22T00:00:00Z")
            + u64(len(entries)) + b"".join(entries) + containers([("model", DICT), ("optim", DICT), ("optim/groups", LIST)]))


def checksums():
    c = [u32(0) + u32(0) + i64(3) + digests([0x0123456789abcdef]), u32(0) + u32(1) + i64(1) + digests([1, 2, 3])]
    return u64(len(c)) + b"".join(c)


def index():
    values = [text("step") + text(i64(8)), text("blob") + text(b"\0\1\2")]
    sums = [text("model/weight") + ints([3, 3]) + digests([11, 22]), text("model/scalar") + ints([1]) + digests([5])]
    return metadata() + u64(len(values)) + b"".join(values) + u64(len(sums)) + b"".join(sums)


def torch_index():
    # key, dtype, numel, data offset, file (an index into the files listed after the values)
    storages = [text("0") + u8(F32) + i64(12) + u64(1024) + u32(1), text("1") + u8(BOOL) + i64(3) + u64(2048) + u32(0)]
    tensors = [text("model/w") + text("0") + u8(F32) + i64(0) + ints([3, 4]) + ints([4, 1]),
               text("model/t") + text("0") + u8(F32) + i64(1) + ints([4, 3]) + ints([1, 4]),
               text("mask") + text("1") + u8(BOOL) + i64(0) + ints([3]) + ints([1])]
    values = [text("step") + text("int") + text(i64(8)), text("name") + text("str") + text("sgd")]
    return (u64(4096) + u64(2) + text("model") + u8(DICT) + text("list") + u8(LIST)
            + u64(len(storages)) + b"".join(storages) + u64(len(tensors)) + b"".join(tensors)
            + u64(len(values)) + b"".join(values)
            + u64(2) + text("model-00001-of-00002.safetensors") + text("model-00002-of-00002.safetensors")
            + u64(2) + u64(4096) + u64(4096)
            + u64(1) + text("sharded") + u8(F32) + ints([2, 4]) + u64(1)
            + chunk([0, 0], [2, 4]) + text("0") + u8(F32) + i64(0) + ints([2, 4]) + ints([4, 1]))


def signatures():
    s = [text("layer.weight") + text("float32") + ints([4, 3]), text("layer.bias") + text("float32") + ints([4]),
         text("step") + text("int64") + ints([])]
    return u64(len(s)) + b"".join(s)


seeds = {
    "save_plan": (SAVE_PLAN, save_plan()),
    "save_plan_empty": (SAVE_PLAN, u64(0) + u64(0)),
    "global_plan": (GLOBAL_PLAN, global_plan()),
    "metadata": (METADATA, metadata()),
    "checksums": (CHECKSUMS, checksums()),
    "checkpoint_index": (INDEX, index()),
    "torch_index": (TORCH_INDEX, torch_index()),
    "signatures": (SIGNATURES, signatures()),
}
for name, (decoder, message) in seeds.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(u8(decoder) + message)
print("wrote", len(seeds), "seeds to", out)
