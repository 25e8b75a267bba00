#!/usr/bin/env python3
"""Writes the seed corpus of the local_copy fuzz target: mutation scripts
(the format is described at the top of tests/fuzz/attribute_mutations.hpp)
of a node-local tier's copy, each one damage the copy's readers (its summary,
the recovery's survey and load) must refuse with an h5dcp::Error or report
as a copy not intact, or accept. They aim at the tier's attributes
(docs/FORMAT.md, "Node-local copies (the local tier)") and at how they agree with the
checkpoint's own. Plain Python (attribute_seeds.py beside it). Check what a
seed reaches with

    H5DCP_FUZZ_VERBOSE=1 build-san/tests/fuzz/h5dcp_fuzz_local_copy SEED

    python3 tests/fuzz/make_local_copy_seeds.py [tests/fuzz/corpus/local_copy]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attribute_seeds import BIG, CHECKPOINT_NAMES, NULL, SCALAR, Scripts, write_seeds  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "local_copy")

# The objects of the copy fuzz_local_copy.cpp saves, in its order ("/" first,
# then HDF5's name order, depth first).
OBJECTS = ["/", "/model", "/model/bias", "/model/ids", "/model/scalar", "/model/weight", "/name", "/step"]
# fuzz_local_copy.cpp's names: a checkpoint's, then the tier's.
NAMES = CHECKPOINT_NAMES + ["local.run_id", "local.step", "local.owner_rank", "local.replica", "local.nodes",
                            "local.rank_node", "local.chunk_owners"]
_s = Scripts(OBJECTS, NAMES)
delete, string, ints = _s.delete, _s.string, _s.ints

W = "/model/weight"
seeds = {
    "valid": b"",
    # the run identity
    "run_id_missing": delete("/", "local.run_id"),
    "run_id_empty": string("/", "local.run_id", ""),
    "run_id_binary": string("/", "local.run_id", b"\xff\x00run"),
    "run_id_spaces": string("/", "local.run_id", "a run", fixed=True),
    "run_id_long": string("/", "local.run_id", "r" * 255),
    "run_id_integer": ints("/", "local.run_id", [7]),
    # the step: the survey compares it with its directory's name
    "step_other": ints("/", "local.step", [4]),
    "step_negative": ints("/", "local.step", [-3]),
    "step_huge": ints("/", "local.step", [BIG]),
    "step_two": ints("/", "local.step", [3, 3]),
    "step_string": string("/", "local.step", "3"),
    "step_missing": delete("/", "local.step"),
    "step_int8_scalar": ints("/", "local.step", [3], "i8", SCALAR),
    # the owner rank: the survey compares it with the file's name
    "owner_other": ints("/", "local.owner_rank", [1]),
    "owner_negative": ints("/", "local.owner_rank", [-1]),
    "owner_huge": ints("/", "local.owner_rank", [2**64 - 1], "u64"),
    "owner_wraps": ints("/", "local.owner_rank", [2**32]),  # rank 0 once narrowed to int
    "replica_wraps": ints("/", "local.replica", [2**32]),
    "owner_null": ints("/", "local.owner_rank", [], shape=NULL),
    "owner_missing": delete("/", "local.owner_rank"),
    # the replica
    "replica_negative": ints("/", "local.replica", [-1]),
    "replica_huge": ints("/", "local.replica", [BIG]),
    "replica_missing": delete("/", "local.replica"),
    # the saving job's nodes and each rank's
    "nodes_empty": string("/", "local.nodes", ""),
    "nodes_two": string("/", "local.nodes", "a\nb"),
    "nodes_blank_line": string("/", "local.nodes", "a\n\nb\n"),
    "nodes_integer": ints("/", "local.nodes", [0]),
    "nodes_missing": delete("/", "local.nodes"),
    "rank_node_outside": ints("/", "local.rank_node", [1]),
    "rank_node_negative": ints("/", "local.rank_node", [-1]),
    "rank_node_huge": ints("/", "local.rank_node", [BIG]),
    "rank_node_empty": ints("/", "local.rank_node", [], shape=NULL),
    "rank_node_two_ranks": ints("/", "local.rank_node", [0, 0]),
    "rank_node_2d": ints("/", "local.rank_node", [0, 0], shape=[1, 2]),
    "rank_node_missing": delete("/", "local.rank_node"),
    # a job of two ranks, agreeing everywhere: this copy holds rank 0's
    # chunk of the weight only, so the load misses rank 1's
    "two_ranks_one_holds": ints("/", "local.rank_node", [0, 0]) + ints("/", "world_size", [2])
    + ints(W, "local.chunk_owners", [0, 1]),
    "two_ranks_owner_1": ints("/", "local.rank_node", [0, 0]) + ints("/", "world_size", [2])
    + ints("/", "local.owner_rank", [1]),
    "world_size_two": ints("/", "world_size", [2]),
    # each tensor's chunk owners
    "owners_count": ints(W, "local.chunk_owners", [0]),
    "owners_three": ints(W, "local.chunk_owners", [0, 0, 0]),
    "owners_outside": ints(W, "local.chunk_owners", [0, 1]),
    "owners_negative": ints(W, "local.chunk_owners", [-1, 0]),
    "owners_huge": ints(W, "local.chunk_owners", [BIG, 0]),
    "owners_string": string(W, "local.chunk_owners", "0,0"),
    "owners_missing": delete(W, "local.chunk_owners"),
    "owners_2d": ints(W, "local.chunk_owners", [0, 0], shape=[2, 1]),
    "owners_scalar_tensor": ints("/model/scalar", "local.chunk_owners", [0, 0]),
    "owners_on_a_value": ints("/step", "local.chunk_owners", [0]),
    "owners_on_a_group": ints("/model", "local.chunk_owners", [0]),
    # the checkpoint's own attributes, as a copy's readers meet them
    "checksums_wrong": ints(W, "checksums", [1, 2], "u64"),
    "checksums_ids_wrong": ints("/model/ids", "checksums", [12345], "u64"),
    "chunks_outside": ints(W, "chunk_sizes", [2, 4, 5, 4], shape=[2, 2]),
    "chunks_one": ints(W, "chunk_offsets", [0, 0], shape=[1, 2]) + ints(W, "chunk_sizes", [6, 4], shape=[1, 2]),
    "dtype_wrong": string("/model/bias", "dtype", "float16"),
    "kind_value_as_tensor": string("/step", "kind", "tensor"),
    "version_newer_major": ints("/", "format_version", [2, 0]),
    "value_checksum_wrong": ints("/step", "checksums", [1], "u64"),
}
write_seeds(out, seeds)
