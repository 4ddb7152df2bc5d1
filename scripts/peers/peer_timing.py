"""What every peer times with: CUDA-event samples under attnbench's stop rule (eager calls from Python, or one captured
graph replayed behind a queued GPU sleep), their summary statistics (src/core/measure.cpp's), and a peer kernel's
gated, timed rows. The module imports the standard library and peer_common only; torch comes from the caller."""
import math
import time

from peer_common import first_line, gate, make_row

HOLD_CYCLES = 200_000  # ~100 us of GPU sleep queued before a graph sample's start event


class Timer:
    """CUDA-event samples until the stop rule (at least min_samples, then relative stdev <= max_noise or timeout
    seconds): eager = back-to-back calls from Python, per call; graph = one capture replayed, the stream held by
    torch.cuda._sleep while the replay is queued so that the events bracket only the kernels."""

    def __init__(self, torch, args):
        self.torch, self.args = torch, args

    def collect(self, sample):
        a, out, start = self.args, [], time.monotonic()
        while True:
            out.append(sample())
            n = len(out)
            if n >= a.min_samples and relative_noise(out) <= a.max_noise:
                break
            if n >= a.min_samples and time.monotonic() - start > a.timeout:
                break
            if n >= 2000:
                break
        return summarize(out)

    def time_eager(self, fn):
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        calls = max(1, min(1000, int(1000.0 / max(start.elapsed_time(end) * 1e3, 1e-3))))  # ~1 ms per sample

        def sample():
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3 / calls
        return self.collect(sample)

    def capture(self, fn, stream=None):
        """One call captured (on `stream`, else torch's capture stream) after warm-up calls on a side stream."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            outs = fn()
        graph.replay()
        torch.cuda.synchronize()
        return graph, outs

    def time_graph(self, graph):
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        hold = getattr(torch.cuda, "_sleep", None)

        def sample():
            if hold:
                hold(HOLD_CYCLES)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3
        return self.collect(sample)


def failure(g):
    """A failed gate in words: each failed tensor's numbers for a gate over several, else the output's."""
    def words(t):
        return f"nonfinite {t['nonfinite']}" if t["nonfinite"] else f"max_abs {t['max_abs']} > atol {t['atol']}"
    if "tensors" in g:
        return "; ".join(f"{t['name']} {words(t)}" for t in g["tensors"] if not t["passed"])
    return words(g)


def timed_rows(timer, c, kernel, modes, prepare, result, ref, plan, repro, atol=None, peaks=(None, None),
               gate_fn=gate, stream=None):
    """Gate and time one runnable kernel in every mode. prepare(mode) gives the no-argument callable for that mode
    (its set-up outside the timed region); result(outs) its output in the reference's layout, which
    gate_fn(torch, c, out, ref, atol) gates; graph mode captures on `stream`. Graph rows gate the replayed output;
    a failure is that mode's error row."""
    rows = []
    for mode in modes:
        def row(status, reason="", g=None, t=None, mode=mode):
            return make_row(c, kernel, mode, status, reason, g, t, plan, repro(mode), peaks)
        try:
            fn = prepare(mode)
            if mode == "eager":
                outs = fn()
                timer.torch.cuda.synchronize()
                g = gate_fn(timer.torch, c, result(outs), ref, atol)
                rows.append(row("ok", "", g, timer.time_eager(fn)) if g["passed"] else
                            row("mismatch", f"gate failed: {failure(g)}", g))
            else:
                graph, outs = timer.capture(fn, stream)
                g = gate_fn(timer.torch, c, result(outs), ref, atol)
                rows.append(row("ok", "", g, timer.time_graph(graph)) if g["passed"] else
                            row("mismatch", f"gate failed (graph replay): {failure(g)}", g))
                del graph, outs
        except Exception as e:  # a backend's refusal at run time, out of memory: this mode's error row
            rows.append(row("error", first_line(e)))
    return rows


# ---- statistics ---------------------------------------------------------------------------------------------

def _quantile(sorted_values, p):
    pos = p * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def summarize(samples):
    """median, min, q1, q3 (linear interpolation between closest ranks), mean, sample stdev, n."""
    s = sorted(samples)
    n = len(s)
    if n == 0:
        return {"median": 0, "min": 0, "q1": 0, "q3": 0, "mean": 0, "stdev": 0, "n": 0}
    mean = sum(s) / n
    stdev = math.sqrt(sum((x - mean) ** 2 for x in s) / (n - 1)) if n > 1 else 0.0
    return {"median": _quantile(s, 0.5), "min": s[0], "q1": _quantile(s, 0.25), "q3": _quantile(s, 0.75),
            "mean": mean, "stdev": stdev, "n": n}


def relative_noise(samples):
    st = summarize(samples)
    return st["stdev"] / st["mean"] if st["mean"] > 0 else float("inf")
