"""torch.save of the benchmark's whole state (4 float32 tensors [rows, 4096],
the bytes all ranks hold together) from one process, fsync included.
usage: torch_save_bench.py FILE GIB REPS  -> prints JSON {"seconds": median, "gb": ..., "ok": ...}

One untimed warm-up save first, in this same process; before every save the
old file is removed and os.sync() lets the disk settle, untimed (the rule
h5dcp-bench and the DCP peer follow too). The last file written is read
back (memory-mapped) and compared with the state, tensor by tensor: `ok`."""
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
nbytes = sum(t.numel() * t.element_size() for t in state.values())
warmup = 1
times = []
for rep in range(warmup + reps):
    if os.path.exists(path):
        os.remove(path)
    os.sync()
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    if rep >= warmup:
        times.append(time.perf_counter() - t0)
back = torch.load(path, mmap=True, weights_only=True)
ok = os.path.getsize(path) >= nbytes and back.keys() == state.keys() and all(
    torch.equal(back[k], v) for k, v in state.items())
del back
os.remove(path)
print(json.dumps({"seconds": statistics.median(times), "times": times, "gb": nbytes / 1e9, "reps": reps,
                  "warmup_reps": warmup, "settled_disk": True, "ok": ok, "torch_version": torch.__version__}))
sys.exit(0 if ok else 1)
