#!/usr/bin/env bash
# On a machine with an AMD GPU (MI300X, gfx942; gfx90a runs the same kernels): builds attnbench against the system
# ROCm (ATTNBENCH_ROCM_ROOT, default /opt/rocm; the CUDA backend off) into ${BUILD_DIR:-build-hip}, runs the HIP
# tests (ISA, resource report, emulated kernels), gates and times every attention group on hip.unified in eager
# and graph modes, sweeps HIPDNN_GFX942_FLASH_WIDE=0,1,2 (fp16 prefill: the flash regime), and plots. Everything
# lands in ${OUT:-results}/hip and ${OUT:-results}/hip-report.tgz; the rows that are not ok and a short table come
# last. ATTNBENCH_BIN picks a binary built elsewhere (the build and its tests are then skipped).
#   scripts/device/hip-report.sh [extra `attnbench run` arguments]
set -u
cd "$(dirname "$0")/../.."
build="${BUILD_DIR:-build-hip}"
bin="${ATTNBENCH_BIN:-$build/src/attnbench}"
top="${OUT:-results}"
R="$top/hip"
mkdir -p "$R"
groups="decode short_prefill long_prefill gqa"
step() { echo "== $* ($(date +%T))"; }

if [ -z "${ATTNBENCH_BIN:-}" ]; then
  export ATTNBENCH_ROCM_ROOT="${ATTNBENCH_ROCM_ROOT:-/opt/rocm}"
  step "build against $ATTNBENCH_ROCM_ROOT into $build"
  BUILD_DIR="$build" ATTNBENCH_CUDA=OFF ATTNBENCH_HIP=ON ATTNBENCH_CUDNN=OFF scripts/build.sh > "$R/build.log" 2>&1 ||
    { tail -30 "$R/build.log"; exit 1; }
  grep -E "HIP backend:|hip.unified instances" "$R/build.log"
  step "tests: ISA, resource report, the kernels on the CPU emulator"
  ctest --test-dir "$build" -L hip --output-on-failure > "$R/tests.log" 2>&1
  echo "rc=$? $(grep -E 'tests passed' "$R/tests.log")"
  ctest --test-dir "$build" -R '^Hip(Emulated|Layouts|Heuristics)\.' --output-on-failure >> "$R/tests.log" 2>&1
  echo "rc=$? $(grep -E 'tests passed' "$R/tests.log" | tail -1)"
fi

step info
timeout 120 "$bin" info > "$R/info.txt" 2>&1
cat "$R/info.txt"

for g in $groups; do
  step "run $g (gate, eager + graph)"
  timeout 600 "$bin" run --group "$g" --backend hip --mode eager,graph --no-progress -o "$R/run_$g.json" "$@" \
    > "$R/run_$g.log" 2>&1
  echo "rc=$? $(grep -E '^rows:' "$R/run_$g.log")"
done

step "sweep HIPDNN_GFX942_FLASH_WIDE=0,1,2 (fp16 prefill)"
timeout 900 "$bin" sweep --group short_prefill --group long_prefill --group gqa --backend hip --dtype fp16 \
  --knob HIPDNN_GFX942_FLASH_WIDE=0,1,2 --no-progress -o "$R/sweep_flash_wide.json" > "$R/sweep_flash_wide.log" 2>&1
echo "rc=$? $(grep -E '^rows:' "$R/sweep_flash_wide.log")"

step plots
python3 reports/plot.py "$R"/run_*.json "$R/sweep_flash_wide.json" -o "$R/plots" > "$R/plots.log" 2>&1
tail -1 "$R/plots.log"
tar czf "$top/hip-report.tgz" -C "$R" .

step "rows that are not ok"
grep -hE ' (mismatch|error|declined) ' "$R"/run_*.log | cut -c1-200 | sort | uniq -c | sort -rn | head -20
step "summary (median us, TFLOP/s, GB/s)"
for g in $groups; do
  grep -E ' ok ' "$R/run_$g.log" | awk '{printf "%-13s %-34s %-5s %-13s %-6s %10s %8s %8s\n",$1,$2,$3,$4,$5,$8,$9,$10}'
done
tail -15 "$R/sweep_flash_wide.log"
echo "report: $top/hip-report.tgz"
