#!/usr/bin/env python3
"""torch peers on attnbench shape files, written in attnbench's result schema so that one `attnbench compare`
or `reports/plot.py` shows attnbench's kernels against them.

- Cases: from `attnbench list --cases --json` (the binary of --attnbench, $ATTNBENCH_BIN or build/src/attnbench):
  the harness's own shape parser and validation, dims and declared work model (FLOPs, bytes).

Kernels: torch.sdpa.flash, torch.sdpa.cudnn, torch.sdpa.efficient (F.scaled_dot_product_attention restricted
with torch.nn.attention.sdpa_kernel to one backend) for op "attention" shapes; torch.chain.gated_block (matmul,
split, F.rms_norm, rotate-half RoPE, SDPA with GQA, sigmoid gate, matmul) for op "gated_block" shapes.

- Inputs: the paged K/V cache and a block table are built like attnbench's; the peer gathers them into dense
  [batch, kv_heads, kv_len, head_size] tensors outside the timed region. Ragged shapes make one SDPA call per
  sequence (inside the timed region: that is what a torch caller without varlen support does).
- Causal masks are bottom-right aligned. q_len == kv_len: is_causal=True (the alignments coincide); decode sees
  every key; q_len < kv_len: torch.nn.attention.bias.causal_lower_right (flash and efficient run it natively;
  other backends get it materialised) and, failing that, an explicit bool mask (flash takes no mask at all).
- GQA: enable_gqa=True, or K/V expanded with repeat_interleave outside the timed region when a backend refuses.
  Which mask and GQA path ran is in each row's "plan"; a backend that takes neither is a declined row with the
  errors torch gave.
- Gate: max_abs against an fp32 torch reference (fp16 2e-2, bf16 4e-2, --atol overrides); NaN/Inf fail.
- Timing: CUDA events, after warm-up, at least --min-samples (20) samples, until relative stdev <= --max-noise or
  --timeout seconds. eager: back-to-back calls from Python (host dispatch included), per call; graph: one call
  captured with torch.cuda.CUDAGraph and replayed, the stream held by torch.cuda._sleep while the replay is
  queued so that the events bracket only the kernels.

Exit codes: 0 every row ok or declined; 1 a row mismatched or errored; 2 bad input (attnbench's message) or no
attnbench binary; 3 no PyTorch or no CUDA here (after the shapes were checked).
"""
import argparse
import math
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402

SDPA_KERNELS = {"torch.sdpa.flash": "FLASH_ATTENTION", "torch.sdpa.cudnn": "CUDNN_ATTENTION",
                "torch.sdpa.efficient": "EFFICIENT_ATTENTION"}
CHAIN_KERNEL = "torch.chain.gated_block"
EXIT_CANNOT_RUN = 3
HOLD_CYCLES = 200_000  # ~100 us of GPU sleep queued before a graph sample's start event


def first_line(e):
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:200] if text else type(e).__name__


