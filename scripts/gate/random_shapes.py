#!/usr/bin/env python3
"""Writes a shape file of seeded random attention shapes for measuring the gate's error distributions.

Head sizes 64/128/256, GQA groups 1..16, block sizes 16..128, causal and not, ragged batches mixing decode,
speculative, chunked and full prefill, KV lengths up to 131072. Usage: random_shapes.py [--seed N] [-n COUNT] -o FILE
"""
import argparse
import json
import random


def shape(rng, i):
    d = rng.choice([64, 128, 256])
    kv_heads = rng.choice([1, 2, 4, 8])
    group = rng.choice([1, 2, 4, 7, 8, 16])
    heads = kv_heads * group
    while heads * d > 8192:  # keep one token's Q under 16 KB
        heads //= 2
        kv_heads = max(1, min(kv_heads, heads))
        heads = kv_heads * max(1, heads // kv_heads)
    seqs = []
    budget = 1 << 21  # q * kv pairs per shape, so the run stays short
    for _ in range(rng.randint(1, 6)):
        kv = int(2 ** rng.uniform(4, 17))
        kind = rng.choice(["decode", "spec", "chunk", "full"])
        q = {"decode": 1, "spec": rng.randint(2, 8), "chunk": min(kv, rng.randint(16, 512)), "full": kv}[kind]
        if q * kv > budget:
            q = max(1, budget // kv)
        seqs.append([q, kv])
        budget -= q * kv
        if budget <= 0:
            break
    return {"name": f"r{i:02d}_d{d}_h{heads}kv{kv_heads}", "head_size": d, "heads": heads, "kv_heads": kv_heads,
            "block_size": rng.choice([16, 32, 64, 64, 128]), "causal": rng.random() < 0.8, "seqlens": seqs}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("-o", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    doc = {"group": "gate_random", "op": "attention",
           "description": f"seeded random shapes (random_shapes.py --seed {a.seed} -n {a.n}) for the gate's error distributions",
           "defaults": {"dtypes": ["bf16", "fp16"]}, "shapes": [shape(rng, i) for i in range(a.n)]}
    with open(a.o, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
