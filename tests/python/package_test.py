"""The h5dcp Python package (python/) against checkpoints the C++ library
wrote: load_state_dict bit for bit against torch.load of the torch.save file
they were converted from, prefixes, verify on sound and damaged files, a
missing xxhash, and hostile files (each a clear h5dcp.FormatError, nothing
from the file executed).

usage: package_test.py ORIGINAL.pt CHECKPOINT... [-- unittest arguments]
(run with the project's virtual environment and python/ on PYTHONPATH)
"""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import torch

import h5dcp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from read_with_h5py import mapped, same  # noqa: E402  (the comparison the interop tests use)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from file_bytes import data_offset  # noqa: E402
from older_format import as_format_1_1  # noqa: E402

import warnings  # noqa: E402
warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")

ORIGINAL = None
CHECKPOINTS = []


def tensors_in(value):
    if isinstance(value, dict):
        return sum(tensors_in(v) for v in value.values())
    if isinstance(value, list):
        return sum(tensors_in(v) for v in value)
    return 1 if isinstance(value, torch.Tensor) else 0


class Copy:
    """A writable copy of a checkpoint in a temporary directory: by default
    the last one, saved by 3 ranks, whose tensors are datasets with their
    attributes (the first, saved by one rank, holds its small tensors in
    format 1.2's packs)."""

    def __init__(self, source=None):
        self.source = source or CHECKPOINTS[-1]

    def __enter__(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "ckpt.h5")
        shutil.copyfile(self.source, self.path)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.dir)


def flip_byte(path, fqn, at=0):
    offset = data_offset(path, fqn)
    assert offset is not None, fqn
    with open(path, "r+b") as raw:
        raw.seek(offset + at)
        byte = raw.read(1)
        raw.seek(offset + at)
        raw.write(bytes([byte[0] ^ 0x40]))


class LoadStateDict(unittest.TestCase):
    def test_every_checkpoint_equals_torch_load_bit_for_bit(self):
        original = mapped(torch.load(ORIGINAL, weights_only=False))
        for path in CHECKPOINTS:
            for verify in (False, True):
                state = h5dcp.load_state_dict(path, verify=verify)
                failures = []
                same(original, state, "", failures)
                self.assertEqual(failures, [], path)
                self.assertGreater(tensors_in(state), 50)
                self.assertEqual(state["dtypes"]["bfloat16"].dtype, torch.bfloat16)
                self.assertEqual(state["dtypes"]["float8_e4m3fn"].dtype, torch.float8_e4m3fn)

    def test_a_prefix_reads_that_part_alone(self):
        whole = h5dcp.load_state_dict(CHECKPOINTS[-1])
        for prefix, key in (("module", "module"), ("module/", "module"), ("lists", "lists"), ("/adamw/", "adamw")):
            part = h5dcp.load_state_dict(CHECKPOINTS[-1], prefix=prefix)
            failures = []
            same(whole[key], part, prefix, failures)
            self.assertEqual(failures, [])
        self.assertIsInstance(h5dcp.load_state_dict(CHECKPOINTS[-1], prefix="lists"), list)
        self.assertEqual(h5dcp.load_state_dict(CHECKPOINTS[-1], prefix="adamw/param_groups/0/betas"), [0.9, 0.999])
        with self.assertRaisesRegex(KeyError, "nothing at prefix 'model'"):
            h5dcp.load_state_dict(CHECKPOINTS[-1], prefix="model")
        with self.assertRaisesRegex(h5dcp.FormatError, "names a tensor or value, not a dict or list"):
            h5dcp.load_state_dict(CHECKPOINTS[-1], prefix="module/0.weight")

    def test_a_format_1_1_file_loads_the_same_and_verifies(self):
        # The checkpoint of one rank, its small tensors in packs, rewritten as
        # format 1.1 wrote it: a dataset per tensor, variable-length strings.
        with Copy(CHECKPOINTS[0]) as path:
            unpacked, strings = as_format_1_1(path)
            self.assertGreater(unpacked, 20)
            self.assertGreater(strings, 100)
            failures = []
            same(mapped(torch.load(ORIGINAL, weights_only=False)), h5dcp.load_state_dict(path, verify=True), "",
                 failures)
            self.assertEqual(failures, [])
            report, packed = h5dcp.verify(path), h5dcp.verify(CHECKPOINTS[0])
            self.assertTrue(report.ok)
            self.assertEqual((report.tensors, report.slabs), (packed.tensors, packed.slabs))

    def test_a_missing_file_is_file_not_found(self):
        with self.assertRaises(FileNotFoundError):
            h5dcp.load_state_dict("/nonexistent/ckpt.h5")


