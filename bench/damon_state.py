#!/usr/bin/env python3
"""Prints, as JSON, the DAMON schemes this kernel runs (sysfs, /sys/kernel/mm/damon/admin):
for each scheme its action, which memory it applies to, how long that memory must have gone
unaccessed, its quota and how many bytes it has applied its action to since it started.

scripts/bench.sh records it before and after its run: on this project's virtual machines the
kernel runs a DAMON scheme that pages out idle page cache, whose freed pages the kernel then
hands to the host (free page reporting), beside whatever the benches free themselves.
Reading sysfs only, except that as root it first asks each running kdamond to refresh its
schemes' counters (`update_schemes_stats`, which changes nothing else). Prints
{"kdamonds": []} where the kernel has no DAMON sysfs interface."""
import json
import os
import sys

ROOT = "/sys/kernel/mm/damon/admin/kdamonds"


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def number(path):
    text = read(path)
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def entries(path, count="nr_{}"):
    """The numbered subdirectories of a DAMON sysfs directory (0, 1, ...), in order: as many as
    its count file says (nr_kdamonds in kdamonds, nr_filters in each kind of filters)."""
    n = number(os.path.join(path, count.format(os.path.basename(path))))
    return [os.path.join(path, str(i)) for i in range(n or 0)]


def scheme(path, aggr_us):
    filters = []
    for kind in ("ops_filters", "filters", "core_filters"):
        for f in entries(os.path.join(path, kind), "nr_filters"):
            filters.append({"type": read(os.path.join(f, "type")), "matching": read(os.path.join(f, "matching")) == "Y",
                            "allow": read(os.path.join(f, "allow")) == "Y"})
    age_min = number(os.path.join(path, "access_pattern/age/min"))
    return {
        "action": read(os.path.join(path, "action")),
        "filters": filters,
        # The age is counted in aggregation intervals.
        "min_idle_seconds": age_min * aggr_us / 1e6 if age_min is not None and aggr_us else None,
        "max_accesses": number(os.path.join(path, "access_pattern/nr_accesses/max")),
        "quota_bytes": number(os.path.join(path, "quotas/bytes")),
        "quota_ms": number(os.path.join(path, "quotas/ms")),
        "quota_reset_ms": number(os.path.join(path, "quotas/reset_interval_ms")),
        "applied_bytes": number(os.path.join(path, "stats/sz_applied")),
    }


def main():
    out = {"kdamonds": []}
    for kd in entries(ROOT) if os.path.isdir(ROOT) else []:
        state = read(os.path.join(kd, "state"))
        if state == "on" and os.geteuid() == 0:
            try:
                with open(os.path.join(kd, "state"), "w") as f:
                    f.write("update_schemes_stats")
            except OSError:
                pass
        contexts = []
        for ctx in entries(os.path.join(kd, "contexts")):
            aggr_us = number(os.path.join(ctx, "monitoring_attrs/intervals/aggr_us"))
            contexts.append({"operations": read(os.path.join(ctx, "operations")),
                             "schemes": [scheme(s, aggr_us) for s in entries(os.path.join(ctx, "schemes"))]})
        out["kdamonds"].append({"state": state, "contexts": contexts})
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
