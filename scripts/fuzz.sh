#!/usr/bin/env bash
# Fuzzes the readers of untrusted bytes (docs/fuzzing.md).
#
#   scripts/fuzz.sh [TARGET|all|runtime] [SECONDS]      default: all, 60 s each
#
# Targets: onnx onnx_proto ir package npy tensor_proto safetensors;
# `runtime` is the runtime's own readers (package npy tensor_proto): what
# a program embedding the runtime reads, and what scripts/test.sh (CI)
# fuzzes for a short time.
# Installs clang-16 and libFuzzer when missing (scripts/setup.sh --fuzz),
# builds what is missing of build-fuzz/ (libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer), makes each target's seeds from the
# repository's own files (build-fuzz/seeds/TARGET; the package and
# safetensors seeds are built by build/'s relax-build and relax-import,
# so build/ is built first when it lacks them), and runs each target for
# SECONDS on its corpus (build-fuzz/corpus/TARGET, kept between runs).
#
# Exit 0 when nothing crashed; otherwise 1, naming each crashing input
# (build-fuzz/findings/TARGET/crash-*). A summary line per target
# (seconds run, executions, per second, coverage, corpus) goes to standard output and
# to build-fuzz/history.tsv. FUZZ_JOBS=N runs N targets at once (default
# 1); FUZZ_FLAGS adds libFuzzer flags.
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=(onnx onnx_proto ir package npy tensor_proto safetensors)
which=${1:-all}
seconds=${2:-60}
if [ "$which" = all ]; then
  targets=("${ALL[@]}")
elif [ "$which" = runtime ]; then
  targets=(package npy tensor_proto)
elif [[ " ${ALL[*]} " == *" $which "* ]]; then
  targets=("$which")
else
  echo "fuzz.sh: no target '$which' (one of: ${ALL[*]}, all, runtime)" >&2
  exit 2
fi
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }

scripts/setup.sh --fuzz
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# A size read from the input that no allocator can give is refused as the
# production build refuses it (std::bad_alloc, then the reader's error).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-16 CXX=clang++-16 cmake -G Ninja -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRELAX_FUZZ=ON \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DRELAX_ENABLE_CPU=OFF -DRELAX_ENABLE_VULKAN=OFF -DRELAX_ENABLE_CUDA=OFF -DRELAX_BUILD_TESTS=OFF >/dev/null
fi
cmake --build build-fuzz --target "${targets[@]/#/fuzz_}" >/dev/null

# The seeds need relax-import and relax-build for some targets.
needs_tools=0
for t in "${targets[@]}"; do [[ $t == package || $t == safetensors ]] && needs_tools=1; done
if [ $needs_tools = 1 ] && [ ! -x build/bin/relax-build ]; then scripts/build.sh >/dev/null; fi

quiet() {  # runs a command, showing what it printed only when it fails
  local out
  out=$("$@" 2>&1) || { echo "$out" >&2; echo "fuzz.sh: making the seeds: $* failed" >&2; exit 1; }
}
small() { find "$@" -type f -size -256k 2>/dev/null | sort; }
seed() {  # seed TARGET: fills build-fuzz/seeds/TARGET
  local t=$1 dir=build-fuzz/seeds/$1 work=build-fuzz/seed-work
  rm -rf "$dir" && mkdir -p "$dir" "$work"
  case $t in
    onnx | onnx_proto)
      small tests/models tests/corpus examples -name '*.onnx' | while read -r f; do cp "$f" "$dir/"; done ;;
    ir)
      small tests/ir tests/golden -name '*.relax' | while read -r f; do cp "$f" "$dir/$(echo "$f" | tr / _)"; done ;;
    npy)
      small tests -name '*.npy' | head -200 | while read -r f; do cp "$f" "$dir/$(echo "$f" | tr / _)"; done ;;
    tensor_proto)
      small tests -name '*.pb' | head -200 | while read -r f; do cp "$f" "$dir/$(echo "$f" | tr / _)"; done ;;
    safetensors)
      for m in tests/models/cnn_tiny.onnx tests/corpus/{gqa_window_ort,lstm_forecaster,qdq_detector,dynquant_seg}.onnx; do
        quiet build/bin/relax-import "$m" -o "$work/$(basename "$m" .onnx).relax"
        cp "$work/$(basename "$m" .onnx).safetensors" "$dir/"
      done ;;
    package)
      # Small models whose programs call builtins, kernels, library calls,
      # control flow and lifted weight transforms.
      for m in tests/models/cnn_tiny.onnx tests/corpus/{scripted_if,scripted_loop,gqa_window_ort,lstm_forecaster,dynquant_seg,contrib_misc}.onnx; do
        quiet build/bin/relax-build "$m" -o "$dir/$(basename "$m" .onnx).rpkg"
      done ;;
  esac
}

mkdir -p build-fuzz/logs
run() {  # run TARGET: one fuzzing session; prints its summary line
  local t=$1 log=build-fuzz/logs/$1.log mark=build-fuzz/logs/$1.start
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  touch "$mark"
  local rc=0 start
  start=$(date +%s)
  # shellcheck disable=SC2086
  RELAX_FUZZ_TRUSTED_KERNELS=build-fuzz/seeds/package build-fuzz/bin/fuzz_"$t" -max_total_time="$seconds" \
    -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t/" ${FUZZ_FLAGS:-} \
    "build-fuzz/corpus/$t" "build-fuzz/seeds/$t" >"$log" 2>&1 || rc=$?
  local took=$(($(date +%s) - start)) execs cov ft corp found
  # The final stats; under -fork=N (no final stats) the last status line.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+: cov' "$log" | tail -1 | tr -dc 0-9 || true)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
  corp=$(find "build-fuzz/corpus/$t" -type f | wc -l)
  found=$(find "build-fuzz/findings/$t" -type f -newer "$mark" | sort | tr '\n' ' ')
  local result=clean
  if [ $rc -ne 0 ] || [ -n "$found" ]; then
    result="FOUND ${found:-(no input written)}(log: $log)"
    rc=1
    # What a CI log needs to tell the finding: the report, not the corpus lines.
    { echo "--- fuzz_$t: the end of $log"; grep -v -E '^#[0-9]+|NEW_FUNC|^INFO:|^\s*$' "$log" | tail -60; } >&2
  fi
  printf '%s\t%s\t%s s\t%s execs\t%s/s\tcov %s\tft %s\tcorpus %s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$took" \
    "${execs:-?}" "$(( ${execs:-0} / (took > 0 ? took : 1) ))" "${cov:-?}" "${ft:-?}" "$corp" "$result" |
    tee -a build-fuzz/history.tsv
  [ $rc -eq 0 ]
}

for t in "${targets[@]}"; do seed "$t"; done
status=0
jobs=${FUZZ_JOBS:-1}
pids=()
for t in "${targets[@]}"; do
  run "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
