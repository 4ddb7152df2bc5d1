"""The backward peer's tests (scripts/peers/torch_backward.py, which torch_sdpa.py runs for the backward ops), run
by test_peers.py with its helpers and failure list (`python3 tests/test_peers.py ATTNBENCH_BINARY`): the gradient
names, declines, failure words and declined rows without torch; the backward groups' cases from the listing; and,
where torch is importable, on the CPU: the closed-form reference against autograd, the gradient gate, every
strategy's gradients gated against the reference, and torch_sdpa.py's rows with a stand-in timer (the CUDA timing
itself needs a device)."""
import os
import subprocess
import types

import peer_common as pc
import peer_timing as pt
import torch_backward as tb  # importable without torch
import torch_sdpa  # importable without torch

check = attention_case = write = None  # test_peers.py's, set by run_unit()


def gated_bwd_case(dtype="bf16", **dims):
    """A gated_block_backward listing entry's case (tiny: the peer takes any head size)."""
    d = {"batch": 1, "seqlen": 64, "d_model": 64, "h_q": 4, "h_kv": 2, "d_head": 16, "rope_dim": 8, "qk_norm": True,
         "causal": True, "recompute": "recompute_qk_pre", "scale": 0.25, "need": ["dh", "dw_qkvg", "dw_o", "dw_norms"]}
    return pc.Case({"group": "g", "shape": "s", "file": "f.json", "op": "gated_block_backward", "dtype": dtype,
                    "types": {"q": dtype, "kv": dtype, "o": dtype, "acc": "fp32"}, "features": {},
                    "dims": dict(d, **dims), "work": {"flops": 1.0, "bytes": 1.0}})


def test_backward_choices():
    """The backward peer's gradient names (the harness's), declines and failure words, and run_case's declined rows,
    all without torch."""
    check(tb.wanted(gated_bwd_case()) == list(tb.BLOCK_GRADS), f"every gradient: {tb.wanted(gated_bwd_case())}")
    check(tb.wanted(gated_bwd_case(need=["dh", "dw_norms"])) == ["dh", "dw_q_norm", "dw_k_norm"], "dw_norms: both")
    check(tb.wanted(gated_bwd_case(need=["dw_o"])) == ["dw_o"], "dW_o alone")
    plain = attention_case([64], [64], op="attention_backward")
    check(tb.decline(gated_bwd_case()) == "" and tb.decline(plain) == "" and plain.q_lens == [64], "plain: taken")
    check(tb.decline(gated_bwd_case(window_left=8)).startswith("window_left:"), "a block's window is declined")
    check("qk_norm" in tb.decline(gated_bwd_case(qk_norm=False, need=["dw_norms"])), "norm weights without a norm")
    check(tb.decline(gated_bwd_case(need=[])).startswith("need:"), "no gradient asked for")
    cap = attention_case([64], [64], op="attention_backward", features={"softcap": 30.0})
    check("feature 'softcap'" in tb.decline(cap), f"softcap: {tb.decline(cap)!r}")
    top_left = attention_case([3], [10], op="attention_backward")
    top_left.dims["causal_bottom_right"] = False
    check("causal_bottom_right false" in tb.decline(top_left), f"top-left: {tb.decline(top_left)!r}")
    check(tb.decline(attention_case([1], [64])).startswith("op attention:"), "the forward ops are torch_sdpa.py's")
    g = {"tensors": [{"name": "dq", "passed": True, "nonfinite": 0, "max_abs": 0.01, "atol": 0.1},
                     {"name": "dk", "passed": False, "nonfinite": 0, "max_abs": 0.5, "atol": 0.1},
                     {"name": "dv", "passed": False, "nonfinite": 3, "max_abs": "inf", "atol": 0.1}]}
    check(pt.failure(g) == "dk max_abs 0.5 > atol 0.1; dv nonfinite 3", f"failure words: {pt.failure(g)!r}")
    check(pt.failure({"nonfinite": 0, "max_abs": 0.2, "atol": 0.04}) == "max_abs 0.2 > atol 0.04", "one output")
    args = torch_sdpa.parse_args(["--group", "g", "--kernel", "torch.sdpa.*", "--mode", "eager,graph"])
    bp = tb.BackwardPeer(types.SimpleNamespace(torch=None, args=args, device="cpu"), torch_sdpa.SDPA_KERNELS)
    rows = bp.run_case(cap)
    check([(r["kernel"], r["mode"], r["status"]) for r in rows] ==
          [(k, m, "declined") for k in torch_sdpa.SDPA_KERNELS for m in ("eager", "graph")] and
          all("softcap" in r["reason"] and r["op"] == "attention_backward" for r in rows), f"declined rows: {rows}")
    check(bp.run_case(gated_bwd_case(window_left=8)) == [], "--kernel torch.sdpa.* selects no block kernel")


