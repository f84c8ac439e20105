#!/usr/bin/env bash
# Configures and builds the project into build/ (tools land in build/bin/).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TYPE="${RELAX_BUILD_TYPE:-RelWithDebInfo}"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
fi
cmake --build build -j "$(nproc)"
