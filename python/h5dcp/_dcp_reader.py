"""h5dcp.DCPReader: a torch.distributed.checkpoint StorageReader over an h5dcp
checkpoint, so that

    dcp.load(state_dict, storage_reader=h5dcp.DCPReader("ckpt.h5"))

loads it into plain, DTensor or FSDP state dicts on any number of ranks. Each
rank opens the file with h5py and reads only the blocks DCP's planner gives it.

Names: DCP flattens a nested state dict by joining the keys of its path with
"." (torch.distributed.checkpoint._traverse); the reader flattens the file's
tree the same way, with DCP's own traversal, so {"model": {"l.weight": t}}
is "model.l.weight" in both. A list of values only (an optimizer's
param_groups[i]["params"], "betas") is one item, as DCP makes it; the file's
lists come back as lists (tuples were stored as lists). Two paths that
flatten to the same name are refused with a FormatError.
"""

import io
import os

import h5py
import torch
from torch.distributed.checkpoint._traverse import traverse_state_dict
from torch.distributed.checkpoint.metadata import (BytesStorageMetadata, ChunkStorageMetadata, Metadata,
                                                   TensorProperties, TensorStorageMetadata)
from torch.distributed.checkpoint.planner import LoadItemType
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from ._blocks import as_tensor, read_block, xxh3
from ._errors import FormatError, naming
from ._format import open_checkpoint, value_of
from ._tree import build


class _TensorLeaf:
    """A tensor of the file in the skeleton DCP's traversal walks: a meta
    tensor (so DCP treats it as a tensor) and the dataset's path."""

    def __init__(self, ds, info):
        self.path = ds.name
        self.info = info


class DCPReader(StorageReader):
    """Reads an h5dcp checkpoint file for torch.distributed.checkpoint.load.

    path: the checkpoint file (or pass it as dcp.load's checkpoint_id).
    verify: check the XXH3-64 of every slab each rank reads (needs xxhash).

    Tensors are described to DCP as one chunk at their global shape, so each
    rank's planner asks exactly for its own shards and the reader reads each
    as one hyperslab. Non-tensor values are handed to DCP's planner as a
    torch.save of the plain value (a PickledObject as its bytes), never as
    anything unpickled from the file. Errors (a file that is not a checkpoint,
    a damaged slab) are raised on the rank that meets them, and DCP reports
    them on every rank.
    """

    def __init__(self, path=None, *, verify=False):
        super().__init__()
        self.path = None if path is None else os.fspath(path)
        self.verify = verify
        self._items = {}  # DCP fqn -> ("tensor", dataset path, TensorInfo) or ("value", value)
        if verify:
            xxh3()

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self._items = {}

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        try:
            with open_checkpoint(os.fspath(checkpoint_id)):
                return True
        except Exception:
            return False

    def read_metadata(self, *args, **kwargs):
        if self.path is None:
            raise ValueError("h5dcp.DCPReader: no checkpoint path (pass it to DCPReader or as checkpoint_id)")
        with naming(self.path), open_checkpoint(self.path) as f:
            skeleton = build(f, "", lambda ds, info: _as_meta(_TensorLeaf(ds, info)),
                             lambda ds, kind, fqn: value_of(ds, kind, fqn)[0])
        items = {}
        state = {}

        def visit(path, value):
            fqn = ".".join(map(str, path))
            if fqn in items:
                raise FormatError("h5dcp: '%s': two entries flatten to the DCP name '%s'" % (self.path, fqn))
            leaf = getattr(value, "_h5dcp_leaf", None)
            if leaf is not None:
                info = leaf.info
                chunk = ChunkStorageMetadata(offsets=torch.Size([0] * len(info.shape)), sizes=torch.Size(info.shape))
                state[fqn] = TensorStorageMetadata(TensorProperties(dtype=info.dtype), torch.Size(info.shape), [chunk])
                items[fqn] = ("tensor", leaf.path, info)
            else:
                state[fqn] = BytesStorageMetadata()
                items[fqn] = ("value", _plain(value))

        traverse_state_dict(skeleton, visit)
        self._items = items
        return Metadata(state_dict_metadata=state, storage_data=items)

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        if isinstance(metadata.storage_data, dict):
            self._items = metadata.storage_data

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan, planner):
        with naming(self.path), h5py.File(self.path, "r") as f:
            for req in plan.items:
                item = self._items.get(req.storage_index.fqn)
                if item is None:
                    raise FormatError("h5dcp: '%s' holds no '%s'" % (self.path, req.storage_index.fqn))
                if req.type == LoadItemType.BYTE_IO:
                    if item[0] != "value":
                        raise FormatError("h5dcp: '%s': '%s' is a tensor, the state dict holds a value there"
                                          % (self.path, req.storage_index.fqn))
                    buffer = io.BytesIO()
                    torch.save(item[1], buffer)
                    buffer.seek(0)
                    planner.load_bytes(req, buffer)
                    continue
                _, dataset_path, info = item
                chunk_offset = req.storage_index.offset or torch.Size([0] * len(info.shape))
                start = [int(o) + int(s) for o, s in zip(chunk_offset, req.storage_offsets)]
                raw = read_block(f[dataset_path], info, start, [int(n) for n in req.lengths], self.verify, self.path)
                tensor = as_tensor(raw, info)
                target = planner.resolve_tensor(req).detach()
                if target.size() != tensor.size():
                    raise FormatError("h5dcp: '%s': tensor '%s': DCP asked for a block of %s into one of %s"
                                      % (self.path, info.fqn, list(tensor.size()), list(target.size())))
                target.copy_(tensor)
                planner.commit_tensor(req, target)
        done = Future()
        done.set_result(None)
        return done


def _as_meta(leaf):
    """A meta tensor standing for `leaf` in the skeleton (no memory)."""
    tensor = torch.empty(leaf.info.shape, dtype=leaf.info.dtype, device="meta")
    tensor._h5dcp_leaf = leaf
    return tensor


def _plain(value):
    """A value as DCP's planner receives it: plain Python objects only."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, torch.Tensor):
        raise FormatError("h5dcp: a tensor inside a list of values cannot be handed to DCP as bytes")
    return value