def test_backward_cases(binary, tmp):
    """The backward ops' cases as the listing gives them: the backward group's lengths and GQA, the block's need,
    and a shape file's features, window and need taken or declined as they come."""
    bwd = pc.list_cases(["backward"], binary=binary)
    check(len(bwd) == 38 and all(c.op == "attention_backward" and tb.decline(c) == "" for c in bwd),
          f"backward: 19 shapes x 2 dtypes, all taken: {len(bwd)}")
    rag = [c for c in bwd if c.name == "d128_h16_ragged"][0]
    check(rag.q_lens == rag.kv_lens == [3000, 517, 8192, 1111, 3564] and rag.total_k == 16384, f"ragged: {rag.dims}")
    gqa = [c for c in bwd if c.name == "d256_h16kv1_gqa16_b4_s4k"][0]
    check((gqa.heads, gqa.kv_heads, gqa.head_size, gqa.q_lens) == (16, 1, 256, [4096] * 4), f"gqa16: {gqa.dims}")
    gated = pc.list_cases(["gated_397b_bwd"], binary=binary)
    check(len(gated) == 14 and all(tb.wanted(c) == list(tb.BLOCK_GRADS) and tb.decline(c) == "" for c in gated),
          f"gated_397b_bwd: 7 shapes x 2 dtypes, every gradient: {len(gated)}")
    check([c.dims["recompute"] for c in gated[:3]] == ["recompute_qk_pre", "recompute_qk_pre", "save_all"],
          f"recompute: {[c.dims['recompute'] for c in gated[:3]]}")
    path = write(tmp, "bwd.json", {"op": "attention_backward", "defaults": {"dtypes": ["bf16"], "heads": 4,
                                   "kv_heads": 2, "head_size": 64}, "shapes": [
        {"name": "cap", "seqlen_k": 128, "softcap": 30.0}, {"name": "win", "seqlen_k": 128, "window_left": 16},
        {"name": "rag", "seqlens": [[100, 300], [64, 64]]}]})
    gpath = write(tmp, "gbwd.json", {"op": "gated_block_backward", "defaults": {
        "dtypes": ["fp16"], "batch": 1, "seqlen": 64, "d_model": 64, "h_q": 2, "h_kv": 1, "d_head": 64, "rope_dim": 16},
        "shapes": [{"name": "dwo", "need": ["dw_o"]}, {"name": "win", "window_left": 8}, {"name": "nonorm",
                                                                                          "qk_norm": False}]})
    cap, win, rag, dwo, gwin, nonorm = pc.list_cases([], [path, gpath], binary=binary)
    check("feature 'softcap'" in tb.decline(cap) and "feature 'window_left'" in tb.decline(win), "features declined")
    check(tb.decline(rag) == "" and (rag.q_lens, rag.kv_lens) == ([100, 64], [300, 64]), f"ragged: {rag.dims}")
    check(tb.wanted(dwo) == ["dw_o"] and tb.decline(dwo) == "", f"need dw_o: {dwo.dims}")
    check(tb.decline(gwin).startswith("window_left:"), f"block window: {tb.decline(gwin)!r}")
    check(tb.wanted(nonorm) == ["dh", "dw_qkvg", "dw_o"] and tb.decline(nonorm) == "", f"no norm: {nonorm.dims}")
    return [path, gpath]


