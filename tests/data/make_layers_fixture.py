#!/usr/bin/python3
"""Builds tests/data/torch_layers_fixture.npz: PyTorch reference values for tests/nn/test_layers_fixture.cpp.

Run by hand (the C++ test does not need PyTorch):  /usr/bin/python3 tests/data/make_layers_fixture.py
Needs Debian's python3-torch (1.13) and numpy. Float64 throughout, fixed seed.

Cases (keys are "<case>.<what>"):
  seq   nn.Sequential(Linear(4, 6), LayerNorm(6), ReLU(), Linear(6, 6), GELU(), Linear(6, 6),
        GELU('tanh'), SiLU(), Linear(6, 5), Tanh(), Linear(5, 3), Sigmoid()) on an input (7, 4). Its state_dict is stored under "seq.state." (the keys the C++ Sequential must produce), the
        LayerNorm affine parameters randomised first; outputs and the gradients of
        loss = sum(out * r) w.r.t. the input and every parameter ("seq.grad.<name>").
  ln2   LayerNorm((2, 3), eps=1e-3) on an input (4, 2, 3): output and gradients, same loss.
RMSNorm is not in torch 1.13, so it has no case here (tests/nn/test_normalization.cpp checks it
against a hand-computed reference).
"""
import os

import numpy as np
import torch
from torch import nn

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
OUT = {}


def put(key, tensor):
    OUT[key] = tensor.detach().cpu().numpy().astype(np.float64)


def run(name, module, x):
    for n, p in module.state_dict().items():
        put(name + ".state." + n, p)
    x = x.clone().requires_grad_()
    out = module(x)
    r = torch.randn_like(out)
    (out * r).sum().backward()
    put(name + ".input", x)
    put(name + ".out", out)
    put(name + ".r", r)
    put(name + ".grad.input", x.grad)
    for n, p in module.named_parameters():
        put(name + ".grad." + n, p.grad)


def randomise_norms(module):
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


seq = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 6),
                    nn.GELU(approximate="tanh"), nn.SiLU(), nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3), nn.Sigmoid())
randomise_norms(seq)
run("seq", seq, 2.0 * torch.randn(7, 4) + 0.5)

ln2 = nn.LayerNorm((2, 3), eps=1e-3)
randomise_norms(ln2)
run("ln2", ln2, 3.0 * torch.randn(4, 2, 3) - 1.0)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_layers_fixture.npz")
np.savez(path, **OUT)
print(f"wrote {path}: {len(OUT)} arrays, {os.path.getsize(path)} bytes, torch {torch.__version__}")
