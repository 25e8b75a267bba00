"""The Python package installs with pip from the repository and works from
anywhere: `pip install --target` of a copy of python/ (so the checkout
stays clean) with the project environment's pip, no index (torch, h5py and
xxhash are that environment's), then, from another directory with only the
target on PYTHONPATH, the installed h5dcp must be the one imported, report the C++ library's version (both h5dcp.__version__ and the
distribution's metadata), and verify and load a checkpoint.

usage: install_test.py PYTHON_DIR VERSION CHECKPOINT
"""
import os
import shutil
import subprocess
import sys
import tempfile


def main(python_dir, version, checkpoint):
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "src")
        shutil.copytree(python_dir, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        target = os.path.join(tmp, "site")
        install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                                  "--no-index", "--target", target, source], capture_output=True, text=True)
        if install.returncode != 0:
            print(install.stdout, install.stderr)
            print("FAIL: pip install of python/ failed")
            return 1
        check = ("import importlib.metadata, os, sys, torch, h5dcp\n"
                 "target, version, path = sys.argv[1:]\n"
                 "assert h5dcp.__file__.startswith(target), h5dcp.__file__\n"
                 "assert h5dcp.__version__ == version, (h5dcp.__version__, version)\n"
                 "assert importlib.metadata.version('h5dcp') == version, importlib.metadata.version('h5dcp')\n"
                 "report = h5dcp.verify(path)\n"
                 "state = h5dcp.load_state_dict(path)\n"
                 "assert report.ok and report.tensors > 0 and isinstance(state, dict) and state\n"
                 "print('installed h5dcp %s from %s: verified %d tensors' % (h5dcp.__version__,"
                 " os.path.dirname(h5dcp.__file__), report.tensors))\n")
        env = dict(os.environ, PYTHONPATH=target)
        run = subprocess.run([sys.executable, "-c", check, target, version, os.path.abspath(checkpoint)], cwd=tmp, env=env,
                             capture_output=True, text=True)
        print(run.stdout + run.stderr)
        return run.returncode


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
