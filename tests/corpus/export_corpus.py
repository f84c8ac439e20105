#!/usr/bin/env python3
"""Exports the real-model corpus: models written the way real code writes
them (Hugging Face's GPT-2 and BERT, ...), exported by torch.onnx as users
export them, with named dynamic axes. Each model lands in this folder as
NAME.onnx with reference outputs under data/NAME/CASE/ (input_K.pb,
output_K.pb, computed by PyTorch), so that the tests need no torch.

Run with Debian's python3-torch (installed by hand; never by the set-up
script):

    /usr/bin/python3 tests/corpus/export_corpus.py [NAME...]

Weights are random but seeded; sizes are small (each file < 2 MB).
"""
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- Hugging Face GPT-2, as modeling_gpt2.py writes it -------------------------------------

class Conv1D(nn.Module):
    """GPT-2's transposed linear layer: y = x @ W + b with W (in, out)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.size(-1),)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, hidden, heads, max_positions):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
            1, 1, max_positions, max_positions), persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.heads, self.head_dim = heads, hidden // heads
        self.c_attn, self.c_proj = Conv1D(3 * hidden, hidden), Conv1D(hidden, hidden)

    def split_heads(self, t):
        new_shape = t.size()[:-1] + (self.heads, self.head_dim)
        return t.view(new_shape).permute(0, 2, 1, 3)

    def merge_heads(self, t):
        t = t.permute(0, 2, 1, 3).contiguous()
        return t.view(t.size()[:-2] + (self.heads * self.head_dim,))

    def forward(self, x, layer_past=None):
        q, k, v = self.c_attn(x).split(x.size(-1), dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        if layer_past is not None:
            k = torch.cat((layer_past[0], k), dim=-2)
            v = torch.cat((layer_past[1], v), dim=-2)
        present = (k, v)
        w = torch.matmul(q, k.transpose(-1, -2)) / (v.size(-1) ** 0.5)
        query_length, key_length = q.size(-2), k.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length:key_length, :key_length]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
        w = torch.where(causal_mask, w, mask_value)
        w = F.softmax(w, dim=-1)
        y = self.merge_heads(torch.matmul(w, v))
        return self.c_proj(y), present


class GPT2MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(4 * hidden, hidden), Conv1D(hidden, 4 * hidden)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads, max_positions):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn, self.mlp = GPT2Attention(hidden, heads, max_positions), GPT2MLP(hidden)

    def forward(self, x, layer_past=None):
        a, present = self.attn(self.ln_1(x), layer_past)
        x = x + a
        return x + self.mlp(self.ln_2(x)), present


class GPT2LMHead(nn.Module):
    def __init__(self, vocab=96, hidden=32, heads=4, layers=2, max_positions=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(max_positions, hidden)
        self.h = nn.ModuleList([GPT2Block(hidden, heads, max_positions) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, attention_mask=None, past=None):
        input_shape = input_ids.size()
        past_length = 0 if past is None else past[0][0].size(-2)
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long)
        position_ids = position_ids.unsqueeze(0).view(-1, input_shape[-1])
        x = self.wte(input_ids) + self.wpe(position_ids)
        presents = []
        for i, block in enumerate(self.h):
            x, present = block(x, None if past is None else past[i])
            presents.append(present)
        return (self.lm_head(self.ln_f(x)), *[t for p in presents for t in p])


class GPT2WithPast(nn.Module):
    """input_ids and a flat list of past keys and values, as ORT's GPT-2
    export lays them out."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, *flat_past):
        past = [(flat_past[2 * i], flat_past[2 * i + 1]) for i in range(len(flat_past) // 2)]
        return self.inner(input_ids, past=past)


# ---- Hugging Face BERT, as modeling_bert.py writes it --------------------------------------

class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden, max_positions, type_vocab=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_positions).expand((1, -1)), persistent=False)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, 0:seq_length]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(position_ids)
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))

    def transpose_for_scores(self, x):
        new_shape = x.size()[:-1] + (self.heads, self.head_dim)
        return x.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, x, extended_mask):
        q = self.transpose_for_scores(self.query(x))
        k = self.transpose_for_scores(self.key(x))
        v = self.transpose_for_scores(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + extended_mask
        ctx = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.heads * self.head_dim,))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.attn_out, self.ln1 = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate, self.output = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, extended_mask):
        x = self.ln1(x + self.attn_out(self.attention(x, extended_mask)))
        return self.ln2(x + self.output(F.gelu(self.intermediate(x))))


