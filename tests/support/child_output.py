"""What the tests' Python drivers check in the output they capture from the
programs they run (CTest's log, which scripts/test.sh and scripts/sanitize.sh
search, never sees captured output).

HDF5-DIAG: HDF5 printed its own error stack. h5dcp turns every HDF5 error
into an exception and must never let HDF5 print one, even on a failure path.
"""

HDF5_DIAG = "HDF5-DIAG"


def hdf5_diag(output, what):
    """A failure message when `output` (str or bytes) holds an HDF5 error
    stack, naming `what` printed it and quoting the first lines; else None."""
    if isinstance(output, bytes):
        output = output.decode(errors="replace")
    if not output or HDF5_DIAG not in output:
        return None
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if HDF5_DIAG in line)
    return "%s printed HDF5's own error stack (HDF5-DIAG):\n%s" % (what, "\n".join(lines[first:first + 8]))
