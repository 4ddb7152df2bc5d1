#!/usr/bin/env python3
"""The peers' pure-python parts (the bottom-right mask, the statistics, the row schema, the page table and FlashInfer's
indptr arrays, the FlashInfer peer's kernel choice, declines and plan() arguments) against hand-computed values,
their command lines, and their cases: taken from `attnbench list --cases --json`, so bad input is the harness's
exit-2 error and the dims and declared work are the harness's. Without the libraries a peer exits 3 (a stand-in
torch that sees a device checks FlashInfer's own exit). The torch parts run only where torch is importable. The
backward peer's tests are test_peers_backward.py's, run from here with these helpers.
Usage: test_peers.py ATTNBENCH_BINARY (default: $ATTNBENCH_BIN or build/src/attnbench)."""
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "peers"))
os.environ["ATTNBENCH_SHAPES_DIR"] = os.path.join(ROOT, "shapes")
import peer_common as pc  # noqa: E402
import peer_timing as pt  # noqa: E402
import flashinfer_paged as fip  # noqa: E402  (importable without torch and FlashInfer)
import torch_sdpa  # noqa: E402  (importable without torch)
import test_peers_backward as backward  # noqa: E402  (beside this file: on the path as the script's folder)
import peer_features as pf  # noqa: E402
import flex_attention as flex  # noqa: E402  (importable without torch)

