#!/usr/bin/python3
"""Builds tests/data/torch_ops_fixture.npz: PyTorch 1.13 reference values for
tests/autograd/test_torch_ops_fixture.cpp, one case per op call.

Run by hand (the C++ test does not need PyTorch):  /usr/bin/python3 tests/data/make_ops_fixture.py
Float64 throughout, fixed seed. Keys are "<case>.<what>":
  <case>.x0, x1, ...   floating inputs (the gradient is taken w.r.t. each)
  <case>.i0, i1, ...   integer inputs (indices), stored as float64
  <case>.out           the output (bool outputs as 0 / 1)
  <case>.indices       the index output of max/min/topk/sort
  <case>.r             random weights: the gradients are those of sum(out * r)
  <case>.g0, g1, ...   d sum(out * r) / d x0, x1, ... (absent for ops without a gradient)
Inputs avoid ties (and kinks) where they would make a gradient ambiguous; the comparison cases
hold ties, NaN and inf on purpose (no gradient there).
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
OUT = {}


def put(key, t):
    assert key not in OUT, key
    OUT[key] = t.detach().cpu().numpy().astype(np.float64, order="C")  # C order (0-dim stays 0-dim)


def case(name, fn, xs, ints=(), grad=True):
    xs = [x.clone().requires_grad_(grad) for x in xs]
    res = fn(*xs, *ints)
    values, indices = (res if isinstance(res, tuple) else (res, None))
    for k, x in enumerate(xs):
        put(f"{name}.x{k}", x)
    for k, i in enumerate(ints):
        put(f"{name}.i{k}", i)
    put(f"{name}.out", values)
    if indices is not None:
        put(f"{name}.indices", indices)
    if grad:
        r = torch.randn_like(values)
        put(f"{name}.r", r)
        (values * r).sum().backward()
        for k, x in enumerate(xs):
            put(f"{name}.g{k}", x.grad if x.grad is not None else torch.zeros_like(x))


def randn(*shape):
    return torch.randn(*shape)


def away_from_zero(*shape, lo=0.2):  # |x| >= lo, random sign: no kink of abs/sign/reciprocal at 0
    return (torch.rand(*shape) * (1.5 - lo) + lo) * torch.where(torch.rand(*shape) < 0.5, -1.0, 1.0)


def distinct(*shape):  # a random permutation of well separated values: no ties in max/sort/topk
    n = math.prod(shape)
    return (torch.randperm(n).double() / n * 4 - 2 + torch.rand(n) * 0.5 / n).reshape(shape)


# ---- elementwise -------------------------------------------------------------------------------
case("abs", torch.abs, [away_from_zero(3, 4)])
case("sign", torch.sign, [torch.tensor([-2.0, 0.0, 3.0, -0.5])])
x = randn(3, 4)
x = torch.where((x.abs() - 0.5).abs() < 0.05, x + 0.2, x)  # no element at a bound
case("clamp", lambda x: torch.clamp(x, -0.5, 0.5), [x])
case("clamp_min", lambda x: torch.clamp(x, min=-0.5), [x])
case("clamp_max", lambda x: torch.clamp(x, max=0.5), [x])
case("minimum", torch.minimum, [randn(3, 4), randn(4)])
case("maximum", torch.maximum, [randn(2, 1, 3), randn(4, 1)])
case("sin", torch.sin, [randn(3, 4) * 3])
case("cos", torch.cos, [randn(3, 4) * 3])
case("erf", torch.erf, [randn(3, 4) * 2])
case("gelu", F.gelu, [randn(3, 4) * 3])
case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [randn(3, 4) * 3])
case("silu", F.silu, [randn(3, 4) * 3])
case("softplus", F.softplus, [randn(3, 4) * 3])
case("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=1.5), [away_from_zero(3, 4) * 2])
case("leaky_relu", lambda x: F.leaky_relu(x, 0.1), [away_from_zero(3, 4)])
case("elu", lambda x: F.elu(x, 0.7), [away_from_zero(3, 4)])
case("log1p", torch.log1p, [torch.rand(3, 4) * 3 - 0.9])
case("expm1", torch.expm1, [randn(3, 4)])
case("rsqrt", torch.rsqrt, [torch.rand(3, 4) + 0.1])
case("reciprocal", torch.reciprocal, [away_from_zero(3, 4)])
case("pow", torch.pow, [torch.rand(3, 4) + 0.2, randn(4) * 2])

# ---- reductions --------------------------------------------------------------------------------
x = randn(3, 4, 5)
case("var_dim", lambda x: torch.var(x, 1), [x])
case("var_biased_keepdim", lambda x: torch.var(x, (0, 2), unbiased=False, keepdim=True), [x])
case("var_correction2", lambda x: torch.var(x, 2, correction=2), [x])
case("var_all", torch.var, [x])
case("std_dim", lambda x: torch.std(x, 2), [x])
case("std_correction0", lambda x: torch.std(x, (0, 1), correction=0), [x])
case("logsumexp", lambda x: torch.logsumexp(x, 1), [x * 3])
case("logsumexp_keepdim", lambda x: torch.logsumexp(x, (0, 2), keepdim=True), [x * 3])
d = distinct(3, 4, 5)
case("amax", lambda x: torch.amax(x, (0, 2), keepdim=True), [d])
case("amin", lambda x: torch.amin(x, 1), [d])
case("max_dim", lambda x: torch.max(x, 1), [d])
case("min_dim_keepdim", lambda x: torch.min(x, 0, keepdim=True), [d])
case("max_all", torch.max, [d])
case("prod_all", torch.prod, [torch.rand(2, 3) + 0.5])
case("prod_dim", lambda x: torch.prod(x, 1), [randn(3, 4)])
case("norm2_dim", lambda x: torch.linalg.vector_norm(x, 2, 1), [x])
case("norm3_all", lambda x: torch.linalg.vector_norm(x, 3), [x])
case("norm_inf", lambda x: torch.linalg.vector_norm(x, math.inf, (0, 2), keepdim=True), [d])
case("norm1", lambda x: torch.linalg.vector_norm(x, 1, 2), [away_from_zero(3, 4, 5)])
case("cumsum", lambda x: torch.cumsum(x, 1), [randn(3, 4)])
case("cumprod", lambda x: torch.cumprod(x, 0), [randn(4, 3)])
case("cumprod_dim1", lambda x: torch.cumprod(x, 1), [randn(3, 4)])
case("topk", lambda x: torch.topk(x, 2), [distinct(3, 5)])
case("topk_smallest_dim0", lambda x: torch.topk(x, 3, 0, largest=False), [distinct(5, 4)])
case("sort", lambda x: torch.sort(x, 1), [distinct(3, 5)])
case("sort_descending_dim0", lambda x: torch.sort(x, 0, descending=True), [distinct(4, 3)])

# ---- shape and indexing ------------------------------------------------------------------------
case("gather", lambda x, i: torch.gather(x, 1, i), [randn(3, 4)], [torch.tensor([[0, 3, 3], [1, 0, 2], [2, 2, 0]])])
case("scatter_add", lambda x, s, i: torch.scatter_add(x, 0, i, s), [randn(3, 4), randn(2, 4)],
     [torch.tensor([[0, 2, 2, 1], [0, 0, 1, 2]])])
case("index_add", lambda x, s, i: torch.index_add(x, 0, i, s, alpha=2.0), [randn(4, 3), randn(3, 3)],
     [torch.tensor([3, 0, 3])])
case("repeat", lambda x: x.repeat(2, 1, 3), [randn(2, 3)])
case("flip", lambda x: torch.flip(x, (0, 2)), [randn(2, 3, 4)])
case("roll", lambda x: torch.roll(x, (1, -2), (0, 1)), [randn(3, 4)])
case("roll_flat", lambda x: torch.roll(x, 3), [randn(3, 4)])
case("tril", lambda x: torch.tril(x, -1), [randn(2, 3, 4)])
case("triu", lambda x: torch.triu(x, 1), [randn(4, 3)])
case("pad", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), [randn(2, 3, 4)])
case("pad_crop", lambda x: F.pad(x, (-1, 1)), [randn(3, 4)])
case("take_along_dim", lambda x, i: torch.take_along_dim(x, i, 1), [randn(3, 4)],
     [torch.tensor([[0, 3], [1, 1], [2, 0]])])

# ---- matmul ------------------------------------------------------------------------------------
case("matmul_dot", torch.matmul, [randn(4), randn(4)])
case("matmul_mv", torch.matmul, [randn(3, 4), randn(4)])
case("matmul_vm_batched", torch.matmul, [randn(4), randn(2, 4, 3)])
case("matmul_bhtd", torch.matmul, [randn(2, 3, 4, 5), randn(2, 3, 5, 6)])
case("matmul_td_bds", torch.matmul, [randn(4, 5), randn(3, 5, 2)])
case("matmul_broadcast_batch", torch.matmul, [randn(2, 1, 3, 4), randn(5, 4, 2)])
case("matmul_transposed", lambda q, k: torch.matmul(q, k.transpose(-2, -1)), [randn(2, 3, 4, 5), randn(2, 3, 6, 5)])

# ---- comparisons and logic (bool outputs, no gradient) -----------------------------------------
nan, inf = math.nan, math.inf
a = torch.tensor([[1.0, 2.0, nan, inf, -inf, 0.0], [3.0, 2.0, 1.0, nan, -0.0, 5.0]])
b = torch.tensor([2.0, 2.0, nan, inf, 0.0, -0.0])
for op in ("eq", "ne", "lt", "le", "gt", "ge"):
    case(op, getattr(torch, op), [a, b], grad=False)
    case(op + "_scalar", lambda x, op=op: getattr(torch, op)(x, 2.0), [a], grad=False)
case("logical_and", torch.logical_and, [a, b], grad=False)
case("logical_or", torch.logical_or, [a, torch.zeros(6)], grad=False)
case("logical_xor", torch.logical_xor, [a, b], grad=False)
case("logical_not", torch.logical_not, [a], grad=False)
case("isnan", torch.isnan, [a], grad=False)
case("isinf", torch.isinf, [a], grad=False)
case("isfinite", torch.isfinite, [a], grad=False)
case("any_dim", lambda x: torch.any(x, 1), [torch.tensor([[0.0, 0.0], [0.0, nan], [1.0, 2.0]])], grad=False)
case("all_dim", lambda x: torch.all(x, 1), [torch.tensor([[0.0, 0.0], [0.0, nan], [1.0, 2.0]])], grad=False)
case("count_nonzero", lambda x: torch.count_nonzero(x, 0), [a], grad=False)

# ---- appended cases (kept last so that the random inputs above stay as they were) ---------------
case("max_dim0_3d", lambda x: torch.max(x, 0), [distinct(3, 4, 5)])
case("min_dim1_4d_keepdim", lambda x: torch.min(x, 1, keepdim=True), [distinct(2, 3, 4, 2)])
case("where_bool", lambda a, b, m: torch.where(m.bool(), a, b), [randn(3, 4), randn(4)],
     [torch.tensor([[1, 0, 0, 1], [0, 0, 1, 1], [1, 1, 1, 0]])])
case("nonzero", torch.nonzero, [a], grad=False)
case("masked_fill_bool", lambda x, m: x.masked_fill(m.bool(), -2.5), [randn(2, 3, 4)], [torch.tensor([[1, 0, 0, 1]])])

# ---- edge cases with documented gradients at kinks, zeros and ties ------------------------------
t = torch.tensor
case("edge_abs_zero", torch.abs, [t([0.0, -1.0, 2.0])])
case("edge_clamp_at_bounds", lambda x: torch.clamp(x, -0.5, 0.5), [t([-0.5, 0.5, 0.0, 1.0, -1.0])])
case("edge_clamp_crossed", lambda x: torch.clamp(x, 0.5, -0.5), [t([-1.0, 0.0, 1.0])])
case("edge_maximum_ties", torch.maximum, [t([1.0, 2.0, 3.0]), t([1.0, 0.0, 3.0])])
case("edge_minimum_ties", torch.minimum, [t([1.0, 2.0, 3.0]), t([1.0, 0.0, 4.0])])
case("edge_leaky_relu_zero", lambda x: F.leaky_relu(x, 0.2), [t([0.0, -1.0, 1.0])])
case("edge_elu_zero", lambda x: F.elu(x, 0.5), [t([0.0, -1.0, 1.0])])
case("edge_softplus_threshold", lambda x: F.softplus(x, 1.0, 2.0), [t([2.0, 2.5, 1.5])])
case("edge_pow_zero_base", torch.pow, [t([0.0, 0.0, 2.0, 0.0]), t([0.0, 2.0, 3.0, 0.5])])
case("edge_prod_one_zero", lambda x: torch.prod(x, 1), [t([[2.0, 0.0, 3.0], [1.0, 2.0, 3.0]])])
case("edge_prod_two_zeros", torch.prod, [t([2.0, 0.0, 3.0, 0.0])])
case("edge_cumprod_zeros", lambda x: torch.cumprod(x, 0), [t([2.0, 0.0, 3.0, 0.0, 4.0])])
case("edge_amax_ties", lambda x: torch.amax(x, 1), [t([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])])
case("edge_max_all_ties", torch.max, [t([[1.0, 3.0], [3.0, 0.0]])])
case("edge_norm_zero", lambda x: torch.linalg.vector_norm(x, 2, 1), [t([[0.0, 0.0], [3.0, 4.0]])])
case("edge_std_constant", lambda x: torch.std(x, 1), [t([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]])])
case("edge_var_single", lambda x: torch.var(x, 1, correction=0), [t([[2.0], [3.0]])])
case("edge_sign_zero", torch.sign, [t([0.0, -0.0, 2.0])])
# NaN and inf inputs (elementwise, so a NaN stays in its own element's gradient).
case("edge_sign_nan", torch.sign, [t([nan, 1.0])])
case("edge_abs_nan", torch.abs, [t([nan, -inf, 1.0])])
case("edge_clamp_nan", lambda x: torch.clamp(x, -1.0, 1.0), [t([nan, 2.0, inf, -inf])])
case("edge_maximum_nan", torch.maximum, [t([nan, 1.0, nan]), t([1.0, nan, nan])])
case("edge_minimum_nan", torch.minimum, [t([nan, 1.0, inf]), t([1.0, nan, -inf])])
case("edge_pow_negative_base", torch.pow, [t([-2.0, -0.5, -3.0]), t([3.0, 2.0, 0.0])])
case("edge_reciprocal_zero", torch.reciprocal, [t([0.0, -0.0, inf])])
case("edge_log1p_minus1", torch.log1p, [t([-1.0, inf])])
case("edge_rsqrt_zero_inf", torch.rsqrt, [t([0.0, inf])])
case("edge_max_dim_nan", lambda x: torch.max(x, 1), [t([[1.0, nan, 3.0], [4.0, 5.0, 6.0]])])
case("edge_sort_nan", lambda x: torch.sort(x, 0), [t([2.0, nan, -1.0, inf])])
case("edge_logsumexp_inf", lambda x: torch.logsumexp(x, 1), [t([[-inf, -inf], [inf, 1.0], [0.0, 1.0]])])
case("edge_softplus_large", F.softplus, [t([50.0, -50.0, 30.0])])
case("edge_gelu_tails", F.gelu, [t([-40.0, 40.0, -8.0])])

np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_ops_fixture.npz"), **OUT)
print(len(OUT), "arrays,", len({k.split(".")[0] for k in OUT}), "cases")
