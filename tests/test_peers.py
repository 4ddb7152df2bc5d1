#!/usr/bin/env python3
"""The torch peer's pure-python parts: the shape parser (same schema and rules as attnbench), the FLOP/byte
model, the bottom-right mask, the statistics and the row schema, against hand-computed values. The torch parts
run only where torch is importable. Usage: test_peers.py [ATTNBENCH_BINARY] (cross-checks the shape names)."""
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
import torch_sdpa  # noqa: E402  (importable without torch)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def expect_error(text, fragments, tmp):
    path = os.path.join(tmp, "bad.json")
    with open(path, "w") as f:
        f.write(text)
    try:
        pc.load_shape_file(path)
    except pc.ShapeError as e:
        msg = str(e)
        for frag in [path] + fragments:
            check(frag in msg, f"error for {text!r} lacks {frag!r}: {msg}")
        return
    check(False, f"no error for {text!r}")


def test_parser(tmp):
    decode = pc.load_group("decode")
    check(len(decode) == 20, f"decode: 10 shapes x 2 dtypes, got {len(decode)}")
    c = decode[0]
    check((c.name, c.dtype, c.q_lens, c.kv_lens, c.heads, c.kv_heads, c.head_size, c.block_size, c.causal) ==
          ("d128_h32kv8_b1_kv4096", "bf16", [1], [4096], 32, 8, 128, 64, True), f"decode[0]: {vars(c)}")
    ragged = [c for c in decode if c.name == "d128_h32kv8_ragged"][0]
    check(ragged.q_lens == [1, 1, 1, 1] and ragged.kv_lens == [523, 37, 2011, 1328], f"ragged: {vars(ragged)}")
    chunked = [c for c in pc.load_group("gqa") if c.name == "d128_h32kv8_chunked_q512_kv4096"][0]
    check(chunked.q_lens == [512] * 8 and chunked.kv_lens == [4096] * 8, f"chunked: {vars(chunked)}")
    gated = pc.load_group("gated_397b")
    check(len(gated) == 7 and all(g.op == "gated_block" and g.dtype == "bf16" for g in gated), "gated_397b: 7 bf16 cases")
    check((gated[0].d_model, gated[0].h_q, gated[0].h_kv, gated[0].d_head, gated[0].rope_dim, gated[0].seqlen) ==
          (5120, 32, 2, 256, 64, 2048), f"gated[0]: {vars(gated[0])}")
    check(not [g for g in gated if g.name == "s2048_full"][0].causal, "s2048_full is not causal")
    sel = pc.select_cases(["decode"], [], ["fp16"], "b8_")
    check([c.id for c in sel] == ["decode/d128_h32kv8_b8_kv4096/fp16", "decode/d128_h32kv8_b8_kv32768/fp16"],
          f"select: {[c.id for c in sel]}")

    # Defaults merge like attnbench's: a shape's seqlens replaces the default batch/seqlen_k, and vice versa.
    path = os.path.join(tmp, "merge.json")
    with open(path, "w") as f:
        json.dump({"defaults": {"heads": 4, "kv_heads": 2, "head_size": 64, "batch": 3, "seqlen_k": 10, "dtypes": ["half"]},
                   "shapes": [{"seqlens": [[2, 5], [1, 7]]}, {"seqlen_q": 4}]}, f)
    a, b = pc.load_shape_file(path)
    check(a.q_lens == [2, 1] and a.kv_lens == [5, 7] and a.dtype == "fp16", f"merge a: {vars(a)}")
    check(b.q_lens == [4] * 3 and b.kv_lens == [10] * 3, f"merge b: {vars(b)}")
    check(a.group == "merge" and a.name == "d64_h4kv2_b2_q2_kv7" and b.name == "d64_h4kv2_b3_q4_kv10",
          f"auto names: {a.name}, {b.name}")

    base = '"heads": 8, "kv_heads": 2, "head_size": 64'
    expect_error('{"shapes": [{"name": "s1", "heads": 8, "kv_heads": 3, "head_size": 64, "seqlen_k": 10}]}',
                 ["shape #0 's1'", "field 'kv_heads'", "not a multiple"], tmp)
    expect_error('{"shapes": [{%s, "seqlen_k": 10, "colour": 1}]}' % base, ["field 'colour'", "unknown field"], tmp)
    expect_error('{"shapes": [{%s, "seqlen_k": 10, "seqlen_q": 11}]}' % base, ["field 'seqlen_q'", "11 > seqlen_k 10"], tmp)
    expect_error('{"shapes": [{%s, "seqlen_k": 10.0}]}' % base, ["field 'seqlen_k'", "expected an integer"], tmp)
    expect_error('{"shapes": [{%s, "seqlen_k": true}]}' % base, ["field 'seqlen_k'", "expected an integer"], tmp)
    expect_error('{"shapes": [{%s, "seqlen_k": 0}]}' % base, ["must be >= 1"], tmp)
    expect_error('{"shapes": [{%s, "seqlen_k": 8, "dtypes": ["fp8"]}]}' % base, ["field 'dtypes'", "fp8"], tmp)
    expect_error('{"shapes": [{%s, "seqlens": [[3, 2]]}]}' % base, ["field 'seqlens'", "seqlen_q > seqlen_k"], tmp)
    expect_error('{"shapes": [{"name": "x", %s, "seqlen_k": 8}, {"name": "x", %s, "seqlen_k": 9}]}' % (base, base),
                 ["shape #1 'x'", "duplicate shape name"], tmp)
    expect_error('{"defaults": {"name": "x"}, "shapes": [{%s, "seqlen_k": 8}]}' % base, ["field 'defaults'"], tmp)
    expect_error('{"shapes": []}', ["field 'shapes'"], tmp)
    expect_error('{"op": "gated_block", "shapes": [{"seqlen": 8, "d_model": 64, "h_q": 4, "h_kv": 2, "d_head": 16, '
                 '"rope_dim": 5}]}', ["field 'rope_dim'", "must be even"], tmp)
    expect_error('{"shapes": [', ["malformed JSON"], tmp)


