"""PyTorch DCP checkpoint directories <-> h5dcp with the `h5dcp` tool,
checked against the real torch.distributed.checkpoint of PyTorch 2.13 and
h5dcp's Python package.

usage:
  dcp_test.py make DIR
      DIR/saved{1,2,3}: one state dict saved by dcp.save from 1, 2 and 3 gloo
      ranks (processes this script starts, a FileStore rendezvous): DTensors
      sharded by rows and by columns, a replicated one, plain tensors, an
      nn.Module + AdamW state dict (get_state_dict), nested dicts, a list
      holding tensors and a dict, non-tensor values (int, float, str, bytes,
      None, bool, a list of values), dtypes from bool to float8 and
      complex64, 0-d and empty tensors. DIR/hostile/*: .metadata that names
      a class outside DCP's (whose reduce would run a command), an unknown
      version, a transformed item, an item outside the directory, chunks
      that leave a gap, an item of another tensor, an item that is not an
      archive; a truncated .distcp; two chunks at one item (overlapping
      bytes), a planner_data path 150,000 keys deep, a FIFO .distcp, a
      .distcp and a .metadata that are links leading out of the directory.
  dcp_test.py import CLI MPIEXEC DIR RANKS
      each saved{N} -> `h5dcp convert` on RANKS ranks -> every tensor and value
      equal, bit for bit, to what DCP itself loads from the directory
      (_load_state_dict with the empty-state-dict planner, as
      dcp_to_torch_save does); the checkpoint verifies.
  dcp_test.py hostile CLI MPIEXEC DIR
      every hostile directory: `h5dcp convert` fails on 1 and 3 ranks with the
      expected message and exit code 3 within seconds, writes nothing, and
      the hostile command never ran.
  dcp_test.py export CLI MPIEXEC DIR RANKS CHECKPOINT...
      each checkpoint -> `h5dcp convert CKPT DIR/exported/<name>` on RANKS
      ranks (twice: --force replaces the first) -> DCP's own whole load of the
      directory equals the checkpoint bit for bit; the sharded DCP loads are
      dcp_reader_test.py's, with CKPT=DIRECTORY arguments.
"""
import os
import pickle
import shutil
import subprocess
import struct
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import h5dcp  # noqa: E402
from h5dcp_cli import cli, run  # noqa: E402
from tensor_patterns import bits, pattern  # noqa: E402

warnings.filterwarnings("ignore")  # DCP warns about the gloo group and experimental dtypes
MARKER = os.path.join(tempfile.gettempdir(), "h5dcp-dcp-hostile-ran")


def state_dict(mesh):
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(5, 6)).sum().backward()
    optimizer.step()
    model_state, optim_state = get_state_dict(model, optimizer)
    dtypes = {name: pattern((3, 4), getattr(torch, name), i)
              for i, name in enumerate(["float16", "uint8", "int8", "int32", "bool", "complex64", "float8_e4m3fn"])}
    return {
        "model": model_state,
        "optim": optim_state,
        "rows": distribute_tensor(pattern((9, 7), torch.float32, 1), mesh, [Shard(0)]),
        "cols": distribute_tensor(pattern((5, 11), torch.bfloat16, 2), mesh, [Shard(1)]),
        "replicated": distribute_tensor(pattern((4, 4), torch.float64, 3), mesh, [Replicate()]),
        "nested": {"a": {"b": pattern((3,), torch.int16, 4), "c.d": pattern((2, 2), torch.bool, 5)},
                   "step": 7, "name": "run-\u03b1", "lr": 0.25, "none": None, "on": True, "blob": b"\x00\xffraw",
                   "flags": [1, 2.5, "x", None, True]},
        "plain": pattern((6,), torch.int64, 6),
        "scalar": torch.tensor(3.5),
        "dtypes": dtypes,
        "layers": [pattern((2, 3), torch.float32, 7), {"w": pattern((3,), torch.float32, 8)}],
        "empty": torch.zeros(0, 3),
    }