class Verify(unittest.TestCase):
    def test_sound_checkpoints_pass_with_every_slab_checked(self):
        for path in CHECKPOINTS:
            report = h5dcp.verify(path)
            self.assertTrue(report.ok)
            self.assertEqual(report.tensors, tensors_in(h5dcp.load_state_dict(path)))
            self.assertGreaterEqual(report.slabs, report.tensors - 2)  # empty tensors have no slab
            self.assertEqual(report.unchecksummed, [])
            self.assertGreater(report.values, 20)

    def test_a_damaged_slab_is_named_by_verify_and_by_verified_loads(self):
        # In a pack (the checkpoint of one rank) and in a dataset of its own.
        for source in (CHECKPOINTS[0], CHECKPOINTS[-1]):
            with self.subTest(source=source), Copy(source) as path:
                flip_byte(path, "dtypes/float32", 5)
                with self.assertRaises(h5dcp.ChecksumError) as caught:
                    h5dcp.verify(path)
                self.assertIn("dtypes/float32", str(caught.exception))
                self.assertEqual([fqn for fqn, _ in caught.exception.problems], ["dtypes/float32"])
                report = h5dcp.verify(path, raise_on_error=False)
                self.assertFalse(report.ok)
                with self.assertRaisesRegex(h5dcp.ChecksumError, "tensor 'dtypes/float32': the slab at \\[0, 0\\]"):
                    h5dcp.load_state_dict(path, verify=True)
                # Unverified, the damaged bytes come through: the checksum is what caught them.
                damaged = h5dcp.load_state_dict(path, prefix="dtypes")["float32"]
                sound = h5dcp.load_state_dict(source, prefix="dtypes")["float32"]
                self.assertFalse(torch.equal(damaged.view(torch.int32), sound.view(torch.int32)))

    def test_a_damaged_value_is_named(self):
        with Copy() as path:
            with h5py.File(path, "r+") as f:
                f["one/only"][()] = np.int64(f["one/only"][()] + 1)
            with self.assertRaisesRegex(h5dcp.ChecksumError, "one/only: the value does not match its checksum"):
                h5dcp.verify(path)
            with self.assertRaisesRegex(h5dcp.ChecksumError, "value 'one/only'"):
                h5dcp.load_state_dict(path, verify=True)

    def test_without_xxhash_the_message_says_what_to_install(self):
        code = ("import sys; sys.modules['xxhash'] = None\n"
                "import h5dcp\n"
                "try:\n    h5dcp.verify(sys.argv[1])\n"
                "except h5dcp.MissingDependencyError as e:\n    print('MESSAGE', e)\n")
        out = subprocess.run([sys.executable, "-c", code, CHECKPOINTS[0]], capture_output=True, text=True,
                             env=dict(os.environ))
        self.assertIn("MESSAGE h5dcp: checking checksums needs the xxhash package", out.stdout + out.stderr)
        self.assertIn("pip install xxhash", out.stdout)


