#!/usr/bin/env python3
"""The torch peer's pure-python parts (the bottom-right mask, the statistics, the row schema) against hand-computed
values, and its cases: taken from `attnbench list --cases --json`, so bad input is the harness's exit-2 error and
the dims and declared work are the harness's. The torch parts run only where torch is importable.
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
import torch_sdpa  # noqa: E402  (importable without torch)

SCRIPT = os.path.join(ROOT, "scripts", "peers", "torch_sdpa.py")
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


def peer(args, env=None):
    return subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def test_mask_stats_rows():
    T, F = True, False
    check(pc.causal_mask(3, 5) == [[T, T, T, F, F], [T, T, T, T, F], [T, T, T, T, T]], "mask 3x5")
    check(pc.causal_mask(1, 4) == [[T, T, T, T]], "decode mask sees every key")
    check(pc.causal_mask(2, 2) == [[T, F], [T, T]], "square mask is the lower triangle")
    s = pc.summarize([5, 1, 3, 2, 4])
    check((s["median"], s["min"], s["q1"], s["q3"], s["mean"], s["n"]) == (3, 1, 2, 4, 3, 5), f"stats {s}")
    check(abs(s["stdev"] - math.sqrt(2.5)) < 1e-12, "sample stdev")
    check(pc.summarize([2, 4])["q1"] == 2.5, "interpolated quartile")
    c = pc.Case({"group": "g", "shape": "s", "file": "f.json", "op": "attention", "dtype": "bf16",
                 "types": {"q": "bf16", "kv": "bf16", "o": "bf16", "acc": "fp32"}, "features": {},
                 "dims": {"heads": 32, "seqlens": [[1, 4096]], "max_seqlen_q": 1, "scale": 0.25},
                 "work": {"flops": 67_108_864.0, "bytes": 16_793_600.0}})
    check(c.id == "g/s/bf16" and c.q_lens == [1] and c.kv_lens == [4096] and c.heads == 32 and c.softmax_scale() == 0.25,
          f"case from a listing entry: {vars(c)}")
    row = pc.make_row(c, "torch.sdpa.flash", "graph", "ok", time_us=pc.summarize([10.0, 10.0]), peaks=(1000.0, None))
    check(abs(row["tflops"] - 67_108_864 / 10e-6 * 1e-12) < 1e-9 and abs(row["pct_peak_flops"] - row["tflops"] / 10) < 1e-9,
          f"rates {row['tflops']} {row['pct_peak_flops']}")
    with open(os.path.join(ROOT, "tests", "data", "sample_results.json")) as f:
        attnbench_row = json.load(f)["rows"][0]
    check(set(row) == set(attnbench_row), f"row fields differ from attnbench's: {set(row) ^ set(attnbench_row)}")
    check(row["dims"]["max_seqlen_q"] == 1 and row["dims"]["heads"] == 32, f"dims {row['dims']}")


def test_cases_from_binary(binary, tmp):
    decode = pc.list_cases(["decode"], binary=binary)
    check(len(decode) == 20, f"decode: 10 shapes x 2 dtypes, got {len(decode)}")
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
    sel = pc.list_cases(["decode"], [], ["fp16"], "b8_", binary=binary)
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


def test_reference_with_torch():
    """Only where torch is importable (CPU is enough): the fp32 reference against a loop over the stdlib mask."""
    try:
        import torch
    except ImportError:
        print("torch not importable: reference check skipped")
        return
    peer_obj = torch_sdpa.TorchPeer.__new__(torch_sdpa.TorchPeer)
    peer_obj.torch = torch
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 3, 8, generator=g), torch.randn(1, 2, 5, 8, generator=g),
               torch.randn(1, 2, 5, 8, generator=g))
    out = peer_obj.reference_sdpa(q, k, v, 0.3, True)
    mask = pc.causal_mask(3, 5)
    for h in range(4):
        for i in range(3):
            keys = [j for j in range(5) if mask[i][j]]
            s = torch.stack([(q[0, h, i] * k[0, h // 2, j]).sum() * 0.3 for j in keys])
            expect = (torch.softmax(s, 0)[:, None] * v[0, h // 2, keys]).sum(0)
            check(torch.allclose(out[0, h, i], expect, atol=1e-5), f"reference h{h} i{i}")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else pc.attnbench_binary()
    test_mask_stats_rows()
    test_reference_with_torch()
    if os.access(binary, os.X_OK):
        with tempfile.TemporaryDirectory() as tmp:
            test_cases_from_binary(binary, tmp)
            test_cli(binary, tmp)
    else:
        check(False, f"no attnbench binary at {binary}: the peers' cases come from it")
    print(f"{len(failures)} failure(s)" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
