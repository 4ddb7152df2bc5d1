#!/usr/bin/env bash
# Configures and builds into ${BUILD_DIR:-build}. The CUDA backend is built when nvcc is found (on PATH or in
# /usr/local/cuda); ATTNBENCH_CUDA=OFF forces it off, ATTNBENCH_CUDNN=AUTO|ON|OFF chooses cudnn.sdpa (AUTO: when
# cuDNN and the frontend headers of scripts/install-deps.sh are found), ATTNBENCH_HIP=AUTO|ON|OFF the HIP backend
# (AUTO: when its toolchain is found and the CUDA backend is off; cmake/hip.cmake) and ATTNBENCH_ROCM_ROOT the ROCm
# install it uses, ATTNBENCH_CUDA_INSTANCES the cuda.unified kernel instances (all, the default, or a list of ci and key
# expressions; kernels/cuda/instances.cmake), ATTNBENCH_TESTS=OFF leaves the tests out, and ATTNBENCH_TARGETS names
# the targets to build (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
cuda="${ATTNBENCH_CUDA:-}"
if [ -z "$cuda" ]; then cuda=OFF; command -v nvcc >/dev/null 2>&1 && cuda=ON; fi
args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNBENCH_CUDA="$cuda" -DATTNBENCH_TESTS="${ATTNBENCH_TESTS:-ON}"
      -DATTNBENCH_CUDNN="${ATTNBENCH_CUDNN:-AUTO}" -DATTNBENCH_HIP="${ATTNBENCH_HIP:-AUTO}")
# Always passed with CUDA, so that a build folder configured with a subset once does not stay one.
[ "$cuda" = ON ] && args+=(-DATTNBENCH_CUDA_INSTANCES="${ATTNBENCH_CUDA_INSTANCES:-all}")
[ -d .deps/usr ] && args+=(-DCMAKE_PREFIX_PATH="$PWD/.deps/usr")
[ -n "${ATTNBENCH_ROCM_ROOT:-}" ] && args+=(-DATTNBENCH_ROCM_ROOT="$ATTNBENCH_ROCM_ROOT")
cmake "${args[@]}" >/dev/null
targets=()
for t in ${ATTNBENCH_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