class Hostile(unittest.TestCase):
    def expect(self, mutate, pattern):
        with Copy() as path:
            with h5py.File(path, "r+") as f:
                mutate(f)
            with self.assertRaisesRegex(h5dcp.FormatError, pattern):
                h5dcp.load_state_dict(path)
            with self.assertRaisesRegex(h5dcp.FormatError, pattern):
                h5dcp.verify(path)

    def test_not_hdf5_and_not_h5dcp(self):
        with tempfile.TemporaryDirectory() as tmp:
            text = os.path.join(tmp, "text.h5")
            with open(text, "w") as out:
                out.write("not a checkpoint\n")
            with self.assertRaisesRegex(h5dcp.FormatError, "is not an HDF5 file"):
                h5dcp.load_state_dict(text)
            plain = os.path.join(tmp, "plain.h5")
            with h5py.File(plain, "w") as f:
                f["x"] = np.arange(3)
            with self.assertRaisesRegex(h5dcp.FormatError, "is not an h5dcp checkpoint"):
                h5dcp.load_state_dict(plain)

    def test_a_newer_major_version_says_upgrade(self):
        self.expect(lambda f: f.attrs.__setitem__("h5dcp.format_version", np.array([2, 0], np.int64)),
                    "format version 2.0; this h5dcp package reads 1.x: upgrade")

    def test_an_unknown_dtype(self):
        self.expect(lambda f: f["dtypes/float32"].attrs.__setitem__("h5dcp.dtype", "float4_e2m1"),
                    "tensor 'dtypes/float32' has unknown dtype 'float4_e2m1'")

    def test_a_dtype_that_is_not_the_hdf5_type(self):
        self.expect(lambda f: f["dtypes/float32"].attrs.__setitem__("h5dcp.dtype", "int32"),
                    "tensor 'dtypes/float32' says dtype int32 but its HDF5 type")

    def test_a_chunk_outside_the_shape(self):
        def mutate(f):
            offsets = f["module/0.weight"].attrs["h5dcp.chunk_offsets"].copy()
            offsets[0, 0] = 7
            f["module/0.weight"].attrs["h5dcp.chunk_offsets"] = offsets
        self.expect(mutate, "tensor 'module/0.weight': chunk 0 lies outside its shape")

    def test_checksums_that_do_not_count_the_slabs(self):
        self.expect(lambda f: f["dtypes/float32"].attrs.__setitem__("h5dcp.checksums", np.zeros(9, np.uint64)),
                    "tensor 'dtypes/float32' has 9 checksums for 3 slabs")

    def test_a_list_without_an_element(self):
        def mutate(f):
            f.move("lists/1", "lists/7")
            f["lists/7"].attrs["h5dcp.key"] = "7"
        self.expect(mutate, "list 'lists' does not hold the elements 0..2")

    def test_a_key_that_is_not_the_link_name(self):
        self.expect(lambda f: f["one/only"].attrs.__setitem__("h5dcp.key", "other"),
                    "'one/only' has key 'other', which is not its link name")

    def test_an_unknown_kind(self):
        self.expect(lambda f: f["one/only"].attrs.__setitem__("h5dcp.kind", "exec"), "'one/only' has unknown kind 'exec'")

    def test_a_bool_tensor_holding_two(self):
        for source in (CHECKPOINTS[0], CHECKPOINTS[-1]):  # in a pack and in a dataset
            with self.subTest(source=source), Copy(source) as path:
                offset = data_offset(path, "dtypes/bool")
                with open(path, "r+b") as raw:
                    raw.seek(offset)
                    raw.write(b"\x02")
                with self.assertRaisesRegex(h5dcp.FormatError,
                                            "bool tensor 'dtypes/bool' holds values other than 0 and 1"):
                    h5dcp.load_state_dict(path)

    def test_a_pickle_value_is_returned_as_bytes_never_executed(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "executed")

            class Evil:
                def __reduce__(self):
                    return (open, (marker, "w"))

            payload = pickle.dumps(Evil())
            with Copy() as path:
                with h5py.File(path, "r+") as f:
                    d = f.create_dataset("evil", data=np.frombuffer(payload, np.uint8))
                    d.attrs["h5dcp.key"] = "evil"
                    d.attrs["h5dcp.kind"] = "pickle"
                state = h5dcp.load_state_dict(path)
                self.assertIsInstance(state["evil"], h5dcp.PickledObject)
                self.assertEqual(bytes(state["evil"]), payload)
                self.assertFalse(os.path.exists(marker))


def main():
    global ORIGINAL, CHECKPOINTS
    args = sys.argv[1:]
    rest = []
    if "--" in args:
        rest = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if len(args) < 2:
        print(__doc__)
        return 2
    ORIGINAL, CHECKPOINTS = args[0], args[1:]
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
