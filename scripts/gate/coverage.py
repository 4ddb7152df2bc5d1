#!/usr/bin/env python3
"""The gate's coverage over result files: per file (a group's run), its rows by status, how many gated rows were
checked on every row (the GPU reference) or with every (64-row tile, head) unit covered (the CPU's sample), where
the reference ran, and its share of the run's wall time; then the worst correct row error per kernel and dtype.

    python3 scripts/gate/coverage.py results/coverage/*.json
"""
import json
import sys
from collections import defaultdict


def summarize(path):
    with open(path) as f:
        doc = json.load(f)
    status = defaultdict(int)
    full = complete = gated = 0
    worst = {}
    for row in doc["rows"]:
        status[row["status"]] += 1
        g = row.get("gate")
        if not g:
            continue
        gated += 1
        cov = g.get("coverage")
        whole = cov and cov["tile_heads"][0] == cov["tile_heads"][1] and cov["sequence_heads"][0] == cov["sequence_heads"][1]
        complete += 1 if whole else 0
        full += 1 if g.get("reference") == "gpu" else 0
        if row["status"] == "ok" and isinstance(g.get("max_row_rel"), (int, float)):
            key = (row["kernel"], row["dtype"])
            worst[key] = max(worst.get(key, 0.0), g["max_row_rel"])
    ref = doc["provenance"].get("reference") or {}
    name = path.rsplit("/", 1)[-1].removesuffix(".json")
    counts = " ".join(f"{k} {v}" for k, v in sorted(status.items()))
    share = f"{ref.get('seconds', 0):.2f} s of {ref.get('wall_s', 0):.1f} s ({100 * ref.get('share', 0):.1f}%)"
    print(f"{name:16s} rows: {counts:40s} gated {gated:4d}: every row {full:4d}, every unit {complete:4d} | "
          f"reference gpu {ref.get('gpu_cases', 0)} cpu {ref.get('cpu_cases', 0)} cases, {share}")
    return worst


def main(paths):
    worst = {}
    for p in paths:
        for k, v in summarize(p).items():
            worst[k] = max(worst.get(k, 0.0), v)
    print("worst max_row_rel of passing rows:")
    for (kernel, dtype), v in sorted(worst.items()):
        print(f"  {kernel:22s} {dtype:16s} {v:.3e}")


if __name__ == "__main__":
    main(sys.argv[1:])
