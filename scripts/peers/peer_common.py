"""What every peer shares with attnbench, in the standard library only: the shape-file parser (the schema and
validation rules of src/shapes.cpp), the declared work model (kernels/common/attention.cpp, gated_block.cpp),
the bottom-right causal mask, the summary statistics (src/measure.cpp), and result rows/files in the
attnbench.results/1 schema."""
import datetime
import json
import math
import os
import re
import socket
import subprocess

RESULTS_SCHEMA = "attnbench.results/1"
TOLERANCE = {"fp16": 2e-2, "bf16": 4e-2}  # gate: max_abs against the fp32 reference
DTYPES = {"fp16": "fp16", "f16": "fp16", "half": "fp16", "bf16": "bf16"}
DTYPE_BYTES = 2
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOP_KEYS = {"group", "op", "description", "defaults", "shapes"}
ATTENTION_KEYS = {"name", "batch", "seqlen_q", "seqlen_k", "seqlens", "heads", "kv_heads", "head_size", "dtypes",
                  "causal", "block_size", "scale"}
GATED_KEYS = {"name", "batch", "seqlen", "d_model", "h_q", "h_kv", "d_head", "rope_dim", "qk_norm", "causal", "dtypes"}


class ShapeError(Exception):
    """A malformed shape file; the message names the file, the shape and the field."""


