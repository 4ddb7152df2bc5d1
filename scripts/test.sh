#!/usr/bin/env bash
# Builds and runs the tests that need no GPU (CTest labels "cpu" and, in a HIP build, "hip"); on a machine with a
# GPU, also "gpu". Without a visible GPU it builds the CPU backend alone (the CUDA and HIP kernels cannot run here,
# and compiling them is most of a build's time); ATTNBENCH_CUDA=ON or ATTNBENCH_HIP=ON asks for a backend anyway,
# its host tests included (CI compiles both: .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
if nvidia-smi -L >/dev/null 2>&1 || [ -e /dev/kfd ]; then
  scripts/build.sh
else
  if [ -z "${ATTNBENCH_CUDA:-}${ATTNBENCH_HIP:-}" ]; then
    echo "test.sh: no GPU visible: the CPU backend and its tests only (ATTNBENCH_CUDA=ON or ATTNBENCH_HIP=ON builds a GPU backend too)"
  fi
  ATTNBENCH_CUDA="${ATTNBENCH_CUDA:-OFF}" ATTNBENCH_HIP="${ATTNBENCH_HIP:-OFF}" scripts/build.sh
fi
labels="cpu|hip"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then labels="cpu|hip|gpu"; fi
ctest --test-dir "${BUILD_DIR:-build}" -L "$labels" -j "$(nproc)" --output-on-failure
