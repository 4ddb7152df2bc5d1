"""torch peers of the backward ops, run by torch_sdpa.py (its command line, cases, exit codes and results schema;
the forward's SDPA strategies, block chain and inputs are its TorchPeer's, the timing peer_timing.py's).

- Cases: op "attention_backward" (group backward) and op "gated_block_backward" (group gated_397b_bwd) from
  `attnbench list --cases --json`: dims, seqlens, GQA, causal, features, need and the declared work.
- Kernels: torch.sdpa.flash, torch.sdpa.cudnn, torch.sdpa.efficient (one SDPA backend pinned with sdpa_kernel)
  for attention_backward; torch.chain.gated_block_bwd (torch.chain.gated_block's ops under autograd) for
  gated_block_backward.
- Inputs: attention: packed Q [total_q, heads, d], K, V [total_k, kv_heads, d] and dO [total_q, heads, d],
  standard normal in the case's dtype (the harness's varlen layout), gathered into dense [B, H, S, d] outside the
  timed region: one batched call when every sequence has the same lengths, else one SDPA call per sequence, all
  under one autograd.grad. Block: torch_sdpa.py's inputs with each token's h scaled by a seeded factor in
  [1/2, 2] (as the harness's backward inputs: at unit scale a norm backward without its rstd factor would pass),
  dy standard normal; the gradients dims.need asks for (dh, dw_qkvg in the flat Q | GATE | K | V layout, dw_o,
  and dw_q_norm, dw_k_norm for dw_norms).
- Timed region: the backward alone. The forward runs once, outside it, with requires_grad on the tensors whose
  gradients are asked for; each timed call is torch.autograd.grad(out, inputs, grad_outputs=dO,
  retain_graph=True): the kernels a training step's backward launches for the op (the backend's dO.O
  preprocessing and backward kernels; the block's GEMMs and elementwise backwards) and none of the forward's,
  whose saved tensors retain_graph keeps for the next call. autograd runs each backward op on its forward op's
  stream, so the forward runs on the stream graph mode captures on. The block keeps autograd's saved activations:
  under dims.recompute recompute_qk_pre the pre-norm Q and K are not projected again (the plan says so).
- Causal: bottom-right, as torch_sdpa.py (is_causal, causal_lower_right, a bool mask). GQA: enable_gqa=True, else
  K/V expanded with repeat_interleave in the forward, whose gradient autograd sums per group in the timed
  backward; the plan says which. Features (window, softcap, ...), mixed or 8-bit types, top-left masks, a block's
  window, seq_lens or MX mode: declined rows with the reason, never computed without them.
- Gate: each gradient on its own against an fp32 reference of the same inputs: attention's closed form per row
  chunk (P = softmax, O = P V, D = rowsum(dO o O), dS = P o (dP - D), dQ = scale dS K, dK = scale dS^T Q,
  dV = P^T dO); the block's fp32 chain under autograd with that closed form as its attention's backward (so no
  [S, S] probabilities are kept). max_abs <= atol = tol x max|ref| per tensor (at least tol x 1e-3); NaN/Inf fail.
  tol is twice the forward's dtype tolerance, as in the harness's gradient gate: fp16 4e-2, bf16 8e-2 (--atol
  sets the forward's, the gradients follow at twice it). Relative to each tensor's largest value, since the
  gradients' size moves with the keys per row, the GQA group and causality, and the rounding of P and dS with
  it: non-causal dV over 8192 keys has an RMS of 0.02 and a largest value of 0.18, where tol x max(1, RMS) would
  allow 44% of that value; causal dK of a GQA-16 group reaches 8. On the CPU (torch 2.5; up to 8192 keys, GQA,
  ragged, q_len < kv_len) torch's flash backward reads at worst 1.6e-2 of max|ref| in bf16 and 1.5e-3 in fp16,
  the block's chain 1.5e-2 and 1.7e-3 (a norm weight's gradient). The row's gate.failed names the tensors that
  failed (dk.max_abs, dv.nonfinite) and gate.tensors holds each one's numbers; a failed gate times nothing.
- Timing: torch_sdpa.py's (peer_timing.py): eager, back-to-back autograd.grad calls from Python (the autograd
  engine's host work included); graph, one such call captured and replayed.

Exit codes: torch_sdpa.py's (0 every row ok or declined; 1 a row mismatched or errored; 2 bad input or no attnbench
binary; 3 no PyTorch or no CUDA here, after the shapes were checked).
"""
import contextlib

import peer_common as pc
import peer_timing as pt

