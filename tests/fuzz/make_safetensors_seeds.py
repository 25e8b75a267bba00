#!/usr/bin/env python3
"""Writes the seed corpus of the safetensors fuzz target: headers (byte 0
even, bytes 1-2 the data size, then the JSON) that parse and that lie in
each way h5dcp refuses, and model.safetensors.index.json texts (byte 0 odd).
Plain Python, no dependencies.

    python3 tests/fuzz/make_safetensors_seeds.py [tests/fuzz/corpus/safetensors]
"""
import json
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "safetensors")
os.makedirs(out, exist_ok=True)


def header(data_bytes, obj):
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return b"\x00" + struct.pack("<H", data_bytes) + text.encode()


def index(obj):
    return b"\x01" + (obj if isinstance(obj, str) else json.dumps(obj)).encode()


a = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
b = {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}
seeds = {
    "valid": header(22, {"__metadata__": {"format": "pt"}, "model/a": a, "b": b}),
    "every_dtype": header(0, {n: {"dtype": n, "shape": [0], "data_offsets": [0, 0]} for n in
                              ["F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "U16", "U32",
                               "U64", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0", "C64"]}),
    "scalar": header(8, {"s": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}}),
    "past_the_data": header(20, {"model/a": a, "b": dict(b, data_offsets=[16, 24])}),
    "overlapping": header(16, {"a": a, "b": dict(b, data_offsets=[10, 16])}),
    "gap": header(24, {"a": a, "b": dict(b, data_offsets=[18, 24])}),
    "unknown_dtype": header(16, {"a": dict(a, dtype="F4")}),
    "shape_overflow": header(0, {"a": dict(a, shape=[1 << 40, 1 << 40], data_offsets=[0, 0])}),
    "not_json": header(4, "{not json"),
    "deep": header(0, '{"a":' + "[" * 5000 + "]" * 5000 + "}"),
    "index": index({"metadata": {"total_size": 22}, "weight_map": {"model/a": "model-00001-of-00002.safetensors",
                                                                   "b": "model-00002-of-00002.safetensors"}}),
    "index_escape": index({"weight_map": {"a": "../outside.safetensors"}}),
    # One key, two meanings: a JSON key twice (at the top, in a tensor, in
    # the index's weight_map), a tensor at a __metadata__ value.
    "duplicate_key": header(22, '{"b": %s, "model/a": %s, "b": %s}' % (json.dumps(b), json.dumps(a), json.dumps(b))),
    "duplicate_field": header(16, '{"a": {"dtype": "F32", "dtype": "I8", "shape": [2, 2], "data_offsets": [0, 16]}}'),
    "metadata_clash": header(16, {"__metadata__": {"format": "pt"}, "__metadata__/format": a}),
    "index_duplicate": index('{"weight_map": {"a": "one.safetensors", "a": "two.safetensors"}}'),
    # A name nesting far past kMaxContainerDepth (the header parses; the index refuses it).
    "deep_name": header(16, {"a/" * 20000 + "a": a}),
}
for name, data in seeds.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(seeds), out))
