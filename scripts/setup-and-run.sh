#!/usr/bin/env bash
# Fresh machine to first results: installs the dependencies, builds, and runs the decode group (CUDA kernels when
# an NVIDIA GPU is visible, HIP kernels on an AMD one, else the CPU backend). Without a GPU it builds only the
# binary, CPU backend alone, and bounds each measurement (--min-samples 5 --timeout 3) so the run ends in minutes;
# extra arguments go to `attnbench run` and replace those bounds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build="${BUILD_DIR:-build}"
extra=()
if nvidia-smi -L >/dev/null 2>&1; then
  scripts/build.sh
elif [ -e /dev/kfd ]; then  # an AMD GPU's driver: the HIP backend (scripts/device/hip-report.sh runs all of it)
  ATTNBENCH_CUDA=OFF ATTNBENCH_TESTS=OFF ATTNBENCH_TARGETS=attnbench scripts/build.sh
else
  echo "setup-and-run: no GPU visible: building the CPU backend only (the CUDA backend builds where nvcc and a GPU are)"
  ATTNBENCH_CUDA=OFF ATTNBENCH_HIP=OFF ATTNBENCH_TESTS=OFF ATTNBENCH_TARGETS=attnbench scripts/build.sh
  [ $# -eq 0 ] && extra=(--min-samples 5 --timeout 3)
fi
bin="$PWD/$build/src"
echo "setup-and-run: attnbench is $bin/attnbench; to run it by name: export PATH=\"$bin:\$PATH\""
"$bin/attnbench" run --group decode "${extra[@]}" "$@"
echo "setup-and-run: attnbench is $bin/attnbench; to run it by name: export PATH=\"$bin:\$PATH\""
