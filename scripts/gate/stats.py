#!/usr/bin/env python3
"""The gate's error distribution of correct kernels, from attnbench results files (run with --gate-only).

For each (kernel, path, dtype): rows gated, the worst per-row relative L2 error (max_row_rel) and the shape it came
from, its 90th percentile, the worst max_abs as a fraction of atol, and rows that failed. The path is the plan's
first two words (cuda.unified: "2d wide", "2d narrow...", "3d splits=..."), so each kernel path is its own line.
Usage: stats.py RESULTS.json [...]   (prints a markdown table)
"""
import json
import sys
from collections import defaultdict


def path_of(row):
    plan = (row.get("plan") or "").split()
    if row.get("kernel", "").endswith("gated_block"):
        fused = [k.split("_")[-1] + "=" + v for k, v in sorted((row.get("knobs") or {}).items()) if "GATED_FUSE" in k]
        return "block " + ",".join(fused)
    if plan[:1] == ["3d"]:
        return "3d decode"
    return " ".join(plan[:2]) or "-"


def main(paths):
    groups = defaultdict(list)
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        for r in doc.get("rows", []):
            g = r.get("gate")
            if not isinstance(g, dict) or r.get("mode") not in (None, "eager", "graph"):
                continue
            if r.get("mode") == "graph" and any(x.get("mode") == "eager" for x in doc["rows"]):
                continue  # one gate per (shape, kernel): the eager row's
            groups[(r["kernel"], path_of(r), r["dtype"])].append((g, r))
    print("| kernel | path | dtype | rows | max row_rel (shape) | p90 row_rel | max max_abs/atol | failed |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    for key in sorted(groups):
        items = groups[key]
        rel = sorted(float(g["max_row_rel"]) if g.get("max_row_rel") not in (None, "inf") else float("inf")
                     for g, _ in items)
        worst_g, worst_r = max(items, key=lambda it: float(it[0].get("max_row_rel") or 0)
                               if it[0].get("max_row_rel") != "inf" else float("inf"))
        abs_frac = max((float(g["max_abs"]) / g["atol"]) if g.get("max_abs") != "inf" else float("inf")
                       for g, _ in items)
        failed = sum(1 for g, _ in items if not g.get("passed"))
        p90 = rel[min(len(rel) - 1, int(0.9 * len(rel)))]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {len(items)} | {rel[-1]:.2e} ({worst_r['group']}/{worst_r['shape']}) "
              f"| {p90:.2e} | {abs_frac:.2f} | {failed} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
