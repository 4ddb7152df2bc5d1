#!/usr/bin/env bash
# One GPU session, end to end: device peaks; every group gated and timed (the baselines); a second run compared
# with the first; cold vs hot L2 on decode; the gated block under both fusion knobs (fuse_gate x fuse_norm_rope);
# torch peers on the same shapes; compute-sanitizer memcheck on the ragged shapes; plots. Everything lands in ${OUT:-results}/session and
# ${OUT:-results}/report.tgz; a short table is printed last. ATTNBENCH_BIN picks a prebuilt binary.
set -u
cd "$(dirname "$0")/../.."
bin="${ATTNBENCH_BIN:-build/src/attnbench}"
[ -x "$bin" ] || { scripts/build.sh >/dev/null; bin=build/src/attnbench; }
top="${OUT:-results}"
R="$top/session"
mkdir -p "$R"
groups="decode short_prefill long_prefill gqa small_pages gated_397b"
step() { echo "== $* ($(date +%T))"; }

step info
timeout 60 "$bin" info > "$R/info.txt" 2>&1
cat "$R/info.txt"
peaks=$(grep -o -- '--peak-gbps [0-9.e+]* --peak-tflops [0-9.e+]*' "$R/info.txt")

for g in $groups; do
  step "run $g"
  # shellcheck disable=SC2086
  timeout 170 "$bin" run --group "$g" --no-progress --timeout 2 $peaks -o "$R/base_$g.json" > "$R/base_$g.log" 2>&1
  echo "rc=$? $(tail -2 "$R/base_$g.log" | head -1)"
done
for g in $groups; do
  step "second run $g (graph)"
  # shellcheck disable=SC2086
  timeout 90 "$bin" run --group "$g" --no-progress --mode graph --timeout 2 $peaks -o "$R/again_$g.json" > "$R/again_$g.log" 2>&1
  "$bin" compare "$R/base_$g.json" "$R/again_$g.json" --json "$R/compare_$g.json" > "$R/compare_$g.txt" 2>&1
  tail -1 "$R/compare_$g.txt"
done

step "cold vs hot L2, decode kv4096"
timeout 60 "$bin" run --group decode --filter 'kv4096/bf16' --l2 cold --no-progress -o "$R/cold_decode.json" > "$R/cold_decode.log" 2>&1
grep -E ' ok ' "$R/cold_decode.log" | cut -c1-130

step "gated block, fuse_gate x fuse_norm_rope"
timeout 240 "$bin" sweep --group gated_397b --knob ATTNBENCH_GATED_FUSE_GATE=0,1 --knob ATTNBENCH_GATED_FUSE_NORM_ROPE=0,1 \
  --mode graph --timeout 2 -o "$R/sweep_gated.json" > "$R/sweep_gated.log" 2>&1
tail -12 "$R/sweep_gated.log"

step "torch peers"
PYTHONUNBUFFERED=1 timeout 300 python3 scripts/peers/torch_sdpa.py $(for g in $groups; do echo --group "$g"; done) \
  --mode graph --timeout 2 -o "$R/torch.json" > "$R/torch.log" 2>&1
echo "rc=$? $(tail -1 "$R/torch.log")"

step "memcheck on the ragged shapes"
timeout 120 compute-sanitizer --tool memcheck "$bin" run --group short_prefill --group decode --filter ragged \
  --gate-only --mode eager --no-progress -o "$R/memcheck.json" > "$R/memcheck.log" 2>&1
grep -E "ERROR SUMMARY|^rows" "$R/memcheck.log"

step plots
python3 reports/plot.py "$R"/base_*.json "$R/torch.json" -o "$R/plots" > "$R/plots.log" 2>&1; tail -1 "$R/plots.log"

step "attnbench vs torch (graph, median us)"
for g in $groups; do
  "$bin" compare --against torch.sdpa.cudnn "$R/base_$g.json" "$R/torch.json" > "$R/vs_cudnn_$g.txt" 2>&1
  # the better of cuDNN dense (torch) and paged (cudnn.sdpa), the issues' bar
  "$bin" compare --against torch.sdpa.cudnn,cudnn.sdpa "$R/base_$g.json" "$R/torch.json" > "$R/vs_best_$g.txt" 2>&1
  "$bin" compare --against torch.chain.gated_block "$R/base_$g.json" "$R/torch.json" > "$R/vs_chain_$g.txt" 2>&1
done
"$bin" compare --against torch.chain.gated_block "$R/sweep_gated.json" "$R/torch.json" > "$R/vs_chain_sweep.txt" 2>&1
tar czf "$top/report.tgz" -C "$R" .
for g in $groups; do grep -E ' ok ' "$R/base_$g.log" | grep graph | awk '{printf "%-13s %-34s %-5s %-14s %10s %8s %8s\n",$1,$2,$3,$4,$8,$9,$10}'; done
