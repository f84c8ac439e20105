#!/usr/bin/env python3
"""Exports the corpus models that ONNX Runtime's transformer optimizer and
its generate() tooling write: graphs of com.microsoft ops, built here node by
node as those tools fuse them, with random seeded weights.

  bert_ort_fused   EmbedLayerNormalization -> Attention (raw 2-D mask) ->
                   SkipLayerNormalization -> MatMul + BiasGelu -> MatMul ->
                   SkipLayerNormalization, as ORT's BERT optimizer fuses one
                   layer
  llm_ort_fused    SimplifiedLayerNormalization -> MatMulNBits (4-bit
                   weights, block 16) -> RotaryEmbedding (halves and
                   interleaved, position_ids) -> SkipSimplifiedLayerNormalization,
                   as a quantised Llama block writes them
  attention_ort    MultiHeadAttention (cross attention, bias, key padding
                   mask) and GroupQueryAttention (4 query heads over 2 key
                   heads, rotary, past, prompt and decode steps)
  contrib_misc     BiasSoftmax (inner and outer broadcast), BiasAdd,
                   GemmFastGelu
  gqa_window_ort   GroupQueryAttention with a sliding window
                   (local_window_size), rotary at position_ids, an
                   attention_bias and softcap (prompt and decode steps)

The references of all but contrib_misc are ONNX Runtime's own outputs (npm's
onnxruntime-node 1.30, CPU, optimisations off), through ort_reference.js;
BiasSoftmax, BiasAdd and GemmFastGelu have no CPU kernel in ONNX Runtime,
so theirs come from numpy, by the formulas of its CUDA kernels.

    /usr/bin/python3 tests/corpus/export_contrib.py --ort-node /tmp/ort/node_modules
"""
import argparse
import json
import math
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MS = "com.microsoft"
rng = np.random.default_rng(0)


def f32(*shape, scale=0.2):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init(name, arr):
    return numpy_helper.from_array(arr, name)


def model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def vi(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, dims)


# ---- bert_ort_fused ------------------------------------------------------------------------

