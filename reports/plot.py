#!/usr/bin/env python3
"""Charts from attnbench result files (attnbench or peer rows, schema attnbench.results/1) and from
`attnbench compare --json` files (schema attnbench.compare/1): PNGs plus summary.md in -o DIR.

Per group: latency per shape for each kernel (eager and graph side by side, log scale); achieved TFLOP/s
(prefill) and GB/s (decode) against the device peaks when known; for sweep files the speedup of each knob
setting over the first; for compare files the speedup of NEW over BASE per row, coloured by verdict.

Needs matplotlib (Debian: python3-matplotlib) and the standard library. Exit codes: 0 done, 2 bad input.
"""
import argparse
import json
import os
import re
import sys

RESULTS_SCHEMA = "attnbench.results/1"
COMPARE_SCHEMA = "attnbench.compare/1"
VERDICT_COLOURS = {"FAST": "#2ca02c", "SLOW": "#d62728", "SAME": "#7f7f7f", "AMBIG": "#ff7f0e", "GATE": "#000000"}


class InputError(Exception):
    """A file that is missing, malformed or of another kind (exit code 2)."""


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: malformed JSON: {e}")
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in (RESULTS_SCHEMA, COMPARE_SCHEMA):
        raise InputError(f"{path}: not an attnbench results or compare file "
                         f"(field 'schema' is {schema!r}, expected {RESULTS_SCHEMA!r} or {COMPARE_SCHEMA!r})")
    rows = doc.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{path}: field 'rows': expected a list of objects")
    need = ("group", "shape", "dtype", "kernel", "mode")
    for i, r in enumerate(rows):
        for k in need:
            if not isinstance(r.get(k), str):
                raise InputError(f"{path}: row #{i}: field '{k}': expected a string, got {r.get(k)!r}")
    return doc


def median(row, key="time_us"):
    t = row.get(key)
    if row.get("status", "ok") != "ok" or not isinstance(t, dict):
        return None
    m = t.get("median")
    return m if isinstance(m, (int, float)) and m > 0 else None


def is_decode(row):
    dims = row.get("dims") or {}
    q = dims.get("max_seqlen_q")
    return q == 1


def slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def knob_label(knobs, names):
    return " ".join(f"{n.replace('ATTNBENCH_', '')}={knobs.get(n, '?')}" for n in names)


