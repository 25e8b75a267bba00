#!/usr/bin/env python3
"""Writes hostile PyTorch DCP checkpoint directories into OUTDIR, one per
case, and prints "<name>: <what it is>" for each.

    ~/.cache/h5dcp/venv-torch-2.13.0/bin/python tests/hostile/make_hostile_dcp.py OUTDIR

refuse-<case>.dcp/ is a directory holding .metadata and .distcp files, as
torch.distributed.checkpoint.save writes them (saved here without a process
group), then tampered with: .metadata unpickled with torch's own classes,
changed, and pickled again as DCP does (pickle.dump). Each must be refused
cleanly by `h5dcp convert SRC DST.h5` (exit 3, a message starting with
"h5dcp", no DST left behind) in bounded memory and time; accept-<case>.dcp/
must convert. Every file is under 1 MB. Classes (issue 48): files outside
the input (a .distcp or .metadata that is a symlink leaving the directory, a
relative_path '../x' or '/etc/passwd'), files that are no regular file (a
FIFO as .distcp or .metadata, a .distcp that is a directory), one byte range
with two meanings (two chunks of one tensor, or chunks of two tensors, at
the same bytes), a planner_data path of 150,000 keys (a quadratic container
index), and 12,000 chunks that all point at one 700 KB item whose pickle
builds 350,000 objects (work amplified 12,000 times).

Files named outside-* are not inputs: they are what a hostile input points
at, outside it. The save writes a random save_id and the checkpoint's path
into storage_meta; it is set to None (as h5dcp's own DCP export writes) so
that the files do not depend on where they were made.

Needs torch (the project's torch virtual environment).
"""
import io
import os
import pickle
import shutil
import struct
import sys
import warnings
import zipfile

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex, TensorStorageMetadata

# A save without a process group warns that it assumes one process: it does, on purpose.
warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")

DATA = "__0_0.distcp"


def save(directory, state):
    """A real DCP checkpoint of `state` in `directory` (one process, no process group), storage_meta cleared."""
    dcp.save(state, checkpoint_id=directory, no_dist=True)
    md = read_metadata(directory)
    md.storage_meta = None
    write_metadata(directory, md)
    return md


def read_metadata(directory):
    with open(os.path.join(directory, ".metadata"), "rb") as f:
        return pickle.load(f)


def write_metadata(directory, md):
    path = os.path.join(directory, ".metadata")
    os.remove(path)  # it may be a symlink or a FIFO by now: never write through it
    with open(path, "wb") as f:
        pickle.dump(md, f)


