#!/usr/bin/env python3
"""torch peers on attnbench shape files, written in attnbench's result schema so that one `attnbench compare`
or `reports/plot.py` shows attnbench's kernels against them.

- Cases: from `attnbench list --cases --json` (the binary of --attnbench, $ATTNBENCH_BIN or build/src/attnbench):
  the harness's own shape parser and validation, dims and declared work model (FLOPs, bytes).

Kernels: torch.sdpa.flash, torch.sdpa.cudnn, torch.sdpa.efficient (F.scaled_dot_product_attention restricted
with torch.nn.attention.sdpa_kernel to one backend) for op "attention" shapes; torch.chain.gated_block (matmul,
split, F.rms_norm, rotate-half RoPE, SDPA with GQA, sigmoid gate, matmul) for op "gated_block" shapes. The same
SDPA kernels for op "attention_backward" and torch.chain.gated_block_bwd for op "gated_block_backward" time the
backward alone: torch_backward.py says how.

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
import math
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402
import peer_timing as pt  # noqa: E402
import torch_backward as tb  # noqa: E402

SDPA_KERNELS = {"torch.sdpa.flash": "FLASH_ATTENTION", "torch.sdpa.cudnn": "CUDNN_ATTENTION",
                "torch.sdpa.efficient": "EFFICIENT_ATTENTION"}
CHAIN_KERNEL = "torch.chain.gated_block"
EXIT_CANNOT_RUN = pc.EXIT_CANNOT_RUN


class TorchPeer:
    def __init__(self, args, torch, device="cuda"):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        try:
            from torch.nn.attention.bias import causal_lower_right
        except ImportError:
            causal_lower_right = None
        self.torch, self.F, self.sdpa_kernel, self.SDPBackend = torch, F, sdpa_kernel, SDPBackend
        self.causal_lower_right = causal_lower_right
        self.args, self.device = args, device  # device "cpu": the tests' gradients and gates, never timed
        self.timer = pt.Timer(torch, args)
        self.peaks = (args.peak_tflops, args.peak_gbps)
        self.backward = tb.BackwardPeer(self, SDPA_KERNELS)

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

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
                    kw["attn_mask"] = torch.ones(ql, kvl, dtype=torch.bool, device=self.device).tril(kvl - ql)
            if c.heads != c.kv_heads:
                if gqa_kind == "enable_gqa":
                    kw["enable_gqa"] = True
                else:
                    k = k.repeat_interleave(c.heads // c.kv_heads, dim=1)
                    v = v.repeat_interleave(c.heads // c.kv_heads, dim=1)
            prepared.append((q, k, v, kw))
        return lambda: [F.scaled_dot_product_attention(q, k, v, **kw) for q, k, v, kw in prepared]

    def choose_sdpa(self, c, calls, build=None):
        """The first (mask, GQA) strategy this backend runs, or None and the reasons torch gave. build(c, calls,
        mask, gqa) makes the callable tried (default sdpa_call; the backward's runs its forward and backward)."""
        build = build or self.sdpa_call
        masked = c.causal and any(1 < q.shape[2] < k.shape[2] for q, k, *_ in calls)
        masks = ["causal_lower_right"] * (self.causal_lower_right is not None) + ["bool"] if masked else ["-"]
        gqas = ["enable_gqa", "repeat_interleave"] if c.heads != c.kv_heads else ["-"]
        errors = []
        for mask in masks:
            for gqa in gqas:
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        fn = build(c, calls, mask, gqa)
                        outs = fn()
                        self.sync()
                    return fn, outs, f"mask {mask}, gqa {gqa}", errors
                except Exception as e:  # torch reports "no kernel" as RuntimeError, old signatures as TypeError
                    why = "; ".join(str(w.message).splitlines()[0][:160] for w in caught[-2:])
                    errors.append(f"[mask {mask}, gqa {gqa}] {pc.first_line(e)}" + (f" ({why})" if why else ""))
        return None, None, "", errors

    def gated_inputs(self, c):
        torch, dt, dev = self.torch, pc.torch_dtype(self.torch, c.dtype), self.device
        g = pc.generator(torch, self.args.seed, dev)
        d, r = c.d_head, c.rope_dim
        n = (2 * c.h_q + 2 * c.h_kv) * d
        x = pc.randn(torch, g, c.batch, c.seqlen, c.d_model, dtype=dt, device=dev)
        w_qkvg = pc.randn(torch, g, n, c.d_model, dtype=dt, std=1 / math.sqrt(c.d_model), device=dev)
        w_o = pc.randn(torch, g, c.d_model, c.h_q * d, dtype=dt, std=1 / math.sqrt(c.h_q * d), device=dev)
        q_norm = (1 + 0.1 * torch.randn(d, generator=g, device=dev)).to(dt)
        k_norm = (1 + 0.1 * torch.randn(d, generator=g, device=dev)).to(dt)
        pos = torch.arange(c.seqlen, device=dev, dtype=torch.float32)
        inv = 10000.0 ** (-torch.arange(0, r, 2, device=dev, dtype=torch.float32) / max(r, 1))
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

    # ---- cases -----------------------------------------------------------------------------------------------

    def repro(self, c, kernel):
        src = f"--group {c.group}" if c.group in self.args.group else f"--shapes {c.file}"
        return lambda mode: (f"python3 scripts/peers/torch_sdpa.py {src} --filter '^{c.id}$' --kernel {kernel} "
                             f"--mode {mode} --seed {self.args.seed}")

    def rows_for(self, c, kernel, fn, ref, plan):
        """Gate + time one runnable kernel in every mode (the same callable eager and captured)."""
        result = (lambda outs: pc.pack(self.torch, outs)) if c.op == "attention" else (
            lambda outs: outs.reshape(-1, c.d_model))
        return pt.timed_rows(self.timer, c, kernel, self.args.mode, lambda mode: fn, result, ref, plan,
                             self.repro(c, kernel), self.args.atol, self.peaks)

    def run_case(self, c):
        torch = self.torch
        if c.op in tb.OPS:
            return self.backward.run_case(c)
        if c.op not in ("attention", "gated_block"):
            return [pc.make_row(c, k, m, "declined", f"op {c.op}: no torch peer runs this op")
                    for k in SDPA_KERNELS if pc.glob(self.args.kernel, k) for m in self.args.mode]
        kernels = [k for k in (SDPA_KERNELS if c.op == "attention" else [CHAIN_KERNEL]) if pc.glob(self.args.kernel, k)]
        rows = []
        if not kernels:
            return rows
        version = f"torch {torch.__version__}"
        if c.plain_decline():
            return [pc.make_row(c, k, m, "declined", c.plain_decline()) for k in kernels for m in self.args.mode]
        try:
            if c.op == "attention":
                calls = pc.dense_calls(torch, c, *pc.paged_inputs(torch, c, self.args.seed))
                ref = pc.attention_reference(torch, c, calls)
                for kernel in kernels:
                    with self.sdpa_kernel([getattr(self.SDPBackend, SDPA_KERNELS[kernel])]):
                        fn, _, how, errors = self.choose_sdpa(c, calls)
                        if fn is None:
                            repro = self.repro(c, kernel)
                            rows += [pc.make_row(c, kernel, m, "declined", "; ".join(errors), repro=repro(m))
                                     for m in self.args.mode]
                            continue
                        plan = f"{version}; {how}" + ("; one call per sequence" if len(calls) > 1 else "")
                        rows += self.rows_for(c, kernel, fn, ref, plan)
            else:
                tensors = self.gated_inputs(c)
                fp32 = tuple(t.float() for t in tensors)
                ref_attention = lambda q, k, v: pc.reference_sdpa(torch, q, k, v, c.softmax_scale(), c.causal)
                ref = self.gated_chain(c, fp32, ref_attention).reshape(-1, c.d_model)
                del fp32
                for gqa in ("enable_gqa", "repeat_interleave"):
                    kw = {"enable_gqa": True} if gqa == "enable_gqa" else {}
                    attention = lambda q, k, v, kw=kw: self.F.scaled_dot_product_attention(
                        q, k, v, is_causal=c.causal, scale=c.softmax_scale(), **kw)
                    fn = lambda attention=attention, gqa=gqa: self.gated_chain(c, tensors, attention, gqa)
                    try:
                        fn()
                        torch.cuda.synchronize()
                        break
                    except Exception as e:
                        fn, err = None, pc.first_line(e)
                if fn is None:
                    return [pc.make_row(c, CHAIN_KERNEL, m, "declined", err) for m in self.args.mode]
                rows += self.rows_for(c, CHAIN_KERNEL, fn, ref, f"{version}; sdpa default dispatch; gqa {gqa}")
        except Exception as e:  # out of memory and the like: error rows, then carry on
            done = {(r["kernel"], r["mode"]) for r in rows}
            rows += [pc.make_row(c, k, m, "error", pc.first_line(e)) for k in kernels for m in self.args.mode
                     if (k, m) not in done]
        torch.cuda.empty_cache()
        return rows


def parse_args(argv):
    ap = pc.argument_parser("torch_sdpa.py", "torch SDPA peers on attnbench shape files (attnbench result schema)",
                            "torch.sdpa.{flash,cudnn,efficient}, torch.chain.gated_block, "
                            f"{tb.CHAIN_KERNEL}",
                            "python3 scripts/peers/torch_sdpa.py --group decode -o results/torch_decode.json")
    return pc.parse_common(ap, argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        cases, out = pc.selection(args, "torch")
    except pc.ShapeError as e:
        print(f"torch_sdpa.py: error: {e}", file=sys.stderr)
        return pc.EXIT_BAD_INPUT
    torch, why = pc.import_torch_cuda()
    if torch is None:
        print(f"torch_sdpa.py: cannot run here: {why}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    peer = TorchPeer(args, torch)
    return pc.run_and_write(cases, peer.run_case, out, args, pc.device_info(torch), "torch_sdpa")


if __name__ == "__main__":
    sys.exit(main())
