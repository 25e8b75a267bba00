"""torch.save of the benchmark's whole state (4 float32 tensors [rows, 4096],
the bytes all ranks hold together) from one process, fsync included.
usage: torch_save_bench.py FILE GIB REPS  -> prints JSON {"seconds": median, "gb": ...}"""
import json
import os
import statistics
import sys
import time

import torch

path, gib, reps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
rows = int(gib * 2**30 / 4 / 4 / 4096)
rows -= rows % 2
state = {f"layer{i}.weight": torch.arange(rows, dtype=torch.float32).unsqueeze(1).expand(rows, 4096).contiguous() + i * 1e6
         for i in range(4)}
times = []
for _ in range(reps):
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    times.append(time.perf_counter() - t0)
os.remove(path)
print(json.dumps({"seconds": statistics.median(times), "gb": 4 * rows * 4096 * 4 / 1e9, "reps": reps}))
