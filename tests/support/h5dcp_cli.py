"""Running the `h5dcp` tool from the Python tests: on one rank directly, on
more under mpiexec; a failure the test did not expect ends it with the
command's output."""
import subprocess


def run(cmd, expect_ok=True):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if expect_ok and done.returncode != 0:
        raise SystemExit("FAIL: %s exited %d:\n%s%s" % (" ".join(cmd), done.returncode, done.stdout, done.stderr))
    return done


def cli(args, ranks, command):
    """`args.cli` (the tool) on `ranks` ranks, with `args.mpiexec` beyond one."""
    if ranks == 1:
        return [args.cli] + command
    return [args.mpiexec, "-n", str(ranks), args.cli] + command
