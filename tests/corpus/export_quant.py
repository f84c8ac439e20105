#!/usr/bin/env python3
"""Exports the quantised corpus models, built node by node as ONNX Runtime's
quantisation tools write them, with random seeded weights; the references
are ONNX Runtime's own outputs (npm's onnxruntime-node, CPU, graph
optimisations off, so each QuantizeLinear / DequantizeLinear runs as
written), through ort_reference.js.

  dynquant_seg   quantize_dynamic of a small segmentation net:
                 DynamicQuantizeLinear -> ConvInteger (u8 x u8, zero points)
                 -> Cast -> Mul (x_scale * w_scale) -> Add bias -> Relu,
                 twice, then a 1x1 head; dynamic batch, height, width
  qdq_detector   QDQ int8 (opset 21): QuantizeLinear / DequantizeLinear
                 around every conv, per-channel int8 weights (axis 0),
                 u8 activations with zero points, a strided conv, a
                 residual add of two dequantised tensors, a sigmoid head
  dynquant_resnet  quantize_dynamic of a small ResNet (32 and 64 channels, 3x3
                 convolutions with reductions of 288 and 576: too long to be
                 exact in f32, so integer products): DynamicQuantizeLinear ->
                 ConvInteger (u8 x u8, zero points) -> Cast -> Mul -> Add bias
                 -> Relu, residual adds in f32, strided downsampling, global
                 average pool and a float head; dynamic batch, height, width
  bert_dynquant  quantize_dynamic of a BERT encoder (hidden 160, 4 heads,
                 FFN 640, 2 layers): every linear layer DynamicQuantizeLinear
                 (shared by the layers reading one tensor) -> MatMulInteger
                 (u8 x symmetric i8 weights, K = 160 and 640) -> Cast -> Mul
                 (x_scale * w_scale) -> Add bias; attention, softmax, GELU
                 and layer norms in f32; dynamic batch and sequence
  bert_qdq       quantize_static (QDQ) of a BERT encoder (hidden 192, 3 heads,
                 FFN 768, 2 layers): QuantizeLinear -> DequantizeLinear on
                 both inputs of every MatMul, the attention products too (u8
                 activations with zero points, calibrated on the cases'
                 inputs through the float model; int8 weights symmetric per
                 output column); dynamic batch and sequence
  qdq_resnet     quantize_static (QDQ) of a small ResNet (32, 64, 128 channels,
                 residual blocks, a MatMul head): the 64- and 128-channel
                 convolutions (576 taps and more) run as integer products

Inputs are large enough (thousands of values per tensor) for rounding ties,
saturation at both ends and non-zero zero points to occur.

    /usr/bin/python3 tests/corpus/export_quant.py --ort-node /tmp/ort/node_modules
"""
import argparse
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

from export_contrib import init, ort_outputs, save, vi

rng = np.random.default_rng(7)


def model(name, nodes, inputs, outputs, inits, opset):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10 if opset >= 21 else 8
    return m


def conv_weights(cout, cin, k):
    return (rng.standard_normal((cout, cin, k, k)) * (1.0 / np.sqrt(cin * k * k))).astype(np.float32)


# ---- dynquant_seg ---------------------------------------------------------------------------

def quantize_u8(w):
    """Per-tensor asymmetric u8 weights, as quantize_dynamic writes them."""
    lo, hi = min(w.min(), 0.0), max(w.max(), 0.0)
    scale = np.float32((hi - lo) / 255.0)
    zp = np.uint8(np.clip(np.round(-lo / scale), 0, 255))
    q = np.clip(np.round(w / scale) + zp, 0, 255).astype(np.uint8)
    return q, scale, zp


