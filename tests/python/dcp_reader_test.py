"""h5dcp.DCPReader under real torch.distributed.checkpoint.load on N gloo
ranks (and DCP's own FileSystemReader over a directory h5dcp exported) (N processes this script starts, a FileStore rendezvous: no ports to
agree on). Every tensor of the checkpoint is loaded into a DTensor sharded
another way than it was saved (Shard(0), Shard(1) or Replicate, by position)
or into a plain tensor, every value into a placeholder; each rank then checks
its local shard against h5dcp.load_state_dict of the same file, bit for bit,
and that every value was replaced by the file's. A second load with
verify=True must give the same bytes. An argument CHECKPOINT=DIRECTORY
loads the DCP directory DIRECTORY (`h5dcp convert CHECKPOINT DIRECTORY`)
with FileSystemReader instead, and checks it against CHECKPOINT the same way.

usage: dcp_reader_test.py RANKS CHECKPOINT[=DIRECTORY]...
"""
import os
import struct
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

import h5dcp

import warnings  # noqa: E402
warnings.filterwarnings("ignore")  # complex32 is experimental; DCP warns about the gloo group

UNSET = "<unset by the test>"


def bits(t):
    return t.contiguous().reshape(-1).view(torch.uint8)


def zeros_of(shape, dtype):
    """Zeros of any dtype (float8, uint16 and complex32 have no zeros kernel everywhere)."""
    size = torch.empty(0, dtype=dtype).element_size()
    return torch.zeros(list(shape) + [size], dtype=torch.uint8).view(dtype).reshape(shape)


def placement_for(position, tensor):
    """Shard(0), Shard(1) or Replicate by position; plain for 0-d and empty tensors."""
    if tensor.dim() == 0 or tensor.numel() == 0:
        return None
    choice = position % 3
    if choice == 1 and tensor.dim() >= 2:
        return Shard(1)
    if choice == 2:
        return Replicate()
    return Shard(0)


def destination(whole, mesh, counter, expected):
    """A state dict shaped like `whole`: DTensors of zeros (or plain zero
    tensors) and placeholder values; `expected` maps each leaf's id to what it must hold."""
    if isinstance(whole, dict):
        return {k: destination(v, mesh, counter, expected) for k, v in whole.items()}
    if isinstance(whole, list) and any(isinstance(v, (dict, list, torch.Tensor)) for v in whole):
        return [destination(v, mesh, counter, expected) for v in whole]
    if isinstance(whole, torch.Tensor):
        counter[0] += 1
        placement = placement_for(counter[0], whole)
        if placement is None:
            out = zeros_of(whole.shape, whole.dtype)
            expected.append((out, whole))
            return out
        shape, offset = compute_local_shape_and_global_offset(whole.shape, mesh, [placement])
        local = zeros_of(shape, whole.dtype)
        out = DTensor.from_local(local, mesh, [placement], run_check=False, shape=whole.shape, stride=whole.stride())
        index = tuple(slice(o, o + s) for o, s in zip(offset, shape))
        expected.append((out, whole[index]))
        return out
    return UNSET  # a value, or a list of values: DCP loads it as one item


def same_value(a, b):
    """Equal values of the same type; floats bit for bit (NaN payloads, -0.0)."""
    if isinstance(b, list):
        return isinstance(a, list) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(b, float):
        return isinstance(a, float) and struct.pack("<d", a) == struct.pack("<d", b)
    want_type = bytes if isinstance(b, bytes) else type(b)  # a PickledObject arrives as its bytes
    return type(a) is want_type and a == b


def check(loaded, whole, path, failures):
    if isinstance(whole, dict):
        for k in whole:
            check(loaded[k], whole[k], path + "." + k, failures)
    elif isinstance(whole, list) and isinstance(loaded, list) and any(isinstance(v, (dict, list, torch.Tensor)) for v in whole):
        for i, (a, b) in enumerate(zip(loaded, whole)):
            check(a, b, "%s.%d" % (path, i), failures)
    elif not isinstance(whole, torch.Tensor):
        if loaded == UNSET or not same_value(loaded, whole):
            failures.append("%s: value %r, the file holds %r" % (path, loaded, whole))


def rank_main(checkpoints, rank, world, store):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    failures = []
    loads = []
    for argument in checkpoints:
        checkpoint, _, directory = argument.partition("=")
        if directory:
            loads.append((checkpoint, lambda d=directory: dcp.FileSystemReader(d)))
        else:
            for verify in (False, True):
                loads.append((checkpoint, lambda c=checkpoint, v=verify: h5dcp.DCPReader(c, verify=v)))
    for checkpoint, reader in loads:
        whole = h5dcp.load_state_dict(checkpoint)
        expected = []
        state = destination(whole, mesh, [0], expected)
        dcp.load(state, storage_reader=reader())
        check(state, whole, "", failures)
        sharded = 0
        for out, want in expected:
            local = out.to_local() if isinstance(out, DTensor) else out
            sharded += isinstance(out, DTensor) and out.placements[0].is_shard()
            if local.dtype != want.dtype or local.shape != want.shape or not torch.equal(bits(local), bits(want)):
                failures.append("%s: a tensor's local block differs (%s %s)" % (checkpoint, want.dtype, tuple(want.shape)))
        if sharded == 0 and world > 1:
            failures.append("%s: no tensor was loaded sharded" % checkpoint)
    dist.barrier()
    dist.destroy_process_group()
    for failure in failures[:20]:
        print("rank %d FAIL: %s" % (rank, failure))
    print("rank %d: %d loads through DCP (h5dcp.DCPReader with verify off and on, FileSystemReader of exports), %s"
          % (rank, len(loads), "bit for bit" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


def main(ranks, checkpoints):
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), str(ranks), store] + checkpoints)
                 for r in range(ranks)]
        codes = [p.wait(timeout=300) for p in procs]
    print("dcp_reader_test: %d ranks, exit codes %s" % (ranks, codes))
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "--rank":
        sys.exit(rank_main(sys.argv[5:], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(int(sys.argv[1]), sys.argv[2:]))
