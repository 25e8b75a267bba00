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
raw_independent = bw(s["raw_independent"]) if "raw_independent" in s else 0
raw_best = max(raw_romio, raw_independent)
rows = [
    ("raw MPI-IO write + fsync (ROMIO, the default; MPI_File_write_at_all)", s["raw"], raw_romio),
    ("raw MPI-IO write + fsync (ROMIO, independent MPI_File_write_at)", s.get("raw_independent"),
     raw_independent or None),
    ("raw MPI-IO write + fsync (OMPIO)", ompio["median_seconds"]["raw"], raw_ompio),
    ("h5dcp save", s["save"], bw(s["save"])),
    ("h5dcp load (same sharding)", s["load"], bw(s["load"])),
    ("h5dcp resharded load", s["reshard"], bw(s["reshard"])),
    ("h5dcp async save, until durable", s["async_total"], bw(s["async_total"])),
    ("h5dcp async save, caller blocked", s["async_blocking"], None),
    ("memory copy of the shards into touched memory (floor of the above)", s.get("staging_copy"),
     bw(s["staging_copy"]) if "staging_copy" in s else None),
    ("PyTorch DCP save", dcp_s.get("SAVE"), bw(dcp_s["SAVE"]) if "SAVE" in dcp_s else None),
    ("PyTorch DCP load", dcp_s.get("LOAD"), bw(dcp_s["LOAD"]) if "LOAD" in dcp_s else None),
    ("PyTorch DCP resharded load", dcp_s.get("LOAD-resharded(rank"),
     bw(dcp_s["LOAD-resharded(rank"]) if "LOAD-resharded(rank" in dcp_s else None),
    ("torch.save, one process", ts["seconds"], bw(ts["seconds"], ts["gb"])),
    ("h5dcp save, 5,000 tensors of 16 KiB", s["small"], bw(s["small"], h["small_gb"])),
    ("h5dcp save, same bytes in 4 tensors", s["small_as_large"], bw(s["small_as_large"], h["small_gb"])),
    ("HDF5 alone: the 5,000 datasets, no attributes", s.get("small_hdf5_bare"),
     bw(s["small_hdf5_bare"], h["small_gb"]) if "small_hdf5_bare" in s else None),
    ("HDF5 alone: the 5,000 datasets, 7 attributes each at creation", s.get("small_hdf5_attrs"),
     bw(s["small_hdf5_attrs"], h["small_gb"]) if "small_hdf5_attrs" in s else None),
]

# Knobs measured in the same run (save only, medians, each beside its own raw write).
knobs = []
for name, file in (("early write-back off (H5DCP_WRITEBACK_MIB=0)", "no-writeback.json"),
                   ("ROMIO hints romio_ds_write=disable, romio_cb_write=disable", "hints.json")):
    try:
        k = json.load(open(f"{results}/{file}"))["median_seconds"]
        knobs.append((name, k["save"], k["raw"], k.get("raw_independent")))
    except (OSError, KeyError):
        pass

# Where the time goes: rank 0's steps of the traced run, one group per save
# (per repetition, the bench's order: sync save, async save, 5,000 small
# tensors, 4 large). The second repetition's: a process's first save pays
# for first touches of memory and is no typical one.
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
groups = groups[4:8] if len(groups) >= 8 else groups[:4]
traced = dict(zip(["sync save", "async save (background)", "5,000 small tensors", "same bytes in 4 tensors"], groups))

def verdict(ok):
    return "met" if ok else "**not met**"

