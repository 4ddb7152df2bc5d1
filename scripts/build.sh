#!/usr/bin/env bash
# Configures and builds into ${BUILD_DIR:-build}. The CUDA backend is built when nvcc is found
# (on PATH or in /usr/local/cuda); ATTNBENCH_CUDA=OFF forces it off.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release)
[ -n "${ATTNBENCH_CUDA:-}" ] && args+=(-DATTNBENCH_CUDA="$ATTNBENCH_CUDA")
[ -d .deps/usr ] && args+=(-DCMAKE_PREFIX_PATH="$PWD/.deps/usr")
cmake "${args[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