def test_backward_rows_cpu(binary, tmp, files):
    """Only where torch is importable: torch_sdpa.py's rows for the backward cases of `files` on the CPU, a stand-in
    timer in place of CUDA's: the flash backend (the CPU has no cuDNN or efficient one: declined with torch's
    reasons) and the block gated per tensor, declines as the listing asks; attnbench compare reads the rows."""
    try:
        import torch
    except ImportError:
        print("torch not importable: backward rows check skipped")
        return

    class CpuTorch:  # torch, with the synchronize timed_rows calls made a no-op on a machine without CUDA
        cuda = types.SimpleNamespace(synchronize=lambda: None)

        def __getattr__(self, name):
            return getattr(torch, name)
    fwd = torch_sdpa.TorchPeer(torch_sdpa.parse_args(["--shapes", files[0], "--mode", "eager"]), torch, "cpu")
    fwd.timer = types.SimpleNamespace(torch=CpuTorch(), time_eager=lambda fn: pt.summarize([fn() and 1.0, 2.0]))
    rows = {(r["shape"], r["kernel"]): r for c in pc.list_cases([], files, binary=binary) for r in fwd.run_case(c)}
    flash = rows[("rag", "torch.sdpa.flash")]
    check(flash["status"] == "ok" and [t["name"] for t in flash["gate"]["tensors"]] == ["dq", "dk", "dv"] and
          "one call per sequence" in flash["plan"] and flash["time_us"]["median"] == 1.5, f"ragged flash: {flash}")
    cudnn = rows[("rag", "torch.sdpa.cudnn")]
    check(cudnn["status"] == "declined" and "[mask causal_lower_right, gqa enable_gqa]" in cudnn["reason"],
          f"no cuDNN on the CPU: {cudnn['reason']}")
    check(rows[("cap", "torch.sdpa.flash")]["status"] == "declined", "softcap: declined")
    dwo = rows[("dwo", tb.CHAIN_KERNEL)]
    check(dwo["status"] == "ok" and [t["name"] for t in dwo["gate"]["tensors"]] == ["dw_o"] and
          "not projected again" in dwo["plan"], f"dW_o alone: {dwo}")
    check(rows[("win", tb.CHAIN_KERNEL)]["reason"].startswith("window_left:"), "a block's window: declined")
    out = os.path.join(tmp, "bwd_rows.json")
    pc.write_results(out, pc.provenance("test", 1), list(rows.values()))
    r = subprocess.run([binary, "compare", out, out], capture_output=True, text=True)
    check(r.returncode == 0 and "SAME 3" in r.stdout, f"compare reads the rows: {r.returncode} {r.stdout} {r.stderr}")


def test_backward_reference_with_torch():
    """Only where torch is importable (CPU is enough): the closed-form backward against autograd through the fp32
    forward reference (GQA, causal q 3 of kv 5, and not causal), alone and as the block's autograd function."""
    try:
        import torch
    except ImportError:
        print("torch not importable: backward reference check skipped")
        return
    g = torch.Generator().manual_seed(2)
    q, k, v, do = (torch.randn(2, 4, 3, 8, generator=g), torch.randn(2, 2, 5, 8, generator=g),
                   torch.randn(2, 2, 5, 8, generator=g), torch.randn(2, 4, 3, 8, generator=g))
    for causal in (True, False):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = pc.reference_sdpa(torch, *leaves, 0.3, causal)
        want = torch.autograd.grad(out, leaves, do)
        got = tb.reference_sdpa_backward(torch, q, k, v, do, 0.3, causal)
        check(torch.allclose(got[0], out, atol=1e-5), f"closed form's O, causal {causal}")
        for name, a, b in zip(("dq", "dk", "dv"), got[1:], want):
            check(torch.allclose(a, b, atol=1e-5), f"closed form's {name}, causal {causal}")
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        fn = torch.autograd.grad(tb.reference_attention(torch, 0.3, causal)(*leaves), leaves, do)
        check(all(torch.allclose(a, b, atol=1e-5) for a, b in zip(fn, want)), f"autograd function, causal {causal}")


def test_gradient_gate_with_torch():
    """Only where torch is importable: the gradient gate's atol (twice the forward's, times each max|ref|), the
    failed tensors and criteria named, NaN failing, a zero tensor failing however small its reference."""
    try:
        import torch
    except ImportError:
        print("torch not importable: gradient gate check skipped")
        return
    c, g = attention_case([4], [4]), torch.Generator().manual_seed(3)
    refs = {"dq": torch.randn(4, 2, 8, generator=g), "dk": 10 * torch.randn(4, 2, 8, generator=g),
            "dv": 0.01 * torch.randn(4, 2, 8, generator=g)}
    grads = {n: r.to(torch.bfloat16) for n, r in refs.items()}
    gate = tb.gradient_gate(torch, c, grads, refs)
    check(gate["passed"] and gate["failed"] == [] and [t["name"] for t in gate["tensors"]] == ["dq", "dk", "dv"],
          f"rounded gradients pass: {gate}")
    check(abs(gate["tensors"][1]["atol"] - 2 * 4e-2 * float(refs["dk"].abs().max())) < 1e-6, "atol of dk")
    bad = dict(grads, dk=grads["dk"] * 0.8, dv=grads["dv"].clone())
    bad["dv"][0, 0, 0] = float("nan")
    gate = tb.gradient_gate(torch, c, bad, refs)
    check(not gate["passed"] and gate["failed"] == ["dk.max_abs", "dv.nonfinite"] and gate["nonfinite"] == 1 and
          gate["detail"].startswith("dv:"), f"failed tensors: {gate['failed']} {gate['detail']}")
    check(pt.failure(gate).startswith("dk max_abs ") and pt.failure(gate).endswith("; dv nonfinite 1"),
          f"failure words: {pt.failure(gate)}")
    zero = tb.gradient_gate(torch, c, dict(grads, dv=torch.zeros_like(grads["dv"])), refs)
    check(zero["failed"] == ["dv.max_abs"], f"a zero dV fails: {zero['failed']}")
    check(tb.gradient_gate(torch, c, grads, refs, tol=1e-5)["failed"], "--atol sets the base")


