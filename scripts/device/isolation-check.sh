#!/usr/bin/env bash
# On a GPU machine, the checks of issue 19 that need one: (1) one group run in-process and isolated, compared
# (timings must be SAME); (2) the same group interrupted with SIGINT after a few cases, resumed, and compared row
# for row (status and gate) with the uninterrupted isolated run; (3) the GPU fault-isolation tests.
#   scripts/device/isolation-check.sh [group]          # default: decode; ISO_ARGS: more run options
# Results land in ${OUT:-results}/isolation/.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="${ATTNBENCH_BIN:-build/src/attnbench}"
[ -x "$bin" ] || { scripts/build.sh >/dev/null; bin=build/src/attnbench; }
g="${1:-decode}"
R="${OUT:-results}/isolation"
mkdir -p "$R"
rm -f "$R"/*.partial.jsonl
read -r -a more <<< "${ISO_ARGS:-}"
common=(run --group "$g" --no-progress "${more[@]}")

echo "== $g in-process vs isolated"
"$bin" "${common[@]}" --isolate off -o "$R/off.json" > "$R/off.log" 2>&1; echo "off: exit $?"
"$bin" "${common[@]}" --isolate case -o "$R/case.json" > "$R/case.log" 2>&1; echo "case: exit $?"
"$bin" compare "$R/off.json" "$R/case.json" --json "$R/compare.json" | tail -n 3

echo "== $g interrupted after 3 cases, resumed"
"$bin" "${common[@]}" -o "$R/part.json" > "$R/part.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  n=$(grep -c '"case_done"' "$R/part.json.partial.jsonl" 2>/dev/null)
  [ "${n:-0}" -ge 3 ] && break
  sleep 0.5
done
kill -INT "$pid"; wait "$pid"; echo "interrupted: exit $? (130 expected)"
"$bin" "${common[@]}" -o "$R/part.json" --resume > "$R/resume.log" 2>&1; echo "resumed: exit $?"
python3 - "$R/case.json" "$R/part.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["rows"] for p in sys.argv[1:3])
key = lambda r: (r["group"], r["shape"], r["dtype"], r["kernel"], r["mode"], r["status"], json.dumps(r["gate"], sort_keys=True))
same = len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b))
print(f"resumed vs uninterrupted: {len(b)} vs {len(a)} rows, status and gate {'equal row for row' if same else 'DIFFER'}")
sys.exit(0 if same else 1)
PY

echo "== GPU fault isolation tests"
t=build/tests/gpu/attnbench_gpu_fault_tests
[ -x "$t" ] && "$t" 2>&1 | tail -n 4 || echo "$t not built"
