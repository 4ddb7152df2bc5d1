"""The charts of reports/plot.py as matplotlib figures, built from rows that plot_input.load validated: latency and
throughput per group, the speedup of each sweep setting over the first, the speedup per row of a compare file.
Builders append a Chart to Charts.charts and notes for summary.md to Charts.notes; the caller writes the files.
Every legend sits outside the axes and figures use constrained layout, so no label is cut off or covers a bar."""
import math
import os
import re
from collections import namedtuple

from plot_input import is_decode, median, settled, spread

VERDICT_COLOURS = {"FAST": "#2ca02c", "SLOW": "#d62728", "SAME": "#7f7f7f", "AMBIG": "#ff7f0e", "GATE": "#000000"}
OTHER_VERDICT = "#1f77b4"
UNSETTLED_LABEL = "unsettled (missed the stop rule)"
UNSETTLED_MARK = {"marker": "*", "markersize": 9, "color": "#d62728", "markeredgecolor": "black",
                  "markeredgewidth": 0.5, "linestyle": "none"}
FONT = 7.5
CHAR_IN = 0.07      # width of one character at FONT points, in inches; only used to size figures
MAX_WIDTH_IN = 20   # wider than this, category labels turn vertical instead of widening the figure
SPEEDUP_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.33, 0.5, 0.67, 0.8, 0.9, 0.95,
                 1.05, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100)

Chart = namedtuple("Chart", "name section title fig")
# values: per category or None; spread: (below, above) per category or None; unsettled: bool per category.
Series = namedtuple("Series", "label values colour hatch spread unsettled")


def slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def knob_lines(setting, names):
    """One "NAME=value" per knob of a sweep setting, without the common ATTNBENCH_ prefix."""
    return [f"{n.replace('ATTNBENCH_', '')}={setting.get(n, '?')}" for n in names]


