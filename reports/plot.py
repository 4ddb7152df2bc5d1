#!/usr/bin/env python3
"""Charts from attnbench result files (attnbench or peer rows, schema attnbench.results/1) and from
`attnbench compare --json` files (schema attnbench.compare/1): PNGs plus summary.md in -o DIR.

Per group: latency per shape for each kernel (eager and graph side by side, log scale, q1-q3 whiskers, unsettled
rows starred); achieved TFLOP/s (prefill) and GB/s (decode) against the device peaks when known; for sweep files
the speedup of each knob setting over the first; for compare files the speedup of NEW over BASE per row, coloured
by verdict (speedups on a log axis centred on 1.0x).

Every input is validated before anything is drawn, and each file is written under a temporary name and renamed
only when all of them are complete, so a bad input or a failure leaves the output folder as it was.
Needs matplotlib (Debian: python3-matplotlib) and the standard library. Exit codes: 0 done, 2 bad input.
"""
import argparse
import os
import sys

from plot_input import COMPARE_SCHEMA, InputError, load


def summary_text(inputs, charts, notes):
    lines = ["# attnbench report", "", "Inputs: " + ", ".join(f"`{p}`" for p in inputs), ""]
    sections = []
    for s in [c.section for c in charts] + [s for s, _ in notes]:
        if s not in sections:
            sections.append(s)
    for s in sections:
        lines += [f"## {s}", ""]
        lines += [f"- {line}" for sec, line in notes if sec == s]
        lines += [f"![{s} {c.title}]({c.name})" for c in charts if c.section == s]
        lines.append("")
    return "\n".join(lines)


def write_all(out, files):
    """files: (name, write(path)) pairs. Each is written to a hidden temporary name in out, then all are renamed
    into place; when one fails, the temporaries are removed and the folder keeps its earlier files."""
    staged = []
    try:
        for name, write in files:
            tmp = os.path.join(out, f".{name}.{os.getpid()}.tmp")
            staged.append(tmp)
            write(tmp)
        for tmp, (name, _) in zip(staged, files):
            os.replace(tmp, os.path.join(out, name))
    finally:
        for tmp in staged:
            if os.path.exists(tmp):
                os.remove(tmp)


def build(docs, plt, peak_tflops=None, peak_gbps=None):
    """The Charts of validated docs [(path, doc)]."""
    from plot_charts import Charts
    charts = Charts(plt, peak_tflops, peak_gbps)
    rows_by_group = {}
    for path, doc in docs:
        if doc["schema"] == COMPARE_SCHEMA:
            charts.compare(doc, path)
            continue
        for r in doc["rows"]:
            rows_by_group.setdefault(r["group"], []).append(r)
        sweep = (doc.get("provenance") or {}).get("sweep")
        if sweep is not None:
            for g in sorted({r["group"] for r in doc["rows"]}):
                charts.sweep(g, [r for r in doc["rows"] if r["group"] == g], sweep, path)
    for g in sorted(rows_by_group):
        charts.latency(g, rows_by_group[g])
        charts.throughput(g, rows_by_group[g])
    return charts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: python3 reports/plot.py results/*.json -o reports/out")
    ap.add_argument("files", nargs="+", help="attnbench result files, peer result files, compare --json files")
    ap.add_argument("-o", "--out", default="reports/out", help="output folder (created; default reports/out)")
    ap.add_argument("--peak-tflops", type=float, help="device peak TFLOP/s (default: from the rows' pct_peak_flops)")
    ap.add_argument("--peak-gbps", type=float, help="device peak GB/s (default: from the rows' pct_peak_bw)")
    args = ap.parse_args(argv)
    try:
        docs = [(p, load(p)) for p in args.files]
    except InputError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib
    except ImportError:
        print(f"plot.py: error: matplotlib is not available to {sys.executable} "
              "(Debian: apt-get install python3-matplotlib, then run with /usr/bin/python3)", file=sys.stderr)
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"plot.py: error: {args.out}: exists and is not a folder", file=sys.stderr)
        return 2

    charts = build(docs, plt, args.peak_tflops, args.peak_gbps)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        print(f"plot.py: error: {args.out}: cannot create the output folder: {e}", file=sys.stderr)
        return 2

    def png(fig):
        return lambda path: fig.savefig(path, format="png", dpi=100)

    def text(body):
        def write(path):
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
        return write
    files = [(c.name, png(c.fig)) for c in charts.charts]
    files.append(("summary.md", text(summary_text(args.files, charts.charts, charts.notes))))
    write_all(args.out, files)
    for c in charts.charts:
        plt.close(c.fig)
        print(os.path.join(args.out, c.name))
    print(os.path.join(args.out, "summary.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