OPS = ("attention_backward", "gated_block_backward")
CHAIN_KERNEL = "torch.chain.gated_block_bwd"
BLOCK_GRADS = {"dh": 0, "dw_qkvg": 1, "dw_o": 2, "dw_q_norm": 3, "dw_k_norm": 4}  # their tensor in gated_inputs()
GRADIENT_FACTOR = 2.0  # the gradients' tolerance over the forward's, as the harness's gradient gate
ZERO_SCALE = 1e-3  # atol's floor, relative to tol: a gradient that is zero throughout still allows rounding
BACKWARD_ALONE = "backward alone: autograd.grad, the forward run once outside the timed region"


def wanted(c):
    """The block's gradients the case asks for, in the harness's names (dims.need; dw_norms is both norms')."""
    need = c.dims.get("need", ["dh", "dw_qkvg", "dw_o"] + ["dw_norms"] * bool(c.dims.get("qk_norm")))
    return [n for n in BLOCK_GRADS if n in need or (n.endswith("_norm") and "dw_norms" in need)]


def decline(c):
    """Why this peer cannot take a backward case ("" when it can)."""
    if c.op not in OPS:
        return f"op {c.op}: not a backward op"
    if c.op == "gated_block_backward":
        if "dw_norms" in c.dims.get("need", []) and not c.dims.get("qk_norm"):
            return "need dw_norms: without qk_norm the block has no norm weights"
        if not wanted(c):
            return "need: no gradient asked for"
    return c.plain_decline()


# ---- the fp32 reference ---------------------------------------------------------------------------------------

