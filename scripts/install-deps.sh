#!/usr/bin/env bash
# Installs the build and test dependencies: Debian's packages (only those missing), then the cuDNN frontend headers
# that cudnn.sdpa is built with (a pinned PyPI wheel, sha256-checked, its include/ tree unpacked into
# .deps/cudnn_frontend/include). `scripts/install-deps.sh cudnn-frontend` does the second part alone;
# ATTNBENCH_CUDNN=OFF skips it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The cuDNN frontend (header-only C++ graph API; cuDNN itself comes with the CUDA toolkit or a cuDNN package).
# One wheel file, whatever the host's Python: the headers in it are the same for every platform tag. 1.18.0 has
# paged caches, ragged offsets and the bottom-right diagonal alignment in SDPA and knows cuDNN 9.19; from 1.19 on
# the headers compile NVRTC calls into every user (an inline SM100 engine), which would make libnvrtc a link and
# load dependency of attnbench.
CUDNN_FE_VERSION=1.18.0
CUDNN_FE_WHEEL=nvidia_cudnn_frontend-1.18.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
CUDNN_FE_SHA256=382ea063b92cbfd5b442cb75ff8422932d78276aecf139e46713ed1ad3d07af4
CUDNN_FE_DIR=.deps/cudnn_frontend

install_cudnn_frontend() {
  if [ "$(cat "$CUDNN_FE_DIR/VERSION" 2>/dev/null)" = "$CUDNN_FE_VERSION" ] && [ -f "$CUDNN_FE_DIR/include/cudnn_frontend.h" ]; then
    return 0
  fi
  local cache=.deps/cache wheel=".deps/cache/$CUDNN_FE_WHEEL"
  mkdir -p "$cache"
  if [ ! -f "$wheel" ]; then
    if ! python3 -m pip --version >/dev/null 2>&1; then
      echo "install-deps: python3 -m pip not found: no cuDNN frontend headers, cudnn.sdpa will not be built" >&2
      return 0
    fi
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --python-version 3.11 --implementation cp --abi cp311 -d "$cache" "nvidia-cudnn-frontend==$CUDNN_FE_VERSION"; then
      echo "install-deps: downloading nvidia-cudnn-frontend $CUDNN_FE_VERSION failed: cudnn.sdpa will not be built" >&2
      return 0
    fi
  fi
  local sum
  sum=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$sum" != "$CUDNN_FE_SHA256" ]; then
    echo "install-deps: $wheel: sha256 $sum, expected $CUDNN_FE_SHA256 (file removed)" >&2
    rm -f "$wheel"
    return 1
  fi
  rm -rf "$CUDNN_FE_DIR"
  python3 - "$wheel" "$CUDNN_FE_DIR" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [n for n in z.namelist() if n.startswith("include/")]
    if not any(n == "include/cudnn_frontend.h" for n in members):
        sys.exit(f"{wheel}: no include/cudnn_frontend.h")
    z.extractall(dest, members)
PY
  echo "$CUDNN_FE_VERSION" > "$CUDNN_FE_DIR/VERSION"
  echo "install-deps: cuDNN frontend $CUDNN_FE_VERSION headers in $CUDNN_FE_DIR/include"
}

if [ "${1:-}" = "cudnn-frontend" ]; then
  install_cudnn_frontend
  exit
fi

pkgs=(cmake ninja-build g++ libcli11-dev nlohmann-json3-dev libeigen3-dev libgtest-dev python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# The HIP backend's toolchain for gfx942 and gfx90a (cmake/hip.cmake): clang-19 and its offload bundler, the HIP
# runtime and headers, the device libraries, and llvm-19's objdump/objcopy for the ISA test; ~95 MB without
# recommends (clang-19's would add llvm-19-dev). ATTNBENCH_HIP=OFF skips them; a ROCm install needs none of them.
hip_missing=()
if [ "${ATTNBENCH_HIP:-}" != "OFF" ]; then
  for p in clang-19 lld-19 clang-tools-19 llvm-19 libamdhip64-dev rocm-device-libs; do
    dpkg -s "$p" >/dev/null 2>&1 || hip_missing+=("$p")
  done
fi
if [ ${#hip_missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  [ ${#missing[@]} -gt 0 ] || $SUDO apt-get update -qq  # else updated above
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${hip_missing[@]}"
fi
[ "${ATTNBENCH_CUDNN:-}" = "OFF" ] || install_cudnn_frontend

# The sanitizer and fuzzing build of scripts/sanitize-cpu.sh: clang with its sanitizer and libFuzzer runtimes, and
# LLVM's OpenMP (only those missing).
san_missing=()
for p in clang libclang-rt-dev libomp-dev; do dpkg -s "$p" >/dev/null 2>&1 || san_missing+=("$p"); done
if [ ${#san_missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${san_missing[@]}"
fi