def save_rank(rank, world, store, out):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    dcp.save(state_dict(init_device_mesh("cpu", (world,))), checkpoint_id=out)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def save(world, out):
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), str(world), os.path.join(tmp, "store"),
                                   out]) for r in range(world)]
        codes = [p.wait(timeout=300) for p in procs]
    if any(codes):
        raise SystemExit("FAIL: dcp.save on %d ranks exited %s" % (world, codes))


class Evil:
    """Pickled as a call of os.system: what h5dcp must refuse, never run."""

    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


def read_metadata(directory):
    with open(os.path.join(directory, ".metadata"), "rb") as f:
        return pickle.load(f)


def hostile_variant(source, target, change):
    shutil.copytree(source, target)
    md = read_metadata(target)
    change(md, target)
    with open(os.path.join(target, ".metadata"), "wb") as f:
        pickle.dump(md, f)


def storage_of(md, fqn, n=0):
    return [v for k, v in md.storage_data.items() if k.fqn == fqn][n]


HOSTILE = {
    "evil_class": "not among the classes and functions of DCP metadata",
    "version": "its metadata version is '9.0.0'",
    "transformed": "is stored transformed",
    "outside": "not the name of a file in the checkpoint directory",
    "gap": "'rows'",
    "other_item": "overlap in the data file",
    "not_archive": "are not a zip archive",
    "truncated": "truncated",
    "overlap": "overlap in the data file '__0_0.distcp'; each byte of a data file belongs to one item",
    "deep_path": "in planner_data nests 150000 keys deep; h5dcp reads checkpoints nested less than 256 deep",
    "fifo_data": "__0_0.distcp' is a FIFO, and a DCP data file must be a regular file",
    "link_data": "__0_0.distcp' (a DCP data file) leads to '",
    "link_metadata": ".metadata' (a DCP .metadata) leads to '",
}
# Each of these must fail within the bound (seconds), not at the test's timeout.
HOSTILE_SECONDS = 60


def make_hostile(source, directory):
    import dataclasses

    def evil(md, _):
        md.planner_data["rows"] = Evil()

    def version(md, _):
        md.version = "9.0.0"

    def transformed(md, _):
        storage_of(md, "rows").transform_descriptors = ["zstd"]

    def outside(md, _):
        storage_of(md, "plain").relative_path = "../saved1/__0_0.distcp"

    def gap(md, _):
        md.state_dict_metadata["rows"].chunks.pop()

    def other_item(md, _):
        keys = {k.fqn: k for k in md.storage_data}
        md.storage_data[keys["plain"]] = storage_of(md, "scalar")

    def not_archive(md, _):
        info = storage_of(md, "plain")
        keys = [k for k in md.storage_data if k.fqn == "plain"]
        md.storage_data[keys[0]] = dataclasses.replace(info, offset=info.offset + 1, length=info.length - 1)

    def truncated(md, target):
        path = os.path.join(target, "__1_0.distcp")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)

    def overlap(md, _):
        # Two chunks of 'rows' at one item: one archive, two meanings.
        keys = [k for k in md.storage_data if k.fqn == "rows"]
        md.storage_data[keys[1]] = md.storage_data[keys[0]]

    def deep_path(md, _):
        md.planner_data["plain"] = ("a",) * 150000

    def replace_data(make_file):
        def change(md, target):
            path = os.path.join(target, "__0_0.distcp")
            os.remove(path)
            make_file(path)
        return change

    outside_file = os.path.abspath(os.path.join(source, "__0_0.distcp"))
    for name, change in [("evil_class", evil), ("version", version), ("transformed", transformed),
                         ("outside", outside), ("gap", gap), ("other_item", other_item),
                         ("not_archive", not_archive), ("truncated", truncated), ("overlap", overlap),
                         ("deep_path", deep_path), ("fifo_data", replace_data(os.mkfifo)),
                         ("link_data", replace_data(lambda p: os.symlink(outside_file, p))),
                         ("link_metadata", lambda md, _: None)]:
        hostile_variant(source, os.path.join(directory, name), change)
    metadata = os.path.join(directory, "link_metadata", ".metadata")
    os.remove(metadata)
    os.symlink(os.path.abspath(os.path.join(source, ".metadata")), metadata)


