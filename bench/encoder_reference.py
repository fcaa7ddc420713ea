#!/usr/bin/python3
"""PyTorch reference for bench_encoder (workload G of issue 20): the same model, data, step and JSON keys.

    OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/encoder_reference.py \
        [--threads N] [--steps N] [--warmup N] [--seed S] [--profile] [--precision f32|bf16]

The model, its initialisation scheme and the batches are described in bench/encoder_workload.h: a
pre-LN Transformer encoder layer (d_model 256, 4 heads, ff 1024, exact GELU, dropout 0) written
with plain ops (torch.nn.Linear, layer_norm, softmax, matmul), batch 32, T = 64, loss
mean((out - target)^2) with target[b, t] = x[b, (t + 1) mod T], Adam(lr 1e-3). The splitmix64
batches are drawn with NumPy (the same numbers bench_encoder draws in C++). Thread settings as
bench/pytorch_reference.py. --precision bf16 (issue 39): each step's forward and loss inside
torch.autocast("cpu", dtype=torch.bfloat16), backward and Adam outside, as bench/pytorch_reference.py
describes; the record names the precision, the dtype of the first step's last product (ff2's output, "product_dtype") and
the first step's loss, the CPU and the OpenBLAS core type taken.
"""
import argparse
import json
import os
import resource
import time

from reference_context import autocast, fields, precision_arg  # bench/, the script's own directory

D, HEADS, FF, B, T = 256, 4, 1024, 32, 64
MASK64 = (1 << 64) - 1


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", choices=["G"], default="G")
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--precision", type=precision_arg, default="f32", help="f32 (or fp32), or bf16: torch.autocast")
    return p.parse_args()


ARGS = parse_args()
THREADS = ARGS.threads if ARGS.threads > 0 else (os.cpu_count() or 1)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from blas_in_use import blas_in_use  # noqa: E402  (bench/, the script's own directory)


def batches(seed, count):
    """splitmix64 from seed * 0x632BE59BD9B4E019 + 12345: the k-th output finalises state0 + k * golden."""
    state0 = (seed * 0x632BE59BD9B4E019 + 12345) & MASK64
    n = B * T * D
    k = np.arange(1, count * n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(state0) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / 16777216.0
    x = (2.0 * u - 1.0).astype(np.float32).reshape(count, B, T, D)
    out = []
    for i in range(count):
        xi = torch.from_numpy(x[i].copy())
        out.append((xi, torch.roll(xi, shifts=-1, dims=1)))   # target[b, t] = x[b, (t + 1) mod T]
    return out


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(D, FF), nn.Linear(FF, D)
        for lin in (self.q, self.k, self.v, self.o, self.ff1, self.ff2):   # U(-1/sqrt(in), 1/sqrt(in))
            bound = 1.0 / lin.in_features ** 0.5
            nn.init.uniform_(lin.weight, -bound, bound)
            nn.init.uniform_(lin.bias, -bound, bound)

    def forward(self, x):
        dh = D // HEADS

        def heads(t):
            return t.reshape(B, T, HEADS, dh).transpose(1, 2)
        a = self.ln1(x)
        q, k, v = heads(self.q(a)), heads(self.k(a)), heads(self.v(a))
        w = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * (1.0 / dh ** 0.5), dim=-1)
        y = x + self.o(torch.matmul(w, v).transpose(1, 2).reshape(B, T, D))
        return y + self.ff2(nn.functional.gelu(self.ff1(self.ln2(y))))


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main():
    a = ARGS
    torch.set_num_threads(THREADS)
    torch.manual_seed(a.seed)
    model = EncoderLayer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = batches(a.seed, a.warmup + a.steps)
    prof = dict(forward_and_loss=0.0, backward=0.0, adam=0.0)
    first_loss, last_loss, start, cpu_start = None, 0.0, time.perf_counter(), cpu_seconds()
    product_dtypes = []
    hook = model.ff2.register_forward_hook(lambda module, inputs, output: product_dtypes.append(str(output.dtype)))
    for i, (x, target) in enumerate(data):
        if i == a.warmup:
            start, cpu_start = time.perf_counter(), cpu_seconds()
        t0 = time.perf_counter()
        with autocast(a.precision):
            loss = ((model(x) - target) ** 2).mean()
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        last_loss = float(loss)
        if first_loss is None:
            first_loss = last_loss
            hook.remove()
        if i >= a.warmup:
            for key, d in zip(prof, (t1 - t0, t2 - t1, t3 - t2)):
                prof[key] += d
    train_s = time.perf_counter() - start
    train_cpu_s = cpu_seconds() - cpu_start
    tokens = a.steps * B * T
    rec = dict(framework="pytorch", torch_version=torch.__version__, config="G",
               model="pre-LN encoder layer (plain ops)", threads=torch.get_num_threads(),
               blas=blas_in_use(),
               openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
               omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), steps=a.steps, warmup=a.warmup, batch=B,
               num_steps=T, tokens=tokens, tokens_per_sec=tokens / train_s, sec_per_step=train_s / a.steps,
               cpu_sec_per_step=train_cpu_s / a.steps, loss_first=first_loss, loss_last=last_loss,
               decode_batch1_sents_per_sec=0.0, decode_batch64_sents_per_sec=0.0,
               peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
               parameters=sum(p.numel() for p in model.parameters()), product_dtype=product_dtypes[0], **fields(a.precision))
    if a.profile:
        rec["profile_s"] = prof
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
