#!/usr/bin/python3
"""PyTorch reference for build/bin/bench_fused (issue 14): the same workloads, forward + backward.

    OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=N /usr/bin/python3 bench/pytorch_fused_reference.py \
        --threads N [--min-time 1.0] [--T 128,512]

Prints one JSON line per workload: wall-clock and CPU milliseconds per iteration (mean over a timed
loop of at least --min-time seconds, after warm-up), the thread count, torch's version and the BLAS
library mapped in the process (OpenBLAS must be, see docs/performance.md).
  layer_norm: F.layer_norm over the last dim of x (8, T, 512) with weight and bias; x, weight and
              bias receive gradients; y.backward(dy).
  sdpa:       q, k, v (8, 8, T, 64) receiving gradients, out.backward(dout), plain and causal, two
              ways: "composed" softmax(q kᵀ / 8 [masked_fill -inf above the diagonal]) v, and
              torch 1.13's F._scaled_dot_product_attention (need_attn_weights=False), itself composed.
"""
import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--threads", type=int, default=1)
p.add_argument("--min-time", type=float, default=1.0)
p.add_argument("--T", default="128,512")
ARGS = p.parse_args()
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))
os.environ.setdefault("OMP_NUM_THREADS", str(ARGS.threads))

import torch  # noqa: E402  (after the environment is set)
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(ARGS.threads)
torch.manual_seed(0)
B, H, D = 8, 8, 64


def blas_mapped():
    torch.ones(64, 64) @ torch.ones(64, 64)
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    return ",".join(sorted(os.path.basename(x) for x in libs)) or "none"


def timeit(step):
    for _ in range(2):
        step()
    n, wall, cpu = 0, 0.0, 0.0
    while wall < ARGS.min_time:
        w0, c0 = time.perf_counter(), time.process_time()
        step()
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        n += 1
    return 1e3 * wall / n, 1e3 * cpu / n


def layer_norm(T):
    C = H * D
    x = torch.randn(B, T, C, requires_grad=True)
    w = (1 + 0.1 * torch.randn(C)).requires_grad_()
    b = (0.1 * torch.randn(C)).requires_grad_()
    dy = torch.randn(B, T, C)

    def step():
        F.layer_norm(x, (C,), w, b).backward(dy)
        x.grad = w.grad = b.grad = None
    return step


def sdpa(T, causal, how):
    q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, H, T, D)
    blocked = torch.ones(T, T, dtype=torch.bool).triu(1)

    def composed():
        s = q @ k.transpose(-2, -1) * (D ** -0.5)
        if causal:
            s = s.masked_fill(blocked, float("-inf"))
        return torch.softmax(s, -1) @ v

    def builtin():
        return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, bool(causal))[0]

    f = composed if how == "composed" else builtin

    def step():
        f().backward(dout)
        q.grad = k.grad = v.grad = None
    return step


def main():
    blas = blas_mapped()
    common = dict(threads=ARGS.threads, torch=torch.__version__, blas=blas,
                  openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"))
    for T in [int(t) for t in ARGS.T.split(",")]:
        wall, cpu = timeit(layer_norm(T))
        print(json.dumps(dict(name="layer_norm", T=T, causal=0, real_ms=wall, cpu_ms=cpu, **common)), flush=True)
        for causal in (0, 1):
            for how in ("composed", "builtin"):
                wall, cpu = timeit(sdpa(T, causal, how))
                print(json.dumps(dict(name="sdpa_" + how, T=T, causal=causal, real_ms=wall, cpu_ms=cpu, **common)),
                      flush=True)


if __name__ == "__main__":
    sys.exit(main())
