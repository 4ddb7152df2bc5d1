#!/usr/bin/env python3
"""The hip.unified code objects carry the MFMA instructions of their regime, for every gfx target built.

usage: check_isa.py [--swap-dtypes] LLVM_OBJCOPY OFFLOAD_BUNDLER LLVM_OBJDUMP TARGETS(,-list) OBJECT...

Each object's .hip_fatbin is unbundled per target and disassembled; per kernel function (demangled names):
flash_kernel<fp16> must hold the 32x32x8 f16 MFMA, narrow_kernel and decode_kernel the 16x16x16 MFMA of their
dtype, combine_kernel none. Every regime's kernels must be found (so that nothing passes by finding nothing).
--swap-dtypes reads fp16 kernels as bf16 and back: the check must then find every MFMA kernel wrong, and exits 0
only if it does (the check's own test).
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The mnemonics per target: gfx942 spells them with an underscore before the type, gfx90a without (and bf16 _1k).
MNEMONICS = {
    "gfx942": {"32x32x8/fp16": "v_mfma_f32_32x32x8_f16", "32x32x8/bf16": "v_mfma_f32_32x32x8_bf16",
               "16x16x16/fp16": "v_mfma_f32_16x16x16_f16", "16x16x16/bf16": "v_mfma_f32_16x16x16_bf16"},
    "gfx90a": {"32x32x8/fp16": "v_mfma_f32_32x32x8f16", "32x32x8/bf16": "v_mfma_f32_32x32x8bf16_1k",
               "16x16x16/fp16": "v_mfma_f32_16x16x16f16", "16x16x16/bf16": "v_mfma_f32_16x16x16bf16_1k"},
}
DTYPES = {"0": "fp16", "1": "bf16"}  # attnbench::DType's values
KERNEL = re.compile(r"^[0-9a-f]+ <void attnbench::hip::(\w+)_kernel<\(attnbench::DType\)(\d), (\d+)(?:, (\d+))?>")
# Expected kernels per target: flash 6, narrow 4, decode 4, combine 4.
EXPECTED = {"flash": 6, "narrow": 4, "decode": 4, "combine": 4}


def functions(disassembly):
    """(regime, dtype, head_size, waves) -> the set of mnemonics in its body."""
    out, current = {}, None
    for line in disassembly.splitlines():
        m = KERNEL.match(line)
        if m:
            current = (m.group(1), DTYPES[m.group(2)], m.group(3), m.group(4))
            out[current] = set()
        elif re.match(r"^[0-9a-f]+ <", line):
            current = None
        elif current and line.strip():
            out[current].add(line.split()[0])
    return out


def wanted(kernel, target):
    regime, dtype = kernel[0], kernel[1]
    if regime == "flash":
        return MNEMONICS[target]["32x32x8/" + dtype]
    if regime in ("narrow", "decode"):
        return MNEMONICS[target]["16x16x16/" + dtype]
    return None


def main():
    args = sys.argv[1:]
    swapped = bool(args) and args[0] == "--swap-dtypes"
    if swapped:
        DTYPES.update({"0": "bf16", "1": "fp16"})
        args = args[1:]
    objcopy, bundler, objdump, targets = args[:4]
    objects = args[4:]
    failures, found = [], {t: {} for t in targets.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        for i, obj in enumerate(objects):
            fatbin = Path(tmp) / f"{i}.fatbin"
            subprocess.run([objcopy, f"--dump-section=.hip_fatbin={fatbin}", obj, "/dev/null"], check=True)
            for target in found:
                co = Path(tmp) / f"{i}.{target}.co"
                subprocess.run([bundler, "--unbundle", "--type=o", f"--input={fatbin}",
                                f"--targets=hipv4-amdgcn-amd-amdhsa--{target}", f"--output={co}"], check=True)
                dis = subprocess.run([objdump, "-d", "-C", f"--mcpu={target}", str(co)], check=True,
                                     capture_output=True, text=True).stdout
                found[target].update(functions(dis))
    for target, kernels in found.items():
        for kernel, mnemonics in sorted(kernels.items(), key=str):
            mfma = sorted(m for m in mnemonics if m.startswith("v_mfma"))
            want = wanted(kernel, target)
            if want is None and mfma:
                failures.append(f"{target} {kernel}: no MFMA expected, found {mfma}")
            elif want is not None and want not in mnemonics:
                failures.append(f"{target} {kernel}: lacks {want} (MFMA found: {mfma})")
            else:
                print(f"ok {target} {kernel[0]} {kernel[1]} d{kernel[2]}" + (f" w{kernel[3]}" if kernel[3] else "") +
                      f": {', '.join(mfma) or 'no MFMA'}")
        for regime, n in EXPECTED.items():
            got = sum(1 for k in kernels if k[0] == regime)
            if got != n:
                failures.append(f"{target}: {got} {regime} kernels, expected {n}")
    for f in failures:
        print("FAIL:", f)
    if swapped:  # every MFMA kernel (14 per target) must have been caught, and nothing else gone wrong
        lacks = [f for f in failures if " lacks " in f]
        ok = len(lacks) == 14 * len(found) and len(lacks) == len(failures)
        print(f"--swap-dtypes: {len(lacks)} kernels caught with the wrong MFMA expected:", "ok" if ok else "NOT ALL")
        return 0 if ok else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
