set -u
export LD_LIBRARY_PATH=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])')/lib:${LD_LIBRARY_PATH:-}
chmod +x .gpubin/*
o=$OUT/r; mkdir -p $o
F='d128_h32kv32_b1_s8192|h64kv8_b1_s8192|s16384'
sel="--group long_prefill --group gqa --filter $F --kernel cuda.unified --mode graph --no-progress"
.gpubin/attnbench_old run $sel -o $o/old.json > $o/old.log 2>&1
.gpubin/attnbench run $sel --rounds 1 -o $o/new1.json > $o/new1.log 2>&1
.gpubin/attnbench run $sel -o $o/new5.json > $o/new5.log 2>&1
.gpubin/attnbench_old run $sel -o $o/old2.json > $o/old2.log 2>&1
.gpubin/attnbench run $sel --rounds 1 -o $o/new1b.json > $o/new1b.log 2>&1
for w in new1 new5 old2 new1b; do echo "$w: $(.gpubin/attnbench compare $o/old.json $o/$w.json | tail -1)"; done
echo "== side by side"
timeout 300 .gpubin/attnbench run --group long_prefill --group decode --backend cuda --kernel '*' --control --mode graph --no-progress -o $o/side.json > $o/side.log 2>&1
tail -3 $o/side.log
.gpubin/attnbench compare --against cudnn.sdpa $o/side.json > $o/side_vs_cudnn.txt 2>&1; tail -2 $o/side_vs_cudnn.txt
cd $OUT && tar czf r.tgz r && rm -rf r