def reference_sdpa_backward(torch, q, k, v, do, scale, causal):
    """fp32 attention's O and (dQ, dK, dV) in closed form under the bottom-right causal mask. Query heads sharing a
    kv head are stacked as rows (pc.reference_sdpa's layout), so dK and dV sum the group as they go; chunked over
    rows, three [rows, kv] temporaries at a time."""
    B, H, ql, d = q.shape
    kvh, kvl = k.shape[1], k.shape[2]
    n = (H // kvh) * ql
    qg, dog = q.float().reshape(B, kvh, n, d), do.float().reshape(B, kvh, n, v.shape[-1])
    kf, vf = k.float(), v.float()
    out, dq = torch.empty_like(dog), torch.empty_like(qg)
    dk, dv = torch.zeros_like(kf), torch.zeros_like(vf)
    rows = max(1, min(n, (1 << 27) // max(1, B * kvh * kvl)))
    for r0 in range(0, n, rows):
        qc, doc = qg[:, :, r0:r0 + rows], dog[:, :, r0:r0 + rows]
        s = (qc @ kf.transpose(-1, -2)) * scale
        if causal:
            i = (torch.arange(r0, r0 + qc.shape[2], device=q.device) % ql)[:, None]
            j = torch.arange(kvl, device=q.device)[None, :]
            s.masked_fill_(j > i + (kvl - ql), float("-inf"))
        p = torch.softmax(s, dim=-1)
        del s
        oc = p @ vf
        ds = p * (doc @ vf.transpose(-1, -2) - (doc * oc).sum(-1, keepdim=True))
        out[:, :, r0:r0 + rows], dq[:, :, r0:r0 + rows] = oc, (ds @ kf) * scale
        dk += (ds.transpose(-1, -2) @ qc) * scale
        dv += p.transpose(-1, -2) @ doc
    return out.reshape(B, H, ql, -1), dq.reshape(B, H, ql, d), dk, dv


def reference_attention(torch, scale, causal):
    """pc.reference_sdpa as an autograd function whose backward is reference_sdpa_backward's closed form: the
    fp32 chain's attention, without autograd keeping every row chunk's probabilities."""
    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return pc.reference_sdpa(torch, q, k, v, scale, causal)

        @staticmethod
        def backward(ctx, do):
            q, k, v = ctx.saved_tensors
            return reference_sdpa_backward(torch, q, k, v, do, scale, causal)[1:]
    return Attention.apply


def gradient_gate(torch, c, grads, refs, tol=None):
    """Each gradient (name -> tensor in its reference's layout) under pc.gate's rule with atol = GRADIENT_FACTOR x
    tol (the forward's: the dtype's, or --atol) x max|ref| (the module's docstring says why), merged: passed when
    every one passes; failed names each failed tensor and criterion; the worst tensor's numbers (max_abs over
    atol) on top; tensors holds each one's."""
    base = GRADIENT_FACTOR * (pc.TOLERANCE[c.dtype] if tol is None else tol)
    parts = []
    for name, ref in refs.items():
        g = pc.gate(torch, c, grads[name], ref, base * max(float(ref.abs().max()), ZERO_SCALE))
        # a NaN/Inf makes max_abs "inf": nonfinite alone names that failure
        g["failed"] = ["nonfinite"] if g["nonfinite"] else ["max_abs"] * (float(g["max_abs"]) > g["atol"])
        parts.append(dict({"name": name}, **g))
    worst = max(parts, key=lambda t: float(t["max_abs"]) / max(t["atol"], 1e-30))
    top = {k: v for k, v in worst.items() if k != "name"}
    top.update(passed=all(t["passed"] for t in parts), failed=[f"{t['name']}.{f}" for t in parts for f in t["failed"]],
               rel_l2=max(t["rel_l2"] for t in parts), rows_checked=sum(t["rows_checked"] for t in parts),
               nonfinite=sum(t["nonfinite"] for t in parts), detail=f"{worst['name']}: {worst['detail']}",
               tensors=parts)
    return top


# ---- attention_backward's problem ----------------------------------------------------------------------------

def packed_inputs(torch, c, seed, device="cuda"):
    """Q [total_q, heads, d], K and V [total_k, kv_heads, d], dO [total_q, heads, d], standard normal."""
    dt, g = pc.torch_dtype(torch, c.dtype), pc.generator(torch, seed, device)
    tq, tk = sum(c.q_lens), sum(c.kv_lens)
    return tuple(pc.randn(torch, g, n, h, c.head_size, dtype=dt, device=device)
                 for n, h in ((tq, c.heads), (tk, c.kv_heads), (tk, c.kv_heads), (tq, c.heads)))


def dense_calls(torch, c, q, k, v, do):
    """Per-call dense (q, k, v, dO), [B, H, q, d] / [B, KVH, kv, d]: one batched call when every sequence has the
    same lengths, else one per sequence."""
    qs, ks = pc.prefix_sums(c.q_lens), pc.prefix_sums(c.kv_lens)
    seqs = [tuple(t[a[i]:a[i + 1]].transpose(0, 1).unsqueeze(0) for t, a in ((q, qs), (k, ks), (v, ks), (do, qs)))
            for i in range(len(c.q_lens))]
    if len(set(zip(c.q_lens, c.kv_lens))) == 1:
        return [tuple(torch.cat([s[j] for s in seqs]).contiguous() for j in range(4))]
    return [tuple(t.contiguous() for t in s) for s in seqs]


def packed_grads(torch, grads):
    """autograd's (dq, dk, dv, dq, dk, dv, ...) of the calls -> dq [total_q, H, d], dk, dv [total_k, KVH, d]."""
    return {name: pc.pack(torch, grads[i::3]) for i, name in enumerate(("dq", "dk", "dv"))}


def attention_reference(torch, c, calls):
    """The fp32 gradients of every call, packed as packed_grads packs a kernel's."""
    per = [reference_sdpa_backward(torch, q, k, v, do, c.softmax_scale(), c.causal)[1:] for q, k, v, do in calls]
    return packed_grads(torch, [g for p in per for g in p])


def block_layout(c, name, grad):
    """A block gradient as the gate reads it: dh a row per token, each norm weight one row."""
    return grad.reshape(-1, c.d_model) if name == "dh" else grad.reshape(1, -1) if name.endswith("_norm") else grad


class BackwardPeer:
    """The backward ops over torch_sdpa.py's TorchPeer `fwd`: its SDPA strategies, block chain, inputs, timer and
    options; `kernels` maps its SDPA kernel names to SDPBackend names."""

    def __init__(self, fwd, kernels):
        self.fwd, self.torch, self.args, self.kernels = fwd, fwd.torch, fwd.args, kernels
        self.stream = None

    def on_stream(self):
        """The stream the forward and the timing run on (the one graph mode captures on); none on the CPU."""
        if self.fwd.device != "cuda":
            return contextlib.nullcontext()
        self.stream = self.stream or self.torch.cuda.Stream()
        return self.torch.cuda.stream(self.stream)

    def timed(self, c, kernel, fn, result, ref, plan):
        return pt.timed_rows(self.fwd.timer, c, kernel, self.args.mode, lambda mode: fn, result, ref, plan,
                             self.fwd.repro(c, kernel), self.args.atol, self.fwd.peaks, gradient_gate, self.stream)

    # ---- attention_backward ----------------------------------------------------------------------------------

    def sdpa_backward(self, c, calls, mask_kind, gqa_kind):
        """Every call's forward with one strategy, run here (an expanded K/V is part of its graph), and the timed
        callable: one autograd.grad over every call's output."""
        leaves, outs, douts = [], [], []
        for q, k, v, do in calls:
            q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
            outs += self.fwd.sdpa_call(c, [(q, k, v)], mask_kind, gqa_kind)()
            leaves += [q, k, v]
            douts.append(do)
        return lambda: self.torch.autograd.grad(outs, leaves, grad_outputs=douts, retain_graph=True)

    def attention_rows(self, c, kernels, rows):
        torch, fwd = self.torch, self.fwd
        calls = dense_calls(torch, c, *packed_inputs(torch, c, self.args.seed, fwd.device))
        ref = attention_reference(torch, c, calls)
        for kernel in kernels:
            with fwd.sdpa_kernel([getattr(fwd.SDPBackend, self.kernels[kernel])]):
                fn, _, how, errors = fwd.choose_sdpa(c, calls, self.sdpa_backward)
                if fn is None:
                    repro = fwd.repro(c, kernel)
                    rows += [pc.make_row(c, kernel, m, "declined", "; ".join(errors), repro=repro(m))
                             for m in self.args.mode]
                    continue
                plan = [f"torch {torch.__version__}", how, BACKWARD_ALONE]
                if "repeat_interleave" in how:
                    plan.append("K/V expanded in the forward, dK/dV summed per group in the timed backward")
                if len(calls) > 1:
                    plan.append("one call per sequence")
                rows += self.timed(c, kernel, fn, lambda outs: packed_grads(torch, outs), ref, "; ".join(plan))

    # ---- gated_block_backward ----------------------------------------------------------------------------------

    def gated_problem(self, c):
        """The block's inputs (h scaled per token), dy, and the fp32 chain's gradients of the names asked for."""
        torch, dev, names = self.torch, self.fwd.device, wanted(c)
        tensors = list(self.fwd.gated_inputs(c))
        g = pc.generator(torch, self.args.seed + 1, dev)
        factor = torch.exp2(torch.rand(c.batch, c.seqlen, 1, generator=g, device=dev) * 2 - 1)  # log-uniform
        tensors[0] = (tensors[0].float() * factor).to(tensors[0].dtype)
        dy = pc.randn(torch, g, c.batch, c.seqlen, c.d_model, dtype=tensors[0].dtype, device=dev)
        fp32 = [t.float().requires_grad_(i in [BLOCK_GRADS[n] for n in names]) for i, t in enumerate(tensors)]
        out = self.fwd.gated_chain(c, fp32, reference_attention(torch, c.softmax_scale(), c.causal))
        grads = torch.autograd.grad(out, [fp32[BLOCK_GRADS[n]] for n in names], grad_outputs=dy.float())
        return tensors, dy, {n: block_layout(c, n, t) for n, t in zip(names, grads)}

    def gated_backward(self, c, tensors, dy, gqa):
        """The block's forward with one GQA strategy, run here, and the timed callable: autograd.grad of the
        gradients asked for (only their inputs require grad, so autograd runs no other GEMM)."""
        torch, names = self.torch, wanted(c)
        asked = [BLOCK_GRADS[n] for n in names]
        leaves = [t.detach().requires_grad_(i in asked) for i, t in enumerate(tensors)]
        kw = {"enable_gqa": True} if gqa == "enable_gqa" else {}

        def attention(q, k, v):
            return self.fwd.F.scaled_dot_product_attention(q, k, v, is_causal=c.causal, scale=c.softmax_scale(), **kw)
        out = self.fwd.gated_chain(c, leaves, attention, gqa)
        inputs = [leaves[i] for i in asked]
        return lambda: dict(zip(names, torch.autograd.grad(out, inputs, grad_outputs=dy, retain_graph=True)))

    def gated_rows(self, c, kernels, rows):
        tensors, dy, ref = self.gated_problem(c)
        for gqa in ("enable_gqa", "repeat_interleave"):
            try:
                fn = self.gated_backward(c, tensors, dy, gqa)
                fn()
                self.fwd.sync()
                break
            except Exception as e:  # a GQA path this torch lacks: try the next
                fn, err = None, pc.first_line(e)
        if fn is None:
            rows += [pc.make_row(c, CHAIN_KERNEL, m, "declined", err) for m in self.args.mode]
            return
        plan = [f"torch {self.torch.__version__}", BACKWARD_ALONE, f"gradients {', '.join(wanted(c))}",
                f"sdpa default dispatch; gqa {gqa}"]
        if c.dims.get("recompute") == "recompute_qk_pre":
            plan.append("autograd's saved activations: the pre-norm Q/K are not projected again")
        rows += self.timed(c, CHAIN_KERNEL, fn, lambda outs: {n: block_layout(c, n, t) for n, t in outs.items()},
                           ref, "; ".join(plan))

    def run_case(self, c):
        kernels = [k for k in (self.kernels if c.op == "attention_backward" else [CHAIN_KERNEL])
                   if pc.glob(self.args.kernel, k)]
        if not kernels:
            return []
        why = decline(c)
        if why:
            return [pc.make_row(c, k, m, "declined", why) for k in kernels for m in self.args.mode]
        rows = []
        try:
            with self.on_stream():
                (self.attention_rows if c.op == "attention_backward" else self.gated_rows)(c, kernels, rows)
        except Exception as e:  # out of memory and the like: error rows, then carry on
            done = {(r["kernel"], r["mode"]) for r in rows}
            rows += [pc.make_row(c, k, m, "error", pc.first_line(e)) for k in kernels for m in self.args.mode
                     if (k, m) not in done]
        if self.fwd.device == "cuda":
            self.torch.cuda.empty_cache()
        return rows