class TorchPeer:
    def __init__(self, args):
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        try:
            from torch.nn.attention.bias import causal_lower_right
        except ImportError:
            causal_lower_right = None
        self.torch, self.F, self.sdpa_kernel, self.SDPBackend = torch, F, sdpa_kernel, SDPBackend
        self.causal_lower_right = causal_lower_right
        self.args = args
        self.peaks = (args.peak_tflops, args.peak_gbps)

    # ---- inputs and references -------------------------------------------------------------------------------

    def generator(self):
        g = self.torch.Generator(device="cuda")
        g.manual_seed(self.args.seed)
        return g

    def randn(self, g, *shape, dtype, std=1.0):
        t = self.torch.randn(*shape, generator=g, device="cuda", dtype=self.torch.float32)
        return (t * std).to(dtype)

    def dtype(self, name):
        return self.torch.bfloat16 if name == "bf16" else self.torch.float16

    def attention_inputs(self, c):
        """Dense per-call (q, k, v) [B, H, q, d] / [B, KVH, kv, d], gathered from a paged cache by the table."""
        torch, dt, g, bs = self.torch, self.dtype(c.dtype), self.generator(), c.block_size
        q = self.randn(g, sum(c.q_lens), c.heads, c.head_size, dtype=dt)
        nblocks = [-(-kv // bs) for kv in c.kv_lens]
        k_cache = self.randn(g, sum(nblocks), bs, c.kv_heads, c.head_size, dtype=dt)
        v_cache = self.randn(g, sum(nblocks), bs, c.kv_heads, c.head_size, dtype=dt)
        table = torch.arange(sum(nblocks), device="cuda", dtype=torch.int32)  # contiguous, as attnbench's default
        seqs, q0, b0 = [], 0, 0
        for ql, kvl, nb in zip(c.q_lens, c.kv_lens, nblocks):
            rows = table[b0:b0 + nb].long()
            gather = lambda cache: cache.index_select(0, rows).reshape(nb * bs, c.kv_heads, c.head_size)[:kvl]
            seqs.append((q[q0:q0 + ql].transpose(0, 1).unsqueeze(0),
                         gather(k_cache).transpose(0, 1).unsqueeze(0), gather(v_cache).transpose(0, 1).unsqueeze(0)))
            q0, b0 = q0 + ql, b0 + nb
        if len(set(zip(c.q_lens, c.kv_lens))) == 1:  # uniform: one batched call
            return [tuple(torch.cat([s[i] for s in seqs]).contiguous() for i in range(3))]
        return [tuple(t.contiguous() for t in s) for s in seqs]

    def reference_sdpa(self, q, k, v, scale, causal):
        """fp32 attention with the bottom-right causal mask. The query heads sharing a kv head are stacked as rows
        (head h reads kv head h // group), so K/V are never expanded; chunked over rows to bound memory."""
        torch = self.torch
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

    @staticmethod
    def pack(outs):
        """[B, H, q, d] per call -> packed [total_q, H, d]."""
        import torch
        return torch.cat([o.transpose(1, 2).reshape(-1, o.shape[1], o.shape[3]) for o in outs])

    def gate(self, c, out, ref):
        torch = self.torch
        o = out.float().reshape(ref.shape)
        nonfinite = int((~torch.isfinite(o)).sum())
        diff = torch.nan_to_num((o - ref).abs(), nan=float("inf"))
        max_abs = float(diff.max())
        worst = int(diff.argmax())
        rel_l2 = float(torch.linalg.vector_norm(torch.nan_to_num(o - ref)) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
        atol = self.args.atol if self.args.atol is not None else pc.TOLERANCE[c.dtype]
        passed = nonfinite == 0 and max_abs <= atol
        row_len = int(math.prod(ref.shape[1:]))
        return {"passed": passed, "max_abs": max_abs if math.isfinite(max_abs) else "inf", "rel_l2": rel_l2,
                "atol": atol, "rows_checked": int(ref.shape[0]), "nonfinite": nonfinite, "worst_index": worst,
                "detail": f"worst at row {worst // row_len}, element {worst % row_len}"}

    # ---- the callables -------------------------------------------------------------------------------------------

    def sdpa_call(self, c, calls, mask_kind, gqa_kind):
        """A no-argument callable running every call with one mask strategy and one GQA strategy; all masks and
        expanded K/V are built here, outside the timed region."""
        torch, F = self.torch, self.F
        prepared = []
        for q, k, v in calls:
            ql, kvl = q.shape[2], k.shape[2]
            kw = {"scale": c.softmax_scale()}
            if c.causal and ql > 1 and ql == kvl:
                kw["is_causal"] = True
            elif c.causal and ql > 1:
                if mask_kind == "causal_lower_right":
                    kw["attn_mask"] = self.causal_lower_right(ql, kvl)
                else:
                    kw["attn_mask"] = torch.ones(ql, kvl, dtype=torch.bool, device="cuda").tril(kvl - ql)
            if c.heads != c.kv_heads:
                if gqa_kind == "enable_gqa":
                    kw["enable_gqa"] = True
                else:
                    k = k.repeat_interleave(c.heads // c.kv_heads, dim=1)
                    v = v.repeat_interleave(c.heads // c.kv_heads, dim=1)
            prepared.append((q, k, v, kw))
        return lambda: [F.scaled_dot_product_attention(q, k, v, **kw) for q, k, v, kw in prepared]

    def choose_sdpa(self, c, calls):
        """The first (mask, GQA) strategy this backend runs, or None and the reasons torch gave."""
        masked = c.causal and any(1 < q.shape[2] < k.shape[2] for q, k, _ in calls)
        masks = ["causal_lower_right"] * (self.causal_lower_right is not None) + ["bool"] if masked else ["-"]
        gqas = ["enable_gqa", "repeat_interleave"] if c.heads != c.kv_heads else ["-"]
        errors = []
        for mask in masks:
            for gqa in gqas:
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        fn = self.sdpa_call(c, calls, mask, gqa)
                        outs = fn()
                        self.torch.cuda.synchronize()
                    return fn, outs, f"mask {mask}, gqa {gqa}", errors
                except Exception as e:  # torch reports "no kernel" as RuntimeError, old signatures as TypeError
                    why = "; ".join(str(w.message).splitlines()[0][:160] for w in caught[-2:])
                    errors.append(f"[mask {mask}, gqa {gqa}] {first_line(e)}" + (f" ({why})" if why else ""))
        return None, None, "", errors

    def gated_inputs(self, c):
        torch, dt, g = self.torch, self.dtype(c.dtype), self.generator()
        d, r = c.d_head, c.rope_dim
        n = (2 * c.h_q + 2 * c.h_kv) * d
        x = self.randn(g, c.batch, c.seqlen, c.d_model, dtype=dt)
        w_qkvg = self.randn(g, n, c.d_model, dtype=dt, std=1 / math.sqrt(c.d_model))
        w_o = self.randn(g, c.d_model, c.h_q * d, dtype=dt, std=1 / math.sqrt(c.h_q * d))
        q_norm = (1 + 0.1 * torch.randn(d, generator=g, device="cuda")).to(dt)
        k_norm = (1 + 0.1 * torch.randn(d, generator=g, device="cuda")).to(dt)
        pos = torch.arange(c.seqlen, device="cuda", dtype=torch.float32)
        inv = 10000.0 ** (-torch.arange(0, r, 2, device="cuda", dtype=torch.float32) / max(r, 1))
        ang = pos[:, None] * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1).expand(c.batch, -1, -1).to(dt).contiguous()
        sin = torch.cat([ang.sin(), ang.sin()], -1).expand(c.batch, -1, -1).to(dt).contiguous()
        return x, w_qkvg, w_o, q_norm, k_norm, cos, sin

    def gated_chain(self, c, tensors, attention, gqa_kind="enable_gqa"):
        """The block as torch ops; `attention(q, k, v)` on [B, H, S, d]. Works in the tensors' dtype."""
        torch, F = self.torch, self.F
        x, w_qkvg, w_o, q_norm, k_norm, cos, sin = tensors
        B, S, d, r, hq, hkv = c.batch, c.seqlen, c.d_head, c.rope_dim, c.h_q, c.h_kv

        def rms_norm(t, w):
            if hasattr(F, "rms_norm"):
                return F.rms_norm(t, (d,), w, eps=1e-6)
            return t * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(t.dtype) * w

        def rope(t):  # rotate-half on the leading r dims
            if r == 0:
                return t
            lead, rest = t[..., :r], t[..., r:]
            half1, half2 = lead[..., :r // 2], lead[..., r // 2:]
            rotated = torch.cat([-half2, half1], -1)
            cs, sn = cos[:, :, None, :], sin[:, :, None, :]
            return torch.cat([lead * cs + rotated * sn, rest], -1)

        qkvg = x @ w_qkvg.t()
        q, gate, k, v = qkvg.split([hq * d, hq * d, hkv * d, hkv * d], dim=-1)
        q, gate = q.view(B, S, hq, d), gate.view(B, S, hq, d)
        k, v = k.view(B, S, hkv, d), v.view(B, S, hkv, d)
        if c.qk_norm:
            q, k = rms_norm(q, q_norm), rms_norm(k, k_norm)
        q, k = rope(q), rope(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if gqa_kind == "repeat_interleave":
            k, v = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
        o = attention(q, k, v).transpose(1, 2) * torch.sigmoid(gate)
        return o.reshape(B, S, hq * d) @ w_o.t()

    # ---- timing --------------------------------------------------------------------------------------------------

    def collect(self, sample):
        a, out, start = self.args, [], time.monotonic()
        while True:
            out.append(sample())
            n = len(out)
            if n >= a.min_samples and pc.relative_noise(out) <= a.max_noise:
                break
            if n >= a.min_samples and time.monotonic() - start > a.timeout:
                break
            if n >= 2000:
                break
        return pc.summarize(out)

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

    def capture(self, fn):
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
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

    # ---- cases -----------------------------------------------------------------------------------------------

    def repro(self, c, kernel, mode):
        src = f"--group {c.group}" if c.group in self.args.group else f"--shapes {c.file}"
        return (f"python3 scripts/peers/torch_sdpa.py {src} --filter '^{c.id}$' --kernel {kernel} --mode {mode} "
                f"--seed {self.args.seed}")

    def rows_for(self, c, kernel, fn, outs, ref, plan):
        """Gate + time one runnable kernel in every mode; graph rows gate the replayed output."""
        rows = []
        for mode in self.args.mode:
            row = lambda status, reason="", gate=None, t=None: pc.make_row(
                c, kernel, mode, status, reason, gate, t, plan, self.repro(c, kernel, mode), self.peaks)
            try:
                if mode == "eager":
                    gate = self.gate(c, self.result(c, outs), ref)
                    rows.append(row("ok", "", gate, self.time_eager(fn)) if gate["passed"] else
                                row("mismatch", f"gate failed: max_abs {gate['max_abs']} > atol {gate['atol']}", gate))
                else:
                    graph, graph_outs = self.capture(fn)
                    gate = self.gate(c, self.result(c, graph_outs), ref)
                    rows.append(row("ok", "", gate, self.time_graph(graph)) if gate["passed"] else
                                row("mismatch", f"gate failed (graph replay): max_abs {gate['max_abs']}", gate))
                    del graph, graph_outs
            except Exception as e:
                rows.append(row("error", first_line(e)))
        return rows

    def result(self, c, outs):
        return self.pack(outs) if c.op == "attention" else outs.reshape(-1, c.d_model)

    def run_case(self, c):
        torch = self.torch
        kernels = [k for k in (SDPA_KERNELS if c.op == "attention" else [CHAIN_KERNEL])
                   if pc_glob(self.args.kernel, k)]
        rows = []
        if not kernels:
            return rows
        version = f"torch {torch.__version__}"
        if c.plain_decline():
            return [pc.make_row(c, k, m, "declined", c.plain_decline()) for k in kernels for m in self.args.mode]
        try:
            if c.op == "attention":
                calls = self.attention_inputs(c)
                ref = self.pack([self.reference_sdpa(q, k, v, c.softmax_scale(), c.causal) for q, k, v in calls])
                for kernel in kernels:
                    with self.sdpa_kernel([getattr(self.SDPBackend, SDPA_KERNELS[kernel])]):
                        fn, outs, how, errors = self.choose_sdpa(c, calls)
                        if fn is None:
                            rows += [pc.make_row(c, kernel, m, "declined", "; ".join(errors), repro=self.repro(c, kernel, m))
                                     for m in self.args.mode]
                            continue
                        plan = f"{version}; {how}" + ("; one call per sequence" if len(calls) > 1 else "")
                        rows += self.rows_for(c, kernel, fn, outs, ref, plan)
            else:
                tensors = self.gated_inputs(c)
                fp32 = tuple(t.float() for t in tensors)
                ref_attention = lambda q, k, v: self.reference_sdpa(q, k, v, c.softmax_scale(), c.causal)
                ref = self.gated_chain(c, fp32, ref_attention).reshape(-1, c.d_model)
                del fp32
                for gqa in ("enable_gqa", "repeat_interleave"):
                    kw = {"enable_gqa": True} if gqa == "enable_gqa" else {}
                    attention = lambda q, k, v, kw=kw: self.F.scaled_dot_product_attention(
                        q, k, v, is_causal=c.causal, scale=c.softmax_scale(), **kw)
                    fn = lambda attention=attention, gqa=gqa: self.gated_chain(c, tensors, attention, gqa)
                    try:
                        outs = fn()
                        torch.cuda.synchronize()
                        break
                    except Exception as e:
                        fn, err = None, first_line(e)
                if fn is None:
                    return [pc.make_row(c, CHAIN_KERNEL, m, "declined", err) for m in self.args.mode]
                rows += self.rows_for(c, CHAIN_KERNEL, fn, outs, ref, f"{version}; sdpa default dispatch; gqa {gqa}")
        except Exception as e:  # out of memory and the like: error rows, then carry on
            done = {(r["kernel"], r["mode"]) for r in rows}
            rows += [pc.make_row(c, k, m, "error", first_line(e)) for k in kernels for m in self.args.mode
                     if (k, m) not in done]
        torch.cuda.empty_cache()
        return rows


def pc_glob(pattern, name):
    import fnmatch
    return fnmatch.fnmatchcase(name, pattern)


def parse_args(argv):
    ap = argparse.ArgumentParser(description="torch SDPA peers on attnbench shape files (attnbench result schema)",
                                 epilog="example: python3 scripts/peers/torch_sdpa.py --group decode -o results/torch_decode.json")
    ap.add_argument("--group", "-g", action="append", default=[], help="shape group (repeatable)")
    ap.add_argument("--shapes", action="append", default=[], help="a shape file (repeatable)")
    ap.add_argument("--kernel", "-k", default="*", help="kernel glob over torch.sdpa.{flash,cudnn,efficient}, "
                    "torch.chain.gated_block (default *)")
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
    ap.add_argument("--out", "-o", help="results JSON (default results/torch_<groups>.json)")
    ap.add_argument("--attnbench", metavar="BIN", help="the attnbench binary that expands the shapes "
                    f"(default $ATTNBENCH_BIN, else {pc.DEFAULT_BINARY} of this repository)")
    args = ap.parse_args(argv)
    args.mode = [m for m in args.mode.split(",") if m]
    args.dtype = [d for d in args.dtype.split(",") if d]
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        if not args.group and not args.shapes:
            raise pc.ShapeError("give at least one --group or --shapes FILE")
        bad = [m for m in args.mode if m not in ("eager", "graph")]
        if bad:
            raise pc.ShapeError(f"--mode: '{bad[0]}' is not eager|graph")
        cases = pc.list_cases(args.group, args.shapes, args.dtype, args.filter, args.attnbench)
        if not cases:
            raise pc.ShapeError("no shapes selected (check --group/--shapes/--dtype/--filter)")
        stem = "+".join(args.group) or os.path.splitext(os.path.basename(args.shapes[0]))[0]
        out = args.out or os.path.join("results", f"torch_{stem}.json")
        folder = os.path.dirname(out) or "."
        if args.out and (not os.path.isdir(folder) or not os.access(folder, os.W_OK)):
            raise pc.ShapeError(f"{out}: cannot write in folder {folder}")
    except pc.ShapeError as e:
        print(f"torch_sdpa.py: error: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("torch_sdpa.py: cannot run here: PyTorch is not installed (the shapes are fine)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if not torch.cuda.is_available():
        print("torch_sdpa.py: cannot run here: torch sees no CUDA device", file=sys.stderr)
        return EXIT_CANNOT_RUN

    os.makedirs(folder, exist_ok=True)
    peer = TorchPeer(args)
    props = torch.cuda.get_device_properties(0)
    device = {"device": props.name, "sm_count": str(props.multi_processor_count),
              "compute_capability": f"{props.major}.{props.minor}", "torch": torch.__version__,
              "cuda_runtime": str(torch.version.cuda), "cudnn": str(torch.backends.cudnn.version())}
    rows = []
    for i, c in enumerate(cases):
        for r in peer.run_case(c):
            t = r["time_us"]["median"] if r["time_us"] else None
            print(f"[{i + 1}/{len(cases)}] {c.id:48s} {r['kernel']:24s} {r['mode']:6s} {r['status']:9s} "
                  f"{'%.2f us' % t if t else r['reason'][:100]}", flush=True)
            rows.append(r)
    prov = pc.provenance(" ".join([os.path.basename(sys.executable)] + sys.argv), args.seed, device,
                         {"peer": "torch_sdpa", "stop_rule": {"min_samples": args.min_samples,
                                                              "max_noise": args.max_noise, "timeout_s": args.timeout}})
    pc.write_results(out, prov, rows)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "declined", "mismatch", "error")}
    print(f"rows: {len(rows)} ({', '.join(f'{k} {v}' for k, v in counts.items())})\nwrote {out}")
    return 1 if counts["mismatch"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