class Plotter:
    def __init__(self, out_dir, peak_tflops=None, peak_gbps=None):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        self.plt = plt
        self.out = out_dir
        self.peak_tflops = peak_tflops
        self.peak_gbps = peak_gbps
        self.images = []  # (section, title, file name)
        self.notes = []   # (section, line)

    def save(self, fig, name, section, title):
        path = os.path.join(self.out, name)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        self.plt.close(fig)
        self.images.append((section, title, name))

    def grouped_bars(self, ax, categories, series, log=False):
        """series: list of (label, values by category or None, colour, hatch)."""
        n = max(len(series), 1)
        width = 0.8 / n
        for i, (label, values, colour, hatch) in enumerate(series):
            xs = [c + (i - (n - 1) / 2) * width for c in range(len(categories))]
            hs = [v if v is not None else 0 for v in values]
            ax.bar(xs, hs, width, label=label, color=colour, hatch=hatch, edgecolor="black", linewidth=0.4)
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, rotation=40, ha="right", fontsize=7)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)

    def colours(self, kernels):
        cmap = self.plt.get_cmap("tab10")
        return {k: cmap(i % 10) for i, k in enumerate(kernels)}

    def first_rows(self, group, rows, chart):
        """One row per (shape, dtype, kernel, mode): the first, so a sweep's reference setting wins. Rows dropped
        that way (a group given twice, e.g. BASE and NEW files) are counted in the summary."""
        seen, dropped = {}, 0
        for r in rows:
            key = (r["shape"], r["dtype"], r["kernel"], r["mode"])
            if key in seen:
                dropped += 1
            else:
                seen[key] = r
        if dropped:
            self.notes.append((group, f"{chart}: {dropped} row(s) repeat a (shape, dtype, kernel, mode) of an earlier "
                                      "file or setting and are not drawn; use compare --json for two runs"))
        return seen

    def latency(self, group, rows):
        cells = self.first_rows(group, rows, "latency")
        cats = sorted({(s, d) for (s, d, _, _), r in cells.items() if median(r)}, key=lambda c: (c[0], c[1]))
        if not cats:
            self.notes.append((group, "no timed rows: no latency chart"))
            return
        kernels = sorted({k for (_, _, k, _), r in cells.items() if median(r)})
        colour = self.colours(kernels)
        series = []
        for k in kernels:
            for mode, hatch in (("eager", ""), ("graph", "//")):
                values = [median(cells[(s, d, k, mode)]) if (s, d, k, mode) in cells else None for s, d in cats]
                if any(v is not None for v in values):
                    series.append((f"{k} {mode}", values, colour[k], hatch))
        fig, ax = self.plt.subplots(figsize=(max(6, 1.1 * len(cats) + 2), 5))
        self.grouped_bars(ax, [f"{s} {d}" for s, d in cats], series, log=True)
        ax.set_ylabel("median latency (us, log scale)")
        ax.set_title(f"{group}: latency per shape (eager plain, graph hatched)")
        self.save(fig, f"{slug(group)}_latency.png", group, "latency")

    def throughput(self, group, rows):
        cells = self.first_rows(group, rows, "throughput")
        panels = []
        for decode, key, unit, peak_key, peak_arg in ((False, "tflops", "TFLOP/s", "pct_peak_flops", self.peak_tflops),
                                                      (True, "gbps", "GB/s", "pct_peak_bw", self.peak_gbps)):
            sel = {c: r for c, r in cells.items()
                   if is_decode(r) == decode and median(r) and isinstance(r.get(key), (int, float))}
            if not sel:
                continue
            peak = peak_arg
            if peak is None:  # the peak the run used: rate * 100 / pct
                for r in sel.values():
                    pct = r.get(peak_key)
                    if isinstance(pct, (int, float)) and pct > 0:
                        peak = r[key] * 100.0 / pct
                        break
            panels.append((decode, key, unit, peak, sel))
        if not panels:
            self.notes.append((group, "no timed rows with tflops/gbps: no throughput chart"))
            return
        fig, axes = self.plt.subplots(len(panels), 1, figsize=(max(6, 1.1 * len(cells) / 2 + 2), 4.5 * len(panels)),
                                      squeeze=False)
        for ax, (decode, key, unit, peak, sel) in zip(axes[:, 0], panels):
            cats = sorted({(s, d) for (s, d, _, _) in sel})
            kernels = sorted({k for (_, _, k, _) in sel})
            colour = self.colours(kernels)
            series = []
            for k in kernels:
                for mode, hatch in (("eager", ""), ("graph", "//")):
                    values = [sel[(s, d, k, mode)][key] if (s, d, k, mode) in sel else None for s, d in cats]
                    if any(v is not None for v in values):
                        series.append((f"{k} {mode}", values, colour[k], hatch))
            top = max((v for _, vals, _, _ in series for v in vals if v), default=0)
            far = bool(peak) and top < 0.1 * peak  # bars would vanish under a linear axis up to the peak
            self.grouped_bars(ax, [f"{s} {d}" for s, d in cats], series, log=far)
            if peak:
                ax.axhline(peak, color="red", linestyle="--", linewidth=1)
                ax.text(0, peak, f" device peak {peak:.0f} {unit}", color="red", va="bottom", fontsize=7)
            ax.set_ylabel(f"achieved {unit}")
            ax.set_title(f"{group}: {'decode' if decode else 'prefill'} {unit}" +
                         (" (peak unknown)" if not peak else " (log scale: far below the peak)" if far else ""))
        self.save(fig, f"{slug(group)}_throughput.png", group, "throughput")

    def sweep(self, group, rows, sweep, path):
        names = list((sweep.get("knobs") or {}).keys())
        settings = sweep.get("settings") or []
        if not names or len(settings) < 2:
            return
        def setting_of(r):
            knobs = r.get("knobs") or {}
            for i, s in enumerate(settings):
                if all(knobs.get(n) == s.get(n) for n in names):
                    return i
            return None
        by_case = {}
        for r in rows:
            i = setting_of(r)
            if i is not None and median(r):
                by_case.setdefault((r["shape"], r["dtype"], r["kernel"], r["mode"]), {})[i] = median(r)
        cases = [c for c, m in by_case.items() if 0 in m and len(m) > 1]
        if not cases:
            self.notes.append((group, f"sweep {os.path.basename(path)}: no case timed under two settings"))
            return
        cmap = self.plt.get_cmap("tab10")
        series = [(knob_label(settings[i], names), [by_case[c][0] / by_case[c][i] if i in by_case[c] else None
                                                    for c in cases], cmap(i % 10), "")
                  for i in range(len(settings))]
        fig, ax = self.plt.subplots(figsize=(max(6, 0.9 * len(cases) + 2), 5))
        self.grouped_bars(ax, [f"{s} {d} {k} {m}" for s, d, k, m in cases], series)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylabel(f"speedup over {knob_label(settings[0], names)}")
        ax.set_title(f"{group}: sweep speedup (first setting = 1)")
        self.save(fig, f"{slug(group)}_sweep_{slug(os.path.splitext(os.path.basename(path))[0])}.png", group, "sweep speedup")

    def compare(self, doc, path):
        section = f"compare {os.path.basename(path)}"
        rows = [r for r in doc["rows"] if isinstance(r.get("speedup"), (int, float))]
        counts = doc.get("summary") or {}
        self.notes.append((section, "verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items())))
        if not rows:
            self.notes.append((section, "no row with timings on both sides: no chart"))
            return
        labels = [f"{r['group']}/{r['shape']} {r['dtype']} {r['kernel']} {r['mode']}" for r in rows]
        speed = [r["speedup"] for r in rows]
        colours = [VERDICT_COLOURS.get(r.get("verdict"), "#1f77b4") for r in rows]
        fig, ax = self.plt.subplots(figsize=(9, max(3, 0.28 * len(rows) + 1.5)))
        ax.barh(range(len(rows)), speed, color=colours, edgecolor="black", linewidth=0.4)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=0.8)
        against = doc.get("against")
        ax.set_xlabel(f"speedup over {against}" if against else "speedup of NEW over BASE (base median / new median)")
        handles = [self.plt.Rectangle((0, 0), 1, 1, color=c) for c in VERDICT_COLOURS.values()]
        ax.legend(handles, list(VERDICT_COLOURS), fontsize=7, loc="lower right")
        ax.set_title(section)
        self.save(fig, f"compare_{slug(os.path.splitext(os.path.basename(path))[0])}.png", section, "speedup")

    def summary(self, inputs):
        lines = ["# attnbench report", "", "Inputs: " + ", ".join(f"`{p}`" for p in inputs), ""]
        sections = []
        for s, _, _ in self.images:
            if s not in sections:
                sections.append(s)
        for s, _ in self.notes:
            if s not in sections:
                sections.append(s)
        for s in sections:
            lines += [f"## {s}", ""]
            lines += [f"- {line}" for sec, line in self.notes if sec == s]
            lines += [f"![{s} {title}]({name})" for sec, title, name in self.images if sec == s]
            lines.append("")
        with open(os.path.join(self.out, "summary.md"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines))


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
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"plot.py: error: matplotlib is not available to {sys.executable} "
              "(Debian: apt-get install python3-matplotlib, then run with /usr/bin/python3)", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        print(f"plot.py: error: {args.out}: cannot create the output folder: {e}", file=sys.stderr)
        return 2

    p = Plotter(args.out, args.peak_tflops, args.peak_gbps)
    rows_by_group = {}
    for path, doc in docs:
        if doc["schema"] == COMPARE_SCHEMA:
            p.compare(doc, path)
            continue
        for r in doc["rows"]:
            rows_by_group.setdefault(r["group"], []).append(r)
        sweep = (doc.get("provenance") or {}).get("sweep")
        if isinstance(sweep, dict):
            groups = sorted({r["group"] for r in doc["rows"]})
            for g in groups:
                p.sweep(g, [r for r in doc["rows"] if r["group"] == g], sweep, path)
    for g in sorted(rows_by_group):
        p.latency(g, rows_by_group[g])
        p.throughput(g, rows_by_group[g])
    p.summary(args.files)
    for _, _, name in p.images:
        print(os.path.join(args.out, name))
    print(os.path.join(args.out, "summary.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
