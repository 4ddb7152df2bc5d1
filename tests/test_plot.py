#!/usr/bin/env python3
"""reports/plot.py on tests/data/sample_results.json plus sweep and compare files made from it: the PNGs exist and
are not trivial; malformed inputs exit 2 with one line naming the file, row and field, and leave the output folder
as it was; the charts' layout holds (legends outside the bars and inside the figure, no label overlaps another or
is cut off), the compare axis is log-scaled around 1.0x, latency bars carry q1-q3 whiskers and unsettled rows a
marker. Runs itself under an interpreter that has matplotlib; exit 77 (CTest skip) when there is none."""
import contextlib
import copy
import io
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLOT = os.path.join(ROOT, "reports", "plot.py")
SAMPLE = os.path.join(ROOT, "tests", "data", "sample_results.json")
REEXEC = "ATTNBENCH_TEST_PLOT_REEXEC"


def has_matplotlib(exe):
    return subprocess.run([exe, "-c", "import matplotlib"], capture_output=True).returncode == 0


def run(*args):
    return subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True)


def dump(path, doc):
    with open(path, "w") as f:
        if isinstance(doc, str):
            f.write(doc)
        else:
            json.dump(doc, f)
    return path


def check_png(path):
    import matplotlib.image as mi
    import numpy as np
    assert os.path.exists(path), f"missing {path}"
    assert os.path.getsize(path) > 5000, f"{path}: only {os.path.getsize(path)} bytes"
    a = (mi.imread(path)[..., :3] * 255).astype(np.uint32)
    colours = len(np.unique((a[..., 0] << 16) | (a[..., 1] << 8) | a[..., 2]))
    assert colours > 10, f"{path}: only {colours} distinct colours"


def sweep_doc(sample, values_a=("0", "1"), values_b=None):
    """The sample's rows once per setting of one knob (or of two: every pair), as `attnbench sweep` writes them."""
    knobs = {"ATTNBENCH_Q_MAJOR_GRID": list(values_a)}
    if values_b:
        knobs["ATTNBENCH_SM90_NARROW_WARPS"] = list(values_b)
    settings = [{}]
    for name, values in knobs.items():
        settings = [dict(s, **{name: v}) for s in settings for v in values]
    doc = copy.deepcopy(sample)
    doc["rows"] = []
    for i, setting in enumerate(settings):
        for r in sample["rows"]:
            n = copy.deepcopy(r)
            n["knobs"] = dict(n.get("knobs") or {}, **setting)
            scale = 1.0 - 0.07 * i if i % 2 else 1.0 + 0.05 * i
            if n.get("time_us"):
                n["time_us"] = {k: (v * scale if k != "n" else v) for k, v in n["time_us"].items()}
            doc["rows"].append(n)
    doc["provenance"].pop("knobs", None)
    doc["provenance"]["sweep"] = {"knobs": knobs, "settings": settings}
    return doc


def compare_doc(speedups=(1.3, 0.7, 1.0, 1.05)):
    rows = []
    for i, speedup in enumerate(speedups):
        verdict = "FAST" if speedup > 1.02 else "SLOW" if speedup < 0.98 else "SAME"
        rows.append({"group": "sample", "shape": f"s{i}", "dtype": "bf16", "kernel": "cuda.unified", "mode": "graph",
                     "verdict": "AMBIG" if i == 3 else verdict, "speedup": speedup, "ratio": 1 / speedup})
    rows.append({"group": "sample", "shape": "gone", "dtype": "bf16", "kernel": "cuda.unified", "mode": "graph",
                 "verdict": "only-in-base", "speedup": None, "ratio": None})
    return {"schema": "attnbench.compare/1", "base": "a.json", "new": "b.json", "threshold": 0.02, "against": None,
            "summary": {"FAST": 1, "SLOW": 1, "SAME": 1, "AMBIG": 1, "only-in-base": 1}, "rows": rows}


def with_unsettled(sample):
    doc = copy.deepcopy(sample)
    for r in doc["rows"]:
        if r["kernel"] == "cuda.unified" and r["mode"] == "graph":
            r["settled"], r["unsettled"] = False, "relative stdev 0.08 > 0.05 at the timeout"
    return doc


