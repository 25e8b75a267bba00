"""Writes docs/PERFORMANCE.md (and a PNG) from one run of scripts/bench.sh.
usage: performance_report.py RESULTS_DIR OUT.md OUT.png"""
import json
import platform
import re
import statistics
import subprocess
import sys
import time

results, md_path, png_path = sys.argv[1], sys.argv[2], sys.argv[3]
h = json.load(open(f"{results}/h5dcp.json"))
ompio = json.load(open(f"{results}/ompio.json"))
ts = json.load(open(f"{results}/torch_save.json"))
dcp = {"SAVE": [], "LOAD": [], "LOAD-resharded(rank": []}
for line in open(f"{results}/dcp.txt"):
    m = re.match(r"(LOAD-resharded\(rank shift\)|SAVE|LOAD)\s+([0-9.]+) s\s+([0-9.]+) GB/s", line)
    if m:
        dcp[m.group(1).replace(" shift)", "")].append(float(m.group(2)))
dcp_s = {k: statistics.median(v) for k, v in dcp.items() if v}

gb = h["gb"]
s = h["median_seconds"]
bw = lambda seconds, size=gb: size / seconds
raw_romio, raw_ompio = bw(s["raw"]), bw(ompio["median_seconds"]["raw"])
rows = [
    ("raw MPI-IO write + fsync (ROMIO, the default)", s["raw"], raw_romio),
    ("raw MPI-IO write + fsync (OMPIO)", ompio["median_seconds"]["raw"], raw_ompio),
    ("h5dcp save", s["save"], bw(s["save"])),
    ("h5dcp load (same sharding)", s["load"], bw(s["load"])),
    ("h5dcp resharded load", s["reshard"], bw(s["reshard"])),
    ("h5dcp async save, until durable", s["async_total"], bw(s["async_total"])),
    ("h5dcp async save, caller blocked", s["async_blocking"], None),
    ("PyTorch DCP save", dcp_s.get("SAVE"), bw(dcp_s["SAVE"]) if "SAVE" in dcp_s else None),
    ("PyTorch DCP load", dcp_s.get("LOAD"), bw(dcp_s["LOAD"]) if "LOAD" in dcp_s else None),
    ("PyTorch DCP resharded load", dcp_s.get("LOAD-resharded(rank"),
     bw(dcp_s["LOAD-resharded(rank"]) if "LOAD-resharded(rank" in dcp_s else None),
    ("torch.save, one process", ts["seconds"], bw(ts["seconds"], ts["gb"])),
    ("h5dcp save, 5,000 tensors of 16 KiB", s["small"], bw(s["small"], h["small_gb"])),
    ("h5dcp save, same bytes in 4 tensors", s["small_as_large"], bw(s["small_as_large"], h["small_gb"])),
]

def verdict(ok):
    return "met" if ok else "**not met**"

mem_limit = 0.10 * (h["shard_bytes"] + h["staging_bytes"])
targets = [
    ("save ≥ 0.9 × raw MPI-IO write (ROMIO: OMPIO is not trusted)", f"{bw(s['save']) / raw_romio:.2f} ×",
     bw(s["save"]) >= 0.9 * raw_romio),
    ("save not slower than DCP", f"{dcp_s['SAVE'] / s['save']:.2f} × DCP's speed" if "SAVE" in dcp_s else "n/a",
     "SAVE" in dcp_s and s["save"] <= dcp_s["SAVE"]),
    ("load ≥ 2 × DCP load", f"{dcp_s['LOAD'] / s['load']:.2f} ×" if "LOAD" in dcp_s else "n/a",
     "LOAD" in dcp_s and dcp_s["LOAD"] / s["load"] >= 2),
    ("resharded load ≥ 1.5 × DCP resharded load",
     f"{dcp_s['LOAD-resharded(rank'] / s['reshard']:.2f} ×" if "LOAD-resharded(rank" in dcp_s else "n/a",
     "LOAD-resharded(rank" in dcp_s and dcp_s["LOAD-resharded(rank"] / s["reshard"] >= 1.5),
    ("resharded load time ≤ 1.2 × same-sharding load", f"{s['reshard'] / s['load']:.2f} ×", s["reshard"] <= 1.2 * s["load"]),
    ("5,000 small tensors ≤ 1.5 × same bytes in 4 tensors", f"{s['small'] / s['small_as_large']:.2f} ×",
     s["small"] <= 1.5 * s["small_as_large"]),
    ("async blocking ≤ 3 % of the sync save", f"{100 * s['async_blocking'] / s['save']:.1f} %",
     s["async_blocking"] <= 0.03 * s["save"]),
    ("memory a save adds ≤ 10 % of shard + staging",
     f"sync {h['sync_save_added_bytes'] / 1e6:.1f} MB, async {h['async_save_added_bytes'] / 1e6:.1f} MB "
     f"(limit {mem_limit / 1e6:.0f} MB)",
     max(h["sync_save_added_bytes"], h["async_save_added_bytes"]) <= mem_limit),
]

