#!/usr/bin/env bash
# On a GPU machine: compute-sanitizer's memcheck, racecheck, synccheck and initcheck over the gate-only run of
# every group (one process: --isolate off; racecheck and initcheck, the slow tools, on a sample of the cases:
# every ${SAMPLE:-4}th by --shard 1/N), then one report per tool: errors per group, split into those whose stack
# names a library (cuDNN, cuBLAS, the driver: named, not ours to fix) and ours.
#   scripts/device/sanitize.sh [tool ...]          # default: memcheck racecheck synccheck initcheck
#   ATTNBENCH_BIN=path/to/attnbench SAN_GROUPS="decode gqa" scripts/device/sanitize.sh memcheck
# Logs and results land in ${OUT:-results}/sanitize/; the exit code is 1 when any tool found an error in our code.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="${ATTNBENCH_BIN:-build/src/attnbench}"
[ -x "$bin" ] || { scripts/build.sh >/dev/null; bin=build/src/attnbench; }
R="${OUT:-results}/sanitize"
mkdir -p "$R"
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck initcheck)
read -r -a groups <<< "${SAN_GROUPS:-decode short_prefill long_prefill gqa gated_397b}"
sample="${SAMPLE:-4}"
limit="${TOOL_TIMEOUT:-900}"
command -v compute-sanitizer >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
command -v compute-sanitizer >/dev/null || { echo "sanitize: compute-sanitizer not found" >&2; exit 2; }

for tool in "${tools[@]}"; do
  extra=()
  case "$tool" in
    racecheck|initcheck) extra=(--shard "1/$sample") ;;
  esac
  for g in "${groups[@]}"; do
    log="$R/${tool}_${g}.log"
    echo "== $tool $g ${extra[*]:-}"
    timeout "$limit" compute-sanitizer --tool "$tool" --target-processes all --print-limit 200 --log-file "$log" \
      "$bin" run --group "$g" --gate-only --mode eager --isolate off --no-progress "${extra[@]}" \
      -o "$R/${tool}_${g}.json" > "$R/${tool}_${g}.out" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "   timed out after $limit s (the log holds what it found until then)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/^/   /'
  done
done

# Per tool: each error block of each log, ours or a library's (by the frames it names).
python3 - "$R" "${tools[@]}" <<'PY'
import glob, os, re, sys
root, tools = sys.argv[1], sys.argv[2:]
lib = re.compile(r"libcudnn|libcublas|libcuda\.so|libnvrtc|libnvJitLink|libcudart")
bad = 0
for tool in tools:
    print(f"\n== {tool}")
    for log in sorted(glob.glob(os.path.join(root, f"{tool}_*.log"))):
        group = os.path.basename(log)[len(tool) + 1:-4]
        text = open(log, errors="replace").read()
        blocks, cur = [], []
        for line in text.splitlines():
            body = line.removeprefix("=========").strip()
            if not body:
                if cur: blocks.append("\n".join(cur)); cur = []
                continue
            cur.append(body)
        if cur: blocks.append("\n".join(cur))
        errors = [b for b in blocks if not b.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY",
                                                       "Target application"))]
        libs = [b for b in errors if lib.search(b)]
        ours = [b for b in errors if not lib.search(b)]
        bad += len(ours)
        names = sorted({m.group(0) for b in libs for m in [lib.search(b)] if m})
        print(f"  {group:14s} errors {len(errors):4d}  ours {len(ours):4d}  libraries {len(libs):4d}"
              + (f" ({', '.join(names)})" if names else ""))
        for b in ours[:3]:
            print("    " + b.splitlines()[0][:160])
sys.exit(1 if bad else 0)
PY
