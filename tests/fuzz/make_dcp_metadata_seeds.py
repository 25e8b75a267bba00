#!/usr/bin/env python3
"""Writes the seed corpus of the dcp_metadata fuzz target: the .metadata of
DCP checkpoints saved by PyTorch (tests/dcp/dcp_test.py make DIR) and of the
hostile directories made from them (among them two chunks at one item,
a planner_data path 150,000 keys deep; a .metadata that is a link is
skipped: it is another directory's). Needs PyTorch's virtual environment to
make DIR; copying needs nothing.

    python3 tests/fuzz/make_dcp_metadata_seeds.py DIR [tests/fuzz/corpus/dcp_metadata]
"""
import os
import shutil
import sys

source = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "corpus", "dcp_metadata")
os.makedirs(out, exist_ok=True)
count = 0
for root, _, files in os.walk(source):
    if ".metadata" in files and not os.path.islink(os.path.join(root, ".metadata")):
        name = os.path.relpath(root, source).replace(os.sep, "_")
        shutil.copyfile(os.path.join(root, ".metadata"), os.path.join(out, name))
        count += 1
print("wrote %d seeds to %s" % (count, out))
