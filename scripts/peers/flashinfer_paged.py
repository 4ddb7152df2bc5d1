#!/usr/bin/env python3
"""FlashInfer's paged attention as a peer on attnbench shape files, written in attnbench's result schema so that
one `attnbench compare` or `reports/plot.py` shows attnbench's kernels against it.

- Cases: from `attnbench list --cases --json`, as torch_sdpa.py takes them (peer_common.py): the harness's own
  shape parser and validation, dims and declared work model.
- Kernels: flashinfer.paged_decode (BatchDecodeWithPagedKVCacheWrapper) for cases whose every query length is 1,
  flashinfer.paged_prefill (BatchPrefillWithPagedKVCacheWrapper) for the others.
- Inputs: the torch peer's values (same seed): Q packed [total_q, heads, d], the K/V caches as pages
  [pages, block_size, kv_heads, d] (kv_layout "NHD", page size = the case's block size), pages numbered in
  sequence order; paged_kv_indptr / indices / last_page_len from that page table, qo_indptr from the query lengths.
- Masks: prefill takes FlashInfer's causal mask, aligned to the end of the keys like attnbench's bottom-right one;
  decode needs none (one query sees every key). GQA: num_kv_heads below num_qo_heads, natively. Decode runs on
  tensor cores for GQA groups over 4 (--tensor-cores auto), as serving engines choose.
- plan() runs once, outside the timed region. eager: run() back to back; graph: run() of a wrapper made with
  use_cuda_graph=True (its index buffers fixed) captured once and replayed. Timing as torch_sdpa.py.
- Declined rows: other ops, mixed or 8-bit types, attention features, head sizes FlashInfer has no paged kernel
  for, and a plan() FlashInfer refuses (its message).
- Gate: the torch peer's fp32 reference over the same cache, max_abs (fp16 2e-2, bf16 4e-2, --atol overrides).

Exit codes: 0 every row ok or declined; 1 a row mismatched or errored; 2 bad input (attnbench's message) or no
attnbench binary; 3 cannot run here: no PyTorch, no CUDA device, or FlashInfer not importable (after the shapes
were checked).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402
import peer_timing as pt  # noqa: E402

DECODE = "flashinfer.paged_decode"
PREFILL = "flashinfer.paged_prefill"
HEAD_SIZES = (64, 128, 256)  # the head dims FlashInfer's paged kernels are built for
WORKSPACE_BYTES = 128 << 20  # FlashInfer's documented float workspace for split-KV partials
EXIT_CANNOT_RUN = pc.EXIT_CANNOT_RUN


def kernel_for(c):
    return DECODE if all(q == 1 for q in c.q_lens) else PREFILL


def decline(c):
    """Why this peer cannot take the case ("" when it can)."""
    if c.op != "attention":
        return f"op {c.op}: this peer runs the attention op only"
    if c.plain_decline():
        return c.plain_decline()
    if c.head_size not in HEAD_SIZES:
        return f"head_size {c.head_size}: FlashInfer's paged kernels take {', '.join(map(str, HEAD_SIZES))}"
    return ""


def tensor_cores(c, choice):
    """Decode on tensor cores: on, off, or auto (GQA groups over 4, where the shared K/V rows pay for the MMA)."""
    return choice == "on" or (choice == "auto" and c.heads // c.kv_heads > 4)


def plan_arguments(c):
    """The wrapper's plan() arguments for the case: index lists (made int32 device tensors by the caller) and
    scalars; q_data_type / kv_data_type are the case's dtype name."""
    table = pc.PageTable(c)
    common = {"num_qo_heads": c.heads, "num_kv_heads": c.kv_heads, "page_size": c.block_size,
              "sm_scale": c.softmax_scale(), "q_data_type": c.dtype, "kv_data_type": c.dtype}
    if kernel_for(c) == DECODE:
        return dict(common, indptr=table.indptr, indices=table.indices, last_page_len=table.last_page_len,
                    head_dim=c.head_size)
    return dict(common, qo_indptr=pc.qo_indptr(c), paged_kv_indptr=table.indptr, paged_kv_indices=table.indices,
                paged_kv_last_page_len=table.last_page_len, head_dim_qk=c.head_size, causal=bool(c.causal))


# The wrapper constructor's fixed index buffers in use_cuda_graph mode, by plan() argument.
GRAPH_BUFFERS = {
    DECODE: {"indptr": "paged_kv_indptr_buffer", "indices": "paged_kv_indices_buffer",
             "last_page_len": "paged_kv_last_page_len_buffer"},
    PREFILL: {"qo_indptr": "qo_indptr_buf", "paged_kv_indptr": "paged_kv_indptr_buf",
              "paged_kv_indices": "paged_kv_indices_buf", "paged_kv_last_page_len": "paged_kv_last_page_len_buf"},
}


