"""What every peer shares with attnbench, in the standard library only: the cases, their dims and the declared work
model, all from `attnbench list --cases --json` (the harness's own shape parser, validation and work model, so
the peers cannot drift from it), the bottom-right causal mask, the summary statistics (src/measure.cpp), and
result rows/files in the attnbench.results/1 schema."""
import datetime
import json
import math
import os
import socket
import subprocess

RESULTS_SCHEMA = "attnbench.results/1"
CASES_SCHEMA = "attnbench.cases/1"
TOLERANCE = {"fp16": 2e-2, "bf16": 4e-2}  # gate: max_abs against the fp32 reference
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BINARY = os.path.join("build", "src", "attnbench")  # under the repository, where scripts/build.sh puts it


class ShapeError(Exception):
    """Bad input (as attnbench reports it: the message names the file, the shape and the field), or no attnbench."""


class Case:
    """One (shape, dtype) case of `attnbench list --cases --json`: group, name, file, op, dtype, types, dims,
    features, flops and bytes (the declared work). Every dims field is an attribute too; attention cases also
    have q_lens and kv_lens (from dims.seqlens)."""

    def __init__(self, entry):
        self.__dict__.update(entry["dims"])
        self.group, self.name, self.file = entry["group"], entry["shape"], entry["file"]
        self.op, self.dtype, self.types = entry["op"], entry["dtype"], entry["types"]
        self.dims, self.features = entry["dims"], entry["features"]
        self.flops, self.bytes = entry["work"]["flops"], entry["work"]["bytes"]
        if self.op == "attention":
            self.q_lens = [q for q, _ in self.dims["seqlens"]]
            self.kv_lens = [kv for _, kv in self.dims["seqlens"]]

    @property
    def id(self):
        return f"{self.group}/{self.name}/{self.dtype}"

    def softmax_scale(self):
        return self.dims["scale"]

    def plain_decline(self):
        """Why a peer that computes plain 16-bit attention cannot take this case ("" when it can): mixed or 8-bit
        types, or any attention feature (a peer must never time a case without its feature)."""
        t = self.types
        if not (t["q"] == t["kv"] == t["o"] and t["q"] in ("bf16", "fp16")):
            return f"types {self.dtype} (q-kv-o): this peer stores Q, K/V and O in one dtype, fp16 or bf16"
        if self.features:
            return f"feature '{next(iter(self.features))}': not implemented by this peer"
        return ""


def attnbench_binary(given=None):
    """--attnbench BIN, else $ATTNBENCH_BIN, else build/src/attnbench of this repository."""
    return given or os.environ.get("ATTNBENCH_BIN") or os.path.join(REPO, DEFAULT_BINARY)


def _harness_message(stderr, code):
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    text = lines[0] if lines else f"exited with status {code} and no message"
    for prefix in ("attnbench: error: ", "attnbench: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def list_cases(groups=(), files=(), dtypes=(), filter_regex="", binary=None):
    """The cases `attnbench run` would take for this selection, in its order; ShapeError with attnbench's message
    when it refuses the input (or cannot be run)."""
    binary = attnbench_binary(binary)
    # NAME=VALUE keeps a value that starts with '-' a value.
    cmd = [binary, "list", "--cases", "--json"] + [f"--group={g}" for g in groups] + [f"--shapes={f}" for f in files]
    cmd += [f"--dtype={d}" for d in dtypes] + ([f"--filter={filter_regex}"] if filter_regex else [])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise ShapeError(f"cannot run attnbench {binary}: {e.strerror} (build it with scripts/build.sh, or give "
                         "--attnbench BIN or ATTNBENCH_BIN)")
    if r.returncode != 0:
        msg = _harness_message(r.stderr, r.returncode)
        raise ShapeError(msg if r.returncode == 2 else f"attnbench {binary} failed (status {r.returncode}): {msg}")
    try:
        doc = json.loads(r.stdout)
        if doc.get("schema") != CASES_SCHEMA:
            raise ValueError(f"schema {doc.get('schema')!r}, expected {CASES_SCHEMA!r}")
        return [Case(e) for e in doc["cases"]]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ShapeError(f"attnbench {binary}: list --cases --json printed no case listing ({e})")


def causal_mask(q_len, kv_len):
    """Bottom-right aligned: key j is visible to query row i iff j <= i + kv_len - q_len (lists of bools)."""
    return [[j <= i + kv_len - q_len for j in range(kv_len)] for i in range(q_len)]


# ---- statistics and rows ------------------------------------------------------------------------------------

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


def make_row(c, kernel, mode, status, reason="", gate=None, time_us=None, plan="", repro="", peaks=(None, None)):
    flops, nbytes = c.flops, c.bytes
    row = {"group": c.group, "shape": c.name, "op": c.op, "dtype": c.dtype, "kernel": kernel, "backend": "cuda",
           "mode": mode, "l2": "hot", "status": status, "reason": reason, "dims": dict(c.dims), "flops": flops,
           "bytes": nbytes, "knobs": {}, "plan": plan, "repro": repro, "gate": gate, "time_us": time_us,
           "device_time_us": None, "tflops": None, "gbps": None, "pct_peak_flops": None, "pct_peak_bw": None,
           "graph_recommended": None}
    if time_us and time_us["median"] > 0:
        sec = time_us["median"] * 1e-6
        row["tflops"] = flops / sec * 1e-12
        row["gbps"] = nbytes / sec * 1e-9
        if peaks[0]:
            row["pct_peak_flops"] = 100.0 * row["tflops"] / peaks[0]
        if peaks[1]:
            row["pct_peak_bw"] = 100.0 * row["gbps"] / peaks[1]
    return row


def git_sha():
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def provenance(command, seed, device=None, extra=None):
    p = {"attnbench_version": None, "git_sha": git_sha(), "command": command, "host": socket.gethostname(),
         "seed": seed, "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
         "device": device or {}, "knobs": {}}
    p.update(extra or {})
    return p


def write_results(path, prov, rows):
    """Atomically (temporary file + rename), like attnbench."""
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"schema": RESULTS_SCHEMA, "provenance": prov, "rows": rows}, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