def test_end_to_end(tmp, sample):
    r = run("--help")
    assert r.returncode == 0 and "--peak-tflops" in r.stdout, r.stdout + r.stderr
    # Peaks from the command line, as the rows carry none.
    bare = copy.deepcopy(sample)
    for row in bare["rows"]:
        row["pct_peak_flops"] = row["pct_peak_bw"] = None
    bare_path = dump(os.path.join(tmp, "bare.json"), bare)
    sweep = dump(os.path.join(tmp, "sweep_sample.json"), sweep_doc(sample))
    cmp = dump(os.path.join(tmp, "cmp.json"), compare_doc())
    out = os.path.join(tmp, "out")
    r = run(bare_path, sweep, cmp, "-o", out, "--peak-tflops", "989", "--peak-gbps", "4800")
    assert r.returncode == 0, r.stdout + r.stderr
    pngs = ["sample_latency.png", "sample_throughput.png", "sample_sweep_sweep_sample.png", "compare_cmp.png"]
    assert sorted(os.listdir(out)) == sorted(pngs + ["summary.md"]), os.listdir(out)  # no temporaries left
    for name in pngs:
        check_png(os.path.join(out, name))
    with open(os.path.join(out, "summary.md")) as f:
        summary = f.read()
    for name in pngs + ["SLOW 1"]:
        assert name in summary, f"summary.md lacks {name}:\n{summary}"


def malformed_cases(tmp, sample):
    """(path, the fragment the message must hold) per kind of bad input."""
    def results(change):
        doc = copy.deepcopy(sample)
        change(doc)
        return doc

    def row(i, **fields):
        def change(doc):
            for k, v in fields.items():
                if v is KeyError:
                    doc["rows"][i].pop(k)
                else:
                    doc["rows"][i][k] = v
        return change

    def dims_without(i, field):
        def change(doc):
            doc["rows"][i]["dims"].pop(field)
        return change

    def time(i, **fields):
        def change(doc):
            doc["rows"][i]["time_us"].update(fields)
        return change

    def cmp_row(**fields):
        doc = compare_doc()
        doc["rows"][1].update(fields)
        return doc

    docs = [
        ("prov_string", results(lambda d: d.update(provenance="h200")), "field 'provenance': expected an object"),
        ("prov_list", results(lambda d: d.update(provenance=[1, 2])), "field 'provenance': expected an object"),
        ("sweep_list", results(lambda d: d["provenance"].update(sweep=["x"])), "field 'provenance.sweep'"),
        ("sweep_knobs", results(lambda d: d["provenance"].update(sweep={"knobs": "A", "settings": []})),
         "field 'provenance.sweep.knobs'"),
        ("sweep_setting", results(lambda d: d["provenance"].update(sweep={"knobs": {"A": ["0"]}, "settings": ["0"]})),
         "field 'provenance.sweep.settings[0]'"),
        ("rows_object", results(lambda d: d.update(rows={})), "field 'rows': expected a list"),
        ("row_string", results(lambda d: d["rows"].__setitem__(2, "row")), "row #2: expected an object"),
        ("row_no_kernel", results(row(4, kernel=KeyError)), "row #4: field 'kernel': expected a string"),
        ("dims_string", results(row(3, dims="b2 s48")), "row #3: field 'dims': expected an object"),
        ("dims_null", results(row(0, dims=None)), "row #0: field 'dims': expected an object"),
        ("dims_short", results(dims_without(6, "max_seqlen_q")), "row #6: field 'dims.max_seqlen_q'"),
        ("time_list", results(row(0, time_us=[63.8])), "row #0: field 'time_us': expected an object"),
        ("time_string", results(row(6, time_us="63.8")), "row #6: field 'time_us': expected an object"),
        ("median_string", results(time(7, median="12.5")), "row #7: field 'time_us.median': expected a finite number"),
        ("median_missing", results(lambda d: d["rows"][7]["time_us"].pop("median")), "row #7: field 'time_us.median'"),
        ("median_bool", results(time(7, median=True)), "row #7: field 'time_us.median'"),
        ("q3_string", results(time(8, q3="high")), "row #8: field 'time_us.q3'"),
        ("tflops_string", results(row(9, tflops="fast")), "row #9: field 'tflops'"),
        ("knobs_list", results(row(10, knobs=["A=1"])), "row #10: field 'knobs'"),
        ("settled_string", results(row(11, settled="no")), "row #11: field 'settled': expected true or false"),
        ("unsettled_number", results(row(11, settled=False, unsettled=3)), "row #11: field 'unsettled'"),
        ("cmp_speedup", cmp_row(speedup="1.2"), "row #1: field 'speedup': expected a positive number"),
        ("cmp_speedup_zero", cmp_row(speedup=0), "row #1: field 'speedup'"),
        ("cmp_verdict", cmp_row(verdict=3), "row #1: field 'verdict'"),
        ("cmp_row_list", dict(compare_doc(), rows=[[1]]), "row #0: expected an object"),
        ("schema", dict(sample, schema="attnbench.results/9"), "not an attnbench results or compare file"),
        ("truncated", "{\"schema\": ", "malformed JSON"),
        ("nan_median", json.dumps(sample).replace("63.801", "NaN", 1), "row #0: field 'time_us.median'"),
        ("latin1", b"\xff\xfe{}".decode("latin-1"), "cannot read"),
    ]
    cases = []
    for name, doc, fragment in docs:
        path = os.path.join(tmp, f"{name}.json")
        if name == "latin1":
            with open(path, "wb") as f:
                f.write(b"\xff\xfe{\"schema\": 1}")
        else:
            dump(path, doc)
        cases.append((path, fragment))
    folder = os.path.join(tmp, "a_folder.json")
    os.makedirs(folder)
    cases.append((folder, "is a directory"))
    cases.append((os.path.join(tmp, "nope.json"), "no such file"))
    shapes = os.path.join(ROOT, "tests", "data", "sample_shapes.json")
    cases.append((shapes, "not an attnbench results or compare file"))
    if os.geteuid() != 0:  # root reads a file whatever its mode
        locked = dump(os.path.join(tmp, "locked.json"), sample)
        os.chmod(locked, 0)
        cases.append((locked, "cannot read"))
    return cases


