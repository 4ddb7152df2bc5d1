#!/usr/bin/env bash
# On a GPU machine: build if needed, print the device and its peaks, gate every attention group, time them,
# and print a short table last. Results land in ${OUT:-results}/.
#   scripts/device/bench.sh [extra `attnbench run` arguments]
#   ATTNBENCH_BIN=path/to/attnbench scripts/device/bench.sh      # a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${ATTNBENCH_BIN:-build/src/attnbench}"
[ -x "$bin" ] || { scripts/build.sh; bin=build/src/attnbench; }
out="${OUT:-results}"
mkdir -p "$out"
groups=(--group decode --group short_prefill --group long_prefill --group gqa)
"$bin" info | tee "$out/info.txt"
peaks=$(grep -o -- '--peak-gbps [0-9.e+]* --peak-tflops [0-9.e+]*' "$out/info.txt" || true)
set +e
# shellcheck disable=SC2086
"$bin" run "${groups[@]}" --no-progress -o "$out/bench.json" $peaks "$@" > "$out/bench.log" 2>&1
rc=$?
set -e
echo "== rows that are not ok (exit $rc) =="
grep -E ' (mismatch|error|declined) ' "$out/bench.log" | cut -c1-200 || true
echo "== summary (median µs, TFLOP/s, GB/s) =="
grep -E ' ok ' "$out/bench.log" | awk '{printf "%-13s %-34s %-5s %-13s %-6s %10s %8s %8s\n",$1,$2,$3,$4,$5,$8,$9,$10}'
tail -2 "$out/bench.log"
exit $rc