class Case:
    """One (shape, dtype) of a shape file. Attention: q_lens, kv_lens, heads, kv_heads, head_size, block_size,
    causal, scale. Gated block: batch, seqlen, d_model, h_q, h_kv, d_head, rope_dim, qk_norm, causal."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def id(self):
        return f"{self.group}/{self.name}/{self.dtype}"

    def softmax_scale(self):
        d = self.head_size if self.op == "attention" else self.d_head
        return self.scale if getattr(self, "scale", None) else 1.0 / math.sqrt(d)


class _Where:
    def __init__(self, path, index=-1, name=""):
        self.path, self.index, self.name = path, index, name

    def fail(self, field, why):
        s = f"{self.path}: "
        if self.index >= 0:
            s += f"shape #{self.index}" + (f" '{self.name}'" if self.name else "") + ": "
        if field:
            s += f"field '{field}': "
        raise ShapeError(s + why)


def _int(s, key, w, minimum=1):
    v = s[key]
    if not isinstance(v, int) or isinstance(v, bool):
        w.fail(key, f"expected an integer, got {json.dumps(v)}")
    if v < minimum:
        w.fail(key, f"must be >= {minimum}, got {v}")
    if v > 1 << 30:
        w.fail(key, f"too large: {v}")
    return v


def _bool(s, key, w):
    if not isinstance(s[key], bool):
        w.fail(key, f"expected true or false, got {json.dumps(s[key])}")
    return s[key]


def _check_keys(obj, allowed, w, what):
    for k in obj:
        if k not in allowed:
            w.fail(k, f"unknown field in {what} (known: {', '.join(sorted(allowed))})")


def _dtypes(s, w):
    if "dtypes" not in s:
        return ["bf16", "fp16"]
    v = s["dtypes"]
    if not isinstance(v, list) or not v:
        w.fail("dtypes", f"expected a non-empty list such as [\"bf16\", \"fp16\"], got {json.dumps(v)}")
    out = []
    for e in v:
        if not isinstance(e, str):
            w.fail("dtypes", f"expected strings, got {json.dumps(e)}")
        if e not in DTYPES:
            w.fail("dtypes", f"unsupported dtype {json.dumps(e)} (supported: bf16, fp16)")
        out.append(DTYPES[e])
    return out


def _attention(s, w):
    for k in ("heads", "kv_heads", "head_size"):
        if k not in s:
            w.fail(k, "missing")
    a = {"heads": _int(s, "heads", w), "kv_heads": _int(s, "kv_heads", w), "head_size": _int(s, "head_size", w),
         "block_size": _int(s, "block_size", w) if "block_size" in s else 64,
         "causal": _bool(s, "causal", w) if "causal" in s else True, "scale": None}
    if a["heads"] % a["kv_heads"]:
        w.fail("kv_heads", f"heads {a['heads']} is not a multiple of kv_heads {a['kv_heads']}")
    if "scale" in s:
        v = s["scale"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            w.fail("scale", f"expected a number > 0, got {json.dumps(v)}")
        a["scale"] = float(v)
    ragged, uniform = "seqlens" in s, "seqlen_k" in s or "seqlen_q" in s or "batch" in s
    if ragged and uniform:
        w.fail("seqlens", "give either seqlens or batch/seqlen_q/seqlen_k, not both")
    if ragged:
        v = s["seqlens"]
        if not isinstance(v, list) or not v:
            w.fail("seqlens", f"expected a non-empty list of [q, kv] pairs, got {json.dumps(v)}")
        q_lens, kv_lens = [], []
        for e in v:
            if not (isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
                w.fail("seqlens", f"expected [q, kv] integer pairs, got {json.dumps(e)}")
            if e[0] < 1 or e[1] < 1:
                w.fail("seqlens", f"lengths must be >= 1, got {json.dumps(e)}")
            if e[0] > e[1]:
                w.fail("seqlens", f"seqlen_q > seqlen_k in {json.dumps(e)}")
            if e[1] > 1 << 30:
                w.fail("seqlens", f"too large: {json.dumps(e)}")
            q_lens.append(e[0])
            kv_lens.append(e[1])
    else:
        if "seqlen_k" not in s:
            w.fail("seqlen_k", "missing")
        batch = _int(s, "batch", w) if "batch" in s else 1
        kv = _int(s, "seqlen_k", w)
        q = _int(s, "seqlen_q", w) if "seqlen_q" in s else kv
        if q > kv:
            w.fail("seqlen_q", f"seqlen_q {q} > seqlen_k {kv}")
        q_lens, kv_lens = [q] * batch, [kv] * batch
    a.update(q_lens=q_lens, kv_lens=kv_lens)
    return a


def _gated(s, w):
    for k in ("seqlen", "d_model", "h_q", "h_kv", "d_head", "rope_dim"):
        if k not in s:
            w.fail(k, "missing")
    g = {"batch": _int(s, "batch", w) if "batch" in s else 1, "seqlen": _int(s, "seqlen", w),
         "d_model": _int(s, "d_model", w), "h_q": _int(s, "h_q", w), "h_kv": _int(s, "h_kv", w),
         "d_head": _int(s, "d_head", w), "rope_dim": _int(s, "rope_dim", w, 0),
         "qk_norm": _bool(s, "qk_norm", w) if "qk_norm" in s else True,
         "causal": _bool(s, "causal", w) if "causal" in s else True}
    if g["h_q"] % g["h_kv"]:
        w.fail("h_kv", f"h_q {g['h_q']} is not a multiple of h_kv {g['h_kv']}")
    if g["rope_dim"] > g["d_head"] or g["rope_dim"] % 2:
        w.fail("rope_dim", f"must be even and <= d_head, got {g['rope_dim']}")
    return g


def load_shape_file(path):
    """The cases of one shape file, one per (shape, dtype); ShapeError naming file, shape and field otherwise."""
    top = _Where(path)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError:
        raise ShapeError(f"{path}: cannot open shape file")
    except json.JSONDecodeError as e:
        raise ShapeError(f"{path}: malformed JSON: {e}")
    if not isinstance(doc, dict):
        top.fail("", "expected a JSON object with \"shapes\"")
    _check_keys(doc, TOP_KEYS, top, "the file")
    group = os.path.splitext(os.path.basename(path))[0]
    if "group" in doc:
        if not isinstance(doc["group"], str) or not doc["group"]:
            top.fail("group", "expected a non-empty string")
        group = doc["group"]
    op = doc.get("op", "attention")
    if op not in ("attention", "gated_block"):
        top.fail("op", f"expected \"attention\" or \"gated_block\", got {json.dumps(op)}")
    keys = ATTENTION_KEYS if op == "attention" else GATED_KEYS
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        top.fail("defaults", "expected an object")
    _check_keys(defaults, keys, top, "defaults")
    if "name" in defaults:
        top.fail("defaults", "a default 'name' makes every shape name the same")
    shapes = doc.get("shapes")
    if not isinstance(shapes, list) or not shapes:
        top.fail("shapes", "expected a non-empty list of shapes")
    cases, names = [], set()
    for i, raw in enumerate(shapes):
        w = _Where(path, i)
        if not isinstance(raw, dict):
            w.fail("", f"expected an object, got {json.dumps(raw)}")
        if "name" in raw:
            if not isinstance(raw["name"], str) or not raw["name"]:
                w.fail("name", "expected a non-empty string")
            w.name = raw["name"]
        _check_keys(raw, keys, w, "a shape")
        s = dict(defaults)
        s.update(raw)
        if "seqlens" in raw and any(k in raw for k in ("batch", "seqlen_q", "seqlen_k")):
            w.fail("seqlens", "give either seqlens or batch/seqlen_q/seqlen_k, not both")
        if "seqlens" in s and "seqlens" not in raw and any(k in raw for k in ("seqlen_k", "seqlen_q", "batch")):
            del s["seqlens"]
        if "seqlens" in raw:
            for k in ("batch", "seqlen_q", "seqlen_k"):
                s.pop(k, None)
        fields = _attention(s, w) if op == "attention" else _gated(s, w)
        name = w.name or auto_name(op, fields)
        if name in names:
            w.fail("name", f"duplicate shape name '{name}'")
        names.add(name)
        for dt in _dtypes(s, w):
            cases.append(Case(group=group, file=path, name=name, op=op, dtype=dt, **fields))
    return cases


def auto_name(op, f):
    if op == "attention":
        return (f"d{f['head_size']}_h{f['heads']}kv{f['kv_heads']}_b{len(f['q_lens'])}_q{max(f['q_lens'])}"
                f"_kv{max(f['kv_lens'])}")
    return f"s{f['seqlen']}"


def shapes_dir():
    return os.environ.get("ATTNBENCH_SHAPES_DIR") or os.path.join(REPO, "shapes")


def load_group(group):
    path = os.path.join(shapes_dir(), group + ".json")
    if not os.path.exists(path):
        known = sorted(os.path.splitext(f)[0] for f in os.listdir(shapes_dir()) if f.endswith(".json"))
        raise ShapeError(f"unknown group '{group}' (known: {', '.join(known)})")
    return load_shape_file(path)


def select_cases(groups, files, dtypes=(), filter_regex=""):
    cases = [c for g in groups for c in load_group(g)] + [c for f in files for c in load_shape_file(f)]
    try:
        rx = re.compile(filter_regex) if filter_regex else None
    except re.error as e:
        raise ShapeError(f"--filter: invalid regular expression '{filter_regex}': {e}")
    want = {DTYPES.get(d, d) for d in dtypes}
    return [c for c in cases if (not want or c.dtype in want) and (rx is None or rx.search(c.id))]


# ---- declared work -----------------------------------------------------------------------------------------

def causal_mask(q_len, kv_len):
    """Bottom-right aligned: key j is visible to query row i iff j <= i + kv_len - q_len (lists of bools)."""
    return [[j <= i + kv_len - q_len for j in range(kv_len)] for i in range(q_len)]


def visible_pairs(q_len, kv_len, causal):
    if not causal or q_len == 1:
        return q_len * kv_len
    return sum(min(kv_len, max(0, i + kv_len - q_len + 1)) for i in range(q_len))


def attention_work(q_lens, kv_lens, heads, kv_heads, head_size, causal):
    """(FLOPs, bytes): 4 * visible pairs * heads * head_size; Q and O once, each sequence's K and V once."""
    pairs = sum(visible_pairs(q, kv, causal) for q, kv in zip(q_lens, kv_lens))
    flops = 4.0 * pairs * heads * head_size
    nbytes = DTYPE_BYTES * (2.0 * sum(q_lens) * heads * head_size + 2.0 * sum(kv_lens) * kv_heads * head_size)
    return flops, nbytes


