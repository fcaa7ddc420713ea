#!/usr/bin/python3
"""Builds tests/data/torch_mha_fixture.npz: PyTorch 1.13 reference values for
tests/nn/test_multihead_attention.cpp.

Run by hand (the C++ test does not need PyTorch):  /usr/bin/python3 tests/data/make_mha_fixture.py
Float64 throughout, fixed seed, eval mode (no dropout). Keys are "<case>.<what>".

Cases: each runs nn.MultiheadAttention(...) on query/key/value, with the masks given as float
tensors of 0 / 1 ("1" = may not attend; the C++ test turns them into i64 masks), and stores its
state_dict ("<case>.state.<name>"), the output, the weights, and the gradients of
sum(out * r) + sum(weights * rw) w.r.t. query, key, value and every parameter.
  self     E=8, 2 heads, batch_first=False, (L=5, N=3, E) self-attention, key_padding_mask
  cross    E=8, 4 heads, kdim=6, vdim=5, batch_first=True, (N=2, L=3) x (N=2, S=4), attn_mask (L, S),
           per-head weights (average_attn_weights=False)
and nn.TransformerEncoderLayer cases (enc_post, enc_pre: below), same layout with "src";
nn.TransformerDecoderLayer cases (dec_post, dec_pre) and small nn.Transformer cases (tfm_post,
tfm_pre) with "tgt"/"memory" or "src"/"tgt"; the PyTorch tutorial's sinusoidal PositionalEncoding
table ("pe.table"). Every case after the first ones is appended, so earlier values do not change.
"""
import math
import os

import numpy as np
import torch
from torch import nn

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
OUT = {}


def put(key, tensor):
    OUT[key] = tensor.detach().cpu().numpy().astype(np.float64)


def run(name, mha, q, k, v, kpm=None, am=None, average=True):
    mha.eval()
    with torch.no_grad():
        if mha.in_proj_bias is not None:
            mha.in_proj_bias.uniform_(-0.3, 0.3)
            mha.out_proj.bias.uniform_(-0.3, 0.3)
    for n, p in mha.state_dict().items():
        put(name + ".state." + n, p)
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out, w = mha(q, k, v, key_padding_mask=None if kpm is None else kpm.bool(),
                 attn_mask=None if am is None else am.bool(), need_weights=True, average_attn_weights=average)
    r, rw = torch.randn_like(out), torch.randn_like(w)
    ((out * r).sum() + (w * rw).sum()).backward()
    for key, t in (("query", q), ("key", k), ("value", v), ("out", out), ("weights", w), ("r", r), ("rw", rw)):
        put(name + "." + key, t)
    if kpm is not None:
        put(name + ".key_padding_mask", kpm)
    if am is not None:
        put(name + ".attn_mask", am)
    for key, t in (("query", q), ("key", k), ("value", v)):
        put(name + ".grad." + key, t.grad)
    for n, p in mha.named_parameters():
        put(name + ".grad." + n, p.grad)


x = torch.randn(5, 3, 8)
kpm = torch.zeros(3, 5)
kpm[0, 4] = 1
kpm[2, 2:] = 1
run("self", nn.MultiheadAttention(8, 2), x, x, x, kpm=kpm)

am = torch.zeros(3, 4)
am[0, 3] = 1
am[2, 0] = 1
run("cross", nn.MultiheadAttention(8, 4, kdim=6, vdim=5, batch_first=True),
    torch.randn(2, 3, 8), torch.randn(2, 4, 6), torch.randn(2, 4, 5), am=am, average=False)



def run_layer(name, layer, src, mask=None, kpm=None):
    layer.eval()
    with torch.no_grad():
        for m in (layer.norm1, layer.norm2):
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
        layer.self_attn.in_proj_bias.uniform_(-0.3, 0.3)
    for n, p in layer.state_dict().items():
        put(name + ".state." + n, p)
    src = src.clone().requires_grad_()
    out = layer(src, src_mask=None if mask is None else mask.bool(),
                src_key_padding_mask=None if kpm is None else kpm.bool())
    r = torch.randn_like(out)
    (out * r).sum().backward()
    for key, t in (("src", src), ("out", out), ("r", r), ("grad.src", src.grad)):
        put(name + "." + key, t)
    if mask is not None:
        put(name + ".src_mask", mask)
    if kpm is not None:
        put(name + ".key_padding_mask", kpm)
    for n, p in layer.named_parameters():
        put(name + ".grad." + n, p.grad)


# Encoder layers (appended after the attention cases, so those keep their values):
#   enc_post  d_model 8, 2 heads, ff 16, relu, post-norm, (S=5, N=3), key_padding_mask
#   enc_pre   d_model 8, 4 heads, ff 12, gelu, norm_first, batch_first, (N=2, S=4), causal src_mask
kpm2 = torch.zeros(3, 5)
kpm2[1, 3:] = 1
run_layer("enc_post", nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), torch.randn(5, 3, 8), kpm=kpm2)
causal = torch.triu(torch.ones(4, 4), diagonal=1)
run_layer("enc_pre", nn.TransformerEncoderLayer(8, 4, dim_feedforward=12, activation="gelu", norm_first=True,
                                                batch_first=True), torch.randn(2, 4, 8), mask=causal)

