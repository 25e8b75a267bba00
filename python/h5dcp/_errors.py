"""The package's exceptions and the one value type it adds."""


class FormatError(ValueError):
    """The file is not an h5dcp checkpoint this package can read, or it is
    damaged: a missing or malformed attribute, an unknown dtype, a tree that
    does not follow docs/FORMAT.md. The message names the file and the fqn."""


class ChecksumError(FormatError):
    """Bytes read from the file do not match the XXH3-64 checksum stored with
    them. ``problems`` lists (fqn, message) pairs, one per failing slab or value."""

    def __init__(self, message, problems=()):
        super().__init__(message)
        self.problems = list(problems)


class MissingDependencyError(ImportError):
    """An optional package a call needs is not installed (xxhash for checksums)."""


class PickledObject(bytes):
    """A value the C++ library stored as a LibTorch pickle (h5dcp.kind
    "pickle"): its bytes, never unpickled by this package. Unpickling runs code
    the file chooses; call ``torch.load(io.BytesIO(value), weights_only=True)``
    or ``pickle.loads`` yourself only on files you trust."""

    def __repr__(self):
        return "PickledObject(%s)" % bytes.__repr__(self)