def small_state():
    """A small state dict: nested dicts, a list of a tensor and an int, plain values."""
    return {"model": {"layer": {"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                                "bias": torch.ones(3, dtype=torch.float32)}},
            "optim": {"lr": 0.5, "betas": [0.9, 0.999]},
            "buffers": [torch.arange(4, dtype=torch.int64), 3],
            "step": 7, "name": "run-1"}


def outside(out, name):
    """OUTDIR/outside-dcp/<name>/: a valid checkpoint outside every input, for hostile inputs to point at."""
    d = os.path.join(out, "outside-dcp", name)
    save(d, {"secret": torch.full((4,), 42.0)})
    return d


def storage_of(md, fqn):
    """The (MetadataIndex, _StorageInfo) of fqn's first chunk or of its value."""
    for index, info in md.storage_data.items():
        if index.fqn == fqn:
            return index, info
    raise KeyError(fqn)


def item_archive(tensor, junk_objects=0):
    """torch.save of `tensor` (what DCP writes as a chunk's item); with junk_objects, its data.pkl first
    builds and drops that many empty lists (EMPTY_LIST, POP: two bytes each), then rebuilds the tensor."""
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    if not junk_objects:
        return buffer.getvalue()
    source = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("/data.pkl"):
                assert data[:2] == b"\x80\x02", "torch.save writes pickle protocol 2"
                data = data[:2] + b"]0" * junk_objects + data[2:]
            record = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            record.compress_type = zipfile.ZIP_STORED
            z.writestr(record, data)
    return out.getvalue()


CASES = []


def case(name, what):
    def register(fn):
        CASES.append((name, what, fn))
        return fn
    return register


# --- files outside the input -----------------------------------------------------------------------------------


@case("refuse-distcp-symlink.dcp",
      "a valid checkpoint whose " + DATA + " is a symlink to '../outside-dcp/distcp/" + DATA + "', outside it")
def _(out, d):
    source = outside(out, "distcp")
    os.makedirs(d)
    shutil.copy(os.path.join(source, ".metadata"), d)
    os.symlink(os.path.join("..", "outside-dcp", "distcp", DATA), os.path.join(d, DATA))


@case("refuse-metadata-symlink.dcp",
      "a valid checkpoint whose .metadata is a symlink to '../outside-dcp/metadata/.metadata', outside it")
def _(out, d):
    source = outside(out, "metadata")
    os.makedirs(d)
    shutil.copy(os.path.join(source, DATA), d)
    os.symlink(os.path.join("..", "outside-dcp", "metadata", ".metadata"), os.path.join(d, ".metadata"))


@case("refuse-parent-relative-path.dcp",
      "an item's relative_path is '../outside-dcp/parent/" + DATA + "' (a valid data file outside the directory)")
def _(out, d):
    outside(out, "parent")
    md = save(d, {"secret": torch.full((4,), 42.0)})
    _, info = storage_of(md, "secret")
    info.relative_path = "../outside-dcp/parent/" + DATA
    os.remove(os.path.join(d, DATA))
    write_metadata(d, md)


@case("refuse-absolute-relative-path.dcp", "a value's relative_path is '/etc/passwd'")
def _(out, d):
    md = save(d, {"step": 7, "w": torch.ones(2)})
    _, info = storage_of(md, "step")
    info.relative_path = "/etc/passwd"
    write_metadata(d, md)


# --- not a regular file --------------------------------------------------------------------------------------------


@case("refuse-distcp-fifo.dcp", "a valid .metadata whose " + DATA + " is a FIFO (opening it blocks)")
def _(out, d):
    save(d, small_state())
    os.remove(os.path.join(d, DATA))
    os.mkfifo(os.path.join(d, DATA))


@case("refuse-metadata-fifo.dcp", ".metadata is a FIFO beside a valid " + DATA)
def _(out, d):
    save(d, small_state())
    os.remove(os.path.join(d, ".metadata"))
    os.mkfifo(os.path.join(d, ".metadata"))


@case("refuse-distcp-directory.dcp", "a valid .metadata whose " + DATA + " is a directory")
def _(out, d):
    save(d, small_state())
    os.remove(os.path.join(d, DATA))
    os.makedirs(os.path.join(d, DATA))


# --- one byte range, two meanings ----------------------------------------------------------------------------------


def two_chunk_tensor(d, same_range):
    """'w' [4] float32 as two chunks [0:2] and [2:4], whose items are those of tensors 'a' and 'b' saved
    before (with same_range, both chunks' storage entries are a's byte range)."""
    md = save(d, {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([3.0, 4.0])})
    a_index, a_info = storage_of(md, "a")
    b_index, b_info = storage_of(md, "b")
    props = md.state_dict_metadata["a"].properties
    md.state_dict_metadata = {"w": TensorStorageMetadata(
        properties=props, size=torch.Size([4]),
        chunks=[ChunkStorageMetadata(offsets=torch.Size([0]), sizes=torch.Size([2])),
                ChunkStorageMetadata(offsets=torch.Size([2]), sizes=torch.Size([2]))])}
    second = a_info if same_range else b_info
    md.storage_data = {
        MetadataIndex("w", torch.Size([0]), 0): _StorageInfo(a_info.relative_path, a_info.offset, a_info.length),
        MetadataIndex("w", torch.Size([2]), 1): _StorageInfo(second.relative_path, second.offset, second.length)}
    md.planner_data = {"w": ("w",)}
    write_metadata(d, md)


@case("refuse-same-byte-range.dcp",
      "tensor 'w' [4] in two chunks, [0:2] and [2:4], whose storage entries are the same byte range")
def _(out, d):
    two_chunk_tensor(d, same_range=True)


@case("refuse-shared-item-two-tensors.dcp",
      "tensors 'x' and 'y' whose one chunk each is the same byte range of " + DATA)
def _(out, d):
    md = save(d, {"x": torch.tensor([1.0, 2.0]), "y": torch.tensor([3.0, 4.0])})
    x_index, x_info = storage_of(md, "x")
    y_index, _ = storage_of(md, "y")
    md.storage_data[y_index] = _StorageInfo(x_info.relative_path, x_info.offset, x_info.length)
    write_metadata(d, md)


# --- memory and time -----------------------------------------------------------------------------------------------


@case("refuse-planner-path-bomb.dcp",
      "the planner_data path of tensor 'w' is 150,000 keys 'a' deep (a quadratic container index)")
def _(out, d):
    md = save(d, {"w": torch.ones(2)})
    key = "a"  # one str object: pickled once, then memo references
    md.planner_data = {"w": tuple([key] * 150000 + ["w"])}
    write_metadata(d, md)


@case("refuse-item-amplification.dcp",
      "tensor 'w' [12000] in 12,000 one-element chunks, all pointing at one 700 KB item whose pickle builds "
      "350,000 objects before the tensor (12,000 x the work of the input)")
def _(out, d):
    chunks = 12000
    md = save(d, {"w": torch.zeros(1)})
    props = md.state_dict_metadata["w"].properties
    item = item_archive(torch.zeros(1), junk_objects=350000)
    with open(os.path.join(d, DATA), "wb") as f:
        f.write(item)
    info = _StorageInfo(DATA, 0, len(item))  # one object: pickled once, then memo references
    one = torch.Size([1])
    offsets = [torch.Size([i]) for i in range(chunks)]
    md.state_dict_metadata = {"w": TensorStorageMetadata(
        properties=props, size=torch.Size([chunks]),
        chunks=[ChunkStorageMetadata(offsets=o, sizes=one) for o in offsets])}
    md.storage_data = {MetadataIndex("w", o, i): info for i, o in enumerate(offsets)}
    md.planner_data = {"w": ("w",)}
    write_metadata(d, md)


# --- legitimate ----------------------------------------------------------------------------------------------------


@case("accept-nested.dcp",
      "a real DCP checkpoint of nested dicts, a list of a tensor and an int, and plain values")
def _(out, d):
    save(d, small_state())


@case("accept-two-chunks.dcp", "tensor 'w' [4] in two chunks, [0:2] and [2:4], each its own byte range")
def _(out, d):
    two_chunk_tensor(d, same_range=False)


def total_size(path):
    if os.path.islink(path) or not os.path.isdir(path):
        return os.lstat(path).st_size
    return sum(total_size(os.path.join(path, n)) for n in os.listdir(path))


def write_all(out):
    os.makedirs(out, exist_ok=True)
    for name, what, fn in CASES:
        d = os.path.join(out, name)
        fn(out, d)
        for n in os.listdir(d):
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) >= 1 << 20:
                sys.exit("make_hostile_dcp: %s/%s is %d bytes, over 1 MB" % (name, n, os.path.getsize(p)))
        print(f"{name}: {what}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_hostile_dcp.py OUTDIR")
    write_all(sys.argv[1])
