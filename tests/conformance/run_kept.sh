#!/usr/bin/env bash
# ctest conformance/run-kept: onnx-conformance builds a few cpu cases and
# keeps their packages; onnx-conformance-run (the runtime alone) runs them
# back and must find what onnx-conformance found. A case whose package is
# missing, and one whose package is damaged, must not pass.
#   run_kept.sh ONNX_CONFORMANCE ONNX_CONFORMANCE_RUN WORKDIR
set -euo pipefail
conf=$1 run=$2 dir=$3
filter='^node/test_(abs|add_bcast|softmax_axis_1|matmul_3d|reduce_sum_keepdims_example)$'
rm -rf "$dir" && mkdir -p "$dir"
"$conf" --target cpu --filter "$filter" --keep "$dir/pkgs" --json "$dir/built.json" >/dev/null
"$run" --target cpu --packages "$dir/pkgs" --filter "$filter" --json "$dir/ran.json" >/dev/null
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
built, ran = (json.load(open(f"{d}/{n}.json"))["cases"] for n in ("built", "ran"))
assert len(built) == 5, built
for name, r in built.items():
    assert r["status"] == "pass", (name, r)
    assert ran[name]["status"] == "pass", (name, ran[name])
print("kept packages ran back: 5 of 5 pass")
PY
# One package gone, one damaged: neither may pass.
rm "$dir/pkgs/node__test_abs.rpkg"
printf 'garbage' | dd of="$dir/pkgs/node__test_add_bcast.rpkg" bs=1 seek=64 conv=notrunc status=none
"$run" --target cpu --packages "$dir/pkgs" --filter "$filter" --json "$dir/bad.json" >/dev/null
python3 - "$dir" <<'PY'
import json, sys
cases = json.load(open(f"{sys.argv[1]}/bad.json"))["cases"]
assert cases["node/test_abs"]["status"] == "build-error", cases["node/test_abs"]
assert cases["node/test_add_bcast"]["status"] != "pass", cases["node/test_add_bcast"]
print("a missing package:", cases["node/test_abs"]["reason"])
print("a damaged package:", cases["node/test_add_bcast"]["status"], cases["node/test_add_bcast"]["reason"])
PY
