#!/usr/bin/env bash
# Builds and runs the tests that need no GPU (CTest label "cpu"); on a machine with a GPU, also "gpu".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
labels="cpu"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then labels="cpu|gpu"; fi
ctest --test-dir "${BUILD_DIR:-build}" -L "$labels" -j "$(nproc)" --output-on-failure
