#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test; then fuzzes the
# runtime's readers for a short time (scripts/fuzz.sh runtime: packages,
# .npy, TensorProto; 20 s each under ASan and UBSan, in build-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
FUZZ_JOBS="$(nproc)" scripts/fuzz.sh runtime 20
