#!/usr/bin/env bash
# Configures and builds the project into build/ (tools land in build/bin/).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TYPE="${RELAX_BUILD_TYPE:-RelWithDebInfo}"
# RelWithDebInfo with line tables only (-g1): backtraces and sanitizer
# reports still name files and lines, and the build takes about a fifth
# less time than with full debug info (-g).
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
fi
cmake --build build -j "$(nproc)"
