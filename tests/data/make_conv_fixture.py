#!/usr/bin/python3
"""Builds tests/data/torch_conv_fixture.npz: PyTorch reference values for tests/nn/test_conv.cpp.

Run by hand (the C++ test does not need PyTorch):  /usr/bin/python3 tests/data/make_conv_fixture.py
Needs Debian's python3-torch (1.13) and numpy. Float64 throughout, fixed seed.

Keys are "<case>.<what>": for the functional cases "input", "weight", "bias" (when any), "out",
"r" (the seed: loss = sum(out * r)) and "grad.<input|weight|bias>". Pooling inputs are rounded to
halves so that windows hold ties (the gradient goes to the first maximum, as torch). Module cases
store torch's state_dict under "<case>.state.<name>" (file order = torch's order;
num_batches_tracked stays int64) and, for BatchNorm, two training steps then an eval step.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
OUT = {}


def put(key, tensor):
    a = tensor.detach().cpu().clone().numpy()  # a copy: state_dict() tensors change as training goes on
    OUT[key] = a if a.dtype == np.int64 else a.astype(np.float64)


def run(name, fn, **tensors):
    """out = fn(**tensors); stores the tensors, out, r and the gradients of sum(out * r)."""
    leaves = {k: v.clone().requires_grad_() for k, v in tensors.items()}
    out = fn(**leaves)
    r = torch.randn_like(out)
    (out * r).sum().backward()
    for k, v in leaves.items():
        put(f"{name}.{k}", v)
        put(f"{name}.grad.{k}", v.grad)
    put(f"{name}.out", out)
    put(f"{name}.r", r)


def halves(*shape):
    return torch.round(torch.randn(*shape) * 2) / 2


# conv2d: plain with bias; strided, dilated and grouped; depthwise without bias; 1x1; 'same' with an
# even kernel (asymmetric padding); a batch of one.
run("conv_a", lambda input, weight, bias: F.conv2d(input, weight, bias, padding=1),
    input=torch.randn(2, 3, 7, 6), weight=torch.randn(4, 3, 3, 3), bias=torch.randn(4))
run("conv_b", lambda input, weight, bias: F.conv2d(input, weight, bias, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2),
    input=torch.randn(1, 4, 9, 8), weight=torch.randn(6, 2, 3, 2), bias=torch.randn(6))
run("conv_c", lambda input, weight: F.conv2d(input, weight, stride=2, padding=1, groups=4),
    input=torch.randn(3, 4, 5, 5), weight=torch.randn(4, 1, 3, 3))
run("conv_d", lambda input, weight, bias: F.conv2d(input, weight, bias),
    input=torch.randn(2, 3, 4, 5), weight=torch.randn(5, 3, 1, 1), bias=torch.randn(5))
run("conv_e", lambda input, weight, bias: F.conv2d(input, weight, bias, padding="same", dilation=(1, 2)),
    input=torch.randn(2, 2, 6, 7), weight=torch.randn(3, 2, 4, 2), bias=torch.randn(3))
# conv1d: strided and dilated; grouped with 'same'.
run("conv1d_a", lambda input, weight, bias: F.conv1d(input, weight, bias, stride=2, padding=1, dilation=2),
    input=torch.randn(2, 3, 10), weight=torch.randn(4, 3, 3), bias=torch.randn(4))
run("conv1d_b", lambda input, weight: F.conv1d(input, weight, padding="same", groups=2),
    input=torch.randn(1, 4, 9), weight=torch.randn(6, 2, 4))

# Pooling.
run("maxpool_a", lambda input: F.max_pool2d(input, 3, stride=2, padding=1), input=halves(2, 3, 7, 9))
run("maxpool_b", lambda input: F.max_pool2d(input, (2, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
    input=halves(1, 2, 8, 7))
put("maxpool_b.indices", F.max_pool2d(torch.from_numpy(OUT["maxpool_b.input"]), (2, 3), stride=(2, 2), padding=(1, 1),
                                      dilation=(2, 1), ceil_mode=True, return_indices=True)[1])
run("maxpool1d", lambda input: F.max_pool1d(input, 3, stride=2, padding=1, ceil_mode=True), input=halves(2, 3, 11))
run("avgpool_a", lambda input: F.avg_pool2d(input, 3, stride=2, padding=1), input=torch.randn(2, 3, 7, 9))
run("avgpool_b", lambda input: F.avg_pool2d(input, (3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True, count_include_pad=False),
    input=torch.randn(2, 3, 8, 9))
run("avgpool_c", lambda input: F.avg_pool2d(input, 2, ceil_mode=True, divisor_override=3), input=torch.randn(1, 2, 5, 5))
run("avgpool1d", lambda input: F.avg_pool1d(input, 4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
    input=torch.randn(2, 3, 11))
run("adaptive_a", lambda input: F.adaptive_avg_pool2d(input, (3, 4)), input=torch.randn(2, 3, 7, 10))
run("adaptive_b", lambda input: F.adaptive_avg_pool2d(input, 5), input=torch.randn(1, 2, 3, 8))


# Modules: state_dict names and values.
def state(name, module):
    for n, t in module.state_dict().items():
        put(f"{name}.state.{n}", t)


state("Conv2d", nn.Conv2d(3, 4, 3, padding=1))
state("Conv1d", nn.Conv1d(2, 4, 3, bias=False))


def batchnorm(name, module, shape):
    """Randomised affine, two training steps (output and gradients of the second), then eval."""
    with torch.no_grad():
        module.weight.uniform_(0.5, 1.5)
        module.bias.uniform_(-0.5, 0.5)
    state(name + ".init", module)
    module.train()
    for step in (1, 2):
        x = (torch.randn(*shape) * 2 + 1).requires_grad_()
        out = module(x)
        r = torch.randn_like(out)
        module.zero_grad()
        (out * r).sum().backward()
        put(f"{name}.step{step}.input", x)
        put(f"{name}.step{step}.out", out)
        put(f"{name}.step{step}.r", r)
        put(f"{name}.step{step}.grad.input", x.grad)
        put(f"{name}.step{step}.grad.weight", module.weight.grad)
        put(f"{name}.step{step}.grad.bias", module.bias.grad)
    state(name + ".trained", module)
    module.eval()
    x = torch.randn(*shape)
    put(f"{name}.eval.input", x)
    put(f"{name}.eval.out", module(x))


batchnorm("bn2d", nn.BatchNorm2d(3), (2, 3, 4, 5))
batchnorm("bn1d", nn.BatchNorm1d(4, momentum=None), (5, 4))
batchnorm("bn1d3", nn.BatchNorm1d(3, eps=1e-3, momentum=0.3), (2, 3, 6))

gn = nn.GroupNorm(2, 6)
with torch.no_grad():
    gn.weight.uniform_(0.5, 1.5)
    gn.bias.uniform_(-0.5, 0.5)
state("gn", gn)
run("gn", lambda input, weight, bias: F.group_norm(input, 2, weight, bias), input=torch.randn(2, 6, 3, 4) * 2 + 1,
    weight=gn.weight.detach(), bias=gn.bias.detach())

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_conv_fixture.npz")
np.savez_compressed(path, **OUT)
print(f"wrote {path}: {len(OUT)} arrays, {os.path.getsize(path)} bytes")
