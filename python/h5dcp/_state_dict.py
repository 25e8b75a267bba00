"""h5dcp.load_state_dict: a checkpoint (or a part of it) as a nested state dict."""

from ._blocks import as_tensor, read_block, xxh3
from ._errors import ChecksumError, naming
from ._format import open_checkpoint, value_checksum, value_of
from ._tree import build, subtree


def load_state_dict(path, prefix=None, *, verify=False):
    """Reads the checkpoint at `path` into a nested state dict, bit for bit.

    Dicts come back as dicts (in the file's key order), lists as lists,
    tensors as CPU torch tensors of their stored dtype (bfloat16, the float8
    variants, complex32, bool and unsigned types included) at their global
    shape, whatever sharding saved them, and non-tensor values as None, int,
    float, bool, str, bytes or h5dcp.PickledObject (never unpickled).

    prefix: the fqn of a dict or list in the file ("model", "optim/state");
    only that part is read and returned. verify: check the XXH3-64 checksum of
    every slab and value read (needs the xxhash package).

    Raises FileNotFoundError; h5dcp.FormatError for a file that is not a
    readable h5dcp checkpoint (naming the file, the fqn and the rule),
    before any data is read when its tree is at fault (links, cycles, data
    outside the file, sizes the file cannot hold); h5dcp.ChecksumError when
    verify finds damaged bytes; KeyError for a prefix the file lacks.
    """
    hash_of = xxh3() if verify else None
    with naming(path), open_checkpoint(path) as f:
        group, fqn = subtree(f, prefix)

        def tensor(ds, info):
            return as_tensor(read_block(ds, info, (0,) * len(info.shape), info.shape, verify, path), info)

        def value(ds, kind, fqn):
            result, payload = value_of(ds, kind, fqn)
            if hash_of is not None:
                stored = value_checksum(ds, fqn)
                if stored is not None and stored != hash_of(payload):
                    raise ChecksumError("h5dcp: '%s': value '%s' does not match its checksum (the file is damaged)"
                                        % (path, fqn), [(fqn, "value")])
            return result

        return build(group, fqn, tensor, value)
