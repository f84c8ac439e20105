#!/usr/bin/env bash
# Installs the Debian 12 packages the project builds and tests with;
# with --fuzz, also clang-16 and libFuzzer (scripts/fuzz.sh's build only).
# Idempotent and quiet: it prints nothing when everything is already there.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config
  llvm-16-dev lld-16 liblld-16-dev libopenblas-dev
  libprotobuf-dev protobuf-compiler libonnx-dev
  libvulkan-dev glslang-dev glslang-tools spirv-tools spirv-headers
  mesa-vulkan-drivers
  libcli11-dev doctest-dev nlohmann-json3-dev
  python3-onnx python3-numpy libonnx-testdata
  graphviz
)
[ "${1:-}" = --fuzz ] && PACKAGES+=(clang-16 libclang-rt-16-dev libfuzzer-16-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