def gated_work(c):
    """The gated block: both projections, the square SDPA; bytes of h, the weights, cos/sin, norms and out."""
    t, dm = c.batch * c.seqlen, c.d_model
    n, aw = (2 * c.h_q + 2 * c.h_kv) * c.d_head, c.h_q * c.d_head
    att, _ = attention_work([c.seqlen] * c.batch, [c.seqlen] * c.batch, c.h_q, c.h_kv, c.d_head, c.causal)
    flops = 2.0 * t * dm * (n + aw) + att
    nbytes = DTYPE_BYTES * (t * dm + n * dm + dm * aw + 2.0 * t * c.rope_dim + (2.0 * c.d_head if c.qk_norm else 0.0)
                            + t * dm)
    return flops, nbytes


def work(c):
    if c.op == "attention":
        return attention_work(c.q_lens, c.kv_lens, c.heads, c.kv_heads, c.head_size, c.causal)
    return gated_work(c)


def dims(c):
    if c.op == "attention":
        d = {"heads": c.heads, "kv_heads": c.kv_heads, "head_size": c.head_size, "block_size": c.block_size,
             "causal": c.causal, "batch": len(c.q_lens), "max_seqlen_q": max(c.q_lens),
             "max_seqlen_k": max(c.kv_lens), "scale": c.softmax_scale()}
        if len(set(zip(c.q_lens, c.kv_lens))) > 1:
            d["seqlens"] = [[q, kv] for q, kv in zip(c.q_lens, c.kv_lens)]
        return d
    d = {k: getattr(c, k) for k in ("batch", "seqlen", "d_model", "h_q", "h_kv", "d_head", "rope_dim", "qk_norm", "causal")}
    d["scale"] = c.softmax_scale()
    return d


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
    flops, nbytes = work(c)
    row = {"group": c.group, "shape": c.name, "op": c.op, "dtype": c.dtype, "kernel": kernel, "backend": "cuda",
           "mode": mode, "l2": "hot", "status": status, "reason": reason, "dims": dims(c), "flops": flops,
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
