#!/usr/bin/env bash
# On a GPU machine: compute-sanitizer's memcheck, racecheck, synccheck and initcheck over the gate-only run of
# every group (one process: --isolate off; racecheck and initcheck, the slow tools, on a sample of the cases:
# every ${SAMPLE:-4}th by --shard 1/N), then one report per tool: per group the cases covered (a run cut by
# TOOL_TIMEOUT keeps the rows it finished), the rows that failed under the tool, and the errors, split into ours
# (frames naming attnbench), a library's (cuDNN, cuBLASLt's nvjet kernels, the driver: named, not ours to fix) and
# unattributed (counted as ours). SAN_KERNELS picks the kernels: ours by default ('cuda.*', whose cuBLASLt GEMMs
# are a library's); 'cudnn.*' for the peers, run apart so that a library's fault leaves our coverage whole.
#   scripts/device/sanitize.sh [tool ...]          # default: memcheck racecheck synccheck initcheck
#   ATTNBENCH_BIN=path/to/attnbench SAN_GROUPS="decode gqa" scripts/device/sanitize.sh memcheck
# Logs and results land in ${OUT:-results}/sanitize/; the exit code is 1 when any tool found an error in our code
# or one of our rows failed under it.
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
kernels="${SAN_KERNELS:-cuda.*}"
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
      "$bin" run --group "$g" --kernel "$kernels" --gate-only --mode eager --isolate off --no-progress "${extra[@]}" \
      -o "$R/${tool}_${g}.json" > "$R/${tool}_${g}.out" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "   timed out after $limit s (the log holds what it found until then)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/^/   /'
  done
done

# Per tool: cases covered and failed rows from each results file; each error block of each log, by whose frames.
python3 - "$R" "$kernels" "${tools[@]}" <<'PY'
import glob, json, os, re, sys
root, kernels, tools = sys.argv[1], sys.argv[2], sys.argv[3:]
lib = re.compile(r"libcudnn|libcublas|libcuda\.so|libnvrtc|libnvJitLink|libcudart|\bnvjet_|\bcudnn_|cutlass|xmma")
peers = kernels.startswith("cudnn")
bad = 0
for tool in tools:
    print(f"\n== {tool} ({kernels})")
    for log in sorted(glob.glob(os.path.join(root, f"{tool}_*.log"))):
        group = os.path.basename(log)[len(tool) + 1:-4]
        try:
            res = json.load(open(log[:-4] + ".json"))
            rows, cut = res["rows"], " (cut by the timeout)" if res["provenance"].get("interrupted") else ""
        except (OSError, ValueError, KeyError):
            try:  # killed before it wrote the file: the rows its journal kept
                lines = [json.loads(l) for l in open(log[:-4] + ".json.partial.jsonl")]
                rows, cut = [l["row"] for l in lines if "row" in l], " (cut; rows from the journal)"
            except (OSError, ValueError, KeyError):
                rows, cut = [], " (no results)"
        cases = len({(r["shape"], r["dtype"]) for r in rows})
        failed = [r for r in rows if r["status"] in ("error", "mismatch")]
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
                                                       "Target application", "Warning"))]
        ours = [b for b in errors if "attnbench" in b]
        libs = [b for b in errors if b not in ours and lib.search(b)]
        other = [b for b in errors if b not in ours and b not in libs]
        if not peers: bad += len(ours) + len(other) + len(failed)
        names = sorted({m.group(0).strip("_") for b in libs for m in [lib.search(b)] if m})
        print(f"  {group:14s} cases {cases:3d}{cut}  failed rows {len(failed):3d}  errors: ours {len(ours):3d}"
              f"  libraries {len(libs):3d}" + (f" ({', '.join(names)})" if names else "") +
              f"  unattributed {len(other):3d}")
        for b in (ours + other)[:3]:
            print("    " + b.splitlines()[0][:160])
        for r in failed[:3]:
            print(f"    row {r['shape']} {r['dtype']} {r['kernel']}: {r['status']} {r.get('reason', '')[:120]}")
sys.exit(1 if bad else 0)
PY
