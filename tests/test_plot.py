#!/usr/bin/env python3
"""reports/plot.py on tests/data/sample_results.json (plus a sweep and a compare file made from it): the PNGs
exist, are not trivial, and bad input exits 2 naming the file. Exit 77 (CTest skip) without matplotlib."""
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLOT = os.path.join(ROOT, "reports", "plot.py")
SAMPLE = os.path.join(ROOT, "tests", "data", "sample_results.json")


def python_with_matplotlib():
    for exe in (sys.executable, "/usr/bin/python3"):
        if exe and os.path.exists(exe):
            if subprocess.run([exe, "-c", "import matplotlib"], capture_output=True).returncode == 0:
                return exe
    return None


def run(py, *args):
    return subprocess.run([py, PLOT, *args], capture_output=True, text=True)


def check_png(py, path):
    assert os.path.exists(path), f"missing {path}"
    size = os.path.getsize(path)
    assert size > 5000, f"{path}: only {size} bytes"
    # Read the pixels in the interpreter that has matplotlib; more than one colour means something was drawn.
    probe = ("import sys, matplotlib.image as m, numpy as np; a = m.imread(sys.argv[1]); "
             "flat = a.reshape(-1, a.shape[-1]); print(len(np.unique(flat, axis=0)))")
    out = subprocess.run([py, "-c", probe, path], capture_output=True, text=True, check=True).stdout
    assert int(out) > 10, f"{path}: only {out.strip()} distinct colours"


def sweep_doc(sample):
    """The sample's rows twice, under two settings of a knob, as `attnbench sweep` writes them."""
    doc = copy.deepcopy(sample)
    rows = []
    for value, scale in (("0", 1.0), ("1", 0.8)):
        for r in sample["rows"]:
            n = copy.deepcopy(r)
            n["knobs"] = dict(n.get("knobs") or {}, ATTNBENCH_Q_MAJOR_GRID=value)
            if n.get("time_us"):
                n["time_us"] = {k: (v * scale if k != "n" else v) for k, v in n["time_us"].items()}
            rows.append(n)
    doc["rows"] = rows
    doc["provenance"]["sweep"] = {"knobs": {"ATTNBENCH_Q_MAJOR_GRID": ["0", "1"]},
                                  "settings": [{"ATTNBENCH_Q_MAJOR_GRID": "0"}, {"ATTNBENCH_Q_MAJOR_GRID": "1"}]}
    return doc


def compare_doc():
    rows = []
    for i, (verdict, speedup) in enumerate((("FAST", 1.3), ("SLOW", 0.7), ("SAME", 1.0), ("AMBIG", 1.05))):
        rows.append({"group": "sample", "shape": f"s{i}", "dtype": "bf16", "kernel": "cuda.unified", "mode": "graph",
                     "verdict": verdict, "speedup": speedup, "ratio": 1 / speedup})
    rows.append({"group": "sample", "shape": "gone", "dtype": "bf16", "kernel": "cuda.unified", "mode": "graph",
                 "verdict": "only-in-base", "speedup": None, "ratio": None})
    return {"schema": "attnbench.compare/1", "base": "a.json", "new": "b.json", "threshold": 0.02, "against": None,
            "summary": {"FAST": 1, "SLOW": 1, "SAME": 1, "AMBIG": 1, "only-in-base": 1}, "rows": rows}


def main():
    py = python_with_matplotlib()
    if py is None:
        print("SKIP: no python3 with matplotlib (Debian: python3-matplotlib)")
        return 77
    with open(SAMPLE) as f:
        sample = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        r = run(py, "--help")
        assert r.returncode == 0 and "--peak-tflops" in r.stdout, r.stdout + r.stderr

        sweep_path = os.path.join(tmp, "sweep_sample.json")
        with open(sweep_path, "w") as f:
            json.dump(sweep_doc(sample), f)
        compare_path = os.path.join(tmp, "cmp.json")
        with open(compare_path, "w") as f:
            json.dump(compare_doc(), f)
        out = os.path.join(tmp, "out")
        r = run(py, SAMPLE, sweep_path, compare_path, "-o", out)
        assert r.returncode == 0, r.stdout + r.stderr
        for name in ("sample_latency.png", "sample_throughput.png", "sample_sweep_sweep_sample.png", "compare_cmp.png"):
            check_png(py, os.path.join(out, name))
        with open(os.path.join(out, "summary.md")) as f:
            summary = f.read()
        for name in ("sample_latency.png", "sample_throughput.png", "compare_cmp.png", "SLOW 1"):
            assert name in summary, f"summary.md lacks {name}:\n{summary}"

        # Peaks from the command line when the rows carry none.
        bare = copy.deepcopy(sample)
        for row in bare["rows"]:
            row["pct_peak_flops"] = row["pct_peak_bw"] = None
        bare_path = os.path.join(tmp, "bare.json")
        with open(bare_path, "w") as f:
            json.dump(bare, f)
        r = run(py, bare_path, "-o", os.path.join(tmp, "bare"), "--peak-tflops", "989", "--peak-gbps", "4800")
        assert r.returncode == 0, r.stdout + r.stderr
        check_png(py, os.path.join(tmp, "bare", "sample_throughput.png"))

        # Wrong files: exit 2, the message names the file.
        shapes = os.path.join(ROOT, "tests", "data", "sample_shapes.json")
        broken = os.path.join(tmp, "broken.json")
        with open(broken, "w") as f:
            f.write("{\"schema\": ")
        for bad, fragment in ((shapes, "not an attnbench results or compare file"), (broken, "malformed JSON"),
                              (os.path.join(tmp, "nope.json"), "no such file")):
            r = run(py, SAMPLE, bad, "-o", os.path.join(tmp, "bad"))
            assert r.returncode == 2, f"{bad}: exit {r.returncode}\n{r.stderr}"
            assert bad in r.stderr and fragment in r.stderr, r.stderr
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
