#!/usr/bin/env bash
# On a GPU machine: the gate on the GPU reference. The GPU tests (the GPU reference against Eigen, the local planted
# defects through `run`, every kernel path under the bounds), then every shipped group gated with every kernel
# (--gate-only, in-process); prints the tests' verdicts, and scripts/gate/coverage.py's table (rows checked, the
# reference's place and share of each run's wall time, the worst passing row per kernel and dtype) last.
#   scripts/device/gate-coverage.sh tests|groups   (BUILD: the build folder holding the binaries, default build;
#   GATE_GROUPS: the groups, default every shipped one; GROUP_TIMEOUT: seconds per group, default 300)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build=${BUILD:-build}
out=${OUT:-results}/coverage
mkdir -p "$out"
cudnn_lib=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${cudnn_lib:+$cudnn_lib:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
tests() {  # NAME BINARY FILTER: one GPU test binary, its verdict lines
  local t0=$SECONDS
  timeout 300 "$2" --gtest_brief=1 --gtest_filter="$3" > "$out/$1.log" 2>&1
  echo "$1 (exit $?, $((SECONDS - t0)) s): $(grep -E '^\[  (PASSED|FAILED) ' "$out/$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$out/$1.log" | head -10
}
case "${1:-}" in
  tests)
    tests gpu_tests "$build/tests/gpu/attnbench_gpu_tests" '*'
    tests local_faults "$build/tests/gpu/attnbench_gpu_fault_tests" 'CudaLocalFaults.*'
    tests cudnn_tests "$build/tests/gpu/attnbench_cudnn_gpu_tests" '*'
    echo "GPU reference against Eigen ($(grep -c ' row_rel .* lse ' "$out/gpu_tests.log") comparisons), the largest:"
    awk '/ row_rel .* lse /{for(i=1;i<=NF;i++){if($i=="row_rel")r=$(i+1);if($i=="lse")l=$(i+1)}
         if(r+0>=mr){mr=r+0;wr=$0} if(l+0>=ml){ml=l+0;wl=$0}} END{print "  " wr; print "  " wl}' "$out/gpu_tests.log"
    ;;
  groups)
    groups=${GATE_GROUPS:-$("$build/src/attnbench" list --groups | tail -n +2)}
    for g in $groups; do
      t0=$SECONDS
      timeout "${GROUP_TIMEOUT:-300}" "$build/src/attnbench" run --group "$g" --gate-only --isolate off --no-progress -o "$out/$g.json" \
        > "$out/$g.log" 2>&1
      echo "$g: exit $?, $((SECONDS - t0)) s; $(grep -E '^reference:' "$out/$g.log")"
      grep -E ' (mismatch|error) ' "$out/$g.log" | cut -c1-220 | head -5
    done
    python3 scripts/gate/coverage.py "$out"/*.json
    ;;
  *) echo "usage: $0 tests|groups" >&2; exit 2 ;;
esac