def bert_ort_fused():
    V, P, D, N, F = 50, 32, 16, 4, 32
    inits = [init("word", f32(V, D)), init("pos", f32(P, D)), init("seg", f32(2, D)),
             init("g0", 1 + f32(D)), init("b0", f32(D)), init("qkv_w", f32(D, 3 * D)), init("qkv_b", f32(3 * D)),
             init("wo", f32(D, D)), init("bo", f32(D)), init("g1", 1 + f32(D)), init("b1", f32(D)),
             init("w1", f32(D, F)), init("bias1", f32(F)), init("w2", f32(F, D)), init("bias2", f32(D)),
             init("g2", 1 + f32(D)), init("b2", f32(D))]
    nodes = [
        helper.make_node("EmbedLayerNormalization",
                         ["input_ids", "segment_ids", "word", "pos", "seg", "g0", "b0", "attention_mask"],
                         ["emb", "mask_index"], domain=MS, epsilon=1e-12, name="EmbedLayerNorm_0"),
        helper.make_node("Attention", ["emb", "qkv_w", "qkv_b", "attention_mask"], ["attn"], domain=MS,
                         num_heads=N, name="Attention_0"),
        helper.make_node("MatMul", ["attn", "wo"], ["attn_out"], name="MatMul_o"),
        helper.make_node("SkipLayerNormalization", ["attn_out", "emb", "g1", "b1", "bo"], ["h1"], domain=MS,
                         epsilon=1e-12, name="SkipLayerNorm_0"),
        helper.make_node("MatMul", ["h1", "w1"], ["ff1"], name="MatMul_1"),
        helper.make_node("BiasGelu", ["ff1", "bias1"], ["act"], domain=MS, name="BiasGelu_0"),
        helper.make_node("MatMul", ["act", "w2"], ["ff2"], name="MatMul_2"),
        helper.make_node("SkipLayerNormalization", ["ff2", "h1", "g2", "b2", "bias2"], ["last_hidden_state"],
                         domain=MS, epsilon=1e-12, name="SkipLayerNorm_1"),
    ]
    seq = ["batch_size", "sequence_length"]
    m = model("bert_ort_fused", nodes,
              [vi("input_ids", TensorProto.INT32, seq), vi("segment_ids", TensorProto.INT32, seq),
               vi("attention_mask", TensorProto.INT32, seq)],
              [vi("last_hidden_state", TensorProto.FLOAT, seq + [D]), vi("mask_index", TensorProto.INT32, ["batch_size"])],
              inits)
    cases = []
    for b, s in ((1, 5), (2, 12), (3, 31)):
        mask = np.ones((b, s), np.int32)
        mask[-1, s - s // 3:] = 0
        cases.append((f"b{b}_s{s}", [rng.integers(0, V, (b, s)).astype(np.int32),
                                     rng.integers(0, 2, (b, s)).astype(np.int32), mask]))
    return m, cases


# ---- llm_ort_fused -------------------------------------------------------------------------

def quantize_4bit(w, block):
    """(N, K) float -> B (N, blocks, block / 2) uint8, scales (N * blocks), zero points packed (N, ceil(blocks / 2))."""
    n, k = w.shape
    blocks = (k + block - 1) // block
    wp = np.zeros((n, blocks * block), np.float32)
    wp[:, :k] = w
    wb = wp.reshape(n, blocks, block)
    lo, hi = wb.min(-1), wb.max(-1)
    scale = np.maximum(hi - lo, 1e-6) / 15
    zero = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(wb / scale[..., None]) + zero[..., None], 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zp = np.zeros((n, (blocks + 1) // 2 * 2), np.uint8)
    zp[:, :blocks] = zero
    zpacked = (zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8)
    return packed, scale.astype(np.float32).reshape(-1), zpacked


def llm_ort_fused():
    D, N, H, MAXS = 32, 4, 8, 64
    inits = [init("ln_w", 1 + f32(D)), init("ln2_w", 1 + f32(D))]
    nodes = [helper.make_node("SimplifiedLayerNormalization", ["x", "ln_w"], ["xn"], epsilon=1e-6, axis=-1,
                              name="RMSNorm_0")]
    for proj, zp in (("q", True), ("v", False)):
        packed, scales, zpacked = quantize_4bit(f32(D, D, scale=0.5), 16)
        inits += [init(f"{proj}_B", packed), init(f"{proj}_scales", scales)]
        ins = ["xn", f"{proj}_B", f"{proj}_scales"]
        if zp:
            inits.append(init(f"{proj}_zp", zpacked))
            ins.append(f"{proj}_zp")
        nodes.append(helper.make_node("MatMulNBits", ins, [f"{proj}_out"], domain=MS, K=D, N=D, bits=4,
                                      block_size=16, name=f"MatMulNBits_{proj}"))
    inv = 1.0 / (10000 ** (np.arange(0, H, 2, dtype=np.float32) / H))
    ang = np.arange(MAXS, dtype=np.float32)[:, None] * inv[None, :]
    inits += [init("cos_cache", np.cos(ang).astype(np.float32)), init("sin_cache", np.sin(ang).astype(np.float32))]
    nodes += [
        helper.make_node("RotaryEmbedding", ["q_out", "position_ids", "cos_cache", "sin_cache"], ["q_rot"], domain=MS,
                         num_heads=N, interleaved=0, name="Rotary_halves"),
        helper.make_node("Reshape", ["v_out", "heads_shape"], ["v_heads"], name="Reshape_v"),
        helper.make_node("Transpose", ["v_heads"], ["v_bnsh"], perm=[0, 2, 1, 3], name="Transpose_v"),
        helper.make_node("RotaryEmbedding", ["v_bnsh", "position_ids", "cos_cache", "sin_cache"], ["v_rot"],
                         domain=MS, interleaved=1, name="Rotary_pairs"),
        helper.make_node("SkipSimplifiedLayerNormalization", ["q_rot", "x", "ln2_w"], ["normed"], domain=MS,
                         epsilon=1e-6, name="SkipRMSNorm_0"),
    ]
    inits.append(init("heads_shape", np.array([0, 0, N, H], np.int64)))
    seq = ["batch_size", "sequence_length"]
    m = model("llm_ort_fused", nodes,
              [vi("x", TensorProto.FLOAT, seq + [D]), vi("position_ids", TensorProto.INT64, seq)],
              [vi("q_rot", TensorProto.FLOAT, seq + [D]), vi("v_rot", TensorProto.FLOAT, ["batch_size", N,
                                                                                         "sequence_length", H]),
               vi("normed", TensorProto.FLOAT, seq + [D])], inits)
    cases = []
    for b, s, past in ((1, 1, 9), (2, 6, 0), (1, 20, 3)):
        pos = np.broadcast_to(np.arange(past, past + s, dtype=np.int64), (b, s)).copy()
        cases.append((f"b{b}_s{s}_p{past}", [f32(b, s, D, scale=1.0), pos]))
    return m, cases


# ---- attention_ort: MultiHeadAttention and GroupQueryAttention ----------------------------

def attention_ort():
    D, N, NKV, H, MAXS = 16, 4, 2, 16, 64
    inv = 1.0 / (10000 ** (np.arange(0, H, 2, dtype=np.float32) / H))
    ang = np.arange(MAXS, dtype=np.float32)[:, None] * inv[None, :]
    inits = [init("mha_bias", f32(3 * D)), init("cos_cache", np.cos(ang).astype(np.float32)),
             init("sin_cache", np.sin(ang).astype(np.float32))]
    nodes = [
        helper.make_node("MultiHeadAttention", ["q", "kv", "kv", "mha_bias", "kv_mask"], ["mha_out"], domain=MS,
                         num_heads=N, name="MHA_cross"),
        helper.make_node("GroupQueryAttention", ["gq", "gk", "gv", "past_key", "past_value", "seqlens_k",
                                                 "total_sequence_length", "cos_cache", "sin_cache"],
                         ["gqa_out", "present_key", "present_value"], domain=MS, num_heads=N, kv_num_heads=NKV,
                         do_rotary=1, name="GQA_0"),
    ]
    m = model("attention_ort", nodes,
              [vi("q", TensorProto.FLOAT, ["batch", "seq", D]), vi("kv", TensorProto.FLOAT, ["batch", "kv_seq", D]),
               vi("kv_mask", TensorProto.INT32, ["batch", "kv_seq"]),
               vi("gq", TensorProto.FLOAT, ["batch", "seq", N * H]), vi("gk", TensorProto.FLOAT, ["batch", "seq", NKV * H]),
               vi("gv", TensorProto.FLOAT, ["batch", "seq", NKV * H]),
               vi("past_key", TensorProto.FLOAT, ["batch", NKV, "past", H]),
               vi("past_value", TensorProto.FLOAT, ["batch", NKV, "past", H]),
               vi("seqlens_k", TensorProto.INT32, ["batch"]), vi("total_sequence_length", TensorProto.INT32, [])],
              [vi("mha_out", TensorProto.FLOAT, ["batch", "seq", D]), vi("gqa_out", TensorProto.FLOAT, ["batch", "seq", N * H]),
               vi("present_key", TensorProto.FLOAT, ["batch", NKV, "total", H]),
               vi("present_value", TensorProto.FLOAT, ["batch", NKV, "total", H])], inits)
    cases = []
    for b, s, l, past in ((1, 5, 3, 0), (2, 1, 7, 6), (1, 1, 4, 11)):
        mask = np.ones((b, l), np.int32)
        mask[-1, l - 1] = 0
        cases.append((f"b{b}_s{s}_p{past}", [
            f32(b, s, D, scale=1.0), f32(b, l, D, scale=1.0), mask, f32(b, s, N * H, scale=1.0),
            f32(b, s, NKV * H, scale=1.0), f32(b, s, NKV * H, scale=1.0), f32(b, NKV, past, H, scale=1.0),
            f32(b, NKV, past, H, scale=1.0), np.full((b,), past + s - 1, np.int32), np.array(past + s, np.int32)]))
    return m, cases


# ---- gqa_window_ort: GroupQueryAttention with a sliding window -----------------------------

def gqa_window_ort():
    """A Mistral-style decoder's attention as ONNX Runtime's tools write it:
    a sliding window (local_window_size), rotary at explicit position_ids,
    an additive attention_bias and softcap."""
    global rng
    rng = np.random.default_rng(5)  # its own inputs, with --only or without
    N, NKV, H, MAXS, W = 4, 2, 16, 64, 3
    inv = 1.0 / (10000 ** (np.arange(0, H, 2, dtype=np.float32) / H))
    ang = np.arange(MAXS, dtype=np.float32)[:, None] * inv[None, :]
    inits = [init("cos_cache", np.cos(ang).astype(np.float32)), init("sin_cache", np.sin(ang).astype(np.float32))]
    nodes = [helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_key", "past_value", "seqlens_k",
                                                      "total_sequence_length", "cos_cache", "sin_cache",
                                                      "position_ids", "attention_bias"],
                              ["out", "present_key", "present_value"], domain=MS, num_heads=N, kv_num_heads=NKV,
                              do_rotary=1, local_window_size=W, softcap=2.0, name="GQA_window")]
    m = model("gqa_window_ort", nodes,
              [vi("q", TensorProto.FLOAT, ["batch", "seq", N * H]), vi("k", TensorProto.FLOAT, ["batch", "seq", NKV * H]),
               vi("v", TensorProto.FLOAT, ["batch", "seq", NKV * H]),
               vi("past_key", TensorProto.FLOAT, ["batch", NKV, "past", H]),
               vi("past_value", TensorProto.FLOAT, ["batch", NKV, "past", H]),
               vi("seqlens_k", TensorProto.INT32, ["batch"]), vi("total_sequence_length", TensorProto.INT32, []),
               vi("position_ids", TensorProto.INT64, ["batch", "seq"]),
               vi("attention_bias", TensorProto.FLOAT, ["batch", 1, "seq", "total"])],
              [vi("out", TensorProto.FLOAT, ["batch", "seq", N * H]),
               vi("present_key", TensorProto.FLOAT, ["batch", NKV, "total", H]),
               vi("present_value", TensorProto.FLOAT, ["batch", NKV, "total", H])], inits)
    cases = []
    for b, s, past in ((1, 6, 0), (2, 1, 7), (1, 2, 9)):
        pos = np.broadcast_to(np.arange(past, past + s, dtype=np.int64) + 2, (b, s)).copy()
        cases.append((f"b{b}_s{s}_p{past}", [
            f32(b, s, N * H, scale=1.0), f32(b, s, NKV * H, scale=1.0), f32(b, s, NKV * H, scale=1.0),
            f32(b, NKV, past, H, scale=1.0), f32(b, NKV, past, H, scale=1.0), np.full((b,), past + s - 1, np.int32),
            np.array(past + s, np.int32), pos, f32(b, 1, s, past + s, scale=0.5)]))
    return m, cases


# ---- contrib_misc (numpy references) -------------------------------------------------------

def softmax_from(z, axis):
    shape = z.shape
    flat = z.reshape(int(np.prod(shape[:axis])), -1)
    e = np.exp(flat - flat.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).reshape(shape)


def fast_gelu(z):
    return 0.5 * z * (1 + np.tanh(z * (0.035677408136300125 * z * z + 0.7978845608028654)))


def contrib_misc():
    C, K = 8, 12
    inits = [init("mm_w", f32(K, C)), init("mm_b", f32(C)), init("add_bias", f32(C))]
    nodes = [
        helper.make_node("BiasSoftmax", ["scores", "mask_bias"], ["probs_inner"], domain=MS, axis=3,
                         is_inner_broadcast=1, name="BiasSoftmax_inner"),
        helper.make_node("BiasSoftmax", ["scores", "rel_bias"], ["probs_outer"], domain=MS, axis=2,
                         is_inner_broadcast=0, name="BiasSoftmax_outer"),
        helper.make_node("GemmFastGelu", ["feat", "mm_w", "mm_b"], ["gelu_out"], domain=MS, name="GemmFastGelu_0"),
        helper.make_node("BiasAdd", ["gelu_out", "add_bias", "skip"], ["biased"], domain=MS, name="BiasAdd_0"),
    ]
    m = model("contrib_misc", nodes,
              [vi("scores", TensorProto.FLOAT, ["b", 2, "s", "s"]), vi("mask_bias", TensorProto.FLOAT, ["b", 1, 1, "s"]),
               vi("rel_bias", TensorProto.FLOAT, [2, "s", "s"]), vi("feat", TensorProto.FLOAT, ["b", "s", K]),
               vi("skip", TensorProto.FLOAT, ["b", "s", C])],
              [vi("probs_inner", TensorProto.FLOAT, ["b", 2, "s", "s"]),
               vi("probs_outer", TensorProto.FLOAT, ["b", 2, "s", "s"]), vi("biased", TensorProto.FLOAT, ["b", "s", C])],
              inits)
    w = {i.name: numpy_helper.to_array(i) for i in inits}
    cases = []
    for b, s in ((1, 3), (2, 7)):
        ins = [f32(b, 2, s, s, scale=1.0), f32(b, 1, 1, s, scale=1.0), f32(2, s, s, scale=1.0), f32(b, s, K, scale=1.0),
               f32(b, s, C)]
        scores, mask_bias, rel_bias, feat, skip = ins
        gelu = fast_gelu(feat @ w["mm_w"] + w["mm_b"])
        outs = [softmax_from(scores + mask_bias, 3), softmax_from(scores + rel_bias, 2),
                gelu + w["add_bias"] + skip]
        cases.append((f"b{b}_s{s}", ins, [o.astype(np.float32) for o in outs]))
    return m, cases


# ---- writing -------------------------------------------------------------------------------

NP_TO_ORT = {np.float32: "float32", np.int64: "int64", np.int32: "int32", np.uint8: "uint8"}


def ort_outputs(node_modules, path, ins, names):
    with tempfile.TemporaryDirectory() as tmp:
        spec = []
        for name, a in zip(names, ins):
            f = os.path.join(tmp, name + ".bin")
            a.tofile(f)
            spec.append({"name": name, "dtype": NP_TO_ORT[a.dtype.type], "shape": list(a.shape), "file": f})
        with open(os.path.join(tmp, "in.json"), "w") as fh:
            json.dump(spec, fh)
        subprocess.run(["node", os.path.join(HERE, "ort_reference.js"), path, os.path.join(tmp, "in.json"), tmp],
                       check=True, env=dict(os.environ, NODE_PATH=node_modules))
        outs = []
        for k, o in enumerate(json.load(open(os.path.join(tmp, "outputs.json")))):
            dt = {"float32": np.float32, "int32": np.int32, "int64": np.int64}[o["dtype"]]
            outs.append(np.fromfile(os.path.join(tmp, f"output_{k}.bin"), dt).reshape(o["shape"]))
        return outs


def save(name, m, cases, node_modules):
    # No onnx.checker: ORT registers SimplifiedLayerNormalization in the ONNX domain, which the checker refuses.
    path = os.path.join(HERE, name + ".onnx")
    onnx.save(m, path)
    names = [i.name for i in m.graph.input]
    for case in cases:
        cname, ins = case[0], case[1]
        outs = case[2] if len(case) > 2 else ort_outputs(node_modules, path, ins, names)
        d = os.path.join(HERE, "data", name, cname)
        os.makedirs(d, exist_ok=True)
        for k, a in enumerate(ins):
            onnx.save_tensor(numpy_helper.from_array(a), os.path.join(d, f"input_{k}.pb"))
        for k, a in enumerate(outs):
            onnx.save_tensor(numpy_helper.from_array(a), os.path.join(d, f"output_{k}.pb"))
    print(f"{name}: {os.path.getsize(path)} bytes, {len(cases)} cases")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ort-node", required=True, help="a node_modules folder holding onnxruntime-node")
    ap.add_argument("--only", help="write only this model")
    args = ap.parse_args()
    for name, make in (("bert_ort_fused", bert_ort_fused), ("llm_ort_fused", llm_ort_fused),
                       ("attention_ort", attention_ort), ("contrib_misc", contrib_misc),
                       ("gqa_window_ort", gqa_window_ort)):
        if args.only and name != args.only:
            continue
        m, cases = make()
        save(name, m, cases, args.ort_node)


if __name__ == "__main__":
    main()
