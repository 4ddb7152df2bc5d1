#!/usr/bin/env bash
# CI performance gate for a GPU runner: runs every group on the GPU, compares each with its committed baseline
# (baselines/h200/<group>.json) and fails on a SLOW row or a mismatch.
#
# Exit codes: 0 no regression; 1 a SLOW row, a mismatch/error row, a row that passed in the baseline and
# fails now (GATE), a row timed in the baseline and not now (LOST), or a group where every row was declined
# (nothing ran); 2 bad usage or input; 3 no GPU here (nvidia-smi -L fails): cannot run, neither pass nor
# failure; 4 a baseline is missing.
#
# Environment: PERF_GROUPS (default: every shipped group), BASELINE_DIR (baselines/<card>: h100, h200, or the
# GPU's name in lower case: a baseline is only comparable on the card it was made on), RESULTS_DIR
# (results/perf), PERF_THRESHOLD (2%), ATTNBENCH_BIN (build/src/attnbench; built with scripts/build.sh when
# absent), PERF_BACKEND (cuda), PERF_RUN_ARGS (extra arguments for `attnbench run`, e.g. "--min-samples 50").
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

groups=${PERF_GROUPS:-"decode short_prefill long_prefill gqa gated_397b"}
results_dir=${RESULTS_DIR:-results/perf}
threshold=${PERF_THRESHOLD:-2%}
bin=${ATTNBENCH_BIN:-build/src/attnbench}
backend=${PERF_BACKEND:-cuda}

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "perf-regression: no GPU here (nvidia-smi -L failed): cannot run the performance gate (exit 3)"
  exit 3
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in
  *H200*) card=h200 ;;
  *H100*) card=h100 ;;
  *) card=$(echo "$gpu" | tr 'A-Z ' 'a-z_' | tr -cd 'a-z0-9_.-') ;;
esac
baseline_dir=${BASELINE_DIR:-baselines/$card}

missing=0
for g in $groups; do
  if [ ! -f "$baseline_dir/$g.json" ]; then
    echo "perf-regression: missing baseline $baseline_dir/$g.json for group '$g'"
    echo "  make it on the reference GPU: $bin run --group $g --backend $backend -o $baseline_dir/$g.json"
    echo "  then review it and commit it"
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 4

if [ ! -x "$bin" ]; then
  echo "perf-regression: $bin not found: building with scripts/build.sh"
  scripts/build.sh || exit 2
fi
mkdir -p "$results_dir" || exit 2

failed=()
for g in $groups; do
  echo "== $g"
  # shellcheck disable=SC2086  # PERF_RUN_ARGS is a list of words
  "$bin" run --group "$g" --backend "$backend" --no-progress --fail-if-nothing-ran -o "$results_dir/$g.json" \
    ${PERF_RUN_ARGS:-}
  rc=$?
  if [ "$rc" -eq 2 ]; then
    echo "perf-regression: attnbench run --group $g: bad usage or input (exit 2)"
    exit 2
  fi
  run_rc=$rc  # 1: a row mismatched or errored (compare lists them), or nothing ran (the run said so above)
  [ "$run_rc" -eq 0 ] || echo "perf-regression: $g: the run failed (mismatch/error rows, or nothing ran)"
  "$bin" compare "$baseline_dir/$g.json" "$results_dir/$g.json" --threshold "$threshold" \
    --fail-on slow,mismatch --json "$results_dir/$g.compare.json"
  rc=$?
  case "$rc" in
    0) [ "$run_rc" -eq 0 ] || failed+=("$g") ;;
    1) failed+=("$g") ;;
    *) echo "perf-regression: compare for $g: bad input (exit $rc)"; exit 2 ;;
  esac
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "perf-regression: FAILED (SLOW, LOST, mismatch or nothing ran) in: ${failed[*]};" \
    "comparisons in $results_dir/*.compare.json"
  exit 1
fi
echo "perf-regression: no regression in: $groups"
