#!/usr/bin/python3
"""PyTorch's time for bench/bench_conv.cpp's step: Conv2d(3 -> 32, 3x3, padding 1) + BatchNorm2d(32) +
ReLU + MaxPool2d(2) on a 32x3x32x32 float32 batch, loss = mean, backward, SGD update (lr 0.01) of
the four trainable tensors. Also the conv alone (forward + backward, sum of the output).

    /usr/bin/python3 bench/conv_reference.py [--threads 1 2] [--seconds 3]

Prints ms per step (median of 5 timed runs of --seconds / 5 each) per thread count. Debian's
python3-torch 1.13 (CPU, oneDNN for convolutions).
"""
import argparse
import statistics
import time

import torch
from torch import nn


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.rand(32, 3, 32, 32) * 2 - 1
    for threads in args.threads:
        torch.set_num_threads(threads)
        conv, bn, pool = nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.MaxPool2d(2)
        params = [conv.weight, conv.bias, bn.weight, bn.bias]

        def step():
            for p in params:
                p.grad = None
            pool(torch.relu(bn(conv(x)))).mean().backward()
            with torch.no_grad():
                for p in params:
                    p.sub_(p.grad * 0.01)

        def conv_only():
            conv.weight.grad = conv.bias.grad = None
            conv(x).sum().backward()

        print(f"torch {torch.__version__} threads={threads}: block step {timed(step, args.seconds):.3f} ms, "
              f"conv forward+backward {timed(conv_only, args.seconds):.3f} ms")


if __name__ == "__main__":
    main()
