#!/usr/bin/env python3
"""Corpus models written with Python lists and loops, exported from
torch.jit.script: torch.onnx then writes ONNX sequences (SplitToSequence,
SequenceEmpty, SequenceInsert inside a Loop, SequenceAt, SequenceLength,
ConcatFromSequence), the way TTS and streaming models come out.

    /usr/bin/python3 tests/corpus/export_scripted.py [NAME...]
"""
import sys
from typing import List

import torch
import torch.nn as nn

from export_corpus import export_named


class ChunkRNN(nn.Module):
    """Frames split into chunks of 4 (torch.split with a run-time length ->
    SplitToSequence), each chunk encoded in a loop that appends to a list
    (SequenceInsert in a Loop), the list stacked (ConcatFromSequence)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.mix = nn.Linear(16, 16)

    def forward(self, x):
        chunks = torch.split(x, 4, dim=1)
        outs: List[torch.Tensor] = []
        state = torch.zeros(x.size(0), 16)
        for c in chunks:
            state = torch.tanh(self.proj(c).mean(1) + self.mix(state))
            outs.append(state)
        return torch.stack(outs, 1), state


class UnbindDecoder(nn.Module):
    """A step-by-step decoder over x.unbind(1) (SplitToSequence without
    keepdims) that collects its outputs in a list and concatenates them
    along the time axis (ConcatFromSequence without a new axis)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 24)
        self.rec = nn.Linear(12, 24, bias=False)
        self.out = nn.Linear(12, 5)

    def forward(self, x, h):
        ys: List[torch.Tensor] = []
        for step in x.unbind(1):
            z, c = (self.inp(step) + self.rec(h)).chunk(2, 1)
            h = torch.sigmoid(z) * h + (1 - torch.sigmoid(z)) * torch.tanh(c)
            ys.append(self.out(h).unsqueeze(1))
        return torch.cat(ys, 1), h


def models():
    torch.manual_seed(20)
    yield dict(name="chunk_rnn", model=torch.jit.script(ChunkRNN().eval()),
               cases=[(f"b{b}_t{t}", (torch.randn(b, t, 8),)) for b, t in ((1, 4), (2, 10), (3, 17))],
               opset=14, inputs=["x"], outputs=["y", "state"],
               axes={"x": {0: "batch", 1: "frames"}})
    torch.manual_seed(21)
    yield dict(name="unbind_decoder", model=torch.jit.script(UnbindDecoder().eval()),
               cases=[(f"b{b}_t{t}", (torch.randn(b, t, 6), torch.randn(b, 12))) for b, t in ((1, 1), (2, 7), (4, 12))],
               opset=14, inputs=["x", "h0"], outputs=["y", "h"],
               axes={"x": {0: "batch", 1: "steps"}, "h0": {0: "batch"}})


if __name__ == "__main__":
    export_named(models(), set(sys.argv[1:]))
