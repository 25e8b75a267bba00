"""Issue 18: `h5dcp convert` streams a checkpoint larger than memory.

usage: larger_than_memory_test.py CLI MPIEXEC WORKDIR [LIMIT_MIB]

Each conversion runs in a memory cgroup of its own, limited to LIMIT_MIB
(default 384) with no swap, holding mpiexec and so every rank. The data is
twice the limit and one tensor alone is larger than it. Page cache is
charged to the cgroup but reclaimable (the sources are dropped from the
cache first, so that reading them is charged too): a conversion that streams
survives, one that holds a whole tensor is OOM-killed. Every conversion must
exit 0, and its output must equal the source bit for bit (checked outside
the cgroup by h5dcp's Python package, safetensors and DCP's own loads).

Directions, each at 1 and 2 ranks:
  safetensors -> h5dcp, torch.save -> h5dcp, DCP -> h5dcp,
  h5dcp -> safetensors, h5dcp -> DCP;
and h5dcp -> torch.save, which one process writes (at 1 rank).
A control first: two ranks that each touch 0.6 x the limit are killed, so
the limit binds, and binds all the ranks together.

The cgroups: cgroup v1's memory hierarchy (memory.limit_in_bytes, and
memory.memsw.limit_in_bytes where swap is accounted) or cgroup v2
(memory.max, memory.swap.max), made under H5DCP_TEST_CGROUP_ROOT when set,
else under the first of /sys/fs/cgroup/memory, /sys/fs/cgroup and
/sys/fs/cgroup/unified that has a memory controller; each removed when its
conversion ends, also on failure. Exits 77 (skipped), saying why, where none
can be made (not root, no memory controller).
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
for d in ("../../python", "../support", "../dcp", "../safetensors"):
    sys.path.insert(0, os.path.join(HERE, d))
import h5dcp  # noqa: E402
from child_output import hdf5_diag  # noqa: E402
from dcp_test import compare, dcp_full_load  # noqa: E402  (nested state dicts, bit for bit)
from safetensors_test import flat, same_tensors  # noqa: E402  (flat safetensors dicts, bit for bit)

MIB = 1 << 20
SKIP = 77
PREFIX = "h5dcp-test-"



class MemoryCgroup:
    """A fresh memory cgroup under `parent` limited to `limit` bytes, without swap."""

    def __init__(self, parent, version, limit):
        self.path = os.path.join(parent, "%s%d-%d" % (PREFIX, os.getpid(), time.monotonic_ns()))
        self.version = version
        os.mkdir(self.path)
        try:
            if version == 1:
                self.write("memory.limit_in_bytes", limit)
                # Swap would hide what a conversion holds: none where it is accounted, else as little as may be.
                self.write("memory.memsw.limit_in_bytes", limit, optional=True)
                self.write("memory.swappiness", 0, optional=True)
            else:
                self.write("memory.max", limit)
                self.write("memory.swap.max", 0, optional=True)
        except BaseException:
            self.remove()
            raise

    def write(self, name, value, optional=False):
        # No O_CREAT: the kernel makes these files, so a directory that is no cgroup fails here.
        try:
            fd = os.open(os.path.join(self.path, name), os.O_WRONLY)
        except FileNotFoundError:
            if optional:
                return
            raise
        try:
            os.write(fd, str(value).encode())
        finally:
            os.close(fd)

    def read(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                return f.read()
        except OSError:
            return None

    def command(self, command):
        """`command` run inside the cgroup: a shell moves itself in, then execs it."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.path] + command

    def peak(self):
        """The most it was charged (processes and page cache), or None where the kernel does not say."""
        text = self.read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        return int(text) if text else None

    def remove(self):
        for _ in range(100):
            # Ranks left behind (a timeout) are this test's own: kill them, or the cgroup stays busy.
            for pid in (self.read("cgroup.procs") or "").split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        print("WARNING: could not remove the cgroup %s" % self.path)


def remove_stale(parent):
    """Empty cgroups of earlier runs whose test process is gone (killed by a CTest timeout)."""
    for name in os.listdir(parent):
        if not name.startswith(PREFIX):
            continue
        try:
            os.kill(int(name[len(PREFIX):].split("-")[0]), 0)
        except ProcessLookupError:
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass
        except (ValueError, PermissionError):
            pass


