#!/usr/bin/env python3
"""Writes the seed corpus of the checkpoint fuzz target: mutation scripts
(the format is described at the top of tests/fuzz/attribute_mutations.hpp), each
one damage a reader must refuse with an h5dcp::Error, or accept. They aim at
h5dcp's parsing of each attribute of the format (docs/FORMAT.md). Plain
Python, no dependencies (attribute_seeds.py beside it). Check what a seed reaches with

    H5DCP_FUZZ_VERBOSE=1 build-san/tests/fuzz/h5dcp_fuzz_checkpoint SEED

    python3 tests/fuzz/make_checkpoint_seeds.py [tests/fuzz/corpus/checkpoint]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attribute_seeds import BIG, CHECKPOINT_NAMES, NULL, SCALAR, Scripts, write_seeds  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "checkpoint")

# The objects of the checkpoint fuzz_checkpoint.cpp saves, in its order
# ("/" first, then HDF5's name order, depth first).
OBJECTS = ["/", "/%", "/%2E", "/%packs", "/%packs/bfloat16", "/%packs/float32", "/%packs/float64", "/%packs/index",
           "/a%2Fb%25c", "/blob", "/flag", "/model", "/model/bias", "/model/bytes", "/model/grid", "/model/ids",
           "/model/mask", "/model/small", "/model/weight", "/nothing", "/optim", "/optim/param_groups",
           "/optim/param_groups/0", "/optim/param_groups/0/betas", "/optim/param_groups/0/betas/0",
           "/optim/param_groups/0/betas/1", "/optim/param_groups/0/lr", "/optim/param_groups/0/name", "/optim/state",
           "/pickled", "/step"]
_s = Scripts(OBJECTS, CHECKPOINT_NAMES)
delete, string, ints = _s.delete, _s.string, _s.ints

W = "/model/weight"
seeds = {
    "valid": b"",
    # root: versions, world size, strings
    "version_newer_major": ints("/", "format_version", [2, 0]),
    "version_newer_minor": ints("/", "format_version", [1, 7]),
    "version_three": ints("/", "format_version", [1, 0, 0]),
    "version_huge": ints("/", "format_version", [2**64 - 1, 0], "u64"),
    "version_int8_scalar": ints("/", "format_version", [1], "i8", SCALAR),
    "version_string": string("/", "format_version", "1.0"),
    "version_missing": delete("/", "format_version"),
    "world_zero": ints("/", "world_size", [0]),
    "world_negative": ints("/", "world_size", [-5], "i32"),
    "world_huge": ints("/", "world_size", [BIG]),
    "world_null": ints("/", "world_size", [], shape=NULL),
    "library_version_fixed": string("/", "library_version", "9.9.9", fixed=True),
    "created_missing": delete("/", "created"),
    "created_binary": string("/", "created", b"\xff\xfe\x00x"),
    "checksum_algorithm_other": string("/", "checksum_algorithm", "md5"),
    # keys and escaping
    "key_mismatch": string(W, "key", "other"),
    "key_slash": string(W, "key", "we/ight"),
    "key_dot": string("/%2E", "key", ".."),
    "key_empty": string("/%", "key", ""),
    "key_percent": string("/a%2Fb%25c", "key", "a/b%c%"),
    "key_missing": delete("/model", "key"),
    "key_integer": ints("/step", "key", [3]),
    "key_list_gap": string("/optim/param_groups/0/betas/1", "key", "5"),
    # containers
    "container_unknown": string("/model", "container", "set"),
    "container_list_as_dict": string("/optim/param_groups", "container", "dict"),
    "container_dict_as_list": string("/optim", "container", "list"),
    "container_missing": delete("/optim/state", "container"),
    # kinds and dtypes
    "kind_tensor_as_int": string(W, "kind", "int"),
    "kind_value_as_tensor": string("/step", "kind", "tensor"),
    "kind_str_as_bytes": string("/optim/param_groups/0/name", "kind", "bytes"),
    "kind_none_as_str": string("/nothing", "kind", "str"),
    "kind_unknown": string("/flag", "kind", "complex"),
    "dtype_wrong": string(W, "dtype", "float16"),
    "dtype_bf16_as_f16": string("/model/bias", "dtype", "float16"),
    "dtype_unknown": string("/model/ids", "dtype", "complex64"),
    "dtype_missing": delete("/model/mask", "dtype"),
    # chunks
    "chunks_negative": ints(W, "chunk_offsets", [0, 0, -2, 0], shape=[2, 2]),
    "chunks_overflow": ints(W, "chunk_offsets", [0, 0, BIG, 0], shape=[2, 2]),
    "chunks_sizes_overflow": ints(W, "chunk_sizes", [2, 4, BIG, BIG], shape=[2, 2]),
    "chunks_outside": ints(W, "chunk_sizes", [2, 4, 5, 4], shape=[2, 2]),
    "chunks_overlap": ints(W, "chunk_offsets", [0, 0, 1, 0], shape=[2, 2]),  # volumes add up: row 5 uncovered
    "chunks_gap": ints(W, "chunk_sizes", [1, 4, 4, 4], shape=[2, 2]),
    # Volumes that add up to the shape's, hiding an overlap and a gap.
    "chunks_duplicate": ints(W, "chunk_offsets", [0, 0, 0, 0], shape=[2, 2]) + ints(W, "chunk_sizes", [2, 4, 2, 4],
                                                                                      shape=[2, 2]),
    # One row per slab: 6 slabs claimed, 2 digests stored.
    "checksum_rows_one_each": ints(W, "checksum_rows", [1, 1]),
    "chunks_one_dimension": ints(W, "chunk_offsets", [0, 2]),
    "chunks_count_mismatch": ints(W, "chunk_sizes", [6, 4]),
    "chunks_unsigned": ints(W, "chunk_offsets", [0, 0, 2**64 - 1, 0], "u64", [2, 2]),
    "chunks_on_a_pack": ints("/%packs/float64", "chunk_offsets", [0]),
    "chunks_on_the_index": ints("/%packs/index", "chunk_sizes", [1, 3], shape=[1, 2]),
    "chunks_missing": delete("/model/grid", "chunk_sizes"),
    # checksums
    "checksum_rows_zero": ints(W, "checksum_rows", [0, 4]),
    "checksum_rows_negative": ints(W, "checksum_rows", [-1, 1]),
    "checksum_rows_one": ints(W, "checksum_rows", [1, 1]),
    "checksum_rows_huge": ints(W, "checksum_rows", [BIG, BIG]),
    "checksum_rows_count": ints(W, "checksum_rows", [2]),
    "checksums_count": ints(W, "checksums", [1, 2, 3], "u64"),
    "checksums_wrong": ints("/model/ids", "checksums", [12345], "u64"),
    "checksums_signed": ints("/model/ids", "checksums", [-1], "i8"),
    "checksums_missing_rows": delete(W, "checksum_rows"),
    "value_checksum_wrong": ints("/step", "checksums", [1], "u64"),
    "value_checksum_two": ints("/blob", "checksums", [1, 2], "u64"),
    "value_checksum_deleted": delete("/pickled", "checksums"),
    # format 1.2: the packs' index (model/norm, model/scalar and model/empty are its rows)
    "index_checksum_wrong": ints("/%packs/index", "checksums", [12345], "u64"),
    "index_checksum_two": ints("/%packs/index", "checksums", [1, 2], "u64"),
    "index_checksum_deleted": delete("/%packs/index", "checksums"),
    "index_checksum_string": string("/%packs/index", "checksums", "0"),
    "packs_as_a_tensor": string("/%packs", "kind", "tensor") + string("/%packs", "dtype", "float32"),
    "packs_as_a_dict": string("/%packs", "container", "dict") + string("/%packs", "key", "%packs"),
    "pack_as_a_tensor": string("/%packs/bfloat16", "kind", "tensor") + string("/%packs/bfloat16", "key", "bfloat16"),
    "root_older_than_packs": ints("/", "format_version", [1, 1]),
    # several at once
    "rechunked_consistently": ints(W, "chunk_offsets", [0, 0, 3, 0], shape=[2, 2])
    + ints(W, "chunk_sizes", [3, 4, 3, 4], shape=[2, 2]),
    "kind_and_dtype": string("/step", "kind", "tensor") + string("/step", "dtype", "int64"),
}
write_seeds(out, seeds)