def test_malformed(tmp, plot, sample):
    out = os.path.join(tmp, "kept")
    os.makedirs(out)
    dump(os.path.join(out, "old.png"), "earlier output")
    fresh = os.path.join(tmp, "never")
    for n, (path, fragment) in enumerate(malformed_cases(tmp, sample)):
        # The bad file after a good one: nothing of the good one may be written either. Every case runs in this
        # process; some also through the command line, for the exit status and stderr of the real thing.
        if n % 6 == 0:
            r = run(SAMPLE, path, "-o", out)
            code, err = r.returncode, r.stderr
        else:
            buf = io.StringIO()
            with contextlib.redirect_stderr(buf):
                code = plot.main([SAMPLE, path, "-o", out])
            err = buf.getvalue()
        lines = err.strip().splitlines()
        assert code == 2, f"{path}: exit {code}\n{err}"
        assert len(lines) == 1 and path in lines[0] and fragment in lines[0], f"{path}: want {fragment!r}:\n{err}"
        assert os.listdir(out) == ["old.png"], f"{path}: the output folder changed: {os.listdir(out)}"
        with contextlib.redirect_stderr(io.StringIO()):
            code = plot.main([path, "-o", fresh])
        assert code == 2 and not os.path.exists(fresh), f"{path}: exit {code}, or {fresh} created"
    with open(os.path.join(out, "old.png")) as f:
        assert f.read() == "earlier output"


def test_no_partial_files(tmp, plot, sample):
    """A write that fails half way (the second PNG) leaves the folder as it was, with no temporary behind."""
    import matplotlib.figure
    out = os.path.join(tmp, "half")
    os.makedirs(out)
    dump(os.path.join(out, "old.md"), "x")
    real, calls = matplotlib.figure.Figure.savefig, []

    def failing(fig, path, **kw):
        calls.append(path)
        if len(calls) == 2:
            with open(path, "wb") as f:
                f.write(b"\x89PNG partial")
            raise OSError("disk full")
        return real(fig, path, **kw)
    matplotlib.figure.Figure.savefig = failing
    try:
        plot.main([SAMPLE, "-o", out])
        raise AssertionError("the failing write did not raise")
    except OSError:
        pass
    finally:
        matplotlib.figure.Figure.savefig = real
    assert len(calls) == 2 and os.listdir(out) == ["old.md"], os.listdir(out)


