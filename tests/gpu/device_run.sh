#!/usr/bin/env bash
# On a GPU machine (kernels/NOTES.md): gate tests, compute-sanitizer memcheck on small cases, then the bench.
# Run from the repository root:
#   BIN=build/tests/gpu bash tests/gpu/device_run.sh [bench-filter]
# BIN (default build/tests/gpu), SAN_FILTER (gtest filter for memcheck), TEST_FILTER, TEST_S / SAN_S / BENCH_S
# (timeouts); logs land in ${OUT:-results/device}.
set -u
OUT=$(realpath -m "${OUT:-results/device}"); mkdir -p "$OUT"
cd "${BIN:-build/tests/gpu}" && export LD_LIBRARY_PATH=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
if command -v cuobjdump > /dev/null; then
  cuobjdump --dump-sass ./attnbench_gpu_tests > "$OUT/sass.txt" 2>/dev/null
  echo "SASS: $(grep -c HGMMA "$OUT/sass.txt") HGMMA, $(grep -cE '\b(LDL|STL)\b' "$OUT/sass.txt") LDL/STL lines"
fi
T0=$(date +%s)
timeout ${TEST_S:-120} ./attnbench_gpu_tests --gtest_brief=1 --gtest_filter="${TEST_FILTER:-*}" > "$OUT/tests.log" 2>&1
echo "gate tests rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$OUT/tests.log" | head -20
awk '/max_abs=/{split($NF,a,"=");if(a[2]+0>m)m=a[2]+0}END{print "worst max_abs", m}' "$OUT/tests.log"
awk '/ wide /&&/max_abs=/{split($NF,a,"=");if(a[2]+0>m)m=a[2]+0;n++}END{print "wide rows", n, "worst max_abs", m}' "$OUT/tests.log"
T1=$(date +%s)
timeout ${SAN_S:-60} compute-sanitizer --tool memcheck --print-limit 5 ./attnbench_gpu_tests --gtest_brief=1 \
  --gtest_filter="${SAN_FILTER:-Layouts/GateAndStrides.*/s0_bf16:Layouts/GateAndStrides.*/s3_bf16:Layouts/GateAndStrides.*/s5_f16:CudaUnifiedDecode.*:CudaUnifiedGraph.*}" \
  > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$? ($(( $(date +%s) - T1 )) s)"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5
timeout ${BENCH_S:-90} ./attnbench_gpu_bench "${1:-}" > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
cat "$OUT/bench.log"
