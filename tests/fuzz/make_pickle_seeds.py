#!/usr/bin/env python3
"""Writes the seed corpus of the torch_pickle fuzz target: the data.pkl of
small real torch.save files (run with a Python that has torch: the
project's virtual environment, with PyTorch 2.13). Each seed covers a part of what the
pickle reader accepts: every dtype, views of a shared storage, 0-d and empty
tensors, nested dicts/lists/tuples, OrderedDict with _metadata (a module's
state dict), int dict keys (an optimizer's state), every scalar kind,
Parameters, a tensor subclass (_rebuild_from_type_v2), and pickle protocols
2 (torch.save's default) to 5.

    ~/.cache/h5dcp/venv-torch-2.13.0/bin/python tests/fuzz/make_pickle_seeds.py [tests/fuzz/corpus/torch_pickle]
"""
import collections
import io
import os
import sys
import zipfile

import torch

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "torch_pickle")
os.makedirs(out, exist_ok=True)


class Tagged(torch.Tensor):
    """A tensor subclass: torch.save writes it with _rebuild_from_type_v2."""


def data_pkl(obj, protocol=2):
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_protocol=protocol)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
        return archive.read(name)


base = torch.arange(12, dtype=torch.float32)
linear = torch.nn.Linear(3, 2)
with torch.no_grad():
    linear.weight.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    linear.bias.zero_()
adam = torch.optim.Adam(linear.parameters(), lr=1e-3)
linear(torch.ones(1, 3)).sum().backward()
adam.step()

seeds = {
    "dtypes": {str(t).split(".")[1]: torch.arange(3).to(t) for t in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
        torch.int8, torch.uint8, torch.bool)},
    "shared_views": {"whole": base, "rows": base.view(3, 4)[1:], "column": base.view(3, 4)[:, 2],
                     "transposed": base.view(3, 4).t(), "offset": base[5:9]},
    "shapes": {"scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3), "expanded": torch.ones(1, 3).expand(4, 3)},
    "nested": {"model": {"layer": {"w": torch.ones(2, 2)}}, "list": [1, [2, {"x": 3}], ()],
               "tuple": (1.5, "two", None), "empty_dict": {}, "empty_list": []},
    "scalars": {"none": None, "true": True, "false": False, "int": 7, "negative": -3, "big": 2**62,
                "small": -2**63, "float": 0.1, "nan": float("nan"), "inf": float("-inf"), "text": "héllo ✓",
                "bytes": b"\x00\x01\xff", "empty_bytes": b"", "empty_text": ""},
    "module": {"model": linear.state_dict()},
    "optimizer": {"optim": adam.state_dict()},
    "ordered": {"od": collections.OrderedDict([("b", 1), ("a", torch.zeros(1))])},
    "parameter": {"p": torch.nn.Parameter(torch.ones(2))},
    "subclass": {"t": torch.ones(2).as_subclass(Tagged)},
    "single": {"only": torch.zeros(1)},
}
for name, obj in seeds.items():
    with open(os.path.join(out, name + ".pkl"), "wb") as f:
        f.write(data_pkl(obj))
for protocol in (3, 4, 5):
    with open(os.path.join(out, "nested_protocol%d.pkl" % protocol), "wb") as f:
        f.write(data_pkl(seeds["nested"], protocol))
    with open(os.path.join(out, "scalars_protocol%d.pkl" % protocol), "wb") as f:
        f.write(data_pkl(seeds["scalars"], protocol))
print("wrote", len(os.listdir(out)), "seeds to", out)