class FlashInferPeer:
    def __init__(self, args, torch, flashinfer):
        self.torch, self.fi, self.args = torch, flashinfer, args
        self.timer = pt.Timer(torch, args)
        self.peaks = (args.peak_tflops, args.peak_gbps)
        self.version = f"flashinfer {getattr(flashinfer, '__version__', '?')}"

    def plan_call(self, c, q, caches, graph):
        """A planned wrapper's run() as a no-argument callable; graph: a use_cuda_graph wrapper."""
        torch, kernel = self.torch, kernel_for(c)
        tc = tensor_cores(c, self.args.tensor_cores)
        kw = plan_arguments(c)
        for name in ("q_data_type", "kv_data_type"):
            kw[name] = pc.torch_dtype(torch, kw[name])
        for name, value in list(kw.items()):
            if isinstance(value, list):
                kw[name] = torch.tensor(value, dtype=torch.int32, device="cuda")
        ctor = {"use_cuda_graph": True} if graph else {}
        if graph:
            ctor.update({buf: kw[arg].clone() for arg, buf in GRAPH_BUFFERS[kernel].items()})
        if kernel == DECODE:
            ctor["use_tensor_cores"] = tc
        cls = (self.fi.BatchDecodeWithPagedKVCacheWrapper if kernel == DECODE else
               self.fi.BatchPrefillWithPagedKVCacheWrapper)
        workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
        wrapper = cls(workspace, "NHD", **ctor)
        wrapper.plan(**kw)
        return lambda: wrapper.run(q, caches)

    def describe(self, c):
        kernel = kernel_for(c)
        cls = "BatchDecodeWithPagedKVCacheWrapper" if kernel == DECODE else "BatchPrefillWithPagedKVCacheWrapper"
        mask = "no mask" if kernel == DECODE else ("causal" if c.causal else "non-causal")
        tc = f", tensor cores {'on' if tensor_cores(c, self.args.tensor_cores) else 'off'}" if kernel == DECODE else ""
        return (f"{self.version}; {cls}, NHD pages of {c.block_size}, {mask}{tc}; graph mode: a use_cuda_graph "
                "wrapper")

    def repro(self, c):
        src = f"--group {c.group}" if c.group in self.args.group else f"--shapes {c.file}"
        return lambda mode: (f"python3 scripts/peers/flashinfer_paged.py {src} --filter '^{c.id}$' --mode {mode} "
                             f"--seed {self.args.seed} --tensor-cores {self.args.tensor_cores}")

    def run_case(self, c):
        kernel = kernel_for(c) if c.op == "attention" else PREFILL
        if not pc.glob(self.args.kernel, kernel):
            return []
        modes, repro = self.args.mode, self.repro(c)
        if decline(c):
            return [pc.make_row(c, kernel, m, "declined", decline(c), repro=repro(m)) for m in modes]
        torch, rows = self.torch, []
        try:
            q, k_cache, v_cache = pc.paged_inputs(torch, c, self.args.seed)
            ref = pc.attention_reference(torch, c, pc.dense_calls(torch, c, q, k_cache, v_cache))
            try:
                eager = self.plan_call(c, q, (k_cache, v_cache), graph=False)
            except Exception as e:  # FlashInfer's refusal of the problem
                return [pc.make_row(c, kernel, m, "declined", f"plan(): {pc.first_line(e)}", repro=repro(m))
                        for m in modes]
            prepare = lambda mode: eager if mode == "eager" else self.plan_call(c, q, (k_cache, v_cache), graph=True)
            result = lambda out: out.reshape(ref.shape)
            rows += pt.timed_rows(self.timer, c, kernel, modes, prepare, result, ref, self.describe(c), repro,
                                  self.args.atol, self.peaks)
        except Exception as e:  # out of memory and the like: error rows, then carry on
            done = {r["mode"] for r in rows}
            rows += [pc.make_row(c, kernel, m, "error", pc.first_line(e), repro=repro(m)) for m in modes
                     if m not in done]
        torch.cuda.empty_cache()
        return rows


def parse_args(argv):
    ap = pc.argument_parser("flashinfer_paged.py",
                            "FlashInfer paged-attention peer on attnbench shape files (attnbench result schema)",
                            f"{DECODE}, {PREFILL}",
                            "python3 scripts/peers/flashinfer_paged.py --group decode "
                            "-o results/flashinfer_decode.json")
    ap.add_argument("--tensor-cores", choices=("auto", "on", "off"), default="auto",
                    help="decode on tensor cores (use_tensor_cores): auto = for GQA groups over 4 (default)")
    return pc.parse_common(ap, argv)


def import_flashinfer():
    """(flashinfer, "") or (None, why it cannot be used here)."""
    try:
        import flashinfer
    except Exception as e:  # absent, or present but built against another torch/CUDA
        return None, f"FlashInfer is not importable ({pc.first_line(e)})"
    return flashinfer, ""


def main(argv=None):
    args = parse_args(argv)
    try:
        cases, out = pc.selection(args, "flashinfer")
    except pc.ShapeError as e:
        print(f"flashinfer_paged.py: error: {e}", file=sys.stderr)
        return pc.EXIT_BAD_INPUT
    torch, why = pc.import_torch_cuda()
    fi = None
    if torch is not None:
        fi, why = import_flashinfer()
    if fi is None:
        print(f"flashinfer_paged.py: cannot run here: {why}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    peer = FlashInferPeer(args, torch, fi)
    device = dict(pc.device_info(torch), flashinfer=str(getattr(fi, "__version__", "?")))
    return pc.run_and_write(cases, peer.run_case, out, args, device, "flashinfer_paged",
                            {"tensor_cores": args.tensor_cores})


if __name__ == "__main__":
    sys.exit(main())