def dynquant_seg():
    nodes, inits = [], []
    x = "input"
    for i, (cin, cout, k) in enumerate(((3, 8, 3), (8, 8, 3), (8, 4, 1))):
        w = conv_weights(cout, cin, k)
        q, ws, wz = quantize_u8(w)
        p = f"l{i}_"
        inits += [init(p + "w_q", q), init(p + "w_scale", np.array(ws, np.float32)),
                  init(p + "w_zp", np.array(wz, np.uint8)),
                  init(p + "bias", (rng.standard_normal(cout) * 0.1).astype(np.float32))]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [p + "x_q", p + "x_scale", p + "x_zp"]),
            helper.make_node("ConvInteger", [p + "x_q", p + "w_q", p + "x_zp", p + "w_zp"], [p + "acc"],
                             pads=[k // 2] * 4),
            helper.make_node("Cast", [p + "acc"], [p + "acc_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "x_scale", p + "w_scale"], [p + "scale"]),
            helper.make_node("Mul", [p + "acc_f", p + "scale"], [p + "scaled"]),
        ]
        inits.append(init(p + "bias_shape", np.array([1, cout, 1, 1], np.int64)))
        nodes += [helper.make_node("Reshape", [p + "bias", p + "bias_shape"], [p + "bias4"]),
                  helper.make_node("Add", [p + "scaled", p + "bias4"], [p + "out"])]
        x = p + "out"
        if i < 2:
            nodes.append(helper.make_node("Relu", [x], [p + "relu"]))
            x = p + "relu"
    nodes.append(helper.make_node("Identity", [x], ["logits"]))
    m = model("dynquant_seg", nodes, [vi("input", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
              [vi("logits", TensorProto.FLOAT, ["batch", 4, "height", "width"])], inits, 17)
    cases = [(f"b{b}_{h}x{w}", [(rng.standard_normal((b, 3, h, w)) * 1.5).astype(np.float32)])
             for b, h, w in ((1, 24, 32), (2, 40, 36))]
    return m, cases


# ---- dynquant_resnet --------------------------------------------------------------------------

def dynquant_resnet():
    r = np.random.default_rng(13)  # its own: --only writes the same model
    nodes, inits = [], []

    def conv(x, name, cin, cout, stride=1, relu=True):
        w = (r.standard_normal((cout, cin, 3, 3)) * (1.0 / np.sqrt(cin * 9))).astype(np.float32)
        q, ws, wz = quantize_u8(w)
        inits.extend([init(name + "_wq", q), init(name + "_ws", np.array(ws, np.float32)),
                      init(name + "_wz", np.array(wz, np.uint8)),
                      init(name + "_b", (r.standard_normal((1, cout, 1, 1)) * 0.1).astype(np.float32))])
        nodes.extend([
            helper.make_node("DynamicQuantizeLinear", [x], [name + "_xq", name + "_xs", name + "_xz"]),
            helper.make_node("ConvInteger", [name + "_xq", name + "_wq", name + "_xz", name + "_wz"], [name + "_acc"],
                             pads=[1, 1, 1, 1], strides=[stride, stride]),
            helper.make_node("Cast", [name + "_acc"], [name + "_accf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [name + "_xs", name + "_ws"], [name + "_scale"]),
            helper.make_node("Mul", [name + "_accf", name + "_scale"], [name + "_scaled"]),
            helper.make_node("Add", [name + "_scaled", name + "_b"], [name + "_y"]),
        ])
        if not relu:
            return name + "_y"
        nodes.append(helper.make_node("Relu", [name + "_y"], [name + "_r"]))
        return name + "_r"

    x = conv("images", "stem", 3, 32, stride=2)
    for i, (cin, cout, stride) in enumerate(((32, 32, 1), (32, 64, 2), (64, 64, 1))):
        p = f"b{i}"
        h = conv(x, p + "c1", cin, cout, stride)
        h = conv(h, p + "c2", cout, cout, relu=False)
        if cin != cout or stride != 1:
            x = conv(x, p + "proj", cin, cout, stride, relu=False)
        nodes.append(helper.make_node("Add", [x, h], [p + "_sum"]))
        nodes.append(helper.make_node("Relu", [p + "_sum"], [p + "_out"]))
        x = p + "_out"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"]))
    inits.append(init("fc_w", (r.standard_normal((64, 10)) * 0.2).astype(np.float32)))
    inits.append(init("fc_b", (r.standard_normal(10) * 0.1).astype(np.float32)))
    nodes.append(helper.make_node("MatMul", ["flat", "fc_w"], ["fc"]))
    nodes.append(helper.make_node("Add", ["fc", "fc_b"], ["logits"]))
    m = model("dynquant_resnet", nodes, [vi("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
              [vi("logits", TensorProto.FLOAT, ["batch", 10])], inits, 17)
    cases = [(f"b{b}_{h}x{w}", [(r.standard_normal((b, 3, h, w)) * 1.2).astype(np.float32)])
             for b, h, w in ((1, 32, 32), (2, 40, 48))]
    return m, cases


# ---- qdq_detector ---------------------------------------------------------------------------

def qdq_detector():
    nodes, inits = [], []

    def qdq(src, name, scale, zp):
        inits.extend([init(name + "_s", np.array(scale, np.float32)), init(name + "_z", np.array(zp, np.uint8))])
        nodes.extend([helper.make_node("QuantizeLinear", [src, name + "_s", name + "_z"], [name + "_q"]),
                      helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name])])
        return name

    def conv(src, name, cin, cout, k, stride=1):
        w = conv_weights(cout, cin, k)
        ws = (np.abs(w).reshape(cout, -1).max(1) / 127.0).astype(np.float32)  # per channel, symmetric
        wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
        inits.extend([init(name + "_wq", wq), init(name + "_ws", ws), init(name + "_wz", np.zeros(cout, np.int8)),
                      init(name + "_b", (rng.standard_normal(cout) * 0.05).astype(np.float32))])
        nodes.extend([
            helper.make_node("DequantizeLinear", [name + "_wq", name + "_ws", name + "_wz"], [name + "_w"], axis=0),
            helper.make_node("Conv", [src, name + "_w", name + "_b"], [name + "_y"], pads=[k // 2] * 4,
                             strides=[stride, stride]),
        ])
        return name + "_y"

    x = qdq("images", "in", 0.02, 128)
    a = conv(x, "c1", 3, 8, 3)
    nodes.append(helper.make_node("Relu", [a], ["c1_r"]))
    a = qdq("c1_r", "a1", 0.015, 0)
    b = conv(a, "c2", 8, 8, 3, stride=2)
    b = qdq(b, "a2", 0.03, 120)
    c = conv(b, "c3", 8, 8, 3)
    c = qdq(c, "a3", 0.03, 118)
    nodes.append(helper.make_node("Add", [b, c], ["res"]))
    r = qdq("res", "a4", 0.04, 125)
    h = conv(r, "head", 8, 6, 1)
    h = qdq(h, "a5", 0.05, 128)
    nodes.append(helper.make_node("Sigmoid", [h], ["scores"]))
    m = model("qdq_detector", nodes, [vi("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
              [vi("scores", TensorProto.FLOAT, ["batch", 6, None, None])], inits, 21)
    cases = [(f"b{b}_{hh}x{ww}", [(rng.standard_normal((b, 3, hh, ww)) * 1.2).astype(np.float32)])
             for b, hh, ww in ((1, 32, 32), (2, 48, 40))]
    return m, cases


# ---- bert_dynquant --------------------------------------------------------------------------


def bert_encoder(c, node, linear, layer_norm, hidden, heads, ffn, layers, word, pos, attention_input=lambda t: t):
    """A BERT encoder's nodes from input_ids and attention_mask: the
    embeddings (word() and pos() their tables, drawn in that order), then
    each layer's attention and FFN through linear(x, name, cin, cout) and
    layer_norm(x, name); attention_input(t) is what the attention products
    read of t. Returns the last hidden state's name."""
    dh = hidden // heads
    c("word_emb", word())
    c("pos_emb", pos())
    c("i0", np.array(0, np.int64))
    c("i1", np.array(1, np.int64))
    c("one", np.array(1.0, np.float32))
    c("neg", np.array(-10000.0, np.float32))
    c("heads_shape", np.array([0, 0, heads, dh], np.int64))
    c("merge_shape", np.array([0, 0, hidden], np.int64))
    c("mask_axes", np.array([1, 2], np.int64))
    c("inv_sqrt_dh", np.array(1.0 / np.sqrt(dh), np.float32))
    c("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), np.float32))
    c("half", np.array(0.5, np.float32))
    node("Shape", ["input_ids"], ["ids_shape"])
    node("Gather", ["ids_shape", "i1"], ["seq"], axis=0)
    node("Range", ["i0", "seq", "i1"], ["positions"])
    node("Gather", ["word_emb", "input_ids"], ["we"])
    node("Gather", ["pos_emb", "positions"], ["pe"])
    node("Add", ["we", "pe"], ["emb"])
    x = layer_norm("emb", "emb_ln")
    node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT)
    node("Sub", ["one", "mask_f"], ["mask_inv"])
    node("Mul", ["mask_inv", "neg"], ["mask_add"])
    node("Unsqueeze", ["mask_add", "mask_axes"], ["ext_mask"])
    a = attention_input
    for i in range(layers):
        p = f"l{i}_"
        q, k, v = (linear(x, p + n, hidden, hidden) for n in ("q", "k", "v"))
        for n, t in (("q", q), ("k", k), ("v", v)):
            node("Reshape", [t, "heads_shape"], [p + n + "_h"])
        node("Transpose", [p + "q_h"], [p + "qt"], perm=[0, 2, 1, 3])
        node("Transpose", [p + "k_h"], [p + "kt"], perm=[0, 2, 3, 1])
        node("Transpose", [p + "v_h"], [p + "vt"], perm=[0, 2, 1, 3])
        node("MatMul", [a(p + "qt"), a(p + "kt")], [p + "scores"])
        node("Mul", [p + "scores", "inv_sqrt_dh"], [p + "scaled"])
        node("Add", [p + "scaled", "ext_mask"], [p + "masked"])
        node("Softmax", [p + "masked"], [p + "probs"], axis=-1)
        node("MatMul", [a(p + "probs"), a(p + "vt")], [p + "ctx"])
        node("Transpose", [p + "ctx"], [p + "ctx_t"], perm=[0, 2, 1, 3])
        node("Reshape", [p + "ctx_t", "merge_shape"], [p + "ctx_m"])
        o = linear(p + "ctx_m", p + "o", hidden, hidden)
        node("Add", [x, o], [p + "res1"])
        x = layer_norm(p + "res1", p + "ln1")
        f = linear(x, p + "ff1", hidden, ffn)
        node("Mul", [f, "inv_sqrt2"], [p + "f_s"])
        node("Erf", [p + "f_s"], [p + "f_erf"])
        node("Add", [p + "f_erf", "one"], [p + "f_1"])
        node("Mul", [f, p + "f_1"], [p + "f_m"])
        node("Mul", [p + "f_m", "half"], [p + "gelu"])
        g = linear(p + "gelu", p + "ff2", ffn, hidden)
        node("Add", [x, g], [p + "res2"])
        x = layer_norm(p + "res2", p + "ln2")
    return x

def bert_dynquant(hidden=160, heads=4, ffn=640, layers=2, vocab=64, positions=64):
    r = np.random.default_rng(11)  # its own: --only writes the same model
    nodes, inits = [], []
    quantized = {}  # tensor -> (x_q, x_scale, x_zp): one DynamicQuantizeLinear per tensor

    def c(name, arr):
        inits.append(init(name, arr))
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, **attrs))
        return outs[0]

    def linear(x, name, cin, cout):
        w = (r.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32)
        ws = np.float32(np.abs(w).max() / 127.0)  # per tensor, symmetric
        c(name + "_wq", np.clip(np.round(w / ws), -127, 127).astype(np.int8))
        c(name + "_ws", np.array(ws, np.float32))
        c(name + "_wz", np.array(0, np.int8))
        c(name + "_b", (r.standard_normal(cout) * 0.05).astype(np.float32))
        if x not in quantized:
            quantized[x] = (x + "_q", x + "_s", x + "_z")
            node("DynamicQuantizeLinear", [x], list(quantized[x]))
        xq, xs, xz = quantized[x]
        node("MatMulInteger", [xq, name + "_wq", xz, name + "_wz"], [name + "_acc"])
        node("Cast", [name + "_acc"], [name + "_accf"], to=TensorProto.FLOAT)
        node("Mul", [xs, name + "_ws"], [name + "_scale"])
        node("Mul", [name + "_accf", name + "_scale"], [name + "_scaled"])
        return node("Add", [name + "_scaled", name + "_b"], [name + "_y"])

    def layer_norm(x, name):
        c(name + "_g", (1 + r.standard_normal(hidden) * 0.1).astype(np.float32))
        c(name + "_beta", (r.standard_normal(hidden) * 0.1).astype(np.float32))
        return node("LayerNormalization", [x, name + "_g", name + "_beta"], [name + "_y"], axis=-1, epsilon=1e-12)

    x = bert_encoder(c, node, linear, layer_norm, hidden, heads, ffn, layers,
                     lambda: (r.standard_normal((vocab, hidden)) * 0.5).astype(np.float32),
                     lambda: (r.standard_normal((positions, hidden)) * 0.1).astype(np.float32))
    node("Identity", [x], ["last_hidden_state"])
    m = model("bert_dynquant", nodes,
              [vi("input_ids", TensorProto.INT64, ["batch", "sequence"]),
               vi("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
              [vi("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])], inits, 17)
    cases = []
    for b, sq in ((1, 7), (2, 24), (3, 32)):  # (lavapipe runs at most 65,535 iterations of a loop: 3 x 32 x 640 for the ranges)
        ids = r.integers(0, vocab, (b, sq)).astype(np.int64)
        mask = np.ones((b, sq), np.int64)
        if b > 1:
            mask[1, sq - 5:] = 0  # a padded second sequence
        cases.append((f"b{b}_s{sq}", [ids, mask]))
    return m, cases



class QdqGraph:
    """Nodes and initialisers of a graph being built, and its activations'
    QuantizeLinear -> DequantizeLinear pairs (u8 over the calibrated range
    with 0 in it): with ranges None, the float model instead, whose
    tensors to quantize are collected in `points`."""

    def __init__(self, ranges):
        self.ranges, self.nodes, self.inits, self.points, self.done = ranges, [], [], [], {}

    def c(self, name, arr):
        self.inits.append(init(name, arr))
        return name

    def node(self, op, ins, outs, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, **attrs))
        return outs[0]

    def qdq(self, x):  # one pair per tensor, shared by its readers
        if x in self.done:
            return self.done[x]
        if self.ranges is None:
            self.points.append(x)
            self.done[x] = x
            return x
        lo, hi = min(self.ranges[x][0], 0.0), max(self.ranges[x][1], 0.0)
        s = np.float32((hi - lo) / 255.0)
        self.c(x + "_s", np.array(s, np.float32))
        self.c(x + "_z", np.array(np.uint8(np.clip(np.round(-lo / s), 0, 255)), np.uint8))
        self.node("QuantizeLinear", [x, x + "_s", x + "_z"], [x + "_q"])
        self.done[x] = self.node("DequantizeLinear", [x + "_q", x + "_s", x + "_z"], [x + "_dq"])
        return self.done[x]


# ---- bert_qdq -------------------------------------------------------------------------------

def bert_qdq(hidden=192, heads=3, ffn=768, layers=2, vocab=64, positions=64):
    """Static QDQ of a BERT encoder, as quantize_static(QuantFormat.QDQ)
    writes one: QuantizeLinear -> DequantizeLinear on both inputs of every
    MatMul (u8 activations with zero points, calibrated on the cases'
    inputs; int8 weights symmetric per output column, axis 1), the
    attention products QK^T and PV too; layer norm, softmax and GELU in
    f32. The float model is run once through ONNX Runtime for the ranges."""
    r = np.random.default_rng(13)
    weights = {}
    for i in range(layers):
        for n, cin, cout in (("q", hidden, hidden), ("k", hidden, hidden), ("v", hidden, hidden),
                             ("o", hidden, hidden), ("ff1", hidden, ffn), ("ff2", ffn, hidden)):
            w = (r.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32)
            weights[f"l{i}_{n}"] = (w, (r.standard_normal(cout) * 0.05).astype(np.float32))
    norms = {n: ((1 + r.standard_normal(hidden) * 0.1).astype(np.float32),
                 (r.standard_normal(hidden) * 0.1).astype(np.float32))
             for n in ["emb_ln"] + [f"l{i}_ln{j}" for i in range(layers) for j in (1, 2)]}
    word = (r.standard_normal((vocab, hidden)) * 0.5).astype(np.float32)
    pos = (r.standard_normal((positions, hidden)) * 0.1).astype(np.float32)
    cases = []
    for b, sq in ((1, 7), (2, 24), (3, 32)):
        ids = r.integers(0, vocab, (b, sq)).astype(np.int64)
        mask = np.ones((b, sq), np.int64)
        if b > 1:
            mask[1, sq - 5:] = 0
        cases.append((f"b{b}_s{sq}", [ids, mask]))

    def build(ranges):
        """The graph; with ranges None, the float model whose extra outputs
        are the tensors to quantize (in `points`)."""
        g = QdqGraph(ranges)
        c, node, qdq = g.c, g.node, g.qdq

        def linear(x, name, cin, cout):
            w, bias = weights[name]
            ws = (np.abs(w).max(axis=0) / 127.0).astype(np.float32)  # per output column
            c(name + "_wq", np.clip(np.round(w / ws), -127, 127).astype(np.int8))
            c(name + "_ws", ws)
            c(name + "_wz", np.zeros(w.shape[1], np.int8))
            c(name + "_b", bias)
            wd = node("DequantizeLinear", [name + "_wq", name + "_ws", name + "_wz"], [name + "_w"], axis=1)
            node("MatMul", [qdq(x), wd], [name + "_mm"])
            return node("Add", [name + "_mm", name + "_b"], [name + "_y"])

        def layer_norm(x, name):
            g, beta = norms[name]
            c(name + "_g", g)
            c(name + "_beta", beta)
            return node("LayerNormalization", [x, name + "_g", name + "_beta"], [name + "_y"], axis=-1,
                        epsilon=1e-12)

        x = bert_encoder(c, node, linear, layer_norm, hidden, heads, ffn, layers, lambda: word, lambda: pos, qdq)
        node("Identity", [x], ["last_hidden_state"])
        outputs = [vi("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])]
        outputs += [vi(t, TensorProto.FLOAT, None) for t in g.points]
        m = model("bert_qdq", g.nodes,
                  [vi("input_ids", TensorProto.INT64, ["batch", "sequence"]),
                   vi("attention_mask", TensorProto.INT64, ["batch", "sequence"])], outputs, g.inits, 17)
        return m, g.points

    return build, cases


# ---- qdq_resnet -----------------------------------------------------------------------------

def qdq_resnet():
    """Static QDQ of a small ResNet as quantize_static(QuantFormat.QDQ)
    writes one: QuantizeLinear -> DequantizeLinear on every convolution's
    and the head MatMul's input (u8 with zero points, calibrated on the
    cases' inputs through the float model), int8 weights symmetric per
    output channel (axis 0; the head's per column, axis 1), f32 biases;
    a 3x3 stem of 32 channels, a strided 64-channel stage and a strided
    128-channel one, each with a residual block, global average pool;
    dynamic batch, height and width. Convolutions of 576 taps and more
    (64 channels in, 3x3) run as integer products (qdq-to-integer)."""
    r = np.random.default_rng(17)
    convs = []  # (name, cin, cout, stride)

    def spec(name, cin, cout, stride=1):
        w = (r.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))).astype(np.float32)
        convs.append((name, w, (r.standard_normal(cout) * 0.05).astype(np.float32), stride))

    spec("stem", 3, 32)
    spec("s1_down", 32, 64, 2)
    spec("s1_a", 64, 64)
    spec("s1_b", 64, 64)
    spec("s2_down", 64, 128, 2)
    spec("s2_a", 128, 128)
    spec("s2_b", 128, 128)
    head_w = (r.standard_normal((128, 10)) / np.sqrt(128)).astype(np.float32)
    head_b = (r.standard_normal(10) * 0.05).astype(np.float32)
    cases = []
    for b, h, w in ((1, 32, 32), (2, 40, 48)):
        cases.append((f"b{b}_{h}x{w}", [r.standard_normal((b, 3, h, w)).astype(np.float32)]))

    def build(ranges):
        g = QdqGraph(ranges)
        c, node, qdq = g.c, g.node, g.qdq

        def conv(x, k, relu=True):
            name, w, bias, stride = convs[k]
            ws = (np.abs(w).reshape(w.shape[0], -1).max(axis=1) / 127.0).astype(np.float32)
            c(name + "_wq", np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8))
            c(name + "_ws", ws)
            c(name + "_wz", np.zeros(w.shape[0], np.int8))
            c(name + "_b", bias)
            wd = node("DequantizeLinear", [name + "_wq", name + "_ws", name + "_wz"], [name + "_w"], axis=0)
            y = node("Conv", [qdq(x), wd, name + "_b"], [name + "_y"], pads=[1, 1, 1, 1], strides=[stride, stride])
            return node("Relu", [y], [name + "_r"]) if relu else y

        x = conv("images", 0)
        for stage, base in (("s1", 1), ("s2", 4)):
            down = conv(x, base)
            a = conv(down, base + 1)
            b = conv(a, base + 2, relu=False)
            x = node("Relu", [node("Add", [down, b], [stage + "_sum"])], [stage + "_out"])
        node("GlobalAveragePool", [x], ["pooled"])
        c("flat_shape", np.array([0, -1], np.int64))
        node("Reshape", ["pooled", "flat_shape"], ["flat"])
        hs = (np.abs(head_w).max(axis=0) / 127.0).astype(np.float32)
        c("head_wq", np.clip(np.round(head_w / hs), -127, 127).astype(np.int8))
        c("head_ws", hs)
        c("head_wz", np.zeros(10, np.int8))
        c("head_b", head_b)
        node("DequantizeLinear", ["head_wq", "head_ws", "head_wz"], ["head_w"], axis=1)
        node("MatMul", [qdq("flat"), "head_w"], ["head_mm"])
        node("Add", ["head_mm", "head_b"], ["logits"])
        outputs = [vi("logits", TensorProto.FLOAT, ["batch", 10])]
        outputs += [vi(t, TensorProto.FLOAT, None) for t in g.points]
        m = model("qdq_resnet", g.nodes, [vi("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])], outputs,
                  g.inits, 17)
        return m, g.points

    return build, cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ort-node", required=True, help="a node_modules folder holding onnxruntime-node")
    ap.add_argument("--only", help="write only this model")
    args = ap.parse_args()
    for name, make in (("dynquant_seg", dynquant_seg), ("qdq_detector", qdq_detector),
                       ("bert_dynquant", bert_dynquant), ("dynquant_resnet", dynquant_resnet)):
        if args.only and name != args.only:
            continue
        m, cases = make()
        save(name, m, cases, args.ort_node)
    for name, make in (("bert_qdq", bert_qdq), ("qdq_resnet", qdq_resnet)):
        if not args.only or args.only == name:
            save(name, *calibrated(make, args.ort_node), args.ort_node)


def calibrated(make, node_modules):
    """A QDQ model whose activation ranges are the float model's over its
    cases' inputs, as ONNX Runtime computes them."""
    build, cases = make()
    m, points = build(None)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "float.onnx")
        onnx.save(m, path)
        ranges = {}
        for _, ins in cases:
            outs = ort_outputs(node_modules, path, ins, [i.name for i in m.graph.input])
            for t, a in zip(points, outs[1:]):
                lo, hi = ranges.get(t, (0.0, 0.0))
                ranges[t] = (min(lo, float(a.min())), max(hi, float(a.max())))
    return build(ranges)[0], cases


if __name__ == "__main__":
    main()
