"""safetensors <-> h5dcp with the `h5dcp` tool, checked by the real
`safetensors` package (0.8) and PyTorch 2.13, and by h5dcp's Python package.

usage:
  safetensors_test.py make DIR
      DIR/every.safetensors: every dtype safetensors has (19), written by
      safetensors.torch.save_file, with nested ("model/...") and dotted names,
      0-d, empty and uneven tensors and a __metadata__; DIR/hostile/*: headers
      that lie (offsets past the data, overlapping ranges, a gap, a length
      past the file, an unknown dtype, a shape that is not the bytes, not
      JSON, a truncated file), an index naming a file outside its directory,
      a key twice, a tensor at a __metadata__ value, a name 300,000 keys
      deep, a FIFO shard, shards that are links leading out of the directory
      (and one that stays inside, which converts).
  safetensors_test.py roundtrip CLI MPIEXEC DIR RANKS
      every.safetensors -> checkpoint (RANKS ranks) -> equal to load_file bit
      for bit (h5dcp.load_state_dict) and verified; -> one .safetensors file
      and a sharded directory (RANKS ranks) -> load_file of each equals the
      original, metadata kept, index complete; the directory -> checkpoint ->
      equal again.
  safetensors_test.py hostile CLI MPIEXEC DIR
      every hostile file: `h5dcp convert` fails on 1 and 2 ranks with the
      expected message on every rank, exit code 3, within seconds, and writes
      nothing.
  safetensors_test.py select CLI MPIEXEC DIR CHECKPOINT
      --prefix (names relative to it, as Hugging Face names a module's
      weights), --key selections, a complex128 tensor refused by name, values
      left out and reported.
"""
import json
import os
import shutil
import struct
import sys
import time

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import h5dcp  # noqa: E402
from h5dcp_cli import cli, run  # noqa: E402
from tensor_patterns import bits, pattern  # noqa: E402

DTYPES = ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
          "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
          "float8_e8m0fnu", "complex64"]
METADATA = {"format": "pt", "note": "written by the safetensors package"}


def reference():
    tensors = {}
    for i, name in enumerate(DTYPES):
        dtype = getattr(torch, name)
        tensors["model/dtypes/" + name] = pattern((7, 5) if i % 2 else (13,), dtype, i)
    tensors["model/embed.weight"] = pattern((257, 33), torch.bfloat16, 99)  # uneven rows for 2 and 3 ranks
    tensors["lm_head.weight"] = pattern((33, 8), torch.float32, 7)
    tensors["scalar"] = pattern((), torch.int64, 3)
    tensors["empty"] = torch.empty((0, 4), dtype=torch.float16)
    return tensors


def same_tensors(a, b, where):
    failures = []
    if set(a) != set(b):
        failures.append("%s: names differ: %s" % (where, sorted(set(a) ^ set(b))[:5]))
    for k in set(a) & set(b):
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(bits(x), bits(y)):
            failures.append("%s: %s differs (%s %s vs %s %s)" % (where, k, x.dtype, tuple(x.shape), y.dtype,
                                                                 tuple(y.shape)))
    return failures


