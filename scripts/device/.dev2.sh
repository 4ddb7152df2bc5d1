set -u
export LD_LIBRARY_PATH=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])')/lib:${LD_LIBRARY_PATH:-}
chmod +x .gpubin/*
OLD=.gpubin/attnbench_old NEW=.gpubin/attnbench AB_GATE=0 AB_GROUPS="long_prefill gqa gated_397b" \
  RUN_ARGS="--kernel cuda.*" AB_OUT=$OUT/ab timeout 560 scripts/device/ab-check.sh
grep -E "^rows:" $OUT/ab/*.log
cd $OUT && tar czf ab2.tgz ab && rm -rf ab