def perturb_norms_and_biases(module):
    """LayerNorm weights ~ U(0.5, 1.5), biases ~ U(-0.5, 0.5), attention in_proj_bias ~ U(-0.3, 0.3):
    torch initialises these to 1 / 0, which would leave their gradients' effect untested."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
            if isinstance(m, nn.MultiheadAttention):
                m.in_proj_bias.uniform_(-0.3, 0.3)


def put_masks(name, masks):
    for key, m in masks.items():
        if m is not None:
            put(name + "." + key, m)


def as_torch_mask(m):
    """0/1 float masks go to torch as bool; float masks with -inf (generate_square_subsequent_mask) as they are."""
    if m is None:
        return None
    return m if torch.isinf(m).any() else m.bool()


def run_decoder_layer(name, layer, tgt, memory, **masks):
    layer.eval()
    perturb_norms_and_biases(layer)
    for n, p in layer.state_dict().items():
        put(name + ".state." + n, p)
    tgt, memory = tgt.clone().requires_grad_(), memory.clone().requires_grad_()
    out = layer(tgt, memory, **{k: as_torch_mask(m) for k, m in masks.items()})
    r = torch.randn_like(out)
    (out * r).sum().backward()
    for key, t in (("tgt", tgt), ("memory", memory), ("out", out), ("r", r), ("grad.tgt", tgt.grad),
                   ("grad.memory", memory.grad)):
        put(name + "." + key, t)
    put_masks(name, masks)
    for n, p in layer.named_parameters():
        put(name + ".grad." + n, p.grad)


def run_transformer(name, model, src, tgt, **masks):
    model.eval()
    perturb_norms_and_biases(model)
    for n, p in model.state_dict().items():
        put(name + ".state." + n, p)
    src, tgt = src.clone().requires_grad_(), tgt.clone().requires_grad_()
    out = model(src, tgt, **{k: as_torch_mask(m) for k, m in masks.items()})
    r = torch.randn_like(out)
    (out * r).sum().backward()
    for key, t in (("src", src), ("tgt", tgt), ("out", out), ("r", r), ("grad.src", src.grad),
                   ("grad.tgt", tgt.grad)):
        put(name + "." + key, t)
    put_masks(name, masks)
    for n, p in model.named_parameters():
        put(name + ".grad." + n, p.grad)


# Decoder layers:
#   dec_post  d_model 8, 2 heads, ff 16, relu, post-norm, tgt (T=4, N=3), memory (S=5, N=3), causal tgt_mask
#             (bool), tgt_key_padding_mask, memory_key_padding_mask
#   dec_pre   d_model 8, 4 heads, ff 12, gelu, norm_first, batch_first, tgt (N=2, T=3), memory (N=2, S=4),
#             memory_mask (T, S), causal tgt_mask
tkpm = torch.zeros(3, 4)
tkpm[1, 3] = 1
mkpm = torch.zeros(3, 5)
mkpm[0, 4] = 1
mkpm[2, 2:] = 1
run_decoder_layer("dec_post", nn.TransformerDecoderLayer(8, 2, dim_feedforward=16), torch.randn(4, 3, 8),
                  torch.randn(5, 3, 8), tgt_mask=torch.triu(torch.ones(4, 4), diagonal=1),
                  tgt_key_padding_mask=tkpm, memory_key_padding_mask=mkpm)
mm = torch.zeros(3, 4)
mm[0, 1] = 1
mm[2, 3] = 1
run_decoder_layer("dec_pre", nn.TransformerDecoderLayer(8, 4, dim_feedforward=12, activation="gelu", norm_first=True,
                                                        batch_first=True),
                  torch.randn(2, 3, 8), torch.randn(2, 4, 8), tgt_mask=torch.triu(torch.ones(3, 3), diagonal=1),
                  memory_mask=mm)

# Transformers, dropout 0, 2 + 2 layers, d_model 8, ff 16, tgt_mask = generate_square_subsequent_mask (float, -inf):
#   tfm_post  2 heads, relu, post-norm, src (S=5, N=2), tgt (T=4, N=2), src/tgt/memory key padding masks
#   tfm_pre   4 heads, gelu, norm_first, batch_first, src (N=2, S=3), tgt (N=2, T=4), src_mask (S, S)
skpm = torch.zeros(2, 5)
skpm[1, 3:] = 1
tkpm2 = torch.zeros(2, 4)
tkpm2[0, 3] = 1
run_transformer("tfm_post", nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                                           dim_feedforward=16, dropout=0.0),
                torch.randn(5, 2, 8), torch.randn(4, 2, 8), tgt_mask=nn.Transformer.generate_square_subsequent_mask(4),
                src_key_padding_mask=skpm, tgt_key_padding_mask=tkpm2, memory_key_padding_mask=skpm)
sm = torch.zeros(3, 3)
sm[0, 2] = 1
run_transformer("tfm_pre", nn.Transformer(d_model=8, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                          dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True,
                                          norm_first=True),
                torch.randn(2, 3, 8), torch.randn(2, 4, 8), src_mask=sm,
                tgt_mask=nn.Transformer.generate_square_subsequent_mask(4))


# The sinusoidal table of PyTorch's tutorial PositionalEncoding (max_len 50, d_model 8), its own formula.
max_len, d_model = 50, 8
position = torch.arange(max_len).unsqueeze(1)
div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
pe = torch.zeros(max_len, d_model)
pe[:, 0::2] = torch.sin(position * div_term)
pe[:, 1::2] = torch.cos(position * div_term)
put("pe.table", pe)

np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_mha_fixture.npz"), **OUT)
print("wrote", len(OUT), "arrays")
