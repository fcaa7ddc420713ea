#!/usr/bin/python3
"""PyTorch reference for workload CONV of bench/compare (bench_conv_step, issue 42): the step of
bench/bench_conv.cpp's BM_ConvBlockTrainingStep with the JSON keys of bench_conv_step.

    OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/conv_reference.py \
        [--threads N] [--steps N] [--warmup N] [--seed S] [--profile] [--precision f32|bf16]
    /usr/bin/python3 bench/conv_reference.py --seconds 3 [--threads 1 2]      # the older table

The step: Conv2d(3 -> 32, 3x3, padding 1) + BatchNorm2d(32) (training: batch statistics, running
ones updated) + ReLU + MaxPool2d(2) on one 32x3x32x32 float32 batch (uniform in [-1, 1), the same
every step), loss = mean, backward, SGD update p -= 0.01 grad of the four trainable tensors under
no_grad, gradients set to None before each step. Prints one JSON line: tokens are images (32 per
step), the decoding fields read 0. Thread settings as bench/encoder_reference.py (OMP_WAIT_POLICY
and OPENBLAS_NUM_THREADS are set before torch is imported unless given). --precision bf16 (issue
39): each step's forward and loss inside torch.autocast("cpu", dtype=torch.bfloat16) (the
convolution runs in bf16 on oneDNN), backward and the SGD update outside, as
bench/pytorch_reference.py describes; the record names the precision and the dtype of the first
step's convolution output ("out_dtype").

With --seconds S, prints instead, per thread count of --threads, ms per step of the block and of the
conv alone (forward + backward of the sum of its output): the median of 5 timed runs of S / 5 each,
after 20 untimed steps. Debian's python3-torch 1.13 (CPU, oneDNN for convolutions).
"""
import argparse
import json
import os
import resource
import statistics
import time

from reference_context import autocast, fields, precision_arg  # bench/, the script's own directory

N, C, H, W, O = 32, 3, 32, 32, 32
LR = 0.01


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", choices=["CONV"], default="CONV")
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="thread count (0 = all cores); with --seconds, a list (default 1 2)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--seconds", type=float, default=None, help="the older timing table instead of JSON")
    p.add_argument("--precision", type=precision_arg, default="f32", help="f32 (or fp32), or bf16: torch.autocast")
    a = p.parse_args()
    if a.seconds is None and a.threads is not None and len(a.threads) != 1:
        p.error("--threads takes one count without --seconds")
    return a


ARGS = parse_args()
if ARGS.seconds is None:
    THREADS = ARGS.threads[0] if ARGS.threads and ARGS.threads[0] > 0 else (os.cpu_count() or 1)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from blas_in_use import blas_in_use  # noqa: E402  (bench/, the script's own directory)


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def block():
    conv, bn, pool = nn.Conv2d(C, O, 3, padding=1), nn.BatchNorm2d(O), nn.MaxPool2d(2)
    return conv, bn, pool, [conv.weight, conv.bias, bn.weight, bn.bias]


def sgd(params):
    with torch.no_grad():
        for p in params:
            p.sub_(p.grad * LR)


def json_run(a):
    torch.set_num_threads(THREADS)
    torch.manual_seed(a.seed)
    conv, bn, pool, params = block()
    x = torch.rand(N, C, H, W) * 2 - 1
    prof = dict(forward_and_loss=0.0, backward=0.0, sgd=0.0)
    first_loss = last_loss = 0.0
    out_dtype = None
    start, cpu_start = time.perf_counter(), cpu_seconds()
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            start, cpu_start = time.perf_counter(), cpu_seconds()
        t0 = time.perf_counter()
        for p in params:
            p.grad = None
        with autocast(a.precision):
            y = conv(x)
            loss = pool(torch.relu(bn(y))).mean()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        sgd(params)
        t3 = time.perf_counter()
        last_loss = float(loss)
        if i == 0:
            first_loss, out_dtype = last_loss, str(y.dtype)
        if i >= a.warmup:
            for key, d in zip(prof, (t1 - t0, t2 - t1, t3 - t2)):
                prof[key] += d
    train_s = time.perf_counter() - start
    train_cpu_s = cpu_seconds() - cpu_start
    images = a.steps * N
    rec = dict(framework="pytorch", torch_version=torch.__version__, config="CONV",
               model="Conv2d(3,32,3,pad 1)+BatchNorm2d+ReLU+MaxPool2d(2), SGD (torch.nn modules)",
               threads=torch.get_num_threads(), blas=blas_in_use(),
               openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
               omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), steps=a.steps, warmup=a.warmup,
               batch=N, input=[N, C, H, W], tokens=images, tokens_per_sec=images / train_s,
               images_per_sec=images / train_s, sec_per_step=train_s / a.steps,
               cpu_sec_per_step=train_cpu_s / a.steps, loss_first=first_loss, loss_last=last_loss,
               decode_batch1_sents_per_sec=0.0, decode_batch64_sents_per_sec=0.0,
               peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
               parameters=sum(p.numel() for p in params), out_dtype=out_dtype, **fields(a.precision))
    if a.profile:
        rec["profile_s"] = prof
    print(json.dumps(rec), flush=True)


def timed(fn, seconds):
    for _ in range(20):  # warm-up: oneDNN primitive caches, allocator
        fn()
    runs = []
    for _ in range(5):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / 5:
            fn()
            n += 1
        runs.append((time.perf_counter() - t0) / n * 1e3)
    return statistics.median(runs)


def table_run(a):
    torch.manual_seed(a.seed)
    x = torch.rand(N, C, H, W) * 2 - 1
    for threads in a.threads or [1, 2]:
        torch.set_num_threads(threads)
        conv, bn, pool, params = block()

        def step():
            for p in params:
                p.grad = None
            pool(torch.relu(bn(conv(x)))).mean().backward()
            sgd(params)

        def conv_only():
            conv.weight.grad = conv.bias.grad = None
            conv(x).sum().backward()

        print(f"torch {torch.__version__} threads={threads}: block step {timed(step, a.seconds):.3f} ms, "
              f"conv forward+backward {timed(conv_only, a.seconds):.3f} ms")


if __name__ == "__main__":
    if ARGS.steps < 1 or ARGS.warmup < 0:
        raise SystemExit("conv_reference.py: --steps must be >= 1 and --warmup >= 0")
    if ARGS.seconds is None:
        json_run(ARGS)
    else:
        table_run(ARGS)
