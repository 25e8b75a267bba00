"""The peer's tuned thread count, from the rounds that timed every count.

bench.sh's alternated 1 GiB saves run bench/dcp_peer_bench.py --save-only
--threads each in every round: each repetition saves once with each
FileSystemWriter thread_count (cases save@1, save@2, save@4). The tuned
count is the one whose saves, pooled over every round, have the lowest
median: the peer tuned on as many samples as it is timed on, in the same
rounds as h5dcp. bench/performance_report.py takes that count's saves as
the peer's figure; bench.sh gives the count to the transformer rounds.

    python bench/dcp_thread_choice.py ROUND.json ...   prints the count
"""
import json
import statistics
import sys


def pooled_by_count(rounds):
    """{thread count: [seconds of every round's saves with it]} over the counts every round timed."""
    per_round = [{int(case.split("@")[1]): v["seconds"] for case, v in j["cases"].items() if case.startswith("save@")}
                 for j in rounds]
    if not per_round or not all(per_round):
        return {}
    counts = set.intersection(*(set(r) for r in per_round))
    return {n: [t for r in per_round for t in r[n]] for n in sorted(counts) if all(r[n] for r in per_round)}


def best_count(rounds):
    """The count with the lowest pooled median, or None where no round timed every count."""
    pooled = pooled_by_count(rounds)
    return min(pooled, key=lambda n: statistics.median(pooled[n])) if pooled else None


if __name__ == "__main__":
    found = best_count([json.load(open(p)) for p in sys.argv[1:]])
    if found is None:
        sys.exit("dcp_thread_choice: no round timed every thread count")
    print(found)