def test_work_model():
    # Decode, B1 kv4096, d128 H32/KV8: one query sees 4096 keys.
    flops, nbytes = pc.attention_work([1], [4096], 32, 8, 128, True)
    check(flops == 4 * 4096 * 32 * 128 == 67_108_864, f"decode flops {flops}")
    check(nbytes == 2 * (2 * 1 * 32 * 128 + 2 * 4096 * 8 * 128) == 16_793_600, f"decode bytes {nbytes}")
    # Causal q=3, kv=5 (bottom-right): rows see 3, 4, 5 keys = 12 pairs; non-causal 15; square q=kv=4: 10.
    check(pc.visible_pairs(3, 5, True) == 12 and pc.visible_pairs(3, 5, False) == 15, "pairs 3x5")
    check(pc.visible_pairs(4, 4, True) == 10 and pc.visible_pairs(1, 9, True) == 9, "pairs square / decode")
    flops, nbytes = pc.attention_work([3, 4], [5, 4], 2, 1, 4, True)
    check(flops == 4 * (12 + 10) * 2 * 4 == 704, f"ragged flops {flops}")
    check(nbytes == 2 * (2 * 7 * 2 * 4 + 2 * 9 * 1 * 4) == 368, f"ragged bytes {nbytes}")
    # Gated block B1 S4 d_model 8, h 2/1, d 4, rope 2, qk_norm, causal: t=4, N=(4+2)*4=24, attn width 8.
    g = pc.Case(op="gated_block", batch=1, seqlen=4, d_model=8, h_q=2, h_kv=1, d_head=4, rope_dim=2, qk_norm=True,
                causal=True)
    flops, nbytes = pc.gated_work(g)
    check(flops == 2 * 4 * 8 * (24 + 8) + 4 * 10 * 2 * 4 == 2368, f"gated flops {flops}")
    check(nbytes == 2 * (32 + 24 * 8 + 8 * 8 + 2 * 4 * 2 + 2 * 4 + 32) == 688, f"gated bytes {nbytes}")