def natural(key):
    """Sort key that puts s2048 before s16384: digit runs compare as numbers."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", "\x1f".join(key))]


def longest_line(texts):
    return max((len(line) for t in texts for line in t.split("\n")), default=0)


def wrap(text, width=16):
    """text on lines of about width characters: broken at spaces, and after '_' inside longer words."""
    pieces = []
    for word in text.split(" "):
        pieces += re.findall(r"[^_]*_|[^_]+$", word) if len(word) > width else [word]
        pieces[-1] += " "
    lines = [""]
    for p in pieces:
        if lines[-1] and len(lines[-1]) + len(p.rstrip(" ")) > width:
            lines.append("")
        lines[-1] += p
    return "\n".join(line.rstrip(" ") for line in lines)


def tick_labels(categories, rotation):
    """Label parts wrapped on lines under a bar group, or on one line when the labels stand vertical."""
    return [" ".join(c) if rotation else "\n".join(wrap(part) for part in c) for c in categories]


def log_axis(ax, lo, hi):
    """A log y axis labelled in plain numbers, at 1-2-5 steps when it spans few decades."""
    import matplotlib.ticker as mt
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(mt.LogLocator(subs=(1, 2, 5) if hi < 300 * lo else (1,)))
    ax.yaxis.set_major_formatter(mt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(mt.NullFormatter())


def speedup_axis(ax, which, values):
    """Log scale centred on 1.0x, symmetric so that a gain and the equal loss look alike, ticks spaced to fit."""
    import matplotlib.ticker as mt
    span = 1.3 * max([abs(math.log(v)) for v in values] + [math.log(1.1)])
    ticks, min_gap = [1.0], 2 * span / 11
    for side in (sorted(t for t in SPEEDUP_TICKS if t > 1), sorted((t for t in SPEEDUP_TICKS if t < 1), reverse=True)):
        last = 0.0
        for t in side:
            d = abs(math.log(t))
            if d > span:
                break
            if d - last >= min_gap:
                ticks.append(t)
                last = d
    getattr(ax, f"set_{which}scale")("log")
    getattr(ax, f"set_{which}lim")(math.exp(-span), math.exp(span))
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(mt.FixedLocator(sorted(ticks)))
    axis.set_major_formatter(mt.FuncFormatter(lambda v, _: f"{v:g}\u00d7"))
    axis.set_minor_locator(mt.NullLocator())
    (ax.axvline if which == "x" else ax.axhline)(1.0, color="black", linewidth=1.0, zorder=3)


class Charts:
    def __init__(self, plt, peak_tflops=None, peak_gbps=None):
        self.plt = plt
        self.peak_tflops = peak_tflops
        self.peak_gbps = peak_gbps
        self.charts = []
        self.notes = []   # (section, line)

    def add(self, fig, name, section, title):
        self.charts.append(Chart(name, section, title, fig))

    def colours(self, kernels):
        cmap = self.plt.get_cmap("tab10")
        return {k: cmap(i % 10) for i, k in enumerate(kernels)}

    def bar_figure(self, panels, extra_legend=()):
        """A figure with one axes per panel, stacked, for panels [(categories, series)] (a category is a tuple of
        label parts), wide enough for the bars, their labels and a legend at the right of each axes.
        Returns (fig, axes, rotation of the category labels)."""
        n_cats = max(len(cats) for cats, _ in panels)
        n_series = max(len(series) for _, series in panels)
        every = [c for cats, _ in panels for c in cats]
        bars_w = 0.11 * n_series + 0.3
        label_w = longest_line(tick_labels(every, 0)) * CHAR_IN + 0.15
        legend_w = longest_line([s.label for _, series in panels for s in series] + list(extra_legend)) * CHAR_IN + 0.9
        rotation, label_h = 0, 0.13 * max(t.count("\n") + 1 for t in tick_labels(every, 0))
        if max(bars_w, label_w) * n_cats + legend_w + 1.2 > MAX_WIDTH_IN:
            rotation, label_h = 90, longest_line(tick_labels(every, 90)) * CHAR_IN
        else:
            bars_w = max(bars_w, label_w)
        fig, axes = self.plt.subplots(len(panels), 1, squeeze=False, layout="constrained",
                                      figsize=(max(7.0, bars_w * n_cats + legend_w + 1.2),
                                               (3.2 + label_h) * len(panels)))
        return fig, list(axes[:, 0]), rotation

    def grouped_bars(self, ax, categories, rotation, series, log=False, base=0.0, extra=()):
        """Bars from `base` per series and category, q1-q3 whiskers where a series has spread, a star over bars of
        unsettled rows, the legend outside at the right. extra: (handle, label) pairs appended to the legend."""
        from matplotlib.lines import Line2D
        from matplotlib.transforms import offset_copy
        n = max(len(series), 1)
        width = 0.8 / n
        up = offset_copy(ax.transData, fig=ax.figure, y=6, units="points")
        down = offset_copy(ax.transData, fig=ax.figure, y=-6, units="points")
        marks = {True: [], False: []}
        whiskers = False
        for i, s in enumerate(series):
            pts = [(c + (i - (n - 1) / 2) * width, v, s.spread[c] if s.spread else (0.0, 0.0), s.unsettled[c])
                   for c, v in enumerate(s.values) if v is not None]
            if not pts:
                continue
            kw = {}
            if s.spread:
                whiskers = True
                kw = {"yerr": [[p[2][0] for p in pts], [p[2][1] for p in pts]],
                      "error_kw": {"elinewidth": 0.8, "capsize": 2, "capthick": 0.8, "ecolor": "black"}}
            ax.bar([p[0] for p in pts], [p[1] - base for p in pts], width, bottom=base, label=s.label,
                   color=s.colour, hatch=s.hatch, edgecolor="black", linewidth=0.4, **kw)
            for x, v, (below, above), unsettled in pts:
                if unsettled:
                    rising = v >= base
                    marks[rising].append((x, v + above if rising else v - below))
        for rising, pts in marks.items():
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], transform=up if rising else down,
                        clip_on=False, zorder=4, **UNSETTLED_MARK)
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(tick_labels(categories, rotation), rotation=rotation, fontsize=FONT)
        ax.set_xlim(-0.6, len(categories) - 0.4)
        if log:
            ends = [y for s in series for c, v in enumerate(s.values) if v is not None
                    for y in (v - (s.spread[c][0] if s.spread else 0), v)]
            log_axis(ax, min(ends), max(ends + [ax.dataLim.y1]))  # the limits include a peak line
        ax.margins(y=0.08)
        ax.grid(axis="y", alpha=0.3)
        handles, names = ax.get_legend_handles_labels()
        if whiskers:
            handles.append(Line2D([], [], color="black", linewidth=0.8, marker="_", markersize=6))
            names.append("whiskers: q1\u2013q3 of the samples")
        if marks[True] or marks[False]:
            handles.append(Line2D([], [], **UNSETTLED_MARK))
            names.append(UNSETTLED_LABEL)
        for h, label in extra:
            handles.append(h)
            names.append(label)
        ax.legend(handles, names, fontsize=FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)

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

    def kernel_series(self, cells, keys, colour, value, spread_of=None):
        """Series per kernel and mode (graph hatched) of value(row) over keys (shape, dtype)."""
        series = []
        for k in colour:
            for mode, hatch in (("eager", ""), ("graph", "//")):
                rs = [cells.get((s, d, k, mode)) for s, d in keys]
                if any(rs):
                    series.append(Series(f"{k} {mode}", [value(r) if r else None for r in rs], colour[k], hatch,
                                         [spread_of(r) if r else (0.0, 0.0) for r in rs] if spread_of else None,
                                         [bool(r) and not settled(r) for r in rs]))
        return series

    def note_unsettled(self, group, cells):
        unsettled = [r for r in cells.values() if not settled(r)]
        if unsettled:
            listed = "; ".join(f"{r['shape']} {r['dtype']} {r['kernel']} {r['mode']}"
                               + (f" ({r['unsettled']})" if r.get("unsettled") else "") for r in unsettled[:8])
            more = f"; and {len(unsettled) - 8} more" if len(unsettled) > 8 else ""
            self.notes.append((group, f"{len(unsettled)} unsettled row(s), starred in the charts: {listed}{more}"))

    def latency(self, group, rows):
        """One panel per dtype: the latency of each kernel and mode per shape, log scale, q1-q3 whiskers."""
        cells = {c: r for c, r in self.first_rows(group, rows, "latency").items() if median(r)}
        if not cells:
            self.notes.append((group, "no timed rows: no latency chart"))
            return
        self.note_unsettled(group, cells)
        colour = self.colours(sorted({k for (_, _, k, _) in cells}))
        panels = []
        for dtype in sorted({d for (_, d, _, _) in cells}):
            keys = sorted({(s, d) for (s, d, _, _) in cells if d == dtype}, key=natural)
            panels.append((dtype, [(s,) for s, _ in keys], self.kernel_series(cells, keys, colour, median, spread)))
        fig, axes, rot = self.bar_figure([p[1:] for p in panels], extra_legend=[UNSETTLED_LABEL])
        for ax, (dtype, cats, series) in zip(axes, panels):
            self.grouped_bars(ax, cats, rot, series, log=True)
            ax.set_ylabel("median latency (us, log scale)")
            ax.set_title(f"{group}: {dtype} latency per shape (eager plain, graph hatched)", fontsize=10)
        self.add(fig, f"{slug(group)}_latency.png", group, "latency")

    def throughput(self, group, rows):
        """One panel per regime and dtype: TFLOP/s of prefill, GB/s of decode, with the device peak."""
        cells = {c: r for c, r in self.first_rows(group, rows, "throughput").items() if median(r)}
        colour = self.colours(sorted({k for (_, _, k, _) in cells}))

        def rate_spread(key):
            # The rate at q3 and q1 of the latency: the work is fixed, so the rate scales as median / time.
            def f(r):
                m, (below, above) = median(r), spread(r)
                return (r[key] * (1 - m / (m + above)), r[key] * (m / (m - below) - 1))
            return f
        panels = []
        for decode, key, unit, peak_key, peak_arg in ((False, "tflops", "TFLOP/s", "pct_peak_flops", self.peak_tflops),
                                                      (True, "gbps", "GB/s", "pct_peak_bw", self.peak_gbps)):
            sel = {c: r for c, r in cells.items() if is_decode(r) == decode and r.get(key) is not None}
            peak = peak_arg
            if peak is None:  # the peak the run used: rate * 100 / pct
                for r in sel.values():
                    pct = r.get(peak_key)
                    if pct is not None and pct > 0:
                        peak = r[key] * 100.0 / pct
                        break
            for dtype in sorted({d for (_, d, _, _) in sel}):
                keys = sorted({(s, d) for (s, d, _, _) in sel if d == dtype}, key=natural)
                series = self.kernel_series(sel, keys, colour, lambda r, k=key: r[k], rate_spread(key))
                panels.append((f"{'decode' if decode else 'prefill'} {dtype}", unit, peak, [(s,) for s, _ in keys],
                               series))
        if not panels:
            self.notes.append((group, "no timed rows with tflops/gbps: no throughput chart"))
            return
        fig, axes, rot = self.bar_figure([p[3:] for p in panels],
                                         extra_legend=[UNSETTLED_LABEL, "device peak 0000 TFLOP/s"])
        for ax, (what, unit, peak, cats, series) in zip(axes, panels):
            top = max((v for s in series for v in s.values if v), default=0)
            far = bool(peak) and top < 0.1 * peak  # bars would vanish under a linear axis up to the peak
            extra = []
            if peak:
                extra.append((ax.axhline(peak, color="red", linestyle="--", linewidth=1),
                              f"device peak {peak:.0f} {unit}"))
            self.grouped_bars(ax, cats, rot, series, log=far, extra=extra)
            ax.set_ylabel(f"achieved {unit}")
            ax.set_title(f"{group}: {what} {unit} per shape" + (" (peak unknown)" if not peak else
                                                                " (log scale: far below the peak)" if far else ""),
                         fontsize=10)
        self.add(fig, f"{slug(group)}_throughput.png", group, "throughput")

    def sweep(self, group, rows, sweep, path):
        names = list(sweep["knobs"])
        settings = sweep["settings"]
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
                by_case.setdefault((r["shape"], r["dtype"], r["kernel"], r["mode"]), {}).setdefault(i, r)
        cases = [c for c, m in by_case.items() if 0 in m and len(m) > 1]
        if not cases:
            self.notes.append((group, f"sweep {os.path.basename(path)}: no case timed under two settings"))
            return
        cmap = self.plt.get_cmap("tab10")
        series = []
        for i in range(1, len(settings)):
            cells = [by_case[c].get(i) for c in cases]
            knobs = knob_lines(settings[i], names)
            series.append(Series("\n".join([f"S{i + 1}: {knobs[0]}"] + ["      " + line for line in knobs[1:]]),
                                 [median(by_case[c][0]) / median(r) if r else None for c, r in zip(cases, cells)],
                                 cmap((i - 1) % 10), "", None,
                                 [bool(r) and not (settled(r) and settled(by_case[c][0]))
                                  for c, r in zip(cases, cells)]))
        from matplotlib.lines import Line2D
        ref = "\n".join(["S1 (reference, = 1\u00d7)"] + ["      " + line for line in knob_lines(settings[0], names)])
        cats = [(f"{s} {d}", f"{k} {m}") for s, d, k, m in cases]
        fig, (ax,), rot = self.bar_figure([(cats, series)], extra_legend=[ref, UNSETTLED_LABEL])
        speedup_axis(ax, "y", [v for s in series for v in s.values if v])
        self.grouped_bars(ax, cats, rot, series, base=1.0,
                          extra=[(Line2D([], [], color="black", linewidth=1.0), ref)])
        ax.set_ylabel("speedup over S1 (log scale)")
        ax.set_title(f"{group}: sweep {os.path.basename(path)}, speedup of each setting over S1", fontsize=10)
        self.add(fig, f"{slug(group)}_sweep_{slug(os.path.splitext(os.path.basename(path))[0])}.png", group,
                 "sweep speedup")

    def compare(self, doc, path):
        section = f"compare {os.path.basename(path)}"
        rows = [r for r in doc["rows"] if r.get("speedup") is not None]
        counts = doc.get("summary") or {}
        self.notes.append((section, "verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items())))
        if not rows:
            self.notes.append((section, "no row with timings on both sides: no chart"))
            return
        labels = [f"{r['group']}/{r['shape']} {r['dtype']} {r['kernel']} {r['mode']}" for r in rows]
        speed = [r["speedup"] for r in rows]
        colours = [VERDICT_COLOURS.get(r.get("verdict"), OTHER_VERDICT) for r in rows]
        present = [v for v in VERDICT_COLOURS if any(r.get("verdict") == v for r in rows)]
        others = any(r.get("verdict") not in VERDICT_COLOURS for r in rows)
        fig, ax = self.plt.subplots(layout="constrained",
                                    figsize=(longest_line(labels) * CHAR_IN + 7.0, 0.22 * len(rows) + 1.5))
        ax.barh(range(len(rows)), [s - 1 for s in speed], left=1, height=0.7, color=colours, edgecolor="black",
                linewidth=0.4)
        speedup_axis(ax, "x", speed)
        for y, s in enumerate(speed):
            ax.annotate(f"{s:.3g}\u00d7", (s, y), xytext=(3 if s >= 1 else -3, 0), textcoords="offset points",
                        ha="left" if s >= 1 else "right", va="center", fontsize=6.5)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(labels, fontsize=FONT)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.grid(axis="x", alpha=0.3)
        against = doc.get("against")
        over = f"the fastest of {against}" if against and "," in against else against  # compare --against A,B
        ax.set_xlabel((f"speedup over {over}" if against else "speedup of NEW over BASE (base median / new median)")
                      + ", log scale")
        handles = [self.plt.Rectangle((0, 0), 1, 1, color=VERDICT_COLOURS[v]) for v in present]
        names = list(present)
        if others:
            handles.append(self.plt.Rectangle((0, 0), 1, 1, color=OTHER_VERDICT))
            names.append("other")
        ax.legend(handles, names, title="verdict", fontsize=FONT, title_fontsize=FONT, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        ax.set_title(section, fontsize=10)
        self.add(fig, f"compare_{slug(os.path.splitext(os.path.basename(path))[0])}.png", section, "speedup")
