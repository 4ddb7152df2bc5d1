#!/usr/bin/env bash
# make-rocm-root.sh DIR CLANG
# Builds the small "ROCm root" that clang (--rocm-path=DIR) and CMake's HIP language need, from Debian's HIP
# packages (libamdhip64-dev, rocm-device-libs), for a machine without a ROCm install. A real ROCm install is used
# as it is (cmake/hip.cmake). Why the root is needed:
#  - Debian's device libraries stop at oclc_isa_version_940.bc: clang refuses gfx942 without a 942 one;
#  - they live in <lib>/amdgcn/bitcode, where clang does not look;
#  - CMake's enable_language(HIP) loads <root>/lib/cmake/hip-lang, and Debian's copy adds -isystem /usr/include,
#    which breaks libstdc++'s #include_next <math.h> in CMake's HIP ABI probe.
set -euo pipefail
DIR=${1:?usage: make-rocm-root.sh DIR CLANG}
CLANG=${2:?usage: make-rocm-root.sh DIR CLANG}
BC=""
for d in /usr/lib/x86_64-linux-gnu/amdgcn/bitcode /usr/lib/amdgcn/bitcode; do
  [ -f "$d/ockl.bc" ] && BC=$d && break
done
[ -n "$BC" ] || { echo "make-rocm-root: no ROCm device libraries (install rocm-device-libs)" >&2; exit 1; }
[ -f /usr/include/hip/hip_runtime.h ] ||
  { echo "make-rocm-root: no HIP headers (install libamdhip64-dev)" >&2; exit 1; }
tmp="$DIR.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/amdgcn/bitcode" "$tmp/share" "$tmp/lib/cmake/hip-lang"
ln -s /usr/include "$tmp/include"          # hip/ and hsa/ headers
ln -s /usr/share/hip "$tmp/share/hip"      # share/hip/version: clang reports the HIP version from it
ln -s "$BC"/*.bc "$tmp/amdgcn/bitcode/"
# oclc_isa_version_94{1,2}.bc hold one constant, __oclc_ISA_version (9402 for gfx942), in the target's layout.
layout=$("$CLANG" --target=amdgcn-amd-amdhsa -mcpu=gfx942 -nogpulib -S -emit-llvm -x c /dev/null -o - |
         sed -n 's/^target datalayout = "\(.*\)"/\1/p')
[ -n "$layout" ] || { echo "make-rocm-root: $CLANG does not know gfx942" >&2; exit 1; }
for v in 941 942; do
  ll="$tmp/isa_$v.ll"
  {
    printf 'target datalayout = "%s"\ntarget triple = "amdgcn-amd-amdhsa"\n' "$layout"
    printf '@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 %s, align 4\n' \
      "${v:0:2}0${v:2:1}"
  } > "$ll"
  "$CLANG" --target=amdgcn-amd-amdhsa -nogpulib -c -emit-llvm "$ll" -o "$tmp/amdgcn/bitcode/oclc_isa_version_$v.bc"
  rm -f "$ll"
done
cp "$(dirname "$0")/hip-lang-config.cmake" "$tmp/lib/cmake/hip-lang/hip-lang-config.cmake"
rm -rf "$DIR"
mv "$tmp" "$DIR"
echo "ROCm root for $CLANG: $DIR"
