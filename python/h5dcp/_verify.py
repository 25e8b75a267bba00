"""h5dcp.verify: every checksum of a checkpoint checked from Python."""

import dataclasses

import numpy as np

from ._blocks import read_raw, slabs, xxh3
from ._errors import ChecksumError, FormatError, naming
from ._format import open_checkpoint, value_checksum, value_of
from ._tree import build


@dataclasses.dataclass
class VerifyReport:
    """What h5dcp.verify checked. problems: (fqn, message) pairs, empty when the file is sound."""
    path: str
    tensors: int = 0
    values: int = 0
    slabs: int = 0
    bytes_read: int = 0
    unchecksummed: list = dataclasses.field(default_factory=list)  # fqns written without checksums
    problems: list = dataclasses.field(default_factory=list)

    @property
    def ok(self):
        return not self.problems


def verify(path, *, raise_on_error=True):
    """Checks the checkpoint at `path`: its format (as load_state_dict reads
    it), that each tensor's saved chunks tile its shape, that bool tensors
    hold only 0 and 1, and the XXH3-64 checksum of every slab of every tensor
    and of every non-tensor value. Reads the file once, slab by slab (memory:
    one slab, about 1 MiB).

    Returns a VerifyReport. Raises h5dcp.ChecksumError listing every problem
    when any is found (or returns the report with them, raise_on_error=False);
    h5dcp.FormatError when the file's structure is not h5dcp's (chunks that
    do not tile their tensor included), before reading any data;
    h5dcp.MissingDependencyError when the xxhash package is not installed.
    """
    hash_of = xxh3()
    report = VerifyReport(str(path))
    with naming(path), open_checkpoint(path) as f:

        def tensor(ds, info):
            report.tensors += 1
            if not info.checksummed:
                if 0 not in info.shape:  # an empty tensor has no bytes to check
                    report.unchecksummed.append(info.fqn)
                return None
            pieces = [((), (), info.scalar_checksum)] if not info.shape else slabs(info)
            for start, count, digest in pieces:
                raw = read_raw(ds, info, start, count)
                report.slabs += 1
                report.bytes_read += raw.nbytes
                if hash_of(raw.tobytes()) != digest:
                    report.problems.append((info.fqn, "the slab at %s does not match its checksum" % list(start)))
                elif info.name == "bool" and raw.size and not np.all((raw == 0) | (raw == 1)):
                    report.problems.append((info.fqn, "a bool tensor holds values other than 0 and 1"))
            return None

        def value(ds, kind, fqn):
            report.values += 1
            try:
                _, payload = value_of(ds, kind, fqn)
            except FormatError as e:
                report.problems.append((fqn, str(e)))
                return None
            stored = value_checksum(ds, fqn)
            if stored is None:
                report.unchecksummed.append(fqn)
            elif stored != hash_of(payload):
                report.problems.append((fqn, "the value does not match its checksum"))
            return None

        build(f, "", tensor, value)
    if report.problems and raise_on_error:
        lines = "".join("\n  %s: %s" % problem for problem in report.problems[:20])
        more = "" if len(report.problems) <= 20 else "\n  ... and %d more" % (len(report.problems) - 20)
        raise ChecksumError("h5dcp: '%s' failed verification (%d problems):%s%s"
                            % (path, len(report.problems), lines, more), report.problems)
    return report