def test_backward_peer_cpu():
    """Only where torch is importable: the backward peer on the CPU (its timing needs CUDA): the strategy chosen,
    autograd.grad over one batched call or one per sequence, the packing and the gate, for attention (GQA, ragged
    with q_len < kv_len, MQA) and the block (every gradient, dW_o alone, K/V expanded); a wrong scale fails."""
    try:
        import torch
    except ImportError:
        print("torch not importable: backward peer check skipped")
        return
    fwd = torch_sdpa.TorchPeer(torch_sdpa.parse_args(["--group", "g"]), torch, device="cpu")
    bp = fwd.backward
    for c in (attention_case([64, 64], [64, 64], heads=4, kv_heads=2, head_size=32, op="attention_backward"),
              attention_case([40, 9], [40, 70], heads=4, kv_heads=4, head_size=32, dtype="fp16", causal=True,
                             op="attention_backward"),
              attention_case([16], [80], heads=4, kv_heads=1, head_size=32, causal=False, op="attention_backward")):
        calls = tb.dense_calls(torch, c, *tb.packed_inputs(torch, c, 7, "cpu"))
        ref = tb.attention_reference(torch, c, calls)
        fn, _, how, _ = fwd.choose_sdpa(c, calls, bp.sdpa_backward)
        grads = tb.packed_grads(torch, fn())
        gate = tb.gradient_gate(torch, c, grads, ref)
        check(gate["passed"] and len(calls) == len(set(zip(c.q_lens, c.kv_lens))) and
              grads["dk"].shape == (sum(c.kv_lens), c.kv_heads, 32), f"{c.q_lens}/{c.kv_lens} ({how}): {gate}")
    c.dims["scale"] *= 1.5
    gate = tb.gradient_gate(torch, c, tb.packed_grads(torch, fwd.choose_sdpa(c, calls, bp.sdpa_backward)[0]()), ref)
    check(not gate["passed"] and "dq.max_abs" in gate["failed"], f"a wrong scale fails: {gate['failed']}")
    for c, gqa in ((gated_bwd_case(), "enable_gqa"), (gated_bwd_case("fp16", causal=False), "repeat_interleave"),
                   (gated_bwd_case(need=["dw_o"]), "enable_gqa")):
        tensors, dy, ref = bp.gated_problem(c)
        grads = {n: tb.block_layout(c, n, t) for n, t in bp.gated_backward(c, tensors, dy, gqa)().items()}
        gate = tb.gradient_gate(torch, c, grads, ref)
        check(gate["passed"] and list(grads) == tb.wanted(c) and grads.get("dw_qkvg", torch.empty(192, 64)).shape ==
              (192, 64), f"block {c.dims['need']} {gqa}: {gate}")
    c.dims["scale"] *= 1.5
    grads = {n: tb.block_layout(c, n, t) for n, t in bp.gated_backward(c, tensors, dy, "enable_gqa")().items()}
    check(tb.gradient_gate(torch, c, grads, ref)["failed"] == ["dw_o.max_abs"], "a block with a wrong scale fails")


def run_unit(helpers):
    """The tests that need no attnbench binary; `helpers` is test_peers.py (check, attention_case, write)."""
    global check, attention_case, write
    check, attention_case, write = helpers.check, helpers.attention_case, helpers.write
    test_backward_choices()
    test_backward_reference_with_torch()
    test_gradient_gate_with_torch()
    test_backward_peer_cpu()


def run_with_binary(binary, tmp):
    """The tests of the listing's backward cases (after run_unit)."""
    test_backward_rows_cpu(binary, tmp, test_backward_cases(binary, tmp))