def flat(tree, prefix=""):
    """h5dcp.load_state_dict's nested dict as safetensors names (keys joined by '/')."""
    out = {}
    for k, v in tree.items():
        name = prefix + k
        if isinstance(v, dict):
            out.update(flat(v, name + "/"))
        else:
            out[name] = v
    return out


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def make(directory):
    shutil.rmtree(os.path.join(directory, "hostile"), ignore_errors=True)  # links and FIFOs are not overwritten
    os.makedirs(os.path.join(directory, "hostile"))
    save_file(reference(), os.path.join(directory, "every.safetensors"), metadata=METADATA)
    good = {"a": torch.arange(4, dtype=torch.float32), "b": torch.arange(2, dtype=torch.int16)}

    def with_header(name, header, data, size=None):
        text = json.dumps(header).encode()
        blob = struct.pack("<Q", len(text) if size is None else size) + text + data
        with open(os.path.join(directory, "hostile", name), "wb") as f:
            f.write(blob)

    data = bits(good["a"]).numpy().tobytes() + bits(good["b"]).numpy().tobytes()
    a = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
    b = {"dtype": "I16", "shape": [2], "data_offsets": [16, 20]}
    with_header("past_the_data.safetensors", {"a": a, "b": dict(b, data_offsets=[16, 24])}, data)
    with_header("overlapping.safetensors", {"a": a, "b": dict(b, data_offsets=[12, 16])}, data[:16])
    with_header("gap.safetensors", {"a": dict(a, data_offsets=[0, 16]), "b": dict(b, data_offsets=[18, 22])},
                data + b"\0\0")
    with_header("length_past_the_file.safetensors", {"a": a, "b": b}, data, size=1 << 20)
    with_header("unknown_dtype.safetensors", {"a": dict(a, dtype="F4"), "b": b}, data)
    with_header("shape_not_bytes.safetensors", {"a": dict(a, shape=[5]), "b": b}, data)
    with open(os.path.join(directory, "hostile", "not_json.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", 12) + b"{not json!!}" + data)
    with_header("truncated.safetensors", {"a": a, "b": b}, data[:10])
    os.makedirs(os.path.join(directory, "hostile", "escape"), exist_ok=True)
    with open(os.path.join(directory, "hostile", "escape", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {"a": "../every.safetensors"}}, f)
    # Two meanings at one key: a JSON key twice, a tensor at a __metadata__ value.
    text = json.dumps({"a": a, "b": b})
    raw = text[:-1] + ', "a": ' + json.dumps(a) + "}"
    with open(os.path.join(directory, "hostile", "duplicate_key.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw.encode() + data)
    with_header("metadata_clash.safetensors", {"__metadata__": {"format": "pt"}, "__metadata__/format": a, "b": b},
                data)
    # 300,000 levels in 600 KB: refused before any container is indexed.
    with_header("deep_name.safetensors", {"a/" * 300000 + "a": a, "b": b}, data)

    def shard_set(name, shard, index_text=None):
        """DIR/hostile/NAME: an index mapping 'a' and 'b' to SHARD, made by shard(path)."""
        target = os.path.join(directory, "hostile", name)
        os.makedirs(target, exist_ok=True)
        shard(os.path.join(target, "shard.safetensors"))
        with open(os.path.join(target, "model.safetensors.index.json"), "w") as f:
            f.write(index_text or json.dumps({"weight_map": {"a": "shard.safetensors", "b": "shard.safetensors"}}))

    good_path = os.path.join(directory, "hostile", "good.safetensors")
    save_file(good, good_path)
    shard_set("fifo_shard", os.mkfifo)
    shard_set("link_outside", lambda p: os.symlink(os.path.abspath(good_path), p))
    shard_set("link_inside", lambda p: (shutil.copyfile(good_path, p + ".real"), os.symlink("shard.safetensors.real", p)))
    shard_set("duplicate_index_key", lambda p: shutil.copyfile(good_path, p),
              '{"weight_map": {"a": "shard.safetensors", "b": "shard.safetensors", "a": "other.safetensors"}}')
    os.makedirs(os.path.join(directory, "hostile", "link_directory"), exist_ok=True)
    os.symlink(os.path.abspath(good_path), os.path.join(directory, "hostile", "link_directory", "model.safetensors"))
    print("wrote every.safetensors (%d tensors) and %d hostile files" % (len(reference()),
                                                                          len(os.listdir(os.path.join(directory, "hostile")))))
    return 0


HOSTILE = {
    "past_the_data.safetensors": "tensor 'b' lies about its offsets: [16, 24) is not inside the 20 bytes of data",
    "overlapping.safetensors": "overlapping ranges",
    "gap.safetensors": "tensor 'b' lies about its offsets: it starts at 18, leaving a gap after byte 16",
    "length_past_the_file.safetensors": "is larger than the file",
    "unknown_dtype.safetensors": "tensor 'a' has unknown dtype 'F4'",
    "shape_not_bytes.safetensors": "tensor 'a' of shape [5] and dtype F32 does not have 16 bytes",
    "not_json.safetensors": "its header is not JSON",
    "truncated.safetensors": "tensor 'a' lies about its offsets: [0, 16) is not inside the 10 bytes of data",
    "escape": "names the file '../every.safetensors', which is not a plain file name in the index's directory",
    "duplicate_key.safetensors": "its header holds the key 'a' twice in one object (one name, one meaning)",
    "metadata_clash.safetensors": "'__metadata__/format' is both a tensor and a __metadata__ value",
    "deep_name.safetensors": "nests 300001 keys deep; h5dcp reads checkpoints nested less than 256 deep",
    "fifo_shard": "shard.safetensors' is a FIFO, and a safetensors file must be a regular file",
    "link_outside": "shard.safetensors' (a shard its index names) leads to '",
    "link_directory": "model.safetensors' (the safetensors file of the directory) leads to '",
    "duplicate_index_key": "is not a valid safetensors index: it holds the key 'a' twice in one object",
}
# Each of these must fail within the bound (seconds), not at the test's timeout.
HOSTILE_SECONDS = 60


def hostile(args):
    failures = []
    for name, expected in HOSTILE.items():
        src = os.path.join(args.dir, "hostile", name)
        for ranks in (1, 2):
            dst = os.path.join(args.dir, "hostile_out.h5")
            if os.path.exists(dst):
                os.remove(dst)
            started = time.monotonic()
            done = run(cli(args, ranks, ["convert", src, dst]), expect_ok=False)
            seconds = time.monotonic() - started
            text = done.stdout + done.stderr
            if done.returncode == 0:
                failures.append("%s on %d ranks was converted" % (name, ranks))
            elif done.returncode != 3:
                failures.append("%s on %d ranks exited %d, not 3:\n%s" % (name, ranks, done.returncode, text))
            if seconds > HOSTILE_SECONDS:
                failures.append("%s on %d ranks took %.0f s" % (name, ranks, seconds))
            elif text.count(expected) < (ranks if ranks > 1 else 1) and expected not in text:
                failures.append("%s on %d ranks: expected %r in:\n%s" % (name, ranks, expected, text))
            if os.path.exists(dst):
                failures.append("%s on %d ranks left %s" % (name, ranks, dst))
            leftovers = [f for f in os.listdir(args.dir) if ".h5dcp-partial." in f]
            if leftovers:
                failures.append("%s on %d ranks left temporary files %s" % (name, ranks, leftovers))
    # A link that stays inside the directory is allowed.
    dst = os.path.join(args.dir, "hostile_out.h5")
    done = run(cli(args, 1, ["convert", os.path.join(args.dir, "hostile", "link_inside"), dst]), expect_ok=False)
    if done.returncode != 0:
        failures.append("link_inside was refused:\n%s%s" % (done.stdout, done.stderr))
    if os.path.exists(dst):
        os.remove(dst)
    for f in failures:
        print("FAIL:", f)
    print("hostile: %d files x 2 rank counts, %s" % (len(HOSTILE), "all refused clearly" if not failures else
                                                      "%d failures" % len(failures)))
    return 1 if failures else 0


def roundtrip(args):
    n = args.ranks
    original = load_file(os.path.join(args.dir, "every.safetensors"))
    failures = []
    ckpt = os.path.join(args.dir, "imported%d.h5" % n)
    run(cli(args, n, ["convert", "--force", "--split-min-bytes", "0", os.path.join(args.dir, "every.safetensors"),
                      ckpt]))
    state = h5dcp.load_state_dict(ckpt, verify=True)
    metadata = state.pop("__metadata__", None)
    if metadata != METADATA:
        failures.append("import: __metadata__ came back as %r" % (metadata,))
    failures += same_tensors(original, flat(state), "import at %d ranks" % n)
    h5dcp.verify(ckpt)

    single = os.path.join(args.dir, "exported%d.safetensors" % n)
    run(cli(args, n, ["convert", "--force", "--split-min-bytes", "0", ckpt, single]))
    failures += same_tensors(original, load_file(single), "export at %d ranks" % n)
    if header_of(single).get("__metadata__") != METADATA:
        failures.append("export: __metadata__ is %r" % header_of(single).get("__metadata__"))

    sharded = os.path.join(args.dir, "sharded%d" % n)
    run(cli(args, n, ["convert", "--force", "--max-shard-size", "4KB", ckpt, sharded]))
    with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
        index = json.load(f)
    shards = sorted(set(index["weight_map"].values()))
    if len(shards) < 3 or any(not s.endswith("-of-%05d.safetensors" % len(shards)) for s in shards):
        failures.append("sharded export: shards %s" % shards)
    loaded = {}
    for shard in shards:
        part = load_file(os.path.join(sharded, shard))
        for name in part:
            if index["weight_map"].get(name) != shard:
                failures.append("sharded export: %s is in %s, the index says %s" % (name, shard,
                                                                                  index["weight_map"].get(name)))
        if os.path.getsize(os.path.join(sharded, shard)) - 8 - struct.unpack(
                "<Q", open(os.path.join(sharded, shard), "rb").read(8))[0] > 4000 and len(part) > 1:
            failures.append("sharded export: %s holds more than 4KB in %d tensors" % (shard, len(part)))
        loaded.update(part)
    failures += same_tensors(original, loaded, "sharded export at %d ranks" % n)
    total = sum(t.numel() * t.element_size() for t in original.values())
    if index["metadata"]["total_size"] != total:
        failures.append("index total_size %s, tensors hold %d bytes" % (index["metadata"]["total_size"], total))
    if sorted(os.listdir(sharded)) != sorted(shards + ["model.safetensors.index.json"]):
        failures.append("sharded export: the directory holds %s" % sorted(os.listdir(sharded)))

    # Exported again over it in one shard: the directory is replaced whole (no
    # shard of the first export left in it) and nothing is left beside it.
    run(cli(args, n, ["convert", "--force", "--max-shard-size", "1GB", ckpt, sharded]))
    with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
        larger = sorted(set(json.load(f)["weight_map"].values()))
    if larger == shards or sorted(os.listdir(sharded)) != sorted(larger + ["model.safetensors.index.json"]):
        failures.append("sharded export replaced: shards %s before, %s after, the directory holds %s" % (
            shards, larger, sorted(os.listdir(sharded))))
    beside = [f for f in os.listdir(args.dir) if f.startswith(".sharded%d." % n)]
    if beside:
        failures.append("sharded export replaced: left beside it: %s" % beside)
    loaded = {}
    for shard in larger:
        loaded.update(load_file(os.path.join(sharded, shard)))
    failures += same_tensors(original, loaded, "sharded export replaced at %d ranks" % n)

    back = os.path.join(args.dir, "reimported%d.h5" % n)
    run(cli(args, n, ["convert", "--force", sharded, back]))
    state = h5dcp.load_state_dict(back, verify=True)
    state.pop("__metadata__", None)
    failures += same_tensors(original, flat(state), "re-import of the sharded export at %d ranks" % n)
    for f in failures:
        print("FAIL:", f)
    print("roundtrip at %d ranks: %d tensors, %s" % (n, len(original), "bit for bit" if not failures else
                                                     "%d failures" % len(failures)))
    return 1 if failures else 0


def select(args):
    failures = []
    whole = h5dcp.load_state_dict(args.checkpoint)
    out = os.path.join(args.dir, "module.safetensors")
    run(cli(args, 2, ["convert", "--force", "--prefix", "module/", args.checkpoint, out]))
    got = load_file(out)
    failures += same_tensors(whole["module"], got, "--prefix module/")
    if "0.weight" not in got:
        failures.append("--prefix: names %s" % sorted(got))
    out = os.path.join(args.dir, "keys.safetensors")
    run(cli(args, 1, ["convert", "--force", "--key", "module/0.weight", "--key", "nested", args.checkpoint, out]))
    got = load_file(out)
    want = {"module/0.weight": whole["module"]["0.weight"], "nested/a/b/c": whole["nested"]["a"]["b"]["c"]}
    failures += same_tensors(want, got, "--key")
    # complex128 has no safetensors dtype: refused, naming the tensor.
    done = run(cli(args, 2, ["convert", "--force", "--prefix", "dtypes", args.checkpoint,
                             os.path.join(args.dir, "refused.safetensors")]), expect_ok=False)
    if done.returncode == 0 or "tensor 'dtypes/complex128' is complex128, which safetensors has no dtype for" not in (
            done.stdout + done.stderr):
        failures.append("complex128 export: exit %d\n%s%s" % (done.returncode, done.stdout, done.stderr))
    if os.path.exists(os.path.join(args.dir, "refused.safetensors")):
        failures.append("the refused export left its file")
    done = run(cli(args, 1, ["convert", "--force", "--key", "no/such", args.checkpoint, out]), expect_ok=False)
    if done.returncode == 0 or "has no tensor at or under 'no/such'" not in done.stdout + done.stderr:
        failures.append("a key selecting nothing: exit %d\n%s" % (done.returncode, done.stderr))
    # Values are left out and reported.
    done = run(cli(args, 1, ["convert", "--force", "--prefix", "adamw", args.checkpoint, out]))
    if "non-tensor values left out" not in done.stdout:
        failures.append("values left out were not reported:\n%s" % done.stdout)
    for f in failures:
        print("FAIL:", f)
    print("select: %s" % ("prefix, keys, refusals and values as expected" if not failures else
                          "%d failures" % len(failures)))
    return 1 if failures else 0


class Args:
    pass


if __name__ == "__main__":
    argv = sys.argv[1:]
    if not argv:
        print(__doc__)
        sys.exit(2)
    a = Args()
    if argv[0] == "make" and len(argv) == 2:
        sys.exit(make(argv[1]))
    if argv[0] in ("roundtrip", "hostile", "select") and len(argv) >= 4:
        a.cli, a.mpiexec, a.dir = argv[1:4]
        if argv[0] == "roundtrip":
            a.ranks = int(argv[4])
            sys.exit(roundtrip(a))
        if argv[0] == "hostile":
            sys.exit(hostile(a))
        a.checkpoint = argv[4]
        sys.exit(select(a))
    print(__doc__)
    sys.exit(2)
