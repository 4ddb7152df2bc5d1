#!/usr/bin/env python3
"""torch's flex_attention as a peer on attnbench shape files, written in attnbench's result schema: the peer that
expresses the attention features (sliding window, softcap, ALiBi, sinks, qq-bias) the torch SDPA backends lack.

- Cases: from `attnbench list --cases --json`, as torch_sdpa.py takes them (peer_common.py), feature values
  included; plain cases run too (the feature rows' baseline).
- Kernel torch.flex_attention: flex_attention compiled with torch.compile (dynamic=False; compiled outside the
  timed region), on dense [B, H, q, d] / [B, KVH, kv, d] gathered from the paged cache (enable_gqa for GQA).
- The features: softcap, ALiBi and the qq-bias as a score_mod, in that order; the causal mask (bottom-right) and
  the sliding window as a mask_mod, whose block mask (create_block_mask, outside the timed region) skips the blocks
  no row sees; a sink as the rescale out * 1 / (1 + e^(sink_h - lse)) from flex_attention's log-sum-exp, in the
  same compiled call.
- Declined rows: other ops, mixed or 8-bit types (flex_attention takes Q, K and V in one 16-bit dtype), a torch
  without flex_attention.
- Gate: peer_features.reference (fp32, every feature), max_abs (fp16 2e-2, bf16 4e-2, --atol overrides). Timing as
  torch_sdpa.py.

Exit codes: 0 every row ok or declined; 1 a row mismatched or errored; 2 bad input (attnbench's message) or no
attnbench binary; 3 no PyTorch or no CUDA here (after the shapes were checked).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402
import peer_timing as pt  # noqa: E402
import peer_features as pf  # noqa: E402

KERNEL = "torch.flex_attention"
SERVED = ("window_left", "window_right", "softcap", "alibi_slopes", "sinks", "qq_bias_len")


def decline(c):
    if c.op != "attention":
        return f"op {c.op}: this peer runs the attention op only"
    t = c.types
    if not (t["q"] == t["kv"] == t["o"] and t["q"] in ("bf16", "fp16")):
        return f"types {c.dtype} (q-kv-o): flex_attention takes Q, K and V in one 16-bit dtype"
    return pf.feature_decline(c, SERVED, "flex_attention")


class FlexPeer:
    def __init__(self, args, torch, flex):
        self.torch, self.args, self.flex = torch, args, flex
        self.timer = pt.Timer(torch, args)
        # Every case's mods and lengths are a recompilation: past dynamo's default limit it would run uncompiled.
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 1024)
        if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
            torch._dynamo.config.accumulated_cache_size_limit = max(
                torch._dynamo.config.accumulated_cache_size_limit, 4096)
        self.compiled = torch.compile(flex.flex_attention, dynamic=False)
        self.aux = getattr(flex, "AuxRequest", None)  # newer torch: return_aux=AuxRequest(lse=True)

    def mods(self, c, ql, kvl):
        """score_mod (None when no mod) and mask_mod (None when every key is visible) of one call's lengths."""
        torch, f, dev = self.torch, c.features, "cuda"
        diag = kvl - ql
        cap = f.get("softcap", 0)
        slopes = torch.tensor(f["alibi_slopes"], device=dev) if f.get("alibi_slopes") else None
        n = f.get("qq_bias_len", 0)
        bias = torch.tensor(f["qq_bias"], device=dev) if n else None  # [n, n]

        def score_mod(score, b, h, q_idx, kv_idx):
            if cap:
                score = cap * torch.tanh(score / cap)
            if slopes is not None:
                score = score + slopes[h] * (kv_idx - q_idx - diag)
            if bias is not None:
                col = kv_idx - diag
                score = score + torch.where(col >= 0, bias[q_idx, col.clamp(min=0)], 0.0)
            return score

        wl, wr = f.get("window_left", -1), f.get("window_right", -1)

        def mask_mod(b, h, q_idx, kv_idx):
            pos = q_idx + diag
            keep = kv_idx <= pos if c.causal else kv_idx >= 0
            if wl >= 0:
                keep = keep & (kv_idx >= pos - wl)
            if wr >= 0:
                keep = keep & (kv_idx <= pos + wr)
            return keep
        masked = (c.causal and ql > 1) or wl >= 0 or wr >= 0
        return (score_mod if cap or slopes is not None or bias is not None else None), (mask_mod if masked else None)

    def call(self, c, q, k, v):
        """The no-argument callable of one dense call: the block mask built here, the compiled attention in it."""
        torch, ql, kvl = self.torch, q.shape[2], k.shape[2]
        score_mod, mask_mod = self.mods(c, ql, kvl)
        block_mask = self.flex.create_block_mask(mask_mod, None, None, ql, kvl, device="cuda") if mask_mod else None
        sinks = torch.tensor(c.features["sinks"], device="cuda").view(1, -1, 1) if c.features.get("sinks") else None
        kw = {"score_mod": score_mod, "block_mask": block_mask, "scale": c.softmax_scale(),
              "enable_gqa": c.heads != c.kv_heads}

        def run():
            if sinks is None:
                return self.compiled(q, k, v, **kw)
            if self.aux is not None:
                out, aux = self.compiled(q, k, v, return_aux=self.aux(lse=True), **kw)
                lse = aux.lse
            else:
                out, lse = self.compiled(q, k, v, return_lse=True, **kw)
            # lse: natural log, [B, H, q]
            share = torch.sigmoid(lse.float() - sinks)  # 1 / (1 + e^(sink - lse))
            return (out.float() * share[..., None]).to(out.dtype)
        return run

    def repro(self, c):
        src = f"--group {c.group}" if c.group in self.args.group else f"--shapes {c.file}"
        return lambda mode: (f"python3 scripts/peers/flex_attention.py {src} --filter '^{c.id}$' --mode {mode} "
                             f"--seed {self.args.seed}")

    def run_case(self, c):
        torch = self.torch
        if not pc.glob(self.args.kernel, KERNEL):
            return []
        if decline(c):
            return [pc.make_row(c, KERNEL, m, "declined", decline(c)) for m in self.args.mode]
        try:
            calls = pc.dense_calls(torch, c, *pc.paged_inputs(torch, c, self.args.seed))
            ref = pf.attention_reference(torch, c, calls, pc.pack)
            fns = [self.call(c, *x) for x in calls]
            fn = lambda: [f() for f in fns]  # noqa: E731
            fn()  # compiles, outside the timed region
            torch.cuda.synchronize()
            score_mod, mask_mod = self.mods(c, calls[0][0].shape[2], calls[0][1].shape[2])
            plan = (f"torch {torch.__version__}; torch.compile(flex_attention); "
                    f"{'score_mod' if score_mod else 'no score_mod'}; {'block mask' if mask_mod else 'no mask'}"
                    + ("; sinks from the lse" if c.features.get("sinks") else "")
                    + ("; one call per sequence" if len(calls) > 1 else ""))
            rows = pt.timed_rows(self.timer, c, KERNEL, self.args.mode, lambda mode: fn,
                                 lambda outs: pc.pack(torch, outs), ref, plan, self.repro(c), self.args.atol,
                                 (self.args.peak_tflops, self.args.peak_gbps))
        except Exception as e:  # out of memory, a compile failure: error rows, then carry on
            rows = [pc.make_row(c, KERNEL, m, "error", pc.first_line(e)) for m in self.args.mode]
        torch.cuda.empty_cache()
        return rows


def parse_args(argv):
    ap = pc.argument_parser("flex_attention.py", "torch flex_attention peer on attnbench shape files (attnbench "
                            "result schema), the attention features included", KERNEL,
                            "python3 scripts/peers/flex_attention.py --group features -o results/flex_features.json")
    return pc.parse_common(ap, argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        cases, out = pc.selection(args, "flex")
    except pc.ShapeError as e:
        print(f"flex_attention.py: error: {e}", file=sys.stderr)
        return pc.EXIT_BAD_INPUT
    torch, why = pc.import_torch_cuda()
    if torch is None:
        print(f"flex_attention.py: cannot run here: {why}", file=sys.stderr)
        return pc.EXIT_CANNOT_RUN
    try:
        import torch.nn.attention.flex_attention as flex
    except ImportError as e:
        print(f"flex_attention.py: cannot run here: torch {torch.__version__} has no flex_attention ({e})",
              file=sys.stderr)
        return pc.EXIT_CANNOT_RUN
    peer = FlexPeer(args, torch, flex)
    return pc.run_and_write(cases, peer.run_case, out, args, pc.device_info(torch), "flex_attention")


if __name__ == "__main__":
    sys.exit(main())
