#!/usr/bin/env python3
"""Writes hostile safetensors inputs into OUTDIR, one per case, and prints
"<name>: <what it is>" for each.

    python tests/hostile/make_hostile_safetensors.py OUTDIR

refuse-<case>.safetensors is one safetensors file (or a FIFO in its place);
refuse-<case>.st/ is a directory holding model.safetensors.index.json and
the shards it names. Each must be refused cleanly by `h5dcp convert SRC
DST.h5` (exit 3, a message starting with "h5dcp", no DST left behind) in
bounded memory and time; accept-<case>.* must convert. Every input is a
valid safetensors file or index apart from its one flaw, deterministic and
under 1 MB. Classes (issue 48): files outside the input (a shard that is a
symlink leaving the directory, an index naming '../'), files that are no
regular file (a FIFO as the file or as a shard, a shard that is a directory),
keys with two meanings (a duplicate tensor name, a duplicate __metadata__
key, a tensor named '__metadata__/format' beside __metadata__'s 'format', a
tensor both a tensor and a dict), overlapping data_offsets, and a name of
300,000 '/'-separated levels (a quadratic container index).

Files named outside-* are not inputs: they are what a hostile input points
at, outside it (run_hostile.py runs only refuse-*/accept-* names).

Standard library only (json, struct, os).
"""
import json
import os
import struct
import sys


def header_bytes(text):
    """The 8-byte length and the JSON text, padded with spaces to a multiple of 8 as safetensors writes."""
    raw = text.encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def entry(dtype, shape, begin, end):
    return '{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (dtype, json.dumps(shape), begin, end)


def f32(n, start=0):
    return struct.pack("<%df" % n, *[float(start + i) for i in range(n)])


def safetensors(tensors, metadata=None):
    """A valid safetensors file: tensors [(name, data bytes, shape)] of float32, laid out in order."""
    parts = []
    data = b""
    if metadata is not None:
        parts.append(json.dumps("__metadata__") + ":" + json.dumps(metadata, sort_keys=True))
    for name, blob, shape in tensors:
        parts.append(json.dumps(name) + ":" + entry("F32", shape, len(data), len(data) + len(blob)))
        data += blob
    return header_bytes("{" + ",".join(parts) + "}") + data


def raw_safetensors(header_text, data):
    """A safetensors file whose header is `header_text` as written (duplicate keys kept)."""
    return header_bytes(header_text) + data


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def index_json(weight_map):
    total = 0
    return json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2, sort_keys=True)


SHARD1 = "model-00001-of-00002.safetensors"
SHARD2 = "model-00002-of-00002.safetensors"


def two_shard_dir(out, name):
    """refuse-<case>.st/ with shard 1 a valid file holding 'a' and an index mapping 'b' to shard 2 (left to the case)."""
    d = os.path.join(out, name)
    os.makedirs(d)
    write(os.path.join(d, SHARD1), safetensors([("a", f32(4), [4])]))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write(index_json({"a": SHARD1, "b": SHARD2}))
    return d


def outside_dir(out):
    """OUTDIR/outside-st/: files outside every input that hostile inputs point at."""
    d = os.path.join(out, "outside-st")
    os.makedirs(d, exist_ok=True)
    return d


CASES = []


def case(name, what):
    def register(fn):
        CASES.append((name, what, fn))
        return fn
    return register


# --- files outside the input -----------------------------------------------------------------------------------


@case("refuse-shard-symlink-outside.st",
      "an index whose second shard is a symlink to '../outside-st/secret.safetensors', a valid safetensors file "
      "outside the directory")
def _(out, name):
    d = two_shard_dir(out, name)
    write(os.path.join(outside_dir(out), "secret.safetensors"), safetensors([("b", f32(4, 100), [4])]))
    os.symlink(os.path.join("..", "outside-st", "secret.safetensors"), os.path.join(d, SHARD2))


@case("refuse-shard-symlink-absolute.st",
      "an index whose second shard is a symlink to a valid safetensors file outside the directory, by absolute path")
def _(out, name):
    d = two_shard_dir(out, name)
    target = os.path.join(os.path.abspath(outside_dir(out)), "secret-absolute.safetensors")
    write(target, safetensors([("b", f32(4, 200), [4])]))
    os.symlink(target, os.path.join(d, SHARD2))


@case("refuse-index-parent-path.st",
      "an index mapping a tensor to '../outside-st/parent.safetensors', a valid file outside the directory")
def _(out, name):
    d = os.path.join(out, name)
    os.makedirs(d)
    write(os.path.join(outside_dir(out), "parent.safetensors"), safetensors([("b", f32(4, 300), [4])]))
    write(os.path.join(d, SHARD1), safetensors([("a", f32(4), [4])]))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write(index_json({"a": SHARD1, "b": "../outside-st/parent.safetensors"}))


