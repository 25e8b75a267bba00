"""The package's exceptions and the one value type it adds."""

import contextlib


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


@contextlib.contextmanager
def naming(path):
    """Every FormatError raised inside names the file `path`: the checks deep
    in the tree name the object and the rule they hold it to, and this adds
    which file (a caller reading many checkpoints must know which is bad)."""
    try:
        yield
    except FormatError as e:
        text = str(e)
        if "'%s'" % path in text:
            raise
        text = "h5dcp: '%s': %s" % (path, text[7:] if text.startswith("h5dcp: ") else text)
        raise (ChecksumError(text, e.problems) if isinstance(e, ChecksumError) else FormatError(text)) from None


@contextlib.contextmanager
def reading(fqn):
    """HDF5's own failures while reading the object `fqn` as a FormatError
    naming it: h5py reports damaged metadata as KeyError, OSError,
    RuntimeError or ValueError with HDF5's text, which alone says neither
    what was being read nor that the file is at fault."""
    try:
        yield
    except FormatError:
        raise
    except (KeyError, OSError, RuntimeError, TypeError, ValueError, OverflowError) as e:
        raise FormatError("h5dcp: '%s' cannot be read, the checkpoint is damaged (HDF5: %s)"
                          % (fqn or "/", str(e).strip("'\"") or type(e).__name__)) from None
