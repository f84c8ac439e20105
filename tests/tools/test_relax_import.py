#!/usr/bin/env python3
"""relax-import from the command line: exit codes, outputs, --json.

Builds small models with Debian's python3-onnx, runs relax-import on them
and on broken files, and checks: exit 0 with the .relax and .safetensors
written; exit 2 listing every unsupported op; exit 1 for unreadable or
malformed input; nothing written on failure.

    tests/tools/test_relax_import.py --relax-import build/bin/relax-import
"""
import argparse
import json
import os
import random
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

from tool_check import check, finish, run, save

def mlp():
    x = helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, ["batch_size", "sequence_length", 8])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 5], [0.5] * 40)
    nodes = [helper.make_node("MatMul", ["input_ids", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["logits"], name="act")]
    g = helper.make_graph(nodes, "mlp", [x], [y], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def unsupported():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("FancyOp", ["x"], ["a"], name="fancy_1", domain="com.example"),
             helper.make_node("FancyOp", ["a"], ["b"], name="fancy_2", domain="com.example"),
             helper.make_node("OtherOp", ["b"], ["y"], name="other", domain="com.example")]
    g = helper.make_graph(nodes, "u", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relax-import", required=True)
    tool = ap.parse_args().relax_import
    tmp = tempfile.TemporaryDirectory(prefix="relax_import_cli_")  # removed when main returns or raises
    d = tmp.name

    # Success: both files, the JSON summary with named symbolic dims.
    save(mlp(), os.path.join(d, "mlp.onnx"))
    p = run(tool, os.path.join(d, "mlp.onnx"), "--json")
    check(p.returncode == 0, f"mlp: exit {p.returncode}: {p.stderr}")
    check(os.path.exists(os.path.join(d, "mlp.relax")), "mlp: no mlp.relax")
    check(os.path.exists(os.path.join(d, "mlp.safetensors")), "mlp: no mlp.safetensors")
    if p.returncode == 0:
        s = json.loads(p.stdout)
        check(s["inputs"][0]["shape"] == ["batch_size", "sequence_length", 8], f"mlp inputs: {s['inputs']}")
        check(s["outputs"][0]["shape"] == ["batch_size", "sequence_length", 5], f"mlp outputs: {s['outputs']}")
        check(s["ops"] == {"MatMul": 1, "Relu": 1}, f"mlp ops: {s['ops']}")
        check(s["opset"] == {"": 17}, f"mlp opset: {s['opset']}")
        check(s["unsupported"] == [], "mlp: unsupported not empty")
    out = os.path.join(d, "other", "named.relax")
    os.makedirs(os.path.dirname(out))
    p = run(tool, os.path.join(d, "mlp.onnx"), "-o", out)
    check(p.returncode == 0 and os.path.exists(out) and os.path.exists(out[:-6] + ".safetensors"), "-o: files")

    # Unsupported: exit 2, every op with its nodes, nothing written.
    save(unsupported(), os.path.join(d, "u.onnx"))
    p = run(tool, os.path.join(d, "u.onnx"), "--json")
    check(p.returncode == 2, f"unsupported: exit {p.returncode}")
    s = json.loads(p.stdout) if p.stdout else {}
    ops = sorted((u["domain"], u["op"], tuple(u["nodes"])) for u in s.get("unsupported", []))
    check(ops == [("com.example", "FancyOp", ("fancy_1", "fancy_2")), ("com.example", "OtherOp", ("other",))],
          f"unsupported list: {ops}")
    check("fancy_1" in p.stderr and "other" in p.stderr, "unsupported: stderr names the nodes")
    check(not os.path.exists(os.path.join(d, "u.relax")), "unsupported: wrote u.relax")

    # Broken inputs: exit 1, a message naming the file, nothing written.
    rng = random.Random(3)
    with open(os.path.join(d, "random.onnx"), "wb") as f:
        f.write(bytes(rng.randrange(256) for _ in range(300)))
    good = mlp().SerializeToString()
    with open(os.path.join(d, "truncated.onnx"), "wb") as f:
        f.write(good[: len(good) // 2])
    for name in ["random.onnx", "truncated.onnx", "missing.onnx"]:
        p = run(tool, os.path.join(d, name))
        check(p.returncode == 1, f"{name}: exit {p.returncode}")
        check(name in p.stderr, f"{name}: message does not name the file: {p.stderr}")
        check(not os.path.exists(os.path.join(d, name[:-5] + ".relax")), f"{name}: wrote output")

    return finish("relax-import CLI")


if __name__ == "__main__":
    sys.exit(main())
