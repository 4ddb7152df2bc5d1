#!/usr/bin/env bash
# Fresh machine to first results: installs the dependencies, builds, and runs the decode group
# (CUDA kernels when a GPU is visible, else the CPU backend). Extra arguments go to `attnbench run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec "${BUILD_DIR:-build}"/src/attnbench run --group decode "$@"