SCRIPT = os.path.join(ROOT, "scripts", "peers", "torch_sdpa.py")
FI_SCRIPT = os.path.join(ROOT, "scripts", "peers", "flashinfer_paged.py")
FLEX_SCRIPT = os.path.join(ROOT, "scripts", "peers", "flex_attention.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def write(tmp, name, doc):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def peer(args, env=None, script=SCRIPT):
    return subprocess.run([sys.executable, script] + args, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def attention_case(q_lens, kv_lens, heads=32, kv_heads=8, head_size=128, block_size=64, causal=True, dtype="bf16",
                   features=None, op="attention"):
    """A listing entry's case, as `attnbench list --cases --json` would give it."""
    seqlens = [[q, kv] for q, kv in zip(q_lens, kv_lens)]
    return pc.Case({"group": "g", "shape": "s", "file": "f.json", "op": op, "dtype": dtype,
                    "types": {"q": dtype, "kv": dtype, "o": dtype, "acc": "fp32"}, "features": features or {},
                    "dims": {"heads": heads, "kv_heads": kv_heads, "head_size": head_size, "block_size": block_size,
                             "causal": causal, "seqlens": seqlens, "max_seqlen_q": max(q_lens),
                             "scale": head_size ** -0.5},
                    "work": {"flops": 1.0, "bytes": 1.0}})


def test_mask_stats_rows():
    T, F = True, False
    check(pc.causal_mask(3, 5) == [[T, T, T, F, F], [T, T, T, T, F], [T, T, T, T, T]], "mask 3x5")
    check(pc.causal_mask(1, 4) == [[T, T, T, T]], "decode mask sees every key")
    check(pc.causal_mask(2, 2) == [[T, F], [T, T]], "square mask is the lower triangle")
    s = pt.summarize([5, 1, 3, 2, 4])
    check((s["median"], s["min"], s["q1"], s["q3"], s["mean"], s["n"]) == (3, 1, 2, 4, 3, 5), f"stats {s}")
    check(abs(s["stdev"] - math.sqrt(2.5)) < 1e-12, "sample stdev")
    check(pt.summarize([2, 4])["q1"] == 2.5, "interpolated quartile")
    c = pc.Case({"group": "g", "shape": "s", "file": "f.json", "op": "attention", "dtype": "bf16",
                 "types": {"q": "bf16", "kv": "bf16", "o": "bf16", "acc": "fp32"}, "features": {},
                 "dims": {"heads": 32, "seqlens": [[1, 4096]], "max_seqlen_q": 1, "scale": 0.25},
                 "work": {"flops": 67_108_864.0, "bytes": 16_793_600.0}})
    check(c.id == "g/s/bf16" and c.q_lens == [1] and c.kv_lens == [4096] and c.heads == 32 and c.softmax_scale() == 0.25,
          f"case from a listing entry: {vars(c)}")
    row = pc.make_row(c, "torch.sdpa.flash", "graph", "ok", time_us=pt.summarize([10.0, 10.0]), peaks=(1000.0, None))
    check(abs(row["tflops"] - 67_108_864 / 10e-6 * 1e-12) < 1e-9 and abs(row["pct_peak_flops"] - row["tflops"] / 10) < 1e-9,
          f"rates {row['tflops']} {row['pct_peak_flops']}")
    with open(os.path.join(ROOT, "tests", "data", "sample_results.json")) as f:
        attnbench_row = json.load(f)["rows"][0]
    check(set(row) == set(attnbench_row), f"row fields differ from attnbench's: {set(row) ^ set(attnbench_row)}")
    check(row["dims"]["max_seqlen_q"] == 1 and row["dims"]["heads"] == 32, f"dims {row['dims']}")


def test_page_table_and_indptr():
    # decode d128_h32kv8_ragged: kv 523, 37, 2011, 1328 over pages of 64 -> 9, 1, 32, 21 pages.
    c = attention_case([1, 1, 1, 1], [523, 37, 2011, 1328])
    t = pc.PageTable(c)
    check(pc.blocks_per_seq(c) == [9, 1, 32, 21], f"blocks {pc.blocks_per_seq(c)}")
    check(t.indptr == [0, 9, 10, 42, 63], f"indptr {t.indptr}")
    check(t.indices == list(range(63)), "indices: every page once, in sequence order")
    check(t.last_page_len == [523 - 8 * 64, 37, 2011 - 31 * 64, 1328 - 20 * 64], f"last {t.last_page_len}")
    check(t.last_page_len == [11, 37, 27, 48] and t.pages(2) == list(range(10, 42)), f"pages(2) {t.pages(2)}")
    check(pc.qo_indptr(c) == [0, 1, 2, 3, 4], f"decode qo_indptr {pc.qo_indptr(c)}")
    # A full last page holds block_size tokens (1 <= last_page_len <= page size), never 0.
    full = attention_case([100, 64], [300, 128], block_size=64)
    ft = pc.PageTable(full)
    check((ft.indptr, ft.last_page_len) == ([0, 5, 7], [44, 64]), f"full page: {ft.indptr} {ft.last_page_len}")
    check(pc.qo_indptr(full) == [0, 100, 164], f"prefill qo_indptr {pc.qo_indptr(full)}")
    small = attention_case([1], [1], block_size=16)
    check((pc.PageTable(small).indptr, pc.PageTable(small).last_page_len) == ([0, 1], [1]), "one token, one page")


def test_flashinfer_choices():
    dec = attention_case([1, 1, 1, 1], [523, 37, 2011, 1328])
    pre = attention_case([100, 64], [300, 128], heads=8, kv_heads=2, block_size=16, causal=False, dtype="fp16")
    mixed = attention_case([1, 4], [100, 200])
    check(fip.kernel_for(dec) == "flashinfer.paged_decode", "q_len 1 everywhere: decode wrapper")
    check(fip.kernel_for(pre) == "flashinfer.paged_prefill" and fip.kernel_for(mixed) == "flashinfer.paged_prefill",
          "any longer query: prefill wrapper")
    a = fip.plan_arguments(dec)
    check((a["indptr"], a["last_page_len"], a["indices"][-1], a["head_dim"], a["page_size"]) ==
          ([0, 9, 10, 42, 63], [11, 37, 27, 48], 62, 128, 64), f"decode plan(): {a}")
    check((a["num_qo_heads"], a["num_kv_heads"], a["q_data_type"], a["kv_data_type"]) == (32, 8, "bf16", "bf16"),
          f"decode heads/types: {a}")
    check(abs(a["sm_scale"] - 128 ** -0.5) < 1e-12 and "causal" not in a and "qo_indptr" not in a, f"decode: {a}")
    b = fip.plan_arguments(pre)
    check((b["qo_indptr"], b["paged_kv_indptr"], b["paged_kv_last_page_len"], b["head_dim_qk"], b["causal"]) ==
          ([0, 100, 164], [0, 19, 27], [12, 16], 128, False), f"prefill plan(): {b}")
    check(b["paged_kv_indices"] == list(range(27)) and b["page_size"] == 16 and b["q_data_type"] == "fp16",
          f"prefill pages: {b}")
    check(fip.plan_arguments(mixed)["causal"] is True, "causal prefill")
    check(set(fip.GRAPH_BUFFERS["flashinfer.paged_decode"]) <= set(a), "decode graph buffers name plan() arguments")
    check(set(fip.GRAPH_BUFFERS["flashinfer.paged_prefill"]) <= set(b), "prefill graph buffers name plan() arguments")

    check(fip.decline(dec) == "" and fip.decline(pre) == "", "plain 16-bit cases are taken")
    check("head_size 96" in fip.decline(attention_case([1], [64], head_size=96)), "head size without a kernel")
    check("feature 'softcap'" in fip.decline(attention_case([1], [64], features={"softcap": 30.0})), "features")
    check("types" in fip.decline(attention_case([1], [64], dtype="e4m3")), "8-bit types")
    check("op gated_block" in fip.decline(attention_case([1], [64], op="gated_block")), "other ops")

    check(fip.tensor_cores(attention_case([1], [64], heads=32, kv_heads=2), "auto"), "group 16: tensor cores")
    check(not fip.tensor_cores(dec, "auto") and fip.tensor_cores(dec, "on"), "group 4: CUDA cores unless on")
    check(not fip.tensor_cores(attention_case([1], [64], heads=32, kv_heads=2), "off"), "off")


def test_flashinfer_arguments():
    a = fip.parse_args(["--group", "decode", "--mode", "graph", "--tensor-cores", "on", "--dtype", "bf16,fp16"])
    check((a.group, a.mode, a.tensor_cores, a.dtype, a.kernel) == (["decode"], ["graph"], "on", ["bf16", "fp16"], "*"),
          f"args {vars(a)}")
    check(fip.parse_args(["-g", "decode"]).tensor_cores == "auto", "tensor cores default auto")
    r = peer(["--group", "decode", "--tensor-cores", "maybe"], script=FI_SCRIPT)
    check(r.returncode == 2 and "--tensor-cores" in r.stderr, f"bad --tensor-cores: {r.returncode} {r.stderr}")
    r = peer(["--help"], script=FI_SCRIPT)
    check(r.returncode == 0 and "exit codes: 0" in r.stdout and "3 cannot run here" in r.stdout and
          "flashinfer.paged_decode" in r.stdout, f"--help: {r.stdout}")
    r = peer(["--help"])
    check(r.returncode == 0 and "exit codes: 0" in r.stdout and "torch.chain.gated_block_bwd" in r.stdout,
          f"torch --help: {r.stdout}")


def stand_in_torch(tmp):
    """A folder with a `torch` that sees a CUDA device and a `flashinfer` that cannot be imported."""
    folder = os.path.join(tmp, "stand_in")
    for pkg, body in (("torch", "__version__ = '0'\n\n\nclass cuda:\n    is_available = staticmethod(lambda: True)\n"),
                      ("flashinfer", "raise ImportError(\"No module named 'flashinfer' (stand-in)\")\n")):
        os.makedirs(os.path.join(folder, pkg), exist_ok=True)
        write(os.path.join(folder, pkg), "__init__.py", body)
    return folder


def test_feature_rule():
    """The peers' plain statement of the features (which keys a row sees, one score's mods) and their declines,
    against hand-computed values."""
    c = attention_case([3], [10], heads=2, kv_heads=1, features={"window_left": 2})
    # row 0 sits at key 7: keys 5..7 visible under causal + window_left 2
    check([j for j in range(10) if pf.visible(c, 0, j, 3, 10)] == [5, 6, 7], "window_left 2, causal")
    c = attention_case([1], [10], causal=False, features={"window_left": 1, "window_right": 1})
    check([j for j in range(10) if pf.visible(c, 0, j, 1, 10)] == [8, 9], "non-causal window around the last key")
    f = {"softcap": 2.0, "alibi_slopes": [0.5, 0.25], "qq_bias_len": 2, "qq_bias": [[1.0, 2.0], [3.0, 4.0]]}
    c = attention_case([2], [6], heads=2, kv_heads=1, features=f)
    # row 1 (i' = 5), key 4 (new token 0), head 1: 2 tanh(1 / 2) + 0.25 (4 - 5) + qq[1][0]
    got = pf.modded_score(c, 1.0, 1, 1, 4, 2, 6, math.tanh)
    check(abs(got - (2 * math.tanh(0.5) - 0.25 + 3.0)) < 1e-12, f"mods {got}")
    got = pf.modded_score(c, 1.0, 0, 0, 1, 2, 6, math.tanh)  # key 1 is an old token: no qq-bias
    check(abs(got - (2 * math.tanh(0.5) + 0.5 * (1 - 4))) < 1e-12, f"mods of an old key {got}")
    check(pf.feature_decline(c, ("softcap",), "p") == "feature 'alibi_slopes': not expressed by p", "decline order")
    check(pf.feature_decline(c, flex.SERVED, "p") == "", "flex serves softcap, ALiBi and the qq-bias")
    kv8 = attention_case([1], [64], features={"k_scale": 0.5})
    kv8.types = dict(kv8.types, kv="e4m3")
    check("one 16-bit dtype" in flex.decline(kv8), f"flex declines an 8-bit cache: {flex.decline(kv8)!r}")
    check(flex.decline(attention_case([1], [64], features={"sinks": [1.0] * 32})) == "", "flex takes sinks")


def test_mask_declines():
    """Rows aligned top-left where some q_len != kv_len, a gated block's seq_lens, window or MX mode and return_lse are
    declined by every peer (each aligns its masks bottom-right over every key and returns the output alone)."""
    top_left = attention_case([3, 5], [10, 5])
    top_left.dims["causal_bottom_right"] = False
    check("causal_bottom_right false" in top_left.plain_decline(), f"top-left: {top_left.plain_decline()!r}")
    check("causal_bottom_right false" in flex.decline(top_left), f"flex top-left: {flex.decline(top_left)!r}")
    square = attention_case([5], [5])
    square.dims["causal_bottom_right"] = False
    check(square.plain_decline() == "", "top-left where every q_len == kv_len is bottom-right")
    lse = attention_case([1], [64])
    lse.dims["return_lse"] = True
    check("return_lse" in lse.plain_decline(), f"return_lse: {lse.plain_decline()!r}")
    gated = attention_case([1], [1], op="gated_block")
    gated.dims["seq_lens"] = [1]
    check("seq_lens" in gated.mask_decline(), f"seq_lens: {gated.mask_decline()!r}")
    mx = attention_case([1], [1], op="gated_block")
    mx.dims["mx"] = {"w_qkvg": "e2m1", "w_o": "e2m1", "o": "nvfp4"}
    check(mx.mask_decline().startswith("mx:"), f"mx: {mx.mask_decline()!r}")
    window = attention_case([1], [1], op="gated_block")
    window.dims["window_right"] = 16
    check(window.mask_decline().startswith("window_right:"), f"a block's window: {window.mask_decline()!r}")


def test_cases_from_binary(binary, tmp):
    decode = pc.list_cases(["decode"], binary=binary)
    check(len(decode) == 30, f"decode: 15 shapes x 2 dtypes, got {len(decode)}")
    c = decode[0]
    check((c.name, c.dtype, c.q_lens, c.kv_lens, c.heads, c.kv_heads, c.head_size, c.block_size, c.causal) ==
          ("d128_h32kv8_b1_kv4096", "bf16", [1], [4096], 32, 8, 128, 64, True), f"decode[0]: {vars(c)}")
    check(abs(c.softmax_scale() - 1 / math.sqrt(128)) < 1e-7, f"resolved scale {c.softmax_scale()}")
    ragged = [c for c in decode if c.name == "d128_h32kv8_ragged"][0]
    check(ragged.q_lens == [1, 1, 1, 1] and ragged.kv_lens == [523, 37, 2011, 1328], f"ragged: {vars(ragged)}")
    gated = pc.list_cases(["gated_397b"], binary=binary)
    check(len(gated) == 7 and all(g.op == "gated_block" and g.dtype == "bf16" for g in gated), "gated_397b: 7 bf16 cases")
    check((gated[0].d_model, gated[0].h_q, gated[0].h_kv, gated[0].d_head, gated[0].rope_dim, gated[0].seqlen) ==
          (5120, 32, 2, 256, 64, 2048), f"gated[0]: {vars(gated[0])}")
    sel = pc.list_cases(["decode"], [], ["fp16"], "b8_kv", binary=binary)
    check([c.id for c in sel] == ["decode/d128_h32kv8_b8_kv4096/fp16", "decode/d128_h32kv8_b8_kv32768/fp16"],
          f"select: {[c.id for c in sel]}")

    # The harness's work model, against hand-computed values: decode B1 kv4096 d128 H32/KV8 (one query, 4096
    # keys); causal q3 kv5 and q4 kv4 (12 + 10 visible pairs); the gated block S64 d_model 64 h 2/1 d64 rope 16.
    path = write(tmp, "work.json", {"group": "w", "defaults": {"dtypes": ["bf16"]}, "shapes": [
        {"name": "dec", "heads": 32, "kv_heads": 8, "head_size": 128, "seqlen_q": 1, "seqlen_k": 4096},
        {"name": "rag", "heads": 2, "kv_heads": 1, "head_size": 4, "seqlens": [[3, 5], [4, 4]]}]})
    gpath = write(tmp, "work_gated.json", {"op": "gated_block", "shapes": [
        {"name": "g", "batch": 1, "seqlen": 64, "d_model": 64, "h_q": 2, "h_kv": 1, "d_head": 64, "rope_dim": 16,
         "dtypes": ["bf16"]}]})
    dec, rag, g = pc.list_cases([], [path, gpath], binary=binary)
    check((dec.flops, dec.bytes) == (4 * 4096 * 32 * 128, 2 * (2 * 32 * 128 + 2 * 4096 * 8 * 128)), f"dec {dec.flops}")
    check((rag.flops, rag.bytes) == (4 * 22 * 2 * 4, 2 * (2 * 7 * 2 * 4 + 2 * 9 * 1 * 4)), f"rag {rag.flops}")
    check(sum(map(sum, pc.causal_mask(3, 5))) + sum(map(sum, pc.causal_mask(4, 4))) == rag.flops / (4 * 2 * 4),
          "the mask agrees with the harness's pair count")
    check((g.flops, g.bytes) == (2 * 64 * 64 * (384 + 128) + 4 * 2080 * 2 * 64,
                                 2 * (64 * 64 + 384 * 64 + 64 * 128 + 2 * 64 * 16 + 2 * 64 + 64 * 64)), f"gated {g.flops}")
    check(g.dims["n_qkvg"] == 384 and g.file == gpath, f"gated dims {g.dims}")
    test_rows_match_harness(binary, tmp, [path, gpath])

    # A peer computes plain 16-bit attention: a case with mixed types or a feature is declined, never timed.
    fpath = write(tmp, "unplain.json", {"group": "u", "defaults": {"dtypes": ["bf16"], "heads": 2, "kv_heads": 1,
                                                                   "head_size": 64, "seqlen_k": 64}, "shapes": [
        {"name": "kv8", "kv_dtype": "e4m3"}, {"name": "cap", "softcap": 30.0}, {"name": "plain"}]})
    kv8, cap, plain = pc.list_cases([], [fpath], binary=binary)
    check("types bf16-e4m3-bf16" in kv8.plain_decline(), f"kv8: {kv8.plain_decline()!r}")
    check("feature 'softcap'" in cap.plain_decline(), f"cap: {cap.plain_decline()!r}")
    check(plain.plain_decline() == "", f"plain: {plain.plain_decline()!r}")

    # The listing carries every feature's values, the qq-bias as its rows: what a features peer computes with.
    spec = [c for c in pc.list_cases(["features"], binary=binary) if c.name.startswith("spec_qq_bias")][0]
    f = spec.features
    check(f.get("qq_bias_len") == 8 and len(f.get("qq_bias", [])) == 8 and all(len(r) == 8 for r in f["qq_bias"]),
          f"qq_bias rows in the listing: {f}")
    check(abs(f["qq_bias"][2][5] - 0.5 * math.sin(1.3 * 2 + 0.7 * 5)) < 1e-3, f"qq_bias[2][5] {f['qq_bias'][2][5]}")


def test_rows_match_harness(binary, tmp, files):
    """Peer rows carry the work and dims of attnbench's own rows (a quick run: only the gated kernel, so attention
    cases are declined rows and the gated ones tiny)."""
    out = os.path.join(tmp, "harness.json")
    args = [binary, "run", "--backend", "cpu", "--kernel", "cpu.gated_block", "--gate-only", "--mode", "eager",
            "--no-progress", "-o", out]
    r = subprocess.run(args + [a for f in files for a in ("--shapes", f)], capture_output=True, text=True)
    check(r.returncode == 0, f"harness run: {r.returncode} {r.stderr}")
    if r.returncode != 0:
        return
    with open(out) as f:
        harness = {(row["shape"], row["dtype"]): row for row in json.load(f)["rows"]}
    for c in pc.list_cases([], files, binary=binary):
        ours, theirs = pc.make_row(c, "torch.sdpa.flash", "eager", "declined"), harness[(c.name, c.dtype)]
        check((ours["flops"], ours["bytes"]) == (theirs["flops"], theirs["bytes"]), f"{c.id}: work {ours['flops']}")
        check(all(ours["dims"].get(k) == v for k, v in theirs["dims"].items()), f"{c.id}: dims {ours['dims']}")


def test_cli(binary, tmp):
    use = ["--attnbench", binary]
    bad = write(tmp, "bad.json", '{"shapes": [{"name": "s1", "heads": 8, "kv_heads": 3, "head_size": 64, "seqlen_k": 10}]}')
    harness = subprocess.run([binary, "list", "--cases", "--json", "--shapes", bad], capture_output=True, text=True)
    message = harness.stderr.strip().replace("attnbench: error: ", "")
    check(harness.returncode == 2 and "field 'kv_heads'" in message, f"harness: {harness.returncode} {harness.stderr}")
    r = peer(use + ["--shapes", bad])
    check(r.returncode == 2 and message in r.stderr, f"bad shape file: {r.returncode} {r.stderr!r} lacks {message!r}")
    twice = write(tmp, "twice.json", '{"shapes": [{"heads": 8, "kv_heads": 2, "head_size": 64, "seqlen_k": 10, '
                                     '"dtypes": ["bf16", "bf16"]}]}')
    r = peer(use + ["--shapes", twice])  # a rule the old Python parser lacked
    check(r.returncode == 2 and "listed twice" in r.stderr, f"duplicate dtype: {r.returncode} {r.stderr}")
    r = peer(use + ["--shapes", "/nonexistent/s.json"])
    check(r.returncode == 2 and "/nonexistent/s.json" in r.stderr, f"missing file: {r.returncode} {r.stderr}")
    r = peer(use + ["--group", "decode", "--dtype", "fp8"])
    check(r.returncode == 2 and "fp8" in r.stderr, f"bad dtype: {r.returncode} {r.stderr}")
    r = peer(use + ["--group", "decode", "--mode", "fast"])
    check(r.returncode == 2 and "--mode" in r.stderr, f"bad mode: {r.returncode} {r.stderr}")
    r = peer(use + ["--group", "gated_397b_bwd", "--dtype", "fp8"])
    check(r.returncode == 2 and "fp8" in r.stderr, f"backward, bad dtype: {r.returncode} {r.stderr}")
    r = peer(["--attnbench", os.path.join(tmp, "no-such-attnbench"), "--group", "decode"])
    check(r.returncode == 2 and "cannot run attnbench" in r.stderr, f"no binary: {r.returncode} {r.stderr}")
    r = peer(["--shapes", bad], env={"ATTNBENCH_BIN": binary})  # the binary from the environment
    check(r.returncode == 2 and message in r.stderr, f"ATTNBENCH_BIN: {r.returncode} {r.stderr}")
    try:
        import torch
        can_run = torch.cuda.is_available()
    except ImportError:
        can_run = False
    if not can_run:  # checks the shapes, then says it cannot run here
        out = os.path.join(tmp, "peer.json")
        r = peer(use + ["--group", "decode", "-o", out])
        check(r.returncode == torch_sdpa.EXIT_CANNOT_RUN and "cannot run here" in r.stderr, f"no torch: {r.stderr}")
        check(not os.path.exists(out), "nothing written without torch")
        r = peer(use + ["--group", "backward", "--group", "gated_397b_bwd", "-o", out])
        check(r.returncode == 3 and "cannot run here" in r.stderr, f"backward, no torch: {r.returncode} {r.stderr}")
        check(not os.path.exists(out), "nothing written for the backward ops without torch")
        r = peer(use + ["--group", "features", "-o", out], script=FLEX_SCRIPT)
        check(r.returncode == 3 and "cannot run here" in r.stderr, f"flex, no torch: {r.returncode} {r.stderr}")
        check(not os.path.exists(out), "nothing written by the flex peer without torch")
        r = peer(use + ["--group", "decode", "-o", out], script=FI_SCRIPT)
        check(r.returncode == fip.EXIT_CANNOT_RUN == 3 and "cannot run here" in r.stderr, f"fi, no torch: {r.stderr}")
        check(not os.path.exists(out), "nothing written by the FlashInfer peer without torch")

    # The FlashInfer peer: bad input is exit 2 before anything is imported; torch with a device but FlashInfer
    # not importable is exit 3, one line naming FlashInfer, nothing written.
    r = peer(use + ["--shapes", bad], script=FLEX_SCRIPT)
    check(r.returncode == 2 and message in r.stderr, f"flex bad shape file: {r.returncode} {r.stderr!r}")
    r = peer(use + ["--shapes", bad], script=FI_SCRIPT)
    check(r.returncode == 2 and message in r.stderr, f"fi bad shape file: {r.returncode} {r.stderr!r}")
    r = peer(use + ["--group", "decode", "--mode", "fast"], script=FI_SCRIPT)
    check(r.returncode == 2 and "--mode" in r.stderr, f"fi bad mode: {r.returncode} {r.stderr}")
    out = os.path.join(tmp, "fi.json")
    path = os.pathsep.join(p for p in (stand_in_torch(tmp), os.environ.get("PYTHONPATH", "")) if p)
    r = peer(use + ["--group", "decode", "-o", out], env={"PYTHONPATH": path}, script=FI_SCRIPT)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 3 and len(lines) == 1 and "FlashInfer is not importable" in lines[0] and
          lines[0].startswith("flashinfer_paged.py: cannot run here:"), f"no FlashInfer: {r.returncode} {r.stderr!r}")
    check(not os.path.exists(out), "nothing written without FlashInfer")


def test_reference_with_torch():
    """Only where torch is importable (CPU is enough): the fp32 reference against a loop over the stdlib mask."""
    try:
        import torch
    except ImportError:
        print("torch not importable: reference check skipped")
        return
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 3, 8, generator=g), torch.randn(1, 2, 5, 8, generator=g),
               torch.randn(1, 2, 5, 8, generator=g))
    out = pc.reference_sdpa(torch, q, k, v, 0.3, True)
    mask = pc.causal_mask(3, 5)
    for h in range(4):
        for i in range(3):
            keys = [j for j in range(5) if mask[i][j]]
            s = torch.stack([(q[0, h, i] * k[0, h // 2, j]).sum() * 0.3 for j in keys])
            expect = (torch.softmax(s, 0)[:, None] * v[0, h // 2, keys]).sum(0)
            check(torch.allclose(out[0, h, i], expect, atol=1e-5), f"reference h{h} i{i}")


def test_feature_reference_with_torch():
    """Only where torch is importable: the features reference against a loop over the plain-Python rule, every
    feature at once (window, softcap, ALiBi, qq-bias, sinks; GQA, q 3 of kv 9)."""
    try:
        import torch
    except ImportError:
        print("torch not importable: features reference check skipped")
        return
    f = {"window_left": 4, "softcap": 1.5, "alibi_slopes": [0.3, -0.2, 0.1, 0.05], "sinks": [0.5, 1.0, -1.0, 2.0],
         "qq_bias_len": 3, "qq_bias": [[0.1, -0.4, 0.3], [0.2, 0.5, -0.6], [0.7, -0.1, 0.0]]}
    c = attention_case([3], [9], heads=4, kv_heads=2, head_size=8, features=f)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 4, 3, 8, generator=g), torch.randn(1, 2, 9, 8, generator=g),
               torch.randn(1, 2, 9, 8, generator=g))
    out = pf.reference(torch, c, q, k, v)
    for h in range(4):
        for i in range(3):
            keys = [j for j in range(9) if pf.visible(c, i, j, 3, 9)]
            s = torch.stack([pf.modded_score(c, (q[0, h, i] * k[0, h // 2, j]).sum() * c.softmax_scale(), h, i, j, 3,
                                             9, torch.tanh) for j in keys])
            w = torch.exp(s - s.max())
            expect = (w[:, None] * v[0, h // 2, keys]).sum(0) / (w.sum() + math.exp(f["sinks"][h] - float(s.max())))
            check(torch.allclose(out[0, h, i], expect, atol=1e-5), f"features reference h{h} i{i}")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else pc.attnbench_binary()
    test_mask_stats_rows()
    test_page_table_and_indptr()
    test_flashinfer_choices()
    test_flashinfer_arguments()
    test_reference_with_torch()
    test_feature_rule()
    test_mask_declines()
    test_feature_reference_with_torch()
    backward.run_unit(sys.modules[__name__])
    if os.access(binary, os.X_OK):
        with tempfile.TemporaryDirectory() as tmp:
            test_cases_from_binary(binary, tmp)
            backward.run_with_binary(binary, tmp)
            test_cli(binary, tmp)
    else:
        check(False, f"no attnbench binary at {binary}: the peers' cases come from it")
    print(f"{len(failures)} failure(s)" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
