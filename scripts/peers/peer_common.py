"""What every peer shares with attnbench: the cases, their dims and the declared work model, all from
`attnbench list --cases --json` (the harness's own shape parser, validation and work model, so the peers cannot
drift from it), the bottom-right causal mask, the paged layout (block tables, FlashInfer-style indptr), result
rows/files in the attnbench.results/1 schema, the command line every peer takes, and the torch parts every peer runs:
inputs, the fp32 reference and the gate (the timing: peer_timing.py). The module imports the standard library only;
the torch helpers take the torch module from a caller that has it."""
import argparse
import datetime
import fnmatch
import json
import math
import os
import socket
import subprocess
import sys

EXIT_BAD_INPUT = 2
EXIT_CANNOT_RUN = 3
RESULTS_SCHEMA = "attnbench.results/1"
CASES_SCHEMA = "attnbench.cases/1"
TOLERANCE = {"fp16": 2e-2, "bf16": 4e-2}  # gate: max_abs against the fp32 reference
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BINARY = os.path.join("build", "src", "attnbench")  # under the repository, where scripts/build.sh puts it


class ShapeError(Exception):
    """Bad input (as attnbench reports it: the message names the file, the shape and the field), or no attnbench."""


class Case:
    """One (shape, dtype) case of `attnbench list --cases --json`: group, name, file, op, dtype, types, dims,
    features, flops and bytes (the declared work). Every dims field is an attribute too; attention cases (forward
    and backward) also have q_lens and kv_lens (from dims.seqlens)."""

    def __init__(self, entry):
        self.__dict__.update(entry["dims"])
        self.group, self.name, self.file = entry["group"], entry["shape"], entry["file"]
        self.op, self.dtype, self.types = entry["op"], entry["dtype"], entry["types"]
        self.dims, self.features = entry["dims"], entry["features"]
        self.flops, self.bytes = entry["work"]["flops"], entry["work"]["bytes"]
        if self.op in ("attention", "attention_backward"):
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
        return self.mask_decline()

    def mask_decline(self):
        """Why a peer whose masks are aligned bottom-right over every key, and which returns the output alone,
        cannot take this case: rows aligned top-left (causal_bottom_right false) on a sequence whose q_len differs
        from its kv_len, a gated block's seq_lens (keys past each length are padding), sliding window or MX mode,
        or return_lse."""
        if hasattr(self, "q_lens") and self.dims.get("causal_bottom_right", True) is False:
            if any(q != kv for q, kv in zip(self.q_lens, self.kv_lens)):
                return "causal_bottom_right false: this peer aligns its masks bottom-right"
        gated = self.op in ("gated_block", "gated_block_backward")
        if gated and "seq_lens" in self.dims:
            return "seq_lens: this peer's chain attends every token of each sequence"
        for window in ("window_left", "window_right"):
            if gated and self.dims.get(window, -1) >= 0:
                return f"{window}: this peer's chain has no sliding window"
        if gated and "mx" in self.dims:
            return "mx: this peer's chain runs its projections in bf16, not block-scaled"
        if self.dims.get("return_lse"):
            return "return_lse: this peer does not write the LSE"
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


def first_line(e):
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def glob(pattern, name):
    return fnmatch.fnmatchcase(name, pattern)


# ---- the paged layout -----------------------------------------------------------------------------------------