def overlaps(a, b, slack=0.5):
    return a.x0 < b.x1 - slack and b.x0 < a.x1 - slack and a.y0 < b.y1 - slack and b.y0 < a.y1 - slack


def drawn_ticklabels(axis):
    """The tick labels within the axis' view: a locator also places ticks beyond it, which are not drawn."""
    lo, hi = sorted(axis.get_view_interval())
    locs = axis.get_majorticklocs()
    slack = 1e-9 * max(abs(lo), abs(hi))
    return [t.label1 for loc, t in zip(locs, axis.get_major_ticks(len(locs))) if lo - slack <= loc <= hi + slack]


def check_layout(chart):
    """Every label inside the figure; legends outside every axes; no two labels overlapping."""
    fig = chart.fig
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = fig.bbox
    labels = []  # (text, bbox); a legend counts as one
    for ax in fig.axes:
        frame = ax.get_window_extent(r)
        legend = ax.get_legend()
        assert legend is not None, f"{chart.name}: an axes without a legend"
        lb = legend.get_window_extent(r)
        for other in fig.axes:
            assert not overlaps(lb, other.get_window_extent(r)), f"{chart.name}: the legend covers an axes"
        labels.append(("legend", lb))
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label] + drawn_ticklabels(ax.xaxis) + drawn_ticklabels(ax.yaxis)
        labels += [(t.get_text(), t.get_window_extent(r)) for t in texts if t.get_visible() and t.get_text()]
        for t in ax.texts:  # value labels at the bar ends stay within the axes
            b = t.get_window_extent(r)
            assert frame.x0 <= b.x0 and b.x1 <= frame.x1, f"{chart.name}: {t.get_text()!r} leaves the axes"
    for i, (a, ba) in enumerate(labels):
        assert (ba.x0 >= box.x0 - 1 and ba.y0 >= box.y0 - 1 and ba.x1 <= box.x1 + 1 and ba.y1 <= box.y1 + 1), \
            f"{chart.name}: {a!r} is cut off: {ba} not in {box}"
        for b, bb in labels[i + 1:]:
            assert not overlaps(ba, bb), f"{chart.name}: {a!r} overlaps {b!r}"


