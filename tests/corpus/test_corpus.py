#!/usr/bin/env python3
"""The real-model corpus (export_corpus.py): each model imported, checked
for named output dims, built once per target (at -O2; at each of its
`levels` where EXPECTED lists them) and run at every exported shape
against PyTorch's outputs. Prints the corpus table:

  model  import  named dims  match_casts  cpu (cases right)  vulkan (...)

"named dims": every output dim is an integer or an expression over the
input's named dims (no fresh d_K, no unknown rank). match_casts counts the
run-time shape bindings left in @main after import. Exit 1 when a model
misses what EXPECTED says it reaches.

    tests/corpus/test_corpus.py --bin build/bin [--targets cpu,vulkan] [--json FILE] [-j N] [--models A,B]

Models are checked N at a time (default: the number of cores); the table
keeps the order of EXPECTED.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# What each model must reach: named output dims, no match_cast in @main,
# and every case right on each target listed.
EXPECTED = {
    "gpt2_hf": dict(named=True, match_casts=0),
    "gpt2_hf_past": dict(named=True, match_casts=0),
    "bert_hf_op14": dict(named=True, match_casts=0),
    "bert_hf_op17": dict(named=True, match_casts=0),
    "t5_encoder": dict(named=True, match_casts=0),
    "whisper_encoder": dict(named=True, match_casts=0),
    "vit": dict(named=True, match_casts=0),
    "gru_tagger": dict(named=True, match_casts=0),
    "lstm_forecaster": dict(named=True, match_casts=0),
    "detect_head": dict(named=True, match_casts=0),
    # export_contrib.py: com.microsoft graphs against ONNX Runtime's outputs
    "bert_ort_fused": dict(named=True, match_casts=0),
    "llm_ort_fused": dict(named=True, match_casts=0),
    "attention_ort": dict(named=True, match_casts=0),
    "contrib_misc": dict(named=True, match_casts=0),
    # attention_bias is (batch, 1, seq, total): total = past + seq is
    # checked at run time where the bias, then the causal mask, is added.
    "gqa_window_ort": dict(named=True, match_casts=2),
    # export_vision.py: vision, detection, segmentation, audio, OCR
    "resnet_small": dict(named=True, match_casts=0),
    "mobilenetv3_small": dict(named=True, match_casts=0),
    "efficientnet_small": dict(named=True, match_casts=0),
    # torch's F.pad exports its pads as Concat -> Reshape(-1, 2) -> Slice(step
    # -1) -> Transpose -> Reshape(-1) -> Cast -> Pad: folded at import.
    "swin_tiny": dict(named=True, match_casts=0),
    # The pads to the skip's size are computed from shapes (diffY // 2 as an
    # ONNX Div on i64, which truncates): width // 2 - (width // 4) * 2 is
    # proven non-negative (floormod(width // 2, 2)), so the Div folds.
    "unet_seg": dict(named=True, match_casts=0),
    "unet_seg_op11": dict(named=True, match_casts=0),
    # Not named by nature: the number of detections depends on the data
    # (NonZero of the confidence masks, NonMaxSuppression in an If).
    "yolo_nms": dict(named=False, match_casts=6),
    "retinaface": dict(named=True, match_casts=0),
    "espcn": dict(named=True, match_casts=0),
    "conformer_audio": dict(named=True, match_casts=0),
    "crnn_ocr": dict(named=True, match_casts=0),
    "text_classifier": dict(named=True, match_casts=0),
    "lenet_op9": dict(named=True, match_casts=0),
    "scripted_if": dict(named=True, match_casts=0),
    # HF T5's position_bias[:, :, -s:, :]: a slice from a negative symbolic
    # start, kept as (1, 4, s, ...) with a run-time check (s = 0 would slice
    # everything), one per self-attention layer.
    "t5_decoder": dict(named=True, match_casts=2),
    # export_scripted.py: Python lists in scripted loops (ONNX sequences).
    # Not named by nature: a list's length is known only at run time, and
    # what is read from it or stacked gets fresh dims.
    # A sum of two tensors read from a list keeps the first's dims, checked
    # at run time (one match_cast each).
    "chunk_rnn": dict(named=False, match_casts=3),
    "unbind_decoder": dict(named=False, match_casts=5),
    "scripted_loop": dict(named=False, match_casts=14),
    # export_quant.py: quantised as ONNX Runtime's tools write them, against
    # ONNX Runtime with its graph optimisations off (each Q/DQ as written).
    "dynquant_seg": dict(named=True, match_casts=0),
    "qdq_detector": dict(named=True, match_casts=0),
    # Its 28 DynamicQuantizeLinear round x / scale to 8 bits: where ONNX
    # Runtime's float ops (layer norm, softmax, erf) and ours differ by an
    # ulp at a rounding tie, one activation lands one step away, and its
    # row's outputs (layer-normed, about 1) move by up to 0.02 (b3_s32: one
    # row of 96). The integer products themselves are exact.
    "bert_dynquant": dict(named=True, match_casts=0, atol=0.05),
    "dynquant_resnet": dict(named=True, match_casts=0),
    # 18 activations quantized to u8 (as above: an ulp apart at a rounding
    # tie moves one step of 8 bits, about 0.002 after the layer norm)
    "bert_qdq": dict(named=True, match_casts=0, atol=0.05),
    "qdq_resnet": dict(named=True, match_casts=0),
    # torchvision's SSDlite: six feature maps; its transform pads to ceil(max size / 32) * 32
    # computed in float (folded at import, so the maps' dims are constants); a batched NMS
    # whose number of detections depends on the data (NonZero per class, TopK,
    # NonMaxSuppression): not named by nature. Built at every level.
    "ssdlite": dict(named=False, match_casts=10, levels=(0, 1, 2)),
    # export_vision.py: optical flow. Built at -O0 too: at 64x128 the pyramid's coarsest level is
    # one pixel high and the traced graph samples it at infinite coordinates; a batch-2 case.
    # RAFT needs height and width divisible by 8: each refinement adds the features' size after
    # three stride-2 convs, (((h + 1) // 2 + 1) // 2 + 1) // 2, to a grid of h // 8, equal only
    # then, checked at run time (two match_casts per refinement).
    # The flow is in pixels (up to 6.5): on vulkan the instance norms' sums over 64x64 run in
    # another order than on cpu (5e-6 of the scale apart), and four refinements, each sampling
    # where the last pointed, carry that to 1.4e-4 pixels. On cpu the correlation volume's
    # products sum in the runtime's order (runtime/gemm.h, not OpenBLAS's, since issue 44), and
    # the refinements carry that to 2.8e-5 pixels at 96x160.
    "raft_flow": dict(named=True, match_casts=8, levels=(0, 2), atol={"cpu": 5e-5, "vulkan": 5e-4}),
}


def run(cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def named_dims(sig):
    """Whether every output dim is an int or an expression over input dim names."""
    names = {d for i in sig["inputs"] for d in (i.get("shape") or []) if isinstance(d, str)}
    for o in sig["outputs"]:
        if o.get("shape") is None:
            return False
        for d in o["shape"]:
            if isinstance(d, int):
                continue
            if d is None or not set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", d)) - {"min", "max"} <= names:
                return False
    return True


def atol_of(name, target):
    """The absolute tolerance of a model's cases on a target: EXPECTED's atol
    (a number, or a number per target), else 1e-5."""
    atol = EXPECTED[name].get("atol", 1e-5)
    return atol.get(target, 1e-5) if isinstance(atol, dict) else atol


def check_model(args, name, tmp):
    t0 = time.monotonic()
    row = check_model_untimed(args, name, tmp)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def check_model_untimed(args, name, tmp):
    row = {"model": name}
    onnx_path = os.path.join(HERE, name + ".onnx")
    ir = os.path.join(tmp, name + ".relax")
    p = run([os.path.join(args.bin, "relax-import"), onnx_path, "-o", ir, "--json"])
    row["import"] = p.returncode == 0
    if not row["import"]:
        row["error"] = p.stderr.strip()[-500:]
        return row
    sig = json.loads(p.stdout)
    row["named"] = named_dims(sig)
    row["outputs"] = [o.get("shape") for o in sig["outputs"]]
    with open(ir) as f:
        main = f.read().split("fn @main", 1)[-1]
    row["match_casts"] = main.count("match_cast(")
    cases = sorted(os.listdir(os.path.join(HERE, "data", name)))
    row["cases"] = cases
    for target in args.targets:
        right, runs, errors, wrong, refused = 0, 0, [], [], {}
        for level in EXPECTED[name].get("levels", (2,)):
            # a case at another level than -O2 is named with it: "b2_64x128 (-O0)"
            tag = "" if level == 2 else f" (-O{level})"
            pkg = os.path.join(tmp, f"{name}.O{level}.{target}.rpkg")
            b = run([os.path.join(args.bin, "relax-build"), onnx_path, "--target", target, f"-O{level}", "-o", pkg])
            if b.returncode != 0:
                row[target] = {"built": False, "right": 0, "error": f"-O{level}: " + b.stderr.strip()[-500:]}
                break
            for case in cases:
                runs += 1
                r = run([os.path.join(args.bin, "relax-run"), pkg, "--test-data",
                         os.path.join(HERE, "data", name, case), "--atol", str(atol_of(name, target))])
                if r.returncode == 0:
                    right += 1
                else:
                    wrong.append(case + tag)
                    errors.append(f"{case}{tag}: {(r.stderr.strip() or r.stdout.strip())[-300:]}")
                    if "error:" in r.stderr:
                        refused[case + tag] = r.stderr
        else:
            row[target] = {"built": True, "right": right, "runs": runs, "errors": errors, "wrong": wrong,
                           "refused": refused}
    return row


def problems_of(row, targets):
    want = EXPECTED[row["model"]]
    out = []
    if not row["import"]:
        return [f"import failed: {row.get('error')}"]
    if want.get("named") and not row["named"]:
        out.append(f"outputs lost their named dims: {row['outputs']}")
    if row["match_casts"] > want.get("match_casts", 0):
        out.append(f"{row['match_casts']} match_casts in @main, expected at most {want.get('match_casts', 0)}")
    for t in targets:
        r = row[t]
        if not r["built"]:
            out.append(f"{t}: build failed: {r['error']}")
        elif want.get("known_refused", {}).get(t):
            # Each listed case fails with an error that says why; others are right.
            for case, why in want["known_refused"][t].items():
                if why not in r["refused"].get(case, ""):
                    out.append(f"{t}: {case} should be refused with an error naming '{why}'")
            others = set(r["wrong"]) - set(want["known_refused"][t])
            if others:
                out.append(f"{t}: {r['right']} of {r['runs']} cases right: {r['errors']}")
        elif set(r["wrong"]) != want.get("known_wrong", {}).get(t, set()):
            known = want.get("known_wrong", {}).get(t, set())
            if set(r["wrong"]) - known:
                out.append(f"{t}: {r['right']} of {r['runs']} cases right: {r['errors']}")
            if known - set(r["wrong"]):
                out.append(f"{t}: {sorted(known - set(r['wrong']))} listed as known wrong now come out right: "
                           "remove them from EXPECTED")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--targets", default="cpu")
    ap.add_argument("--json")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--models", help="check only these models (comma-separated)")
    args = ap.parse_args()
    names = [n for n in EXPECTED if not args.models or n in args.models.split(",")]
    args.targets = [t for t in args.targets.split(",") if t]
    rows, failures = [], 0
    head = f"{'model':<16} {'import':<7} {'named dims':<11} {'match_casts':>11}" + "".join(
        f" {t + ' right':>13}" for t in args.targets) + "  seconds"
    print(head, flush=True)
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        futures = [pool.submit(check_model, args, name, tmp) for name in names]
        for name, future in zip(names, futures):
            row = future.result()
            rows.append(row)
            cells = "".join(
                f" {(str(row[t]['right']) + '/' + str(row[t]['runs'])) if row[t]['built'] else 'no build':>13}"
                if row["import"] else f" {'-':>13}" for t in args.targets)
            print(f"{name:<16} {'yes' if row['import'] else 'no':<7} {'yes' if row.get('named') else 'no':<11} "
                  f"{row.get('match_casts', '-'):>11}{cells}  {row['seconds']:7.1f}", flush=True)
            for pr in problems_of(row, args.targets):
                print(f"    FAIL {pr}")
                failures += 1
            for t, known in EXPECTED[name].get("known_wrong", {}).items():
                if t in args.targets:
                    print(f"    known wrong on {t}: {sorted(known)}")
            for t, known in EXPECTED[name].get("known_refused", {}).items():
                if t in args.targets:
                    print(f"    refused on {t} (as expected): {sorted(known)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"corpus: {len(rows)} models, {failures} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