def blocks_per_seq(c):
    return [-(-kv // c.block_size) for kv in c.kv_lens]


def prefix_sums(counts):
    out = [0]
    for n in counts:
        out.append(out[-1] + n)
    return out


class PageTable:
    """The cache's pages as FlashInfer takes them: sequence i owns pages indices[indptr[i]:indptr[i + 1]], of
    which the last holds last_page_len[i] tokens (1..block_size). Pages are numbered contiguously in sequence order,
    attnbench's default block order."""

    def __init__(self, c):
        counts = blocks_per_seq(c)
        self.indptr = prefix_sums(counts)
        self.indices = list(range(self.indptr[-1]))
        self.last_page_len = [kv - (n - 1) * c.block_size for kv, n in zip(c.kv_lens, counts)]

    def pages(self, i):
        return self.indices[self.indptr[i]:self.indptr[i + 1]]


def qo_indptr(c):
    """Where each sequence's query rows start in the packed [total_q, heads, d] Q and O, and the end."""
    return prefix_sums(c.q_lens)


# ---- torch: inputs, the reference, the gate ---------------------------------------------------------------------

def torch_dtype(torch, name):
    return torch.bfloat16 if name == "bf16" else torch.float16


def randn(torch, g, *shape, dtype, std=1.0, device="cuda"):
    t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    return (t * std).to(dtype)


def generator(torch, seed, device="cuda"):
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def paged_inputs(torch, c, seed):
    """Q packed [total_q, heads, d] and the K/V caches [pages, block_size, kv_heads, d] (pages of PageTable(c)),
    standard normal in the case's dtype; one seed gives every peer the same values."""
    dt, g, pages = torch_dtype(torch, c.dtype), generator(torch, seed), PageTable(c).indptr[-1]
    q = randn(torch, g, sum(c.q_lens), c.heads, c.head_size, dtype=dt)
    k_cache = randn(torch, g, pages, c.block_size, c.kv_heads, c.head_size, dtype=dt)
    v_cache = randn(torch, g, pages, c.block_size, c.kv_heads, c.head_size, dtype=dt)
    return q, k_cache, v_cache


def dense_calls(torch, c, q, k_cache, v_cache):
    """Per-call dense (q, k, v) [B, H, q, d] / [B, KVH, kv, d], gathered from the paged caches by the page table:
    one batched call when every sequence has the same lengths, else one call per sequence."""
    table, bs, seqs = PageTable(c), c.block_size, []
    starts = qo_indptr(c)
    for i, (ql, kvl) in enumerate(zip(c.q_lens, c.kv_lens)):
        rows = torch.tensor(table.pages(i), device="cuda", dtype=torch.long)

        def gather(cache):
            return cache.index_select(0, rows).reshape(len(rows) * bs, c.kv_heads, c.head_size)[:kvl]
        seqs.append((q[starts[i]:starts[i + 1]].transpose(0, 1).unsqueeze(0),
                     gather(k_cache).transpose(0, 1).unsqueeze(0), gather(v_cache).transpose(0, 1).unsqueeze(0)))
    if len(set(zip(c.q_lens, c.kv_lens))) == 1:
        return [tuple(torch.cat([s[i] for s in seqs]).contiguous() for i in range(3))]
    return [tuple(t.contiguous() for t in s) for s in seqs]


def reference_sdpa(torch, q, k, v, scale, causal):
    """fp32 attention with the bottom-right causal mask. The query heads sharing a kv head are stacked as rows
    (head h reads kv head h // group), so K/V are never expanded; chunked over rows to bound memory."""
    B, H, ql, d = q.shape
    kvh, kvl = k.shape[1], k.shape[2]
    qg = q.float().reshape(B, kvh, (H // kvh) * ql, d)  # rows: (head within the group, query row)
    kf, vf = k.float(), v.float()
    out = torch.empty(B, kvh, qg.shape[2], vf.shape[-1], device=q.device, dtype=torch.float32)
    rows = max(1, min(qg.shape[2], (1 << 28) // max(1, B * kvh * kvl)))
    for r0 in range(0, qg.shape[2], rows):
        qc = qg[:, :, r0:r0 + rows]
        s = (qc @ kf.transpose(-1, -2)) * scale
        if causal:
            i = (torch.arange(r0, r0 + qc.shape[2], device=q.device) % ql)[:, None]
            j = torch.arange(kvl, device=q.device)[None, :]
            s.masked_fill_(j > i + (kvl - ql), float("-inf"))
        out[:, :, r0:r0 + rows] = torch.softmax(s, dim=-1) @ vf
    return out.reshape(B, H, ql, vf.shape[-1])


def pack(torch, outs):
    """[B, H, q, d] per call -> packed [total_q, H, d]."""
    return torch.cat([o.transpose(1, 2).reshape(-1, o.shape[1], o.shape[3]) for o in outs])


def attention_reference(torch, c, calls):
    """The fp32 reference of an attention case, packed [total_q, H, d]: what every peer's output is gated on."""
    return pack(torch, [reference_sdpa(torch, q, k, v, c.softmax_scale(), c.causal) for q, k, v in calls])


def gate(torch, c, out, ref, atol=None):
    """max_abs against the fp32 reference (atol: the dtype's tolerance unless given); NaN/Inf fail."""
    o = out.float().reshape(ref.shape)
    nonfinite = int((~torch.isfinite(o)).sum())
    diff = torch.nan_to_num((o - ref).abs(), nan=float("inf"))
    max_abs = float(diff.max())
    worst = int(diff.argmax())
    rel_l2 = float(torch.linalg.vector_norm(torch.nan_to_num(o - ref)) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
    atol = atol if atol is not None else TOLERANCE[c.dtype]
    passed = nonfinite == 0 and max_abs <= atol
    row_len = int(math.prod(ref.shape[1:]))
    return {"passed": passed, "max_abs": max_abs if math.isfinite(max_abs) else "inf", "rel_l2": rel_l2,
            "atol": atol, "rows_checked": int(ref.shape[0]), "nonfinite": nonfinite, "worst_index": worst,
            "detail": f"worst at row {worst // row_len}, element {worst % row_len}"}


# ---- rows ---------------------------------------------------------------------------------------------------

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


# ---- the command line and the run every peer shares ----------------------------------------------------------

EXIT_CODES = ("exit codes: 0 every row ok or declined; 1 a row mismatched or errored; 2 bad input (attnbench's "
              "message) or no attnbench binary; 3 cannot run here (a library it needs is not importable, or no "
              "CUDA device), after the shapes were checked")


def argument_parser(prog, description, kernels, example):
    """The options every peer takes; `kernels` names what --kernel globs over."""
    ap = argparse.ArgumentParser(prog=prog, description=description, epilog=f"example: {example}\n{EXIT_CODES}",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group", "-g", action="append", default=[], help="shape group (repeatable)")
    ap.add_argument("--shapes", action="append", default=[], help="a shape file (repeatable)")
    ap.add_argument("--kernel", "-k", default="*", help=f"kernel glob over {kernels} (default *)")
    ap.add_argument("--dtype", default="", help="keep only these dtypes, comma-separated")
    ap.add_argument("--mode", default="eager,graph", help="eager,graph (default both)")
    ap.add_argument("--filter", default="", help="regex over group/shape/dtype")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--atol", type=float, help="gate tolerance (default fp16 2e-2, bf16 4e-2)")
    ap.add_argument("--min-samples", type=int, default=20)
    ap.add_argument("--max-noise", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per measurement once min-samples are in")
    ap.add_argument("--peak-tflops", type=float)
    ap.add_argument("--peak-gbps", type=float)
    ap.add_argument("--out", "-o", help="results JSON (default results/<peer>_<groups>.json)")
    ap.add_argument("--attnbench", metavar="BIN", help="the attnbench binary that expands the shapes "
                    f"(default $ATTNBENCH_BIN, else {DEFAULT_BINARY} of this repository)")
    return ap


def parse_common(ap, argv):
    args = ap.parse_args(argv)
    args.mode = [m for m in args.mode.split(",") if m]
    args.dtype = [d for d in args.dtype.split(",") if d]
    return args


def selection(args, prefix):
    """The cases and the results path of the command line; ShapeError for bad input (before anything runs)."""
    if not args.group and not args.shapes:
        raise ShapeError("give at least one --group or --shapes FILE")
    bad = [m for m in args.mode if m not in ("eager", "graph")]
    if bad:
        raise ShapeError(f"--mode: '{bad[0]}' is not eager|graph")
    cases = list_cases(args.group, args.shapes, args.dtype, args.filter, args.attnbench)
    if not cases:
        raise ShapeError("no shapes selected (check --group/--shapes/--dtype/--filter)")
    stem = "+".join(args.group) or os.path.splitext(os.path.basename(args.shapes[0]))[0]
    out = args.out or os.path.join("results", f"{prefix}_{stem}.json")
    folder = os.path.dirname(out) or "."
    if args.out and (not os.path.isdir(folder) or not os.access(folder, os.W_OK)):
        raise ShapeError(f"{out}: cannot write in folder {folder}")
    return cases, out


def import_torch_cuda():
    """(torch, "") where torch sees a CUDA device, else (None, why this machine cannot run a peer)."""
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed (the shapes are fine)"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA device"
    return torch, ""


def device_info(torch):
    props = torch.cuda.get_device_properties(0)
    return {"device": props.name, "sm_count": str(props.multi_processor_count),
            "compute_capability": f"{props.major}.{props.minor}", "torch": torch.__version__,
            "cuda_runtime": str(torch.version.cuda), "cudnn": str(torch.backends.cudnn.version())}


def run_and_write(cases, run_case, out, args, device, peer, extra=None):
    """Every case's rows (printed as they come), the results file; 1 when a row mismatched or errored, else 0."""
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    rows = []
    for i, c in enumerate(cases):
        for r in run_case(c):
            t = r["time_us"]["median"] if r["time_us"] else None
            print(f"[{i + 1}/{len(cases)}] {c.id:48s} {r['kernel']:24s} {r['mode']:6s} {r['status']:9s} "
                  f"{'%.2f us' % t if t else r['reason'][:100]}", flush=True)
            rows.append(r)
    stop = {"min_samples": args.min_samples, "max_noise": args.max_noise, "timeout_s": args.timeout}
    prov = provenance(" ".join([os.path.basename(sys.executable)] + sys.argv), args.seed, device,
                      dict({"peer": peer, "stop_rule": stop}, **(extra or {})))
    write_results(out, prov, rows)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "declined", "mismatch", "error")}
    print(f"rows: {len(rows)} ({', '.join(f'{k} {v}' for k, v in counts.items())})\nwrote {out}")
    return 1 if counts["mismatch"] or counts["error"] else 0
