#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on the bundled
# example model: a GPT-2 style decoder with a KV cache (tests/models/gpt2_tiny.onnx,
# symbolic batch, sequence and past lengths) compiled once into a cpu
# package, then run at three shapes and compared with PyTorch's outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
mkdir -p build/out
build/bin/relax-build tests/models/gpt2_tiny.onnx --target cpu -o build/out/gpt2_tiny.cpu.rpkg
for case in b1_s7_p0 b1_s1_p7 b2_s64_p3; do
  echo "# batch, sequence and past length: $case"
  build/bin/relax-run build/out/gpt2_tiny.cpu.rpkg --test-data "tests/models/data/gpt2_tiny/$case" --atol 1e-5
done
