#!/usr/bin/env bash
# One device call for a change to the wide prefill kernel: the gate, compute-sanitizer on the wide shapes, the bench
# rows of the new binary and of reference binaries (A/B in one call, interleaved), and an Nsight Compute profile of
# one shape. Run from the repository root on a GPU machine:
#   BIN=build/tests/gpu REFS="ref:build-ref/tests/gpu/attnbench_gpu_bench" ROWS="v4 d128|v5 " \
#     PROFILE_ROW="v5 d128 causal S8192 H32 B1 persistent stages2" PHASES="gate san bench ncu" bash scripts/device/wide-ab.sh
# Everything lands in ${OUT:-results/wide-ab}/ab.tgz; the bench rows are printed last.
set -u
BIN=${BIN:-build/tests/gpu}
export LD_LIBRARY_PATH=$PWD/$BIN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-results/wide-ab}; mkdir -p "$OUT"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee "$W/gpu.txt"
cuobjdump --dump-sass "$BIN/attnbench_gpu_tests" > "$W/sass.txt" 2>/dev/null &&
  echo "SASS: $(grep -c HGMMA "$W/sass.txt") HGMMA, $(grep -cE '\b(LDL|STL)\b' "$W/sass.txt") LDL/STL lines"
rm -f "$W/sass.txt"

PHASES=" ${PHASES:-gate san bench ncu} "
if [[ $PHASES == *" gate "* ]]; then
T0=$(date +%s)
stdbuf -oL timeout "${TEST_S:-240}" "$BIN/attnbench_gpu_tests" --gtest_brief=1 --gtest_filter="${TEST_FILTER:-*}" \
  > "$W/tests.log" 2>&1
echo "gate tests rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" "$W/tests.log" | head -20
awk '/ wide /&&/max_abs=/{for(i=1;i<=NF;i++)if($i~/^max_abs=/){split($i,a,"=");if(a[2]+0>m)m=a[2]+0};n++}END{print "wide rows", n, "worst max_abs", m}' "$W/tests.log"

fi
if [[ $PHASES == *" san "* ]]; then
SAN=${SAN_FILTER:-Groups/Prefill2D.Wide*/s2_bf16:Groups/Prefill2D.Wide*/s3_bf16:Groups/Prefill2D.Wide*/s7_bf16:Groups/Prefill2D.Wide*/s8_f16}
for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
  T1=$(date +%s)
  timeout "${SAN_S:-100}" compute-sanitizer --tool $tool --print-limit 5 "$BIN/attnbench_gpu_tests" --gtest_brief=1 \
    --gtest_filter="$SAN" > "$W/$tool.log" 2>&1
  echo "$tool rc=$? ($(( $(date +%s) - T1 )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$W/$tool.log" | head -1)"
done
fi

ROWS=${ROWS:-v5 }
IFS='|' read -ra FILTERS <<< "$ROWS"
for round in $(seq 1 ${ROUNDS:-1}); do
  [[ $PHASES == *" bench "* ]] || break
  for f in "${FILTERS[@]}"; do
    timeout "${BENCH_S:-120}" "$BIN/attnbench_gpu_bench" "$f" >> "$W/bench_new_$round.log" 2>&1
    for ref in ${REFS:-}; do
      name=${ref%%:*}; bin=${ref#*:}
      timeout "${BENCH_S:-120}" "$bin" "$f" >> "$W/bench_${name}_$round.log" 2>&1
    done
  done
done

if [[ $PHASES == *" ncu "* ]] && [ -n "${PROFILE_ROW:-}" ] && command -v ncu > /dev/null; then
  T2=$(date +%s)
  timeout "${NCU_S:-150}" ncu --clock-control none -k regex:prefill_wide --launch-skip 2 --launch-count 1 --set full \
    --import-source no -o "$W/profile" "$BIN/attnbench_gpu_bench" "$PROFILE_ROW" > "$W/ncu_run.log" 2>&1
  echo "ncu rc=$? ($(( $(date +%s) - T2 )) s)"
  if [ -f "$W/profile.ncu-rep" ]; then
    ncu --import "$W/profile.ncu-rep" --page details > "$W/ncu_details.txt" 2>&1
    ncu --import "$W/profile.ncu-rep" --page source --csv --print-source sass > "$W/ncu_source.csv" 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy" \
      "$W/ncu_details.txt" | head -20
  fi
fi
tar -czf "$OUT/ab.tgz" -C "$W" .
for f in "$W"/bench_*.log; do [ -f "$f" ] && { echo "-- $(basename "$f" .log)"; cat "$f"; }; done