def find_cgroup_parent():
    """(directory, version) to make the cgroups under, or (None, why there is none)."""
    override = os.environ.get("H5DCP_TEST_CGROUP_ROOT")
    candidates = [override] if override else ["/sys/fs/cgroup/memory", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
    reasons = []
    for parent in candidates:
        if os.path.exists(os.path.join(parent, "memory.limit_in_bytes")):
            version = 1
        elif os.path.exists(os.path.join(parent, "cgroup.controllers")):
            version = 2
            with open(os.path.join(parent, "cgroup.controllers")) as f:
                if "memory" not in f.read().split():
                    reasons.append("%s: cgroup v2 without the memory controller" % parent)
                    continue
            # Children have memory.max only where the parent hands the controller down.
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                handed_down = "memory" in f.read().split()
            if not handed_down:
                try:
                    with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                        f.write("+memory")
                except OSError as e:
                    reasons.append("%s: cannot enable the memory controller for children: %s" % (parent, e))
                    continue
        else:
            reasons.append("%s: no memory cgroup (v1 or v2)" % parent)
            continue
        try:
            remove_stale(parent)
            MemoryCgroup(parent, version, 64 * MIB).remove()
        except OSError as e:
            reasons.append("%s: cannot make a memory cgroup: %s" % (parent, e))
            continue
        return parent, version
    return None, "; ".join(reasons)


def random_tensor(shape, dtype, seed):
    """Random bytes viewed as `dtype`, every bit pattern included: no slab
    repeats another, so one read or written at the wrong offset shows."""
    n = torch.empty(shape, dtype=dtype).nbytes
    return torch.empty(n, dtype=torch.uint8).random_(generator=torch.Generator().manual_seed(seed)).view(
        dtype).reshape(shape)


def reference(limit):
    """2 x `limit` bytes of tensors: 1.25 x limit in one (more than the cgroup holds), 0.75 x in another."""
    cols = 4096
    return {"model": {"big.weight": random_tensor((limit * 5 // 4 // (cols * 4), cols), torch.float32, 1),
                      "mid.weight": random_tensor((limit * 3 // 4 // (cols * 2), cols), torch.bfloat16, 2),
                      "norm.bias": random_tensor((257,), torch.float16, 3),
                      "mask": torch.rand(7, 5, generator=torch.Generator().manual_seed(4)) > 0.5},
            "step": torch.tensor(1000, dtype=torch.int64)}


def make_sources(ref, work):
    """The three sources, written by the packages themselves (outside the cgroups)."""
    import torch.distributed.checkpoint as dcp
    sources = {"safetensors": os.path.join(work, "src.safetensors"), "torch.save": os.path.join(work, "src.pt"),
               "DCP": os.path.join(work, "src_dcp")}
    save_file(flat(ref), sources["safetensors"])
    torch.save(ref, sources["torch.save"])
    dcp.save(ref, checkpoint_id=sources["DCP"], no_dist=True)
    return sources


def drop_cached(path):
    """`path` (a file, or the files of a directory) written back and dropped from
    the page cache: the conversion reads it from the disk, into page cache
    charged to its cgroup, as on a node that has not read it yet."""
    paths = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] if os.path.isdir(path) else [path]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_limited(parent, version, limit, command):
    """`command` in a fresh cgroup: (its CompletedProcess, seconds, peak bytes or None)."""
    group = MemoryCgroup(parent, version, limit)
    try:
        start = time.monotonic()
        done = subprocess.run(group.command(command), capture_output=True, text=True, timeout=240)
        return done, time.monotonic() - start, group.peak()
    finally:
        group.remove()


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__)
        return 2
    cli, mpiexec, work = argv[:3]
    limit = int(argv[3]) * MIB if len(argv) == 4 else 384 * MIB
    if os.environ.get("H5DCP_TEST_SANITIZED"):
        # ASan's shadow memory and allocator add to what each rank holds: the
        # bound would be ASan's, not h5dcp's. scripts/test.sh's build checks it.
        print("SKIP: a sanitizer build (H5DCP_SANITIZE): memory bounds are checked in the regular build")
        return SKIP
    parent, version = find_cgroup_parent()
    if parent is None:
        print("SKIP: no memory cgroup can be made to run the conversions in (%s)" % version)
        return SKIP
    print("memory cgroups: v%d under %s, limit %d MiB, no swap" % (version, parent, limit // MIB))
    # Terminated, still remove the cgroup in hand (its `finally`).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    failures = []

    # The control: each rank alone fits, both together do not.
    touch = "import time; b = bytearray(%d); time.sleep(2)" % (limit * 6 // 10)
    done, _, peak = run_limited(parent, version, limit, [mpiexec, "-n", "2", sys.executable, "-c", touch])
    print("control, 2 ranks touching 0.6 x the limit each: exit %d, peak %s MiB" % (
        done.returncode, "?" if peak is None else peak // MIB))
    if done.returncode == 0:
        failures.append("the control was not killed: the limit does not bind every rank")

    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ref = reference(limit)
    total = sum(t.nbytes for t in flat(ref).values())
    sources = make_sources(ref, work)
    big = ref["model"]["big.weight"].nbytes
    print("sources: %d MiB of tensors, the largest %d MiB" % (total // MIB, big // MIB))
    assert total >= 2 * limit - MIB and big > limit

    def convert(what, ranks, src, dst):
        """One conversion in its own cgroup: True when it exited 0."""
        drop_cached(src)
        command = [cli, "convert", "--force", src, dst]
        done, seconds, peak = run_limited(parent, version, limit,
                                          command if ranks == 1 else [mpiexec, "-n", str(ranks)] + command)
        print("%-20s np%d: exit %d, peak %s MiB under a %d MiB limit, %.1f s" % (
            what, ranks, done.returncode, "?" if peak is None else peak // MIB, limit // MIB, seconds))
        if done.returncode != 0:
            failures.append("%s at %d ranks exited %d under a %d MiB limit (-9/137: OOM-killed):\n%s%s" % (
                what, ranks, done.returncode, limit // MIB, done.stdout, done.stderr[-3000:]))
            return False
        diag = hdf5_diag(done.stdout + done.stderr, what)
        if diag:
            failures.append(diag)
        return True

    def check(dst, found, keep=False):
        failures.extend(found)
        print("  %s: %s" % (os.path.basename(dst), "%d differences" % len(found) if found else "equal bit for bit"))
        if found or keep:
            return
        if os.path.isdir(dst):  # at most 5 copies of the data on the disk at once
            shutil.rmtree(dst)
        else:
            os.remove(dst)

    def compare_tree(expected, got, where):
        found = []
        compare(expected, got, where, found)
        return found

    ckpt = os.path.join(work, "from_safetensors_np1.h5")
    for ranks in (1, 2):
        for kind, src in sources.items():
            dst = os.path.join(work, "from_%s_np%d.h5" % (kind.replace(".", "_"), ranks))
            if convert(kind + " -> h5dcp", ranks, src, dst):
                check(dst, compare_tree(ref, h5dcp.load_state_dict(dst), dst), keep=dst == ckpt)
        # Exports, from the checkpoint the safetensors import wrote on 1 rank (its failure is reported).
        if not os.path.exists(ckpt):
            continue
        st = os.path.join(work, "out_np%d.safetensors" % ranks)
        if convert("h5dcp -> safetensors", ranks, ckpt, st):
            check(st, same_tensors(flat(ref), load_file(st), st))
        out = os.path.join(work, "out_dcp_np%d" % ranks)
        if convert("h5dcp -> DCP", ranks, ckpt, out):
            check(out, compare_tree(ref, dcp_full_load(out), out))
        if ranks == 1:  # one process writes the one zip file
            pt = os.path.join(work, "out.pt")
            if convert("h5dcp -> torch.save", ranks, ckpt, pt):
                check(pt, compare_tree(ref, torch.load(pt, weights_only=True), pt))

    for f in failures[:20]:
        print("FAIL:", f)
    print("%d MiB converted each way in a %d MiB cgroup, %.1f s: %s" % (
        total // MIB, limit // MIB, time.monotonic() - started, "%d failures" % len(failures) if failures else "OK"))
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
