#!/usr/bin/env python3
"""relax-run --list-devices: the Vulkan devices through the real loader.

scripts/setup.sh installs Mesa's lavapipe, so at least one device must be
listed, with the limits the backend plans with (storage-buffer range,
shared memory, push constants, workgroup size). With the loader pointed at
a driver manifest that does not exist, the tool says Vulkan is unavailable
and why, and exits 1, without crashing.

    tests/tools/test_vulkan_devices.py --bin build/bin
"""
import argparse
import json
import os
import subprocess
import sys

from tool_check import check, finish, run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    rrun = os.path.join(args.bin, "relax-run")

    r = run(rrun, "--list-devices", "--json")
    check(r.returncode == 0, f"--list-devices: exit {r.returncode}: {r.stdout}{r.stderr}")
    rep = json.loads(r.stdout) if r.stdout.strip() else {}
    devices = rep.get("vulkan", [])
    check(len(devices) >= 1, f"no Vulkan device (lavapipe is installed by scripts/setup.sh): {rep}")
    for d in devices:
        check(d.get("name") and d.get("index") == devices.index(d), f"device name and index: {d}")
        check(d.get("max_storage_buffer_range", 0) >= 1 << 20 and d.get("max_shared_memory", 0) >= 16384
              and d.get("max_push_constants", 0) >= 128 and d.get("max_workgroup_invocations", 0) >= 128,
              f"device limits: {d}")
    if any("llvmpipe" in d.get("name", "") for d in devices):
        lvp = next(d for d in devices if "llvmpipe" in d["name"])
        # lavapipe's limits, which the tests rely on.
        check(lvp["max_storage_buffer_range"] == 128 << 20, f"lavapipe storage buffer range: {lvp}")
        check(lvp["type"] == "cpu", f"lavapipe is a cpu device: {lvp}")

    r = run(rrun, "--list-devices")
    check(r.returncode == 0 and "vulkan 0:" in r.stdout, f"text listing: {r.stdout}{r.stderr}")

    env = dict(os.environ, VK_ICD_FILENAMES="/nonexistent/icd.json", VK_DRIVER_FILES="/nonexistent/icd.json")
    r = subprocess.run([rrun, "--list-devices"], capture_output=True, text=True, env=env, timeout=60)
    check(r.returncode == 1 and "no Vulkan device" in r.stdout and "unavailable" in r.stdout,
          f"no driver: exit {r.returncode}: {r.stdout}{r.stderr}")

    r = run(rrun)
    check(r.returncode == 2 and "package is required" in r.stderr, f"no package: exit {r.returncode}: {r.stderr}")
    return finish("Vulkan devices")


if __name__ == "__main__":
    sys.exit(main())
