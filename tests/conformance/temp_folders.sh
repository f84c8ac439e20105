#!/usr/bin/env bash
# ctest conformance/temp-folders: onnx-conformance leaves nothing in the
# temporary directory, whether its cases pass or their processes crash
# (--abort-after-build: each aborts with its package on disk). Each case's
# process gets a $TMPDIR of its own, which the parent removes once it has
# reaped it (tests/conformance/cases.cc run_all).
#   temp_folders.sh ONNX_CONFORMANCE WORKDIR
set -euo pipefail
conf=$1 dir=$2
filter='^node/test_(abs|add_bcast|softmax_axis_1)$'
rm -rf "$dir" && mkdir -p "$dir/tmp"
left() { find "$dir/tmp" -mindepth 1 | wc -l; }
TMPDIR="$dir/tmp" "$conf" --target cpu --filter "$filter" --json "$dir/ok.json" >/dev/null
TMPDIR="$dir/tmp" "$conf" --target cpu --filter "$filter" --abort-after-build --json "$dir/crash.json" >/dev/null || true
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
ok, crash = (json.load(open(f"{d}/{n}.json"))["cases"] for n in ("ok", "crash"))
assert len(ok) == 3 and all(r["status"] == "pass" for r in ok.values()), ok
assert len(crash) == 3 and all(r["status"] == "crash" and "signal 6" in r["reason"] for r in crash.values()), crash
print("3 cases passed, 3 aborted:", next(iter(crash.values()))["reason"])
PY
n=$(left)
if [ "$n" != 0 ]; then
  echo "FAIL: $n entries left in the temporary directory:"
  find "$dir/tmp" -maxdepth 2 | head -20
  exit 1
fi
echo "nothing left in the temporary directory"