mem_limit = 0.10 * (h["shard_bytes"] + h["staging_bytes"])
targets = [
    ("save ≥ 0.9 × raw MPI-IO write (the faster ROMIO write, collective or independent; OMPIO is not trusted)",
     f"{bw(s['save']) / raw_best:.2f} ×", bw(s["save"]) >= 0.9 * raw_best),
    ("save not slower than DCP", f"{dcp_s['SAVE'] / s['save']:.2f} × DCP's speed" if "SAVE" in dcp_s else "n/a",
     "SAVE" in dcp_s and s["save"] <= dcp_s["SAVE"]),
    ("load ≥ 2 × DCP load", f"{dcp_s['LOAD'] / s['load']:.2f} ×" if "LOAD" in dcp_s else "n/a",
     "LOAD" in dcp_s and dcp_s["LOAD"] / s["load"] >= 2),
    ("resharded load ≥ 1.5 × DCP resharded load",
     f"{dcp_s['LOAD-resharded(rank'] / s['reshard']:.2f} ×" if "LOAD-resharded(rank" in dcp_s else "n/a",
     "LOAD-resharded(rank" in dcp_s and dcp_s["LOAD-resharded(rank"] / s["reshard"] >= 1.5),
    ("resharded load time ≤ 1.2 × same-sharding load", f"{s['reshard'] / s['load']:.2f} ×", s["reshard"] <= 1.2 * s["load"]),
    ("5,000 small tensors ≤ 1.5 × same bytes in 4 tensors",
     f"{s['small'] / s['small_as_large']:.2f} × (HDF5 alone, no attributes: "
     f"{s.get('small_hdf5_bare', float('nan')) / s['small_as_large']:.2f} ×)",
     s["small"] <= 1.5 * s["small_as_large"]),
    ("async blocking ≤ 3 % of the sync save",
     f"{100 * s['async_blocking'] / s['save']:.1f} % (the bare memory copy: "
     f"{100 * s.get('staging_copy', float('nan')) / s['save']:.1f} %)",
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
              f"| h5dcp save with | seconds | vs default save ({s['save']:.3f} s) "
              "| raw write in that run, collective / independent |",
              "|---|---:|---:|---:|"]
    for name, sec, raw, raw_ind in knobs:
        ind = f"{raw_ind:.3f}" if raw_ind else "n/a"
        lines.append(f"| {name} | {sec:.3f} | {s['save'] / sec:.2f} × the speed | {raw:.3f} / {ind} |")
if traced:
    steps = [st for st, _, _ in next(iter(traced.values()))]
    lines += ["", "## Where the time goes (rank 0, second repetition of a traced run, seconds worked per step)", "",
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
    "- **How it is measured.** Every timed save writes a new file; the file the",
    "  case wrote before is removed untimed and `sync()` lets the disk settle",
    "  first (on ext4 mounted with `discard`, as here, freeing a GiB keeps the",
    "  disk busy for a quarter second, which otherwise lands in whichever case",
    "  comes next: it made the async save look 3 × slower than the sync one).",
    "- **Run to run.** The verdicts near a threshold flip between runs on this",
    "  disk. Four full runs of this command with the final code (2026-11-22,",
    "  the last one is the table above): save against the faster raw write",
    "  0.92-1.53 ×; save against DCP's 1.00-1.96 × its speed; load against",
    "  DCP's 1.79-2.12 ×; resharded load against DCP's 1.63-2.31 ×; 5,000",
    "  small tensors 6.6-7.3 × the 4 large ones (HDF5 alone, no attributes:",
    "  2.4-2.7 ×); async blocking 15-27 % of the sync save (the bare copy",
    "  12-21 %).",
    "- **Save vs the raw write.** The issue's raw baseline is one",
    "  `MPI_File_write_at_all` per tensor plus `MPI_File_sync`, into a new",
    "  file; the same with `MPI_File_write_at` (each rank on its own) is",
    "  measured too, and the target is taken against the faster of the two",
    "  (which one that is changes from run to run here). The knob rows carry",
    "  their own raw writes, more samples of the ratio. An h5dcp save adds the",
    "  collective plan, creating the file, its datasets and attributes,",
    "  reserving the space (posix_fallocate, so that a full disk fails before",
    "  any data is written), the XXH3 checksums of every byte, the checksum",
    "  attributes, closing, an fsync from every rank, and the rename plus",
    "  directory fsync that publish the file atomically. The step table shows",
    "  `save:write` (HDF5's write through ROMIO into the page cache, plus",
    "  hashing: XXH3 takes about 20 ms per 128 MiB block, and, since early",
    "  write-back, most of the disk's work) and `save:sync` (the close and",
    "  the fsync of what is left) take all of it; the rest is milliseconds. A",
    "  profile of the write is dominated by the kernel's page-cache copy",
    "  (`copy_folio_from_iter_atomic`). The write step's own time varies by",
    "  10 × between saves with the same data: the kernel throttles writers",
    "  when dirty pages pile up (measured per 128 MiB block: 0.03 s to 1.2 s).",
    "  Early write-back (below) takes the disk write out of the fsync.",
    "- **Collective or independent writes.** Each rank's block of a",
    "  row-sharded tensor is one contiguous range of the file: two-phase",
    "  collective I/O has nothing to aggregate there and only adds rounds of",
    "  exchanges (ROMIO's 16 MiB collective buffer: 8 rounds per 128 MiB",
    "  block). Measured at 1 GiB, 2 ranks, three runs each, every run beside",
    "  its own raw write: collective writes 0.88-1.6 s per save (0.59-1.09 ×",
    "  the raw write), independent writes 0.83-0.84 s (0.94-0.98 ×), ROMIO's",
    "  collective buffering and data sieving turned off 0.86-0.96 s. So",
    "  `IoMode::Collective` now writes collectively only tensors whose blocks",
    "  are scattered through the file (column or grid shards, which the",
    "  interleaved-shards test covers).",
    "- **Early write-back.** A save used to be the copy into the page cache",
    "  (`save:write`) followed by the disk write (the fsync in `save:sync`),",
    "  one after the other. The writer now asks the kernel to start writing",
    "  the file back every 32 MiB it writes (`sync_file_range` with",
    "  `SYNC_FILE_RANGE_WRITE`, which does not wait; `core/early_writeback`),",
    "  so the disk works while the copy goes on, and the fsync at the end",
    "  finds little left. Measured alternately, 1 GiB, 2 ranks, five saves",
    "  per run: sync saves 0.55-0.64 s with it (5 of 6 runs; one 1.2 s)",
    "  against 0.79-0.86 s without (one 1.04 s); async saves 0.70-0.79 s",
    "  against 0.89-1.27 s. The knob row above turns it off in this run",
    "  (`H5DCP_WRITEBACK_MIB=0`). The raw baselines do not do this (they are",
    "  plain MPI-IO), which is how a save can be faster than the raw write.",
    "- **A save that replaces a checkpoint** at the same path used to pay for",
    "  freeing the old file's blocks inside its commit step: 0.25-0.33 s per",
    "  GiB here (the rename drops the last link; ext4 with `discard`). The",
    "  replaced file now gets a second hidden name before the rename and is",
    "  removed by a background thread once the rename is durable",
    "  (`core/deferred_removal`): the commit step went from 0.3 s to under",
    "  1 ms. The cases above write new files, so this does not show in them.",
    "- **Many small tensors.** Each tensor is its own dataset (contract 1).",
    "  The two rows \"HDF5 alone\" make the same 5,000 datasets with bare HDF5",
    "  calls and h5dcp's file settings (collective metadata, 1.8 format,",
    "  contiguous, no fill, no times), write the data, close and fsync: even",
    "  without a single attribute HDF5 needs more than 1.5 × the time of the",
    "  4-tensor save, so the target is below what one dataset per tensor",
    "  allows in HDF5 1.10. h5dcp stores 7 attributes per dataset (key, kind,",
    "  dtype, chunk offsets and sizes, checksum rows and checksums); the step",
    "  table shows `save:create` (5 of them, at creation) and `save:checksums`",
    "  (the other 2, written after the data) dominate. A microbenchmark of",
    "  HDF5 alone puts a number on the one thing left: attributes added after",
    "  creation cost about 0.25 s per 5,000 datasets, the same attributes at",
    "  creation about 0.02 s; moving the checksums before the create step",
    "  would need every rank to hash before the file exists (for GPU tensors",
    "  a second device-to-host copy or a host copy of the whole shard), not",
    "  done yet. Measured and not kept: HDF5 library-version bounds (latest),",
    "  a 1 MiB metadata block size, a larger metadata cache, early allocation,",
    "  all-collective metadata operations, fixed-length string attributes: no",
    "  measurable change on 5,000 tensors. Kept: no access/modification times",
    "  on datasets, independent writes for single-writer tensors.",
    "- **Async saves.** The caller is blocked for the collective plan and the",
    "  copy of its blocks into the pre-touched, reused staging memory; the",
    "  background thread checksums the staged bytes and writes them. The row",
    "  \"memory copy of the shards\" is that copy alone (at::Tensor::copy_ into",
    f"  touched memory, one thread per rank): the blocking time is {s['async_blocking'] / s['staging_copy']:.2f} ×",
    "  that copy's. The 3 % target assumes a save that is slow next to a",
    "  memory copy (GPU to pinned host memory, slow storage); here the disk",
    f"  writes at {bw(s['save']) / bw(s['staging_copy']):.2f} × the speed memory copies in this run, so the",
    f"  copy alone is {100 * s['staging_copy'] / s['save']:.0f} % of the save. With more cores per rank the copy is",
    "  parallel (ATen's intra-op threads; the benchmark pins one).",
    "- **Loads** read each rank's block as one hyperslab per tensor (or per",
    "  checksum slab when resharding needs partial slabs) with independent I/O,",
    "  and verify every slab's XXH3 checksum.",
    "- Knobs kept: contiguous layout, no fill values, collective metadata",
    "  writes, the 1.8 file format (needed for large checksum attributes),",
    "  compact binary plan exchange, independent writes for row shards and",
    "  single-writer tensors, no object times, background removal of",
    "  replaced files, early write-back.",
    "  Measured in this run (table above): independent writes for sharded",
    "  tensors and ROMIO's data sieving / collective buffering turned off.",
    "  Measured separately (2 runs of 5 saves each, 1 GiB, and the 5,000",
    "  tensor case): `H5Pset_alignment` to 4 KiB or 1 MiB for datasets from",
    "  64 KiB: 0.82-0.86 s per save against 0.86 s without; collective",
    "  metadata writes off: 0.85-0.87 s, and 1.29-1.33 s against 1.23-1.41 s",
    "  for 5,000 tensors. Neither changes anything measurable here: alignment",
    "  is not set (it would only make files larger), collective metadata",
    "  writes stay on (the metadata cache is flushed by one collective MPI-IO",
    "  write rather than many small ones: HDF5's advice for many ranks on a",
    "  parallel file system). Not done: reusing the plan",
    "  across saves (planning is under 1 ms of a 1 GB save in the step table).",
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
