#!/usr/bin/env bash
# Builds and runs the tests that need no GPU (CTest labels "cpu" and, in a HIP build, "hip"); on a machine with a
# GPU, also "gpu".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
labels="cpu|hip"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then labels="cpu|hip|gpu"; fi
ctest --test-dir "${BUILD_DIR:-build}" -L "$labels" -j "$(nproc)" --output-on-failure
