#!/usr/bin/python3
"""Builds tests/data/torch_fixture.npz: PyTorch reference values for tests/nn/test_torch_fixture.cpp.

Run by hand (the C++ test does not need PyTorch):  /usr/bin/python3 tests/data/make_torch_fixture.py
Needs Debian's python3-torch (1.13) and numpy. Everything is computed in float64 with fixed seeds
and saved as float64, so the C++ side can match to 1e-5 meaningfully.

Cases (keys are "<case>.<what>"):
  gru          GRU(3, 4, num_layers=2, bidirectional=True), input (T=5, B=3, 3), h0 (4, 3, 4):
               outputs, h_n and gradients of loss = sum(out * r_out) + sum(h_n * r_h) w.r.t. the
               input, h0 and every weight ("gru.grad.<name>").
  gru_packed   the same GRU on a PackedSequence (lengths 5, 2, 4; no h0): PyTorch's semantics of
               variable lengths, which tg's GRU reproduces with valid_lens.
  lstm         LSTM(3, 4, num_layers=2), input, (h0, c0).
  lstm_bi      LSTM(3, 4, bidirectional=True), packed with lengths 3, 5 (T=5, B=2).
  attn1, attn2 d2l's AdditiveAttention(key 3, query 4, hiddens 6) with 1-D and 2-D valid_lens.
  adam         a 4-8-2 tanh MLP trained 10 steps with Adam(lr=0.05) and clip_grad_norm_(1.0) on MSE:
               per-step gradient norms (before clipping) and parameters after every step.
"""
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from d2l_torch import AdditiveAttention  # noqa: E402  (d2l 0.17's class)

torch.set_default_dtype(torch.float64)
OUT = {}


def put(key, tensor):
    OUT[key] = tensor.detach().cpu().numpy().astype(np.float64) if torch.is_tensor(tensor) else np.asarray(tensor)


def rnn_case(name, module, x, state, lens, r_out, r_h):
    """Runs `module` (GRU or LSTM), optionally packed, and stores values and gradients."""
    module.zero_grad()
    x = x.clone().requires_grad_()
    if state is not None:
        state = tuple(s.clone().requires_grad_() for s in state) if isinstance(state, tuple) else state.clone().requires_grad_()
    if lens is None:
        out, hn = module(x, state)
    else:
        packed = pack_padded_sequence(x, torch.tensor(lens), enforce_sorted=False)
        out, hn = module(packed, state)
        out, _ = pad_packed_sequence(out, total_length=x.shape[0])
        put(name + ".lens", np.asarray(lens, dtype=np.int64))
    h = hn[0] if isinstance(hn, tuple) else hn
    loss = (out * r_out).sum() + (h * r_h).sum()
    if isinstance(hn, tuple):
        loss = loss + (hn[1] * r_h).sum() * 0.5  # c_n too, with another weight
    loss.backward()
    put(name + ".input", x)
    put(name + ".out", out)
    put(name + ".r_out", r_out)
    put(name + ".r_h", r_h)
    put(name + ".grad.input", x.grad)
    if isinstance(hn, tuple):
        put(name + ".h_n", hn[0])
        put(name + ".c_n", hn[1])
        if state is not None:
            put(name + ".h0", state[0])
            put(name + ".c0", state[1])
            put(name + ".grad.h0", state[0].grad)
            put(name + ".grad.c0", state[1].grad)
    else:
        put(name + ".h_n", hn)
        if state is not None:
            put(name + ".h0", state)
            put(name + ".grad.h0", state.grad)
    for pname, p in module.named_parameters():
        put(name + ".grad." + pname, p.grad)


# ---- GRU -------------------------------------------------------------------------------------------
torch.manual_seed(0)
gru = nn.GRU(3, 4, num_layers=2, bidirectional=True)
for n, p in gru.named_parameters():
    put("gru." + n, p)
T, B = 5, 3
x = torch.randn(T, B, 3)
h0 = torch.randn(4, B, 4)
r_out = torch.randn(T, B, 8)
r_h = torch.randn(4, B, 4)
rnn_case("gru", gru, x, h0, None, r_out, r_h)
rnn_case("gru_packed", gru, x, None, [5, 2, 4], r_out, r_h)

# ---- LSTM ------------------------------------------------------------------------------------------
torch.manual_seed(1)
lstm = nn.LSTM(3, 4, num_layers=2)
for n, p in lstm.named_parameters():
    put("lstm." + n, p)
x = torch.randn(4, 2, 3)
state = (torch.randn(2, 2, 4), torch.randn(2, 2, 4))
rnn_case("lstm", lstm, x, state, None, torch.randn(4, 2, 4), torch.randn(2, 2, 4))

torch.manual_seed(2)
lstm_bi = nn.LSTM(3, 4, bidirectional=True)
for n, p in lstm_bi.named_parameters():
    put("lstm_bi." + n, p)
x = torch.randn(5, 2, 3)
rnn_case("lstm_bi", lstm_bi, x, None, [3, 5], torch.randn(5, 2, 8), torch.randn(2, 2, 4))


# ---- d2l AdditiveAttention -------------------------------------------------------------------------
torch.manual_seed(3)
attn = AdditiveAttention(3, 4, 6, 0.0)
attn.eval()
for n, p in attn.named_parameters():
    put("attn." + n, p)
q = torch.randn(2, 3, 4)
k = torch.randn(2, 5, 3)
v = torch.randn(2, 5, 2)
r = torch.randn(2, 3, 2)
for case, lens in (("attn1", torch.tensor([2, 4])), ("attn2", torch.tensor([[1, 3, 5], [2, 2, 4]]))):
    attn.zero_grad()
    qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
    out = attn(qq, kk, vv, lens)
    (out * r).sum().backward()
    put(case + ".queries", qq)
    put(case + ".keys", kk)
    put(case + ".values", vv)
    put(case + ".valid_lens", lens.numpy().astype(np.int64))
    put(case + ".r", r)
    put(case + ".out", out)
    put(case + ".weights", attn.attention_weights)
    put(case + ".grad.queries", qq.grad)
    put(case + ".grad.keys", kk.grad)
    put(case + ".grad.values", vv.grad)
    for n, p in attn.named_parameters():
        put(case + ".grad." + n, p.grad)

# ---- Adam with clip_grad_norm_ ---------------------------------------------------------------------
torch.manual_seed(4)
mlp = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
for n, p in mlp.named_parameters():
    put("adam.init." + n, p)
X = torch.randn(8, 4)
Y = 3.0 * torch.randn(8, 2)
put("adam.x", X)
put("adam.y", Y)
opt = torch.optim.Adam(mlp.parameters(), lr=0.05)
norms, history = [], {n: [] for n, _ in mlp.named_parameters()}
for step in range(10):
    opt.zero_grad()
    loss = ((mlp(X) - Y) ** 2).mean()
    loss.backward()
    norms.append(float(nn.utils.clip_grad_norm_(mlp.parameters(), 1.0)))
    opt.step()
    for n, p in mlp.named_parameters():
        history[n].append(p.detach().clone())
put("adam.grad_norms", np.asarray(norms, dtype=np.float64))
for n, hs in history.items():
    put("adam.params." + n, torch.stack(hs))

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_fixture.npz")
np.savez(path, **OUT)
print(f"wrote {path}: {len(OUT)} arrays, {os.path.getsize(path)} bytes, torch {torch.__version__}")
