#!/usr/bin/env python3
"""Install and embed: `cmake --install` into a fresh prefix, then the example
program (examples/embed/run_model.c) built against the installed runtime
twice, with find_package(RelaxRuntime) and with pkg-config, run on a package
the installed relax-build wrote (GPT-2 with a KV cache, symbolic dims bound
on the command line). Its outputs must equal relax-run's on the same inputs;
a damaged package and a missing dim must fail with the runtime's message.

    tests/tools/test_install.py --build-dir build --source-dir .
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from tool_check import check, finish, run

DIMS = {"batch_size": 2, "sequence_length": 5, "past_sequence_length": 3}


def fill(k, dtype, shape):
    """The example's input pattern (run_model.c)."""
    n = int(np.prod(shape))
    v = (7 * np.arange(n, dtype=np.int64) + k) % 13
    if dtype == "f32":
        return (v.astype(np.float32) / np.float32(13) - np.float32(0.5)).reshape(shape)
    if dtype == "i64":
        return v.reshape(shape)
    raise ValueError(dtype)


def parse_outputs(text):
    """{name: (dtype, shape, sum)} from run_model's output lines."""
    out = {}
    for m in re.finditer(r"^output (\S+) (\S+) \[([^\]]*)\] sum (\S+)$", text, re.M):
        shape = [int(x) for x in m.group(3).split(",") if x.strip()]
        out[m.group(1)] = (m.group(2), shape, float(m.group(4)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--sanitize", default="",
                    help="the build's -DRELAX_SANITIZE: a program linking that runtime is built with it too")
    args = ap.parse_args()
    san = [f"-fsanitize={args.sanitize}"] if args.sanitize else []
    src = os.path.abspath(args.source_dir)

    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        r = run("cmake", "--install", args.build_dir, "--prefix", prefix)
        check(r.returncode == 0, f"cmake --install: {r.stderr[-1000:]}")
        libdir = None
        for d, _, files in os.walk(prefix):
            if "librelax_runtime.so" in files:
                libdir = d
        check(libdir is not None, "librelax_runtime.so not installed")
        for f in ("bin/relax-build", "bin/relax-run", "bin/relax-import", "bin/relax-inspect", "bin/relax-opt",
                  "include/relax/relax_runtime.h"):
            check(os.path.exists(os.path.join(prefix, f)), f"not installed: {f}")
        libdir = libdir or os.path.join(prefix, "lib")
        check(os.path.exists(os.path.join(libdir, "cmake", "RelaxRuntime", "RelaxRuntimeConfig.cmake")),
              "no CMake package config")
        check(os.path.exists(os.path.join(libdir, "pkgconfig", "relax-runtime.pc")), "no pkg-config file")

        # A package from the installed compiler.
        bindir = os.path.join(prefix, "bin")
        pkg = os.path.join(tmp, "gpt2.cpu.rpkg")
        r = run(os.path.join(bindir, "relax-build"), os.path.join(src, "tests", "models", "gpt2_tiny.onnx"),
                "-o", pkg)
        check(r.returncode == 0, f"installed relax-build: {r.stderr[-1000:]}")
        r = run(os.path.join(bindir, "relax-build"), "--version")
        check(r.returncode == 0 and "relax-build 0.1.0" in r.stdout and "cpu: LLVM" in r.stdout,
              f"--version: {r.stdout}")

        # The example, built with CMake's find_package.
        exe_cmake = os.path.join(tmp, "embed-cmake", "run_model")
        r = run("cmake", "-S", os.path.join(src, "examples", "embed"), "-B", os.path.join(tmp, "embed-cmake"),
                "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}", f"-DCMAKE_C_FLAGS={' '.join(san)}")
        check(r.returncode == 0, f"configure with find_package: {r.stdout[-800:]} {r.stderr[-800:]}")
        r = run("cmake", "--build", os.path.join(tmp, "embed-cmake"))
        check(r.returncode == 0 and os.path.exists(exe_cmake), f"build with find_package: {r.stdout[-1500:]}")

        # The same with pkg-config (the .pc file finds its prefix itself).
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "relax-runtime"], capture_output=True, text=True,
                               env=env)
        check(flags.returncode == 0 and prefix in flags.stdout, f"pkg-config: {flags.stdout} {flags.stderr}")
        exe_pc = os.path.join(tmp, "run_model_pc")
        r = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", os.path.join(src, "examples", "embed", "run_model.c"),
                            "-o", exe_pc, *san, *flags.stdout.split()], capture_output=True, text=True)
        check(r.returncode == 0, f"build with pkg-config: {r.stderr[-1500:]}")

        # The reference: relax-run on the same inputs.
        names = []
        r = run(os.path.join(bindir, "relax-inspect"), pkg, "--json")
        import json
        sig = json.loads(r.stdout) if r.returncode == 0 else {"inputs": []}
        inputs = []
        for k, inp in enumerate(sig["inputs"]):
            shape = [DIMS[d] if isinstance(d, str) else d for d in inp["shape"]]
            path = os.path.join(tmp, f"in{k}.npy")
            np.save(path, fill(k, inp["dtype"], shape))
            inputs += ["--input", f"{inp['name']}={path}"]
            names.append(inp["name"])
        outdir = os.path.join(tmp, "ref")
        r = run(os.path.join(bindir, "relax-run"), pkg, *inputs, "--output-dir", outdir)
        check(r.returncode == 0, f"relax-run: {r.stderr[-800:]}")
        ref = {}
        for f in os.listdir(outdir) if os.path.isdir(outdir) else []:
            ref[f[:-4]] = np.load(os.path.join(outdir, f))

        dims = [f"{k}={v}" for k, v in DIMS.items()]
        for label, exe, extra_env in (("find_package", exe_cmake, None),
                                      ("pkg-config", exe_pc, {"LD_LIBRARY_PATH": libdir})):
            if not os.path.exists(exe):
                continue
            e = dict(os.environ, **(extra_env or {}))
            r = subprocess.run([exe, pkg, *dims], capture_output=True, text=True, env=e)
            check(r.returncode == 0, f"{label}: run_model exit {r.returncode}: {r.stderr}")
            outs = parse_outputs(r.stdout)
            check(len(outs) == 5 and len(ref) == 5, f"{label}: outputs {list(outs)} / reference {list(ref)}")
            for name, (dtype, shape, total) in outs.items():
                want = ref.get(re.sub(r"[^A-Za-z0-9._-]", "_", name))
                if want is None:
                    check(False, f"{label}: no reference for {name}")
                    continue
                check(list(want.shape) == shape, f"{label}: {name} shape {shape}, relax-run {list(want.shape)}")
                s = float(want.astype(np.float64).sum())
                check(abs(total - s) <= 1e-6 * max(1.0, abs(s)), f"{label}: {name} sum {total}, relax-run {s}")
            check("input input_ids i64 [batch_size, sequence_length]" in r.stdout,
                  f"{label}: signature line: {r.stdout[:300]}")
            check("[2, 4, 8, 16]" in r.stdout, f"{label}: present length past + sequence = 8: {r.stdout}")
            # Errors: a missing dim, a damaged package, a dim the model refuses.
            r = subprocess.run([exe, pkg], capture_output=True, text=True, env=e)
            check(r.returncode == 1 and "batch_size=VALUE" in r.stderr, f"{label}: missing dim: {r.stderr}")
            bad = os.path.join(tmp, "bad.rpkg")
            with open(pkg, "rb") as f:
                data = bytearray(f.read())
            data[len(data) // 2] ^= 0xFF
            with open(bad, "wb") as f:
                f.write(data)
            r = subprocess.run([exe, bad, *dims], capture_output=True, text=True, env=e)
            check(r.returncode == 1 and "bad.rpkg" in r.stderr and "checksum" in r.stderr,
                  f"{label}: damaged package: {r.stderr}")
            r = subprocess.run([exe, pkg, "batch_size=2", "sequence_length=5", "past_sequence_length=-1"],
                               capture_output=True, text=True, env=e)
            check(r.returncode == 1 and "run:" in r.stderr, f"{label}: negative dim: {r.stderr}")
            print(f"{label}: built and ran; outputs equal relax-run's")

    return finish("install and embed")


if __name__ == "__main__":
    sys.exit(main())
