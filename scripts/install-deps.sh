#!/usr/bin/env bash
# Installs the build and test dependencies from Debian's packages (only those missing).
set -euo pipefail
pkgs=(cmake ninja-build g++ libcli11-dev nlohmann-json3-dev libeigen3-dev libgtest-dev python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