class BertModel(nn.Module):
    def __init__(self, vocab=100, hidden=32, heads=4, layers=2, max_positions=64):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, max_positions)
        self.layers = nn.ModuleList([BertLayer(hidden, heads) for _ in range(layers)])
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids):
        extended = attention_mask[:, None, None, :].to(torch.float32)
        extended = (1.0 - extended) * torch.finfo(torch.float32).min
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, extended)
        return x, torch.tanh(self.pooler(x[:, 0]))


# ---- the corpus ----------------------------------------------------------------------------

def gpt2_cases(past_layers):
    """(name, inputs) per case: batch, sequence and past lengths vary."""
    out = []
    for b, s, p in ([1, 1, 5], [2, 7, 3], [1, 16, 0]) if past_layers else ([1, 1, 0], [2, 7, 0], [3, 20, 0]):
        ids = torch.randint(0, 96, (b, s))
        past = [torch.randn(b, 4, p, 8) for _ in range(2 * past_layers)]
        out.append((f"b{b}_s{s}_p{p}" if past_layers else f"b{b}_s{s}", (ids, *past)))
    return out


def bert_cases():
    out = []
    for b, s in ([1, 5], [2, 16], [3, 33]):
        mask = torch.ones(b, s, dtype=torch.long)
        mask[0, s - 1:] = 0
        out.append((f"b{b}_s{s}", (torch.randint(0, 100, (b, s)), mask, torch.randint(0, 2, (b, s)))))
    return out


def models():
    torch.manual_seed(0)
    gpt2 = GPT2LMHead().eval()
    past_names = [f"past_{k}.{i}" for i in range(2) for k in ("key", "value")]
    present_names = [f"present_{k}.{i}" for i in range(2) for k in ("key", "value")]
    past_axes = {n: {0: "batch_size", 2: "past_sequence_length"} for n in past_names}
    present_axes = {n: {0: "batch_size", 2: "total_sequence_length"} for n in present_names}
    ids_axes = {"input_ids": {0: "batch_size", 1: "sequence_length"}}
    logits_axes = {"logits": {0: "batch_size", 1: "sequence_length"}}
    yield dict(name="gpt2_hf", model=gpt2, cases=gpt2_cases(0), opset=17, inputs=["input_ids"],
               outputs=["logits", *present_names], axes={**ids_axes, **logits_axes, **present_axes})
    yield dict(name="gpt2_hf_past", model=GPT2WithPast(gpt2), cases=gpt2_cases(2), opset=17,
               inputs=["input_ids", *past_names], outputs=["logits", *present_names],
               axes={**ids_axes, **logits_axes, **past_axes, **present_axes})
    torch.manual_seed(1)
    bert = BertModel().eval()
    seq = {0: "batch_size", 1: "sequence_length"}
    for opset in (14, 17):
        yield dict(name=f"bert_hf_op{opset}", model=bert, cases=bert_cases(), opset=opset,
                   inputs=["input_ids", "attention_mask", "token_type_ids"],
                   outputs=["last_hidden_state", "pooler_output"],
                   axes={"input_ids": seq, "attention_mask": seq, "token_type_ids": seq,
                         "last_hidden_state": seq, "pooler_output": {0: "batch_size"}})


def save_pb(t, path):
    onnx.save_tensor(numpy_helper.from_array(t.detach().numpy()), path)


def export(m):
    path = os.path.join(HERE, m["name"] + ".onnx")
    first = m["cases"][0][1]
    with torch.no_grad():
        torch.onnx.export(m["model"], first, path, opset_version=m["opset"], input_names=m["inputs"],
                          output_names=m["outputs"], dynamic_axes=m["axes"])
    for case, args in m["cases"]:
        d = os.path.join(HERE, "data", m["name"], case)
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            outs = m["model"](*args)
        for k, t in enumerate(args):
            save_pb(t, os.path.join(d, f"input_{k}.pb"))
        for k, t in enumerate(outs if isinstance(outs, tuple) else (outs,)):
            save_pb(t, os.path.join(d, f"output_{k}.pb"))
    print(f"{m['name']}: {os.path.getsize(path)} bytes, {len(m['cases'])} cases")


def main():
    want = set(sys.argv[1:])
    for m in models():
        if not want or m["name"] in want:
            export(m)


if __name__ == "__main__":
    main()
