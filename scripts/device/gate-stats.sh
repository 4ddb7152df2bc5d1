#!/usr/bin/env bash
# On a GPU machine: the gate's error distributions of every correct CUDA kernel path (README, "The gate").
# Gates (no timing) every shipped group and the seeded random shapes under each path's knobs and both block orders,
# then prints scripts/gate/stats.py's table. Part "sdpa" runs cuda.unified, "block" the gated block and the GPU tests.
#   scripts/device/gate-stats.sh sdpa|block      (ATTNBENCH_BIN, ATTNBENCH_GPU_TESTS pick binaries built elsewhere)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
bin=${ATTNBENCH_BIN:-build/src/attnbench}
tests=${ATTNBENCH_GPU_TESTS:-build/tests/gpu/attnbench_gpu_tests}
out=${GATE_OUT:-results/gate}
mkdir -p "$out"
prefill=(--group short_prefill --group long_prefill --group gqa)

gate() {  # NAME ARGS...: one gate-only run, its last summary line
  local name=$1 t0=$SECONDS
  shift
  "$bin" run --gate-only --backend cuda --mode eager --no-progress -o "$out/$name.json" "$@" > "$out/$name.log" 2>&1
  echo "$name (exit $?, $((SECONDS - t0)) s): $(grep '^rows:' "$out/$name.log")"
}

case "${1:-}" in
  sdpa)
    gate auto --group decode "${prefill[@]}"
    gate auto_shuffled --group decode "${prefill[@]}" --block-order shuffled
    gate narrow "${prefill[@]}" --set ATTNBENCH_SM90_PATH=narrow --block-order shuffled
    gate wide --group short_prefill --group gqa --set ATTNBENCH_SM90_PATH=wide
    gate splits1 --group decode --set ATTNBENCH_3D_SPLITS=1 --block-order shuffled
    gate random --shapes tests/data/gate_random.json --block-order shuffled
    gate random_narrow --shapes tests/data/gate_random.json --set ATTNBENCH_SM90_PATH=narrow
    ;;
  block)
    gate gated --group gated_397b
    gate gated_fused --group gated_397b --set ATTNBENCH_GATED_FUSE_NORM_ROPE=1
    gate gated_unfused --group gated_397b --set ATTNBENCH_GATED_FUSE_GATE=0
    t0=$SECONDS
    "$tests" --gtest_brief=1 > "$out/gpu_tests.log" 2>&1
    echo "gpu tests (exit $?, $((SECONDS - t0)) s): $(grep -E 'PASSED|FAILED' "$out/gpu_tests.log" | tail -3 | tr '\n' ' ')"
    ;;
  *) echo "usage: $0 sdpa|block" >&2; exit 2 ;;
esac
python3 scripts/gate/stats.py "$out"/*.json | tee "$out/stats.md"