cpu = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
lines = [
    "# Performance",
    "",
    "Measured by `scripts/bench.sh` (one command: h5dcp-bench, the raw MPI-IO",
    "baselines, PyTorch DCP from `../shared/peers`, torch.save), all in one run on",
    "the same disk. Every timed save includes fsync. Medians of "
    f"{h['reps']} repetitions; {h['ranks']} ranks; {gb:.2f} GB of float32 in 4 tensors row-sharded",
    f"over the ranks (DCP's peer benchmark's data). Machine: {platform.node()}, {cpu} cores, "
    f"{time.strftime('%Y-%m-%d')}. Loads with the page cache warm. Every h5dcp load was checked "
    f"value by value: {'equal' if h['correct'] else 'NOT EQUAL'}.",
    "",
    "The disk here is a virtio volume whose fsync'd write speed swings between",
    "0.2 and 1.3 GB/s from one second to the next (FACTS.md): ratios measured in",
    "the same run are meaningful, absolute numbers much less so.",
    "",
    "## Results",
    "",
    "| case | seconds | GB/s |",
    "|---|---:|---:|",
]
for name, sec, rate in rows:
    lines.append(f"| {name} | {sec:.3f} | {rate:.3f} |" if rate else f"| {name} | {sec:.3f} | |" if sec else f"| {name} | n/a | |")
lines += ["", "## Targets (issue 6)", "", "| target | measured | |", "|---|---|---|"]
for name, value, ok in targets:
    lines.append(f"| {name} | {value} | {verdict(ok)} |")
lines += [
    "",
    "![bandwidths](performance.png)",
    "",
    "## Where the time goes, and what was tried",
    "",
    "- **Save vs the raw write.** The raw baseline is one `MPI_File_write_at_all`",
    "  plus `MPI_File_sync`. An h5dcp save adds the collective plan, creating the",
    "  file, its groups, datasets and attributes (collective metadata writes), the",
    "  checksum attributes, closing, an fsync from every rank, and the rename plus",
    "  directory fsync that publish it atomically. With 4 large tensors the extra",
    "  work is small next to the data; on this disk the fsync'd write speed itself",
    "  varies by a factor of 5 between runs, which dominates the ratio.",
    "- **Many small tensors.** Each tensor is its own dataset (contract 1), and",
    "  HDF5 spends about 0.1 ms per dataset on its object header and attributes",
    "  even on one rank; packing small tensors into shared datasets would break",
    "  the one-dataset-per-tensor format, so it was not done. Tensors with a",
    "  single writer are written with independent I/O (no per-tensor collective",
    "  call), which is what made the small case scale with the rank count.",
    "  Measured and not kept: HDF5 library-version bounds (1.10), a 1 MiB",
    "  metadata block size, a larger metadata cache, fixed-length string",
    "  attributes: no measurable change on 5,000 tensors.",
    "- **Async blocking time** is the collective plan plus copying this rank's",
    "  blocks into the (pre-touched, reused) staging memory at memory bandwidth;",
    "  the rest of the save runs in the background.",
    "- **Loads** read each rank's block as one hyperslab per tensor (or per",
    "  checksum slab when resharding needs partial slabs) with independent I/O,",
    "  and verify every slab's XXH3 checksum.",
    "- Knobs kept: contiguous layout, no fill values, collective metadata",
    "  writes, the 1.8 file format (needed for large checksum attributes),",
    "  compact binary plan exchange, independent writes for single-writer",
    "  tensors. Not yet measured: MPI-IO hints (ROMIO data sieving and",
    "  collective buffering sizes), alignment, plan reuse across saves.",
    "",
]
open(md_path, "w").write("\n".join(lines) + "\n")

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
names = [n for n, sec, rate in rows if rate]
rates = [rate for n, sec, rate in rows if rate]
fig, ax = plt.subplots(figsize=(9, 5))
ax.barh(names[::-1], rates[::-1], color=["#4c72b0" if n.startswith("h5dcp") else "#999999" for n in names[::-1]])
ax.set_xlabel("GB/s (higher is better)")
ax.set_title(f"h5dcp vs baselines, {h['ranks']} ranks, {gb:.2f} GB, fsync on")
fig.tight_layout()
fig.savefig(png_path, dpi=90)
