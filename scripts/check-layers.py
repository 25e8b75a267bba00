#!/usr/bin/env python3
"""Checks the layering of lib/ (docs/ARCHITECTURE.md): which project layers
and which packages (MPI, HDF5, LibTorch, xxHash) each folder of lib/src may
include, directly or through a public header, that no public header
includes HDF5 or an internal header, and that the umbrella headers include
every public header: h5dcp.hpp the checkpoint library's, training.hpp those
of h5dcp/training/ (the library h5dcp::training, on top of h5dcp, which
only the training layer and the training headers may include). The build already fails when a layer
includes a package it does not link (one object library per layer); this
also catches includes of a higher layer's own headers, which compile.

Usage: check-layers.py [REPO]   (exit 1 and one line per violation)
"""
import pathlib
import re
import sys

# Layer -> the layers it may include (itself included). Bottom to top.
LAYERS = {
    "base": {"base"},
    "plan": {"base", "plan"},
    "storage": {"base", "storage"},
    "formats": {"base", "plan", "storage", "formats"},
    "comm": {"base", "comm"},
    "hdf5": {"base", "plan", "storage", "comm", "hdf5"},
    "torch": {"base", "plan", "torch"},
    "training": {"base", "plan", "comm", "torch", "training"},
    "api": {"base", "plan", "storage", "formats", "comm", "hdf5", "torch", "api"},
    "interop": {"base", "plan", "storage", "formats", "comm", "hdf5", "torch", "api", "interop"},
    "manager": {"base", "plan", "storage", "comm", "api", "manager"},
}
# Package -> the layers that may see it (directly or through public headers).
PACKAGES = {
    "mpi": {"comm", "hdf5", "torch", "training", "api", "interop", "manager"},
    "hdf5": {"hdf5"},
    "torch": {"torch", "training", "api", "interop", "manager"},
    "xxhash": {"base"},
}
# (package, layer) pairs seen only through public headers, never included:
# the torch layer sees MPI's types in public headers but makes no MPI calls.
THROUGH_PUBLIC_ONLY = {("mpi", "torch")}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def package_of(name):
    if name == "mpi.h":
        return "mpi"
    if name in ("hdf5.h", "hdf5_hl.h") or re.fullmatch(r"H5[A-Za-z]*(public)?\.h", name):
        return "hdf5"
    if name.split("/")[0] in ("ATen", "c10", "torch", "caffe2"):
        return "torch"
    if name.startswith("xxhash"):
        return "xxhash"
    return None


def includes(path):
    return INCLUDE.findall(path.read_text(encoding="utf-8"))


def main(repo):
    src = repo / "lib" / "src"
    public = repo / "lib" / "include" / "h5dcp"
    problems = []

    # What each public header brings, transitively: packages and public headers.
    public_packages = {}

    def packages_of_public(name, seen=()):
        if name in public_packages:
            return public_packages[name]
        path = public / name
        found = set()
        if not path.exists():
            path = public / (name + ".in")
        if path.exists():
            for kind, inc in includes(path):
                pkg = package_of(inc)
                if pkg:
                    found.add(pkg)
                elif inc.startswith("h5dcp/") and inc[6:] not in seen:
                    found |= packages_of_public(inc[6:], seen + (name,))
        public_packages[name] = found
        return found

    for header in sorted(public.rglob("*.hpp")):
        name = header.relative_to(public).as_posix()
        for kind, inc in includes(header):
            where = f"lib/include/h5dcp/{name}"
            if package_of(inc) == "hdf5":
                problems.append(f"{where}: public header includes HDF5 ({inc}): HDF5 types stay inside lib/src/hdf5")
            if kind == '"' and not inc.startswith("h5dcp/"):
                problems.append(f"{where}: public header includes the internal header {inc}")
            if inc.startswith("h5dcp/training") and not name.startswith("training"):
                problems.append(f"{where}: a checkpoint header includes {inc} (h5dcp::training is on top of h5dcp)")

    # An umbrella header is the one include a user of its library needs: it
    # has them all (h5dcp.hpp: the checkpoint library; training.hpp: training/).
    for umbrella_name, pattern in (("h5dcp.hpp", "*.hpp*"), ("training.hpp", "training/*.hpp")):
        umbrella = public / umbrella_name
        in_umbrella = {inc[6:] for _, inc in includes(umbrella) if inc.startswith("h5dcp/")}
        for header in sorted(public.glob(pattern)):
            name = header.relative_to(public).as_posix().removesuffix(".in")
            if name not in ("h5dcp.hpp", "training.hpp") and name not in in_umbrella:
                problems.append(f"lib/include/h5dcp/{umbrella_name}: the umbrella header leaves out h5dcp/{name}")

    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    for folder in folders:
        if folder not in LAYERS:
            problems.append(f"lib/src/{folder}: a folder that is no layer (add it to scripts/check-layers.py "
                            "and docs/ARCHITECTURE.md)")
    for layer, allowed in LAYERS.items():
        for path in sorted((src / layer).rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".h"):
                continue
            where = path.relative_to(repo).as_posix()
            for kind, inc in includes(path):
                pkg = package_of(inc)
                if pkg:
                    if layer not in PACKAGES[pkg] or (pkg, layer) in THROUGH_PUBLIC_ONLY:
                        problems.append(f"{where}: includes {inc}, but the {layer} layer must not see {pkg}")
                    continue
                if inc.startswith("h5dcp/training") and "training" not in allowed:
                    problems.append(f"{where}: includes {inc}, but the {layer} layer must not use h5dcp::training")
                if inc.startswith("h5dcp/"):
                    for pkg in sorted(packages_of_public(inc[6:])):
                        if layer not in PACKAGES[pkg]:
                            problems.append(f"{where}: includes {inc}, which brings {pkg}, "
                                            f"but the {layer} layer must not see {pkg}")
                    continue
                first = inc.split("/")[0]
                if kind == '"' and first in LAYERS and first not in allowed:
                    problems.append(f"{where}: includes {inc}, but the {layer} layer may only include "
                                    f"{', '.join(sorted(allowed))}")
    for line in problems:
        print(line)
    if problems:
        print(f"check-layers: {len(problems)} layering violation(s); the layers are in docs/ARCHITECTURE.md",
              file=sys.stderr)
        return 1
    print(f"check-layers: {len(LAYERS)} layers, every include allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)))
