#!/usr/bin/env python3
"""scripts/check-layers.py passes on the real tree and reports each kind of
violation planted in a copy of lib/: a lower layer including a higher
layer's header, a package a layer must not see (directly and through a
public header; LibTorch in formats/), HDF5 in a public header, a folder
that is no layer, a public header an umbrella header leaves out (h5dcp.hpp,
training.hpp), and a checkpoint layer including a header of h5dcp::training."""
import pathlib
import shutil
import subprocess
import sys
import tempfile

repo = pathlib.Path(sys.argv[1])
checker = repo / "scripts" / "check-layers.py"


def run(root):
    done = subprocess.run([sys.executable, str(checker), str(root)], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def plant(path, line):
    path.write_text(line + "\n" + path.read_text(encoding="utf-8"), encoding="utf-8")


code, out = run(repo)
assert code == 0, f"the real tree breaks the layering:\n{out}"

with tempfile.TemporaryDirectory() as tmp:
    root = pathlib.Path(tmp)
    shutil.copytree(repo / "lib", root / "lib")
    src = root / "lib" / "src"
    plant(src / "plan" / "save_plan.cpp", '#include "hdf5/handle.hpp"')
    plant(src / "plan" / "load_plan.cpp", '#include "h5dcp/state_dict.hpp"')
    plant(src / "storage" / "durable_file.cpp", "#include <mpi.h>")
    plant(src / "torch" / "host_bytes.cpp", '#include "comm/comm.hpp"')
    plant(src / "comm" / "comm.cpp", "#include <ATen/core/Tensor.h>")
    plant(src / "api" / "save.cpp", "#include <hdf5.h>")
    plant(src / "formats" / "pickle_value.cpp", "#include <torch/torch.h>")
    plant(src / "formats" / "zip_writer.cpp", '#include "h5dcp/state_dict.hpp"')
    plant(src / "formats" / "dcp_metadata.cpp", '#include "interop/shared/source_files.hpp"')
    plant(src / "comm" / "plain_calls.hpp", '#include "h5dcp/training/device.hpp"')
    plant(root / "lib" / "include" / "h5dcp" / "dtype.hpp", "#include <H5Ppublic.h>")
    (src / "misc").mkdir()
    (root / "lib" / "include" / "h5dcp" / "extra.hpp").write_text("#pragma once\n", encoding="utf-8")
    (root / "lib" / "include" / "h5dcp" / "training" / "extra.hpp").write_text("#pragma once\n", encoding="utf-8")
    code, out = run(root)
    expected = [
        "lib/src/plan/save_plan.cpp: includes hdf5/handle.hpp, but the plan layer may only include base, plan",
        "lib/src/plan/load_plan.cpp: includes h5dcp/state_dict.hpp, which brings torch",
        "lib/src/storage/durable_file.cpp: includes mpi.h, but the storage layer must not see mpi",
        "lib/src/torch/host_bytes.cpp: includes comm/comm.hpp, but the torch layer may only include",
        "lib/src/comm/comm.cpp: includes ATen/core/Tensor.h, but the comm layer must not see torch",
        "lib/src/api/save.cpp: includes hdf5.h, but the api layer must not see hdf5",
        "lib/src/formats/pickle_value.cpp: includes torch/torch.h, but the formats layer must not see torch",
        "lib/src/formats/zip_writer.cpp: includes h5dcp/state_dict.hpp, which brings torch",
        "lib/src/formats/dcp_metadata.cpp: includes interop/shared/source_files.hpp, but the formats layer may only include",
        "lib/include/h5dcp/dtype.hpp: public header includes HDF5 (H5Ppublic.h)",
        "lib/src/misc: a folder that is no layer",
        "lib/include/h5dcp/h5dcp.hpp: the umbrella header leaves out h5dcp/extra.hpp",
        "lib/include/h5dcp/training.hpp: the umbrella header leaves out h5dcp/training/extra.hpp",
        "lib/src/comm/plain_calls.hpp: includes h5dcp/training/device.hpp, but the comm layer must not use "
        "h5dcp::training",
    ]
    assert code == 1, f"violations passed the checker (exit {code}):\n{out}"
    missing = [line for line in expected if line not in out]
    assert not missing, "not reported: " + "; ".join(missing) + "\nchecker said:\n" + out
print(f"check_layers_test: the tree passes, {len(expected)} planted violations reported")
