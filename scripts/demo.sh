#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on the bundled
# example model: the O1 pipeline over examples/mlp.relax, printing the IR
# after normalization and the time of each pass.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
mkdir -p build/out
build/bin/relax-opt examples/mlp.relax --passes=O1 --print-after=normalize --time-passes -o build/out/mlp.opt.relax
echo "# optimized IR written to build/out/mlp.opt.relax:"
cat build/out/mlp.opt.relax