def test_charts(tmp, plot, charts_mod, sample):
    import matplotlib.pyplot as plt
    from matplotlib.container import BarContainer
    from plot_input import load
    files = {"unsettled.json": with_unsettled(sample), "sweep2.json": sweep_doc(sample, ("0", "1"), ("4", "8", "16")),
             "cmp.json": compare_doc(), "near.json": compare_doc((0.97, 1.01, 1.05, 0.99))}
    docs = [(p, load(dump(os.path.join(tmp, p), d))) for p, d in files.items()]
    built = plot.build(docs, plt, peak_tflops=989, peak_gbps=4800)
    charts = {c.name: c for c in built.charts}
    assert set(charts) == {"sample_latency.png", "sample_throughput.png", "sample_sweep_sweep2.png",
                           "compare_cmp.png", "compare_near.png"}, sorted(charts)
    for c in charts.values():
        check_layout(c)

    for name in ("compare_cmp.png", "compare_near.png"):
        ax = charts[name].fig.axes[0]
        assert ax.get_xscale() == "log", f"{name}: the speedup axis is {ax.get_xscale()}"
        lo, hi = ax.get_xlim()
        assert abs(lo * hi - 1) < 1e-6, f"{name}: the axis {lo}..{hi} is not centred on 1.0x"
        assert any(list(line.get_xdata()) == [1, 1] for line in ax.lines), f"{name}: no line at 1.0x"
    ticks = [t.get_text() for t in charts["compare_near.png"].fig.axes[0].get_xticklabels()]
    for want in ("0.9\u00d7", "1\u00d7", "1.1\u00d7"):
        assert want in ticks, f"compare ticks {ticks} lack {want}"

    legend = [t.get_text() for ax in charts["sample_throughput.png"].fig.axes for t in ax.get_legend().get_texts()]
    assert "device peak 989 TFLOP/s" in legend and "device peak 4800 GB/s" in legend, legend

    # Latency: a whisker on every bar from q1 to q3, a star over each unsettled row.
    ax = charts["sample_latency.png"].fig.axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert bars and all(c.errorbar is not None for c in bars), "latency bars without error bars"
    spans = set()
    for c in bars:
        segments = c.errorbar.lines[2][0].get_segments()
        assert len(segments) == len(c.patches), "a latency bar without its whisker"
        spans |= {(round(s[0][1], 6), round(s[1][1], 6)) for s in segments}
    timed = [r for r in sample["rows"] if r["status"] == "ok" and r["time_us"]]
    assert spans == {(round(r["time_us"]["q1"], 6), round(r["time_us"]["q3"], 6)) for r in timed}, spans
    stars = [line for line in ax.lines if line.get_marker() == "*"]
    unsettled = [r for r in with_unsettled(sample)["rows"] if r.get("settled") is False and r["time_us"]]
    assert sum(len(s.get_xdata()) for s in stars) == len(unsettled) > 0, "unsettled rows not marked"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert charts_mod.UNSETTLED_LABEL in legend and any("q1" in t for t in legend), legend
    settled_only = plot.build([(SAMPLE, load(SAMPLE))], plt)
    ax = settled_only.charts[0].fig.axes[0]
    assert not [line for line in ax.lines if line.get_marker() == "*"], "a star without an unsettled row"

    # Many shapes: the labels stand vertical rather than widening the figure past reading.
    wide = copy.deepcopy(sample)
    model = [r for r in sample["rows"] if r["kernel"] == "cuda.unified" and r["mode"] == "graph"][0]
    wide["group"], wide["rows"] = "wide", []
    for i in range(28):
        for kernel in ("cuda.unified", "torch.sdpa.flash", "torch.sdpa.cudnn"):
            r = dict(copy.deepcopy(model), group="wide", kernel=kernel,
                     shape=f"d128_h32kv8_b{i + 1}_kv{4096 * (i % 4 + 1)}_paged")
            r["time_us"] = {k: (v * (i + 1) if k != "n" else v) for k, v in r["time_us"].items()}
            wide["rows"].append(r)
    chart = plot.build([("wide.json", wide)], plt).charts[0]
    check_layout(chart)
    ax = chart.fig.axes[0]
    assert {t.get_rotation() for t in drawn_ticklabels(ax.xaxis)} == {90}, "wide chart labels not vertical"
    assert chart.fig.get_figwidth() <= 25, f"wide chart {chart.fig.get_figwidth()} in wide"

    # Sweep of two knobs: five settings against S1, on the same centred log axis, each named in the legend.
    ax = charts["sample_sweep_sweep2.png"].fig.axes[0]
    assert ax.get_yscale() == "log"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [t.split(":")[0] for t in legend if t.startswith("S") and ":" in t] == ["S2", "S3", "S4", "S5", "S6"], legend
    assert any("SM90_NARROW_WARPS=16" in t for t in legend), legend
    plt.close("all")


def main():
    if not has_matplotlib(sys.executable):
        other = "/usr/bin/python3"
        if os.environ.get(REEXEC) or not os.path.exists(other) or not has_matplotlib(other):
            print("SKIP: no python3 with matplotlib (Debian: python3-matplotlib)")
            return 77
        os.environ[REEXEC] = "1"
        os.execv(other, [other, os.path.abspath(__file__)])
    import matplotlib
    matplotlib.use("Agg")
    sys.path.insert(0, os.path.join(ROOT, "reports"))
    import plot
    import plot_charts
    with open(SAMPLE) as f:
        sample = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        test_end_to_end(tmp, sample)
        test_malformed(tmp, plot, sample)
        test_no_partial_files(tmp, plot, sample)
        test_charts(tmp, plot, plot_charts, sample)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
