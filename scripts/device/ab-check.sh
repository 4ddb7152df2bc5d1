#!/usr/bin/env bash
# On a GPU machine: an A/B check of two attnbench binaries in one call (a refactor must not change results or
# speed). Runs every group gated (GPU tests too when given), then times the chosen groups in graph mode as
# OLD, NEW, OLD again, and compares NEW and the repeat against the first OLD run: a SLOW row in NEW that the
# repeat does not also show is a regression.
#   OLD=path NEW=path [AB_GROUPS="decode long_prefill"] [GPU_TESTS=path] [AB_GATE=0] [RUN_ARGS=...] \
#     scripts/device/ab-check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out=${AB_OUT:-results/ab}
mkdir -p "$out"
groups=${AB_GROUPS:-"decode short_prefill long_prefill gqa gated_397b"}
if [ -n "${GPU_TESTS:-}" ]; then
  "$GPU_TESTS" --gtest_brief=1 > "$out/gpu_tests.log" 2>&1
  echo "gpu tests (exit $?): $(grep -E 'PASSED|FAILED' "$out/gpu_tests.log" | tr '\n' ' ')"
fi
gsel=()
for g in decode short_prefill long_prefill gqa gated_397b; do gsel+=(--group "$g"); done
if [ "${AB_GATE:-1}" != 0 ]; then
  "$NEW" run "${gsel[@]}" --gate-only --mode eager --no-progress -o "$out/gate_new.json" > "$out/gate_new.log" 2>&1
  echo "NEW gate-only, every group (exit $?): $(grep '^rows:' "$out/gate_new.log")"
fi
for g in $groups; do
  for who in old new old2; do
    bin=$OLD; [ "$who" = new ] && bin=$NEW
    # shellcheck disable=SC2086
    "$bin" run --group "$g" --mode graph --no-progress -o "$out/${g}_$who.json" ${RUN_ARGS:-} > "$out/${g}_$who.log" 2>&1
  done
  for who in new old2; do
    "$NEW" compare "$out/${g}_old.json" "$out/${g}_$who.json" > "$out/${g}_$who.compare.txt" 2>&1
    echo "$g $who vs old: $(tail -1 "$out/${g}_$who.compare.txt")"
  done
done
