#!/usr/bin/env python3
"""Side-by-side comparison of tapegrad's fused ops (build/bin/bench_fused) and PyTorch
(bench/pytorch_fused_reference.py): layer_norm and scaled_dot_product_attention, forward+backward.

    bench/fused_compare.py [--reps 3] [--threads 1,2] [--min-time 1.0] [--stat median|min] [--out FILE]

For every repetition and thread count the two programs run alternately (tapegrad, then PyTorch,
same thread count), so drifts of the machine's load hit both alike; each figure is the median over
repetitions (--stat min: the fastest repetition, the reading least disturbed by other work on a
shared machine). PyTorch runs with OMP_WAIT_POLICY=passive and OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=N,
and is counted in its best setting per workload (lowest time over thread counts and, for SDPA,
over its two forms). Ratios are PyTorch best / tapegrad (> 1 = tapegrad faster), for wall-clock
time and for CPU time (user+system of all threads: robust on a loaded machine, and the measure
where a second thread cannot help). Scaling = tapegrad 1 thread / 2 threads, wall-clock.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def tapegrad(binary, threads, min_time):
    out = subprocess.run([binary, f"--benchmark_filter=/threads:{threads}", f"--benchmark_min_time={min_time}",
                          "--benchmark_format=json"], capture_output=True, text=True, check=True).stdout
    rows = {}
    for b in json.loads(out)["benchmarks"]:
        name = b["name"].split("/")[0]
        args = dict(kv.split(":") for kv in b["name"].split("/")[1:] if ":" in kv)
        kind = {"BM_LayerNormForwardBackward": "layer_norm", "BM_SDPAForwardBackward": "sdpa",
                "BM_SDPAComposedForwardBackward": "sdpa_composed"}[name]
        scale = {"us": 1e-3, "ms": 1.0, "ns": 1e-6}[b["time_unit"]]
        rows[(kind, int(args["T"]), int(args.get("causal", 0)))] = (b["real_time"] * scale, b["cpu_time"] * scale)
    return rows


def pytorch(python, threads, min_time):
    env = dict(os.environ, OMP_WAIT_POLICY="passive", OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([python, os.path.join(ROOT, "bench", "pytorch_fused_reference.py"), "--threads", str(threads),
                          "--min-time", str(min_time)], env=env, capture_output=True, text=True, check=True).stdout
    rows, info = {}, {}
    for line in out.splitlines():
        r = json.loads(line)
        kind = "layer_norm" if r["name"] == "layer_norm" else "sdpa"
        rows.setdefault((kind, r["T"], r["causal"]), []).append((r["real_ms"], r["cpu_ms"], r["name"]))
        info = dict(torch=r["torch"], blas=r["blas"])
    return rows, info


def main():
    ap = argparse.ArgumentParser(description="tapegrad fused ops vs PyTorch (issue 14)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "bench_fused"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--stat", choices=["median", "min"], default="median")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    tg, pt, info = {}, {}, {}
    load_before = sh("uptime")
    for rep in range(a.reps):
        for t in threads:
            for key, val in tapegrad(a.bin, t, a.min_time).items():
                tg.setdefault(key + (t,), []).append(val)
            rows, info = pytorch(a.python, t, a.min_time)
            for key, vals in rows.items():
                for real, cpu, how in vals:
                    pt.setdefault(key + (t, how), []).append((real, cpu))
            print(f"# rep {rep} threads {t} done ({sh('uptime')})", file=sys.stderr, flush=True)
    load_after = sh("uptime")

    def med(vals, i):
        return (statistics.median if a.stat == "median" else min)(v[i] for v in vals)

    out = [f"tapegrad `{os.path.relpath(a.bin, ROOT)}` at commit `{sh('git -C ' + ROOT + ' rev-parse --short HEAD')}`, "
           f"PyTorch {info.get('torch')} with BLAS `{info.get('blas')}`, {a.reps} repetitions ({'medians' if a.stat == 'median' else 'fastest of them'}), "
           f"min time {a.min_time} s, on `{sh('hostname')}` ({os.cpu_count()} CPUs).", "",
           f"Load before: `{load_before}`  ", f"Load after: `{load_after}`", "",
           "| workload | T | causal | tapegrad ms (1 thr / 2 thr) | tapegrad CPU ms (1 / 2) | PyTorch best ms (setting) "
           "| PyTorch best CPU ms | ratio wall (1 / 2 thr) | ratio CPU (1 thr) | tapegrad 2-thread scaling | composite ms (1 / 2) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind, T, causal in sorted({k[:3] for k in tg if k[0] != "sdpa_composed"}):
        t1, t2 = tg.get((kind, T, causal, 1)), tg.get((kind, T, causal, 2))
        cands = [(med(v, 0), f"{k[4]}, {k[3]} thr") for k, v in pt.items() if k[:3] == (kind, T, causal)]
        cpus = [med(v, 1) for k, v in pt.items() if k[:3] == (kind, T, causal)]
        best, setting = min(cands)
        best_cpu = min(cpus)
        comp = [tg.get(("sdpa_composed", T, causal, t)) for t in (1, 2)] if kind == "sdpa" else [None, None]

        def f(x, i=0):
            return f"{med(x, i):.3g}" if x else "–"
        out.append(f"| {kind} | {T} | {causal} | {f(t1)} / {f(t2)} | {f(t1, 1)} / {f(t2, 1)} | {best:.3g} ({setting}) | "
                   f"{best_cpu:.3g} | {best / med(t1, 0):.2f}x / {best / med(t2, 0) if t2 else float('nan'):.2f}x | "
                   f"{best_cpu / med(t1, 1):.2f}x | {med(t1, 0) / med(t2, 0) if t2 else float('nan'):.2f}x | "
                   f"{f(comp[0])} / {f(comp[1])} |")
    out.append("")
    out.append(f"PyTorch, every setting ({a.stat} ms wall / CPU):")
    out.append("")
    for k in sorted(pt):
        out.append(f"- {k[0]} T={k[1]} causal={k[2]} {k[4]} threads={k[3]}: {med(pt[k], 0):.3g} / {med(pt[k], 1):.3g}")
    text = "\n".join(out) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
