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

# Knobs measured in the same run (save only, medians, each beside its own raw write).
knobs = []
for name, file in (("independent writes (IoMode::Independent)", "independent.json"),
                   ("ROMIO hints romio_ds_write=disable, romio_cb_write=disable", "hints.json")):
    try:
        k = json.load(open(f"{results}/{file}"))["median_seconds"]
        knobs.append((name, k["save"], k["raw"]))
    except (OSError, KeyError):
        pass

# Where the time goes: rank 0's steps of the traced run, one group per save
# (the bench's order: sync save, async save, 5,000 small tensors, 4 large).
groups = []
try:
    for line in open(f"{results}/trace.txt"):
        m = re.match(r"\[h5dcp trace\] rank 0 (save:\w+)\s+waited ([0-9.]+) s, worked ([0-9.]+) s", line)
        if not m:
            continue
        if m.group(1) == "save:plan":
            groups.append([])
        if groups:
            groups[-1].append((m.group(1), float(m.group(2)), float(m.group(3))))
except OSError:
    pass
traced = dict(zip(["sync save", "async save (background)", "5,000 small tensors", "same bytes in 4 tensors"], groups))

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
if knobs:
    lines += ["", "## Knobs measured in this run", "",
              f"| h5dcp save with | seconds | vs default save ({s['save']:.3f} s) | raw write in that run |",
              "|---|---:|---:|---:|"]
    for name, sec, raw in knobs:
        lines.append(f"| {name} | {sec:.3f} | {s['save'] / sec:.2f} × the speed | {raw:.3f} |")
if traced:
    steps = [st for st, _, _ in next(iter(traced.values()))]
    lines += ["", "## Where the time goes (rank 0, one traced run, seconds worked per step)", "",
              "| step | " + " | ".join(traced) + " |", "|---|" + "---:|" * len(traced)]
    for i, st in enumerate(steps):
        cells = []
        for g in traced.values():
            cells.append(f"{g[i][2]:.3f}" if i < len(g) else "")
        lines.append(f"| {st} | " + " | ".join(cells) + " |")
lines += [
    "",
    "![bandwidths](performance.png)",
    "",
    "## Where the time goes, and what was tried",
    "",
    "- **Save vs the raw write.** The raw baseline is one `MPI_File_write_at_all`",
    "  per tensor plus `MPI_File_sync`, into a new file (as every checkpoint is:",
    "  rewriting the blocks of an existing file skips the file system's block",
    "  allocation and is no fair limit). An h5dcp save adds the collective plan,",
    "  creating the file, its datasets and attributes, reserving the space",
    "  (posix_fallocate, so that a full disk fails before any data is written;",
    "  measured without it: no difference), the XXH3 checksums of every byte,",
    "  the checksum attributes, closing, an fsync from every rank, and the rename",
    "  plus directory fsync that publish the file atomically. The step table",
    "  shows that the data write itself (`save:write`: HDF5's collective write",
    "  through ROMIO into the page cache, plus hashing) is where the time goes;",
    "  a profile of it is dominated by the kernel's page-cache copy",
    "  (`copy_folio_from_iter_atomic`, 33 %), XXH3 is 5 %. On this disk the",
    "  fsync'd write speed varies by a factor of 5 between runs, which moves the",
    "  ratio by more than any knob below did.",
    "- **Many small tensors.** Each tensor is its own dataset (contract 1). The",
    "  step table shows where 5,000 of them go: `save:create` (5,000 dataset",
    "  creations with 5 attributes each, collective metadata) and",
    "  `save:checksums` (2 more attributes each) dominate, the data write is",
    "  small. That is HDF5's per-object cost, about 0.1-0.3 ms per dataset;",
    "  packing small tensors into shared datasets would meet the target but",
    "  break the one-dataset-per-tensor format, so it was not done. Tensors",
    "  with a single writer are written with independent I/O (no per-tensor",
    "  collective call). Measured and not kept: HDF5 library-version bounds",
    "  (1.10), a 1 MiB metadata block size, a larger metadata cache,",
    "  fixed-length string attributes: no measurable change on 5,000 tensors.",
    "  Kept: no access/modification times on datasets (each attribute write",
    "  would update them).",
    "- **Async saves.** The caller is blocked for the collective plan and the",
    "  copy of its blocks into the pre-touched, reused staging memory; the",
    "  background thread checksums the staged bytes and writes them. When the",
    "  staging memory holds the whole shard, the background starts writing only",
    "  once the copy is done: before that change, copy, hashing and the write",
    "  competed for the 2 cores, the caller was blocked 21 % of a sync save and",
    "  the whole async save took 3 × a sync one. What remains is the copy at",
    "  this machine's memory bandwidth: the 3 % target assumes a save that is",
    "  slow next to a memory copy (GPU to pinned host memory, slow storage);",
    "  here the disk writes at about the speed memory copies, so the copy alone",
    "  is a few percent of the save.",
    "- **Loads** read each rank's block as one hyperslab per tensor (or per",
    "  checksum slab when resharding needs partial slabs) with independent I/O,",
    "  and verify every slab's XXH3 checksum.",
    "- Knobs kept: contiguous layout, no fill values, collective metadata",
    "  writes, the 1.8 file format (needed for large checksum attributes),",
    "  compact binary plan exchange, independent writes for single-writer",
    "  tensors, no object times. Measured in this run (table above): independent",
    "  writes for sharded tensors and ROMIO's data sieving / collective",
    "  buffering turned off. Not done: HDF5 alignment (`H5Pset_alignment`: the",
    "  datasets are contiguous and ROMIO writes them with large requests",
    "  already) and reusing the plan across saves (planning is under 1 ms of a",
    "  1 GB save in the step table).",
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