def test_mask_stats_rows():
    T, F = True, False
    check(pc.causal_mask(3, 5) == [[T, T, T, F, F], [T, T, T, T, F], [T, T, T, T, T]], "mask 3x5")
    check(pc.causal_mask(1, 4) == [[T, T, T, T]], "decode mask sees every key")
    check(pc.causal_mask(2, 2) == [[T, F], [T, T]], "square mask is the lower triangle")
    check(sum(map(sum, pc.causal_mask(7, 19))) == pc.visible_pairs(7, 19, True), "mask agrees with the pair count")
    s = pc.summarize([5, 1, 3, 2, 4])
    check((s["median"], s["min"], s["q1"], s["q3"], s["mean"], s["n"]) == (3, 1, 2, 4, 3, 5), f"stats {s}")
    check(abs(s["stdev"] - math.sqrt(2.5)) < 1e-12, "sample stdev")
    check(pc.summarize([2, 4])["q1"] == 2.5, "interpolated quartile")
    c = pc.load_group("decode")[0]
    row = pc.make_row(c, "torch.sdpa.flash", "graph", "ok", time_us=pc.summarize([10.0, 10.0]), peaks=(1000.0, None))
    check(abs(row["tflops"] - 67_108_864 / 10e-6 * 1e-12) < 1e-9 and abs(row["pct_peak_flops"] - row["tflops"] / 10) < 1e-9,
          f"rates {row['tflops']} {row['pct_peak_flops']}")
    with open(os.path.join(ROOT, "tests", "data", "sample_results.json")) as f:
        attnbench_row = json.load(f)["rows"][0]
    check(set(row) == set(attnbench_row), f"row fields differ from attnbench's: {set(row) ^ set(attnbench_row)}")
    check(row["dims"]["max_seqlen_q"] == 1 and row["dims"]["heads"] == 32, f"dims {row['dims']}")


def test_cli(tmp):
    script = os.path.join(ROOT, "scripts", "peers", "torch_sdpa.py")
    r = subprocess.run([sys.executable, script, "--shapes", "/nonexistent/s.json"], capture_output=True, text=True)
    check(r.returncode == 2 and "/nonexistent/s.json" in r.stderr, f"bad shapes: {r.returncode} {r.stderr}")
    r = subprocess.run([sys.executable, script, "--group", "decode", "--mode", "fast"], capture_output=True, text=True)
    check(r.returncode == 2 and "--mode" in r.stderr, f"bad mode: {r.returncode} {r.stderr}")
    try:
        import torch
        can_run = torch.cuda.is_available()
    except ImportError:
        can_run = False
    if not can_run:  # parses the shapes, then says it cannot run here
        out = os.path.join(tmp, "peer.json")
        r = subprocess.run([sys.executable, script, "--group", "decode", "-o", out], capture_output=True, text=True)
        check(r.returncode == torch_sdpa.EXIT_CANNOT_RUN and "cannot run here" in r.stderr, f"no torch: {r.stderr}")
        check(not os.path.exists(out), "nothing written without torch")


def test_reference_with_torch():
    """Only where torch is importable (CPU is enough): the fp32 reference against a loop over the stdlib mask."""
    try:
        import torch
    except ImportError:
        print("torch not importable: reference check skipped")
        return
    peer = torch_sdpa.TorchPeer.__new__(torch_sdpa.TorchPeer)
    peer.torch = torch
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 3, 8, generator=g), torch.randn(1, 2, 5, 8, generator=g),
               torch.randn(1, 2, 5, 8, generator=g))
    out = peer.reference_sdpa(q, k, v, 0.3, True)
    mask = pc.causal_mask(3, 5)
    for h in range(4):
        for i in range(3):
            keys = [j for j in range(5) if mask[i][j]]
            s = torch.stack([(q[0, h, i] * k[0, h // 2, j]).sum() * 0.3 for j in keys])
            expect = (torch.softmax(s, 0)[:, None] * v[0, h // 2, keys]).sum(0)
            check(torch.allclose(out[0, h, i], expect, atol=1e-5), f"reference h{h} i{i}")


def test_against_binary(binary):
    """The peer's parser and attnbench's agree on every shipped group's shape names."""
    for group in sorted(os.path.splitext(f)[0] for f in os.listdir(pc.shapes_dir()) if f.endswith(".json")):
        r = subprocess.run([binary, "list", "--shapes", "--group", group], capture_output=True, text=True,
                           env=dict(os.environ))
        names = [line.split()[0] for line in r.stdout.splitlines()[1:] if line.startswith("  ")]
        ours = list(dict.fromkeys(c.name for c in pc.load_group(group)))
        check(r.returncode == 0 and names == ours, f"{group}: attnbench {names} vs peer {ours}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_parser(tmp)
        test_work_model()
        test_mask_stats_rows()
        test_cli(tmp)
    test_reference_with_torch()
    if len(sys.argv) > 1 and os.path.exists(sys.argv[1]):
        test_against_binary(sys.argv[1])
    print(f"{len(failures)} failure(s)" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