def make(directory):
    if os.path.exists(directory):
        shutil.rmtree(directory)
    os.makedirs(os.path.join(directory, "hostile"))
    for world in (1, 2, 3):
        save(world, os.path.join(directory, "saved%d" % world))
    make_hostile(os.path.join(directory, "saved2"), os.path.join(directory, "hostile"))
    print("make: DCP checkpoints saved from 1, 2, 3 ranks; %d hostile directories" % len(HOSTILE))
    return 0


def dcp_full_load(directory):
    """The whole state dict as DCP loads it with no state dict to load into (dcp_to_torch_save's way)."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
    state = {}
    _load_state_dict(state, storage_reader=FileSystemReader(directory), planner=_EmptyStateDictLoadPlanner(),
                     no_dist=True)
    return state


def holds_nothing(value):
    """A dict of (dicts of) nothing: DCP stores no entry for it."""
    return isinstance(value, dict) and all(holds_nothing(v) for v in value.values())


def compare(dcp_value, ours, path, failures):
    if isinstance(dcp_value, dict):
        if isinstance(ours, dict):
            ours = {k: v for k, v in ours.items() if k in map(str, dcp_value) or not holds_nothing(v)}
        if not isinstance(ours, dict) or set(map(str, dcp_value)) != set(ours):
            failures.append("%s: keys %s, h5dcp has %s" % (path, sorted(map(str, dcp_value)),
                                                            sorted(ours) if isinstance(ours, dict) else type(ours)))
            return
        for k, v in dcp_value.items():
            compare(v, ours[str(k)], path + "/" + str(k), failures)
    elif isinstance(dcp_value, (list, tuple)):
        if not isinstance(ours, list) or len(ours) != len(dcp_value):
            failures.append("%s: a list of %d, h5dcp has %r" % (path, len(dcp_value), ours))
            return
        for i, (a, b) in enumerate(zip(dcp_value, ours)):
            compare(a, b, "%s/%d" % (path, i), failures)
    elif isinstance(dcp_value, torch.Tensor):
        if (not isinstance(ours, torch.Tensor) or ours.dtype != dcp_value.dtype or ours.shape != dcp_value.shape
                or not torch.equal(bits(ours), bits(dcp_value))):
            failures.append("%s: tensor differs (%s %s)" % (path, dcp_value.dtype, tuple(dcp_value.shape)))
    elif isinstance(dcp_value, float):
        if not isinstance(ours, float) or struct.pack("<d", ours) != struct.pack("<d", dcp_value):
            failures.append("%s: %r, h5dcp has %r" % (path, dcp_value, ours))
    elif isinstance(ours, h5dcp.PickledObject):  # exported as its bytes, as to torch.save
        if type(dcp_value) is not bytes or dcp_value != bytes(ours):
            failures.append("%s: %r, h5dcp has %r" % (path, dcp_value, ours))
    elif type(ours) is not type(dcp_value) or ours != dcp_value:
        failures.append("%s: %r, h5dcp has %r" % (path, dcp_value, ours))


def import_(args):
    failures = []
    for world in (1, 2, 3):
        source = os.path.join(args.dir, "saved%d" % world)
        ckpt = os.path.join(args.dir, "imported%d_at%d.h5" % (world, args.ranks))
        run(cli(args, args.ranks, ["convert", "--force", "--split-min-bytes", "0", source, ckpt]))
        expected = dcp_full_load(source)
        compare(expected, h5dcp.load_state_dict(ckpt, verify=True), "saved%d" % world, failures)
        h5dcp.verify(ckpt)
        # The tensors the test means to cover are there, and DTensors were saved in shards.
        md = read_metadata(source)
        shards = max(len(md.state_dict_metadata["rows"].chunks), len(md.state_dict_metadata["cols"].chunks))
        if shards != world:
            failures.append("saved%d: 'rows' and 'cols' were saved in %d chunks" % (world, shards))
    for f in failures[:30]:
        print("FAIL:", f)
    print("import on %d ranks: DCP checkpoints from 1, 2, 3 ranks %s" % (
        args.ranks, "equal bit for bit to DCP's own load" if not failures else "differ: %d failures" % len(failures)))
    return 1 if failures else 0


def hostile(args):
    failures = []
    if os.path.exists(MARKER):
        os.remove(MARKER)
    for name, expected in HOSTILE.items():
        source = os.path.join(args.dir, "hostile", name)
        for ranks in (1, 3):
            dst = os.path.join(args.dir, "hostile_out.h5")
            if os.path.exists(dst):
                os.remove(dst)
            started = time.monotonic()
            done = run(cli(args, ranks, ["convert", source, dst]), expect_ok=False)
            seconds = time.monotonic() - started
            text = done.stdout + done.stderr
            if done.returncode == 0:
                failures.append("%s on %d ranks was converted" % (name, ranks))
            elif done.returncode != 3:
                failures.append("%s on %d ranks exited %d, not 3:\n%s" % (name, ranks, done.returncode, text))
            if seconds > HOSTILE_SECONDS:
                failures.append("%s on %d ranks took %.0f s" % (name, ranks, seconds))
            elif expected not in text:
                failures.append("%s on %d ranks: expected %r in:\n%s" % (name, ranks, expected, text))
            if os.path.exists(dst):
                failures.append("%s on %d ranks left %s" % (name, ranks, dst))
            leftovers = [f for f in os.listdir(args.dir) if f.startswith(".hostile_out.h5.h5dcp-partial.")]
            if leftovers:
                failures.append("%s on %d ranks left temporary files %s" % (name, ranks, leftovers))
    if os.path.exists(MARKER):
        failures.append("the command pickled in evil_class/.metadata ran")
    for f in failures:
        print("FAIL:", f)
    print("hostile: %d directories x 2 rank counts, %s" % (
        len(HOSTILE), "all refused clearly, nothing run" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


def export(args):
    out = os.path.join(args.dir, "exported")
    os.makedirs(out, exist_ok=True)
    for ckpt in args.checkpoints:
        name = os.path.splitext(os.path.basename(ckpt))[0] + "_np%d" % args.ranks
        dst = os.path.join(out, name)
        for _ in range(2):  # the second time replaces the first
            run(cli(args, args.ranks, ["convert", "--force", "--split-min-bytes", "0", ckpt, dst]))
        files = sorted(os.listdir(dst))
        if ".metadata" not in files or not any(f.endswith(".distcp") for f in files):
            raise SystemExit("FAIL: %s holds %s" % (dst, files))
        leftovers = [f for f in os.listdir(out) if f.startswith("." + name + ".h5dcp-partial.")]
        if leftovers:
            raise SystemExit("FAIL: temporary files left: %s" % leftovers)
        # DCP's own load with no state dict to load into gives the checkpoint back, bit for bit.
        failures = []
        compare(dcp_full_load(dst), h5dcp.load_state_dict(ckpt), name, failures)
        for f in failures[:30]:
            print("FAIL:", f)
        if failures:
            return 1
        print("exported %s to %s on %d ranks: %s; DCP loads it back bit for bit" % (ckpt, dst, args.ranks,
                                                                                    ", ".join(files)))
    return 0


class Args:
    pass


if __name__ == "__main__":
    argv = sys.argv[1:]
    if len(argv) == 5 and argv[0] == "--rank":
        sys.exit(save_rank(int(argv[1]), int(argv[2]), argv[3], argv[4]))
    if len(argv) == 2 and argv[0] == "make":
        sys.exit(make(argv[1]))
    if len(argv) >= 4 and argv[0] in ("import", "hostile", "export"):
        a = Args()
        a.cli, a.mpiexec, a.dir = argv[1:4]
        if argv[0] == "hostile":
            sys.exit(hostile(a))
        a.ranks = int(argv[4])
        if argv[0] == "import":
            sys.exit(import_(a))
        a.checkpoints = argv[5:]
        sys.exit(export(a))
    print(__doc__)
    sys.exit(2)
