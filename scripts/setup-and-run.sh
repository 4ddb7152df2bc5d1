#!/usr/bin/env bash
# Fresh machine to first results: installs the dependencies, builds, and runs a group: decode with an NVIDIA GPU
# (CUDA kernels) or an AMD one (HIP kernels); without a GPU, the CPU backend alone is built and runs quickstart, a
# group made to finish in seconds on a CPU (decode, ragged decode, a short and a chunked prefill). Extra arguments
# go to `attnbench run` (another --group replaces the default one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build="${BUILD_DIR:-build}"
group=(--group decode)
if nvidia-smi -L >/dev/null 2>&1; then
  scripts/build.sh
elif [ -e /dev/kfd ]; then  # an AMD GPU's driver: the HIP backend (scripts/device/hip-report.sh runs all of it)
  ATTNBENCH_CUDA=OFF ATTNBENCH_TESTS=OFF ATTNBENCH_TARGETS=attnbench scripts/build.sh
else
  echo "setup-and-run: no GPU visible: building the CPU backend only (the CUDA backend builds where nvcc and a GPU are)"
  ATTNBENCH_CUDA=OFF ATTNBENCH_HIP=OFF ATTNBENCH_TESTS=OFF ATTNBENCH_TARGETS=attnbench scripts/build.sh
  group=(--group quickstart)
fi
bin="$PWD/$build/src"
echo "setup-and-run: attnbench is $bin/attnbench; to run it by name: export PATH=\"$bin:\$PATH\""
for a in "$@"; do case "$a" in -g|--group|--group=*|--shapes|--shapes=*) group=() ;; esac; done
"$bin/attnbench" run "${group[@]}" "$@"
echo "setup-and-run: attnbench is $bin/attnbench; to run it by name: export PATH=\"$bin:\$PATH\""
