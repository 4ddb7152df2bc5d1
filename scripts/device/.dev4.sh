set -u
export LD_LIBRARY_PATH=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])')/lib:${LD_LIBRARY_PATH:-}
chmod +x .gpubin/*
o=$OUT/b; mkdir -p $o
sel="--group long_prefill --group gqa --filter d128_h32kv32_b1_s8192|h64kv8_b1_s8192|d128_h32kv32_b2_s4096 --kernel cuda.unified --mode graph --no-progress"
for i in 1 2; do for w in old a49 new; do
  b=.gpubin/attnbench_$w; [ $w = new ] && b=.gpubin/attnbench
  x=""; [ $w = new ] && x="--rounds 1"
  $b run $sel $x -o $o/${w}_$i.json > $o/${w}_$i.log 2>&1
done; done
python3 - <<PY
import json
runs=["old_1","a49_1","new_1","old_2","a49_2","new_2"]
d={w:json.load(open(f"$o/{w}.json"))["rows"] for w in runs}
print(" "*40, " ".join(f"{w:>8}" for w in runs))
for i,r in enumerate(d["old_1"]):
    print(f'{r["shape"][:34]:34} {r["dtype"]}', " ".join(f'{d[w][i]["time_us"]["median"]:8.1f}' for w in runs))
PY
cd $OUT && tar czf b.tgz b && rm -rf b