# --- not a regular file --------------------------------------------------------------------------------------------


@case("refuse-fifo.safetensors", "a FIFO named as the .safetensors file (opening it blocks until a writer comes)")
def _(out, name):
    os.mkfifo(os.path.join(out, name))


@case("refuse-fifo-shard.st", "an index whose second shard is a FIFO")
def _(out, name):
    d = two_shard_dir(out, name)
    os.mkfifo(os.path.join(d, SHARD2))


@case("refuse-shard-directory.st", "an index whose second shard is a directory")
def _(out, name):
    d = two_shard_dir(out, name)
    os.makedirs(os.path.join(d, SHARD2))


# --- keys with two meanings ----------------------------------------------------------------------------------------


@case("refuse-duplicate-tensor.safetensors",
      "the header names tensor 'w' twice (a JSON duplicate key): F32 [4] and I32 [2, 2], both at bytes [0, 16] "
      "(either one alone is a valid file)")
def _(out, name):
    text = '{"w":%s,"w":%s}' % (entry("F32", [4], 0, 16), entry("I32", [2, 2], 0, 16))
    write(os.path.join(out, name), raw_safetensors(text, f32(4)))


@case("refuse-duplicate-metadata-key.safetensors",
      "__metadata__ holds 'format' twice ('pt' and 'np': a JSON duplicate key)")
def _(out, name):
    text = '{"__metadata__":{"format":"pt","format":"np"},"w":%s}' % entry("F32", [4], 0, 16)
    write(os.path.join(out, name), raw_safetensors(text, f32(4)))


@case("refuse-duplicate-index-entry.st",
      "the index's weight_map names tensor 'a' twice (a JSON duplicate key): first to the shard that does not "
      "hold it, then to the one that does")
def _(out, name):
    d = os.path.join(out, name)
    os.makedirs(d)
    write(os.path.join(d, SHARD1), safetensors([("a", f32(4), [4])]))
    write(os.path.join(d, SHARD2), safetensors([("b", f32(4), [4])]))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write('{"metadata":{"total_size":32},"weight_map":{"a":"%s","a":"%s","b":"%s"}}' % (SHARD2, SHARD1, SHARD2))


@case("refuse-metadata-format-tensor.safetensors",
      "a tensor named '__metadata__/format' beside __metadata__ holding 'format' (two things at one key)")
def _(out, name):
    write(os.path.join(out, name), safetensors([("__metadata__/format", f32(4), [4])], metadata={"format": "pt"}))


@case("refuse-tensor-and-dict.safetensors", "tensors 'a' and 'a/b': 'a' both a tensor and a dict")
def _(out, name):
    write(os.path.join(out, name), safetensors([("a", f32(4), [4]), ("a/b", f32(4), [4])]))


@case("refuse-overlapping-offsets.safetensors", "tensors 'a' [0:16] and 'b' [8:24]: their data_offsets overlap")
def _(out, name):
    text = '{"a":%s,"b":%s}' % (entry("F32", [4], 0, 16), entry("F32", [4], 8, 24))
    write(os.path.join(out, name), raw_safetensors(text, f32(6)))


# --- memory and time -----------------------------------------------------------------------------------------------


@case("refuse-deep-name.safetensors",
      "one tensor named 'a/a/a/...' of 300,000 levels (a 600 KB header: a quadratic container index)")
def _(out, name):
    deep = "/".join(["a"] * 300000)
    write(os.path.join(out, name), safetensors([(deep, f32(1), [1])]))


# --- legitimate ----------------------------------------------------------------------------------------------------


@case("accept-nested-name.safetensors",
      "tensors 'model/layer/weight' and 'model/layer/bias' and __metadata__ {'format': 'pt', 'note': 'x'}")
def _(out, name):
    write(os.path.join(out, name), safetensors([("model/layer/weight", f32(6), [2, 3]),
                                                ("model/layer/bias", f32(2, 6), [2])],
                                               metadata={"format": "pt", "note": "x"}))


@case("accept-two-shards.st", "a valid index of two shards, 'a' in one and 'b' in the other")
def _(out, name):
    d = os.path.join(out, name)
    os.makedirs(d)
    write(os.path.join(d, SHARD1), safetensors([("a", f32(4), [4])]))
    write(os.path.join(d, SHARD2), safetensors([("b", f32(4, 4), [4])]))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write(index_json({"a": SHARD1, "b": SHARD2}))


def write_all(out):
    os.makedirs(out, exist_ok=True)
    for name, what, fn in CASES:
        fn(out, name)
        print(f"{name}: {what}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_hostile_safetensors.py OUTDIR")
    write_all(sys.argv[1])
