"""What a run of bench/compare's references ran on and in which precision (issue 39), shared by the
PyTorch references (bench/pytorch_reference.py, encoder_reference.py, conv_reference.py) and by
bench/compare: the CPU as tg::cpu::summary() names it, the OpenBLAS core type the library took,
the OPENBLAS_* settings, and torch.autocast for --precision bf16. torch is imported only by
autocast(), so bench/compare can use the rest without it."""
import contextlib
import ctypes
import os

# The flags tg::cpu::summary() lists (autograd/cpu.cpp), in its order.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
             "amx_tile", "amx_bf16", "amx_int8")
PRECISIONS = ("f32", "bf16")


def precision_arg(value):
    """argparse type of --precision: f32 (fp32 is accepted for it) or bf16."""
    v = {"fp32": "f32"}.get(value, value)
    if v not in PRECISIONS:
        raise ValueError(f"precision must be f32 (or fp32) or bf16, not {value}")
    return v


def cpuinfo():
    """The first processor's fields of /proc/cpuinfo ({} when unreadable)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    if info:
                        break
                    continue
                if ":" in line:
                    k, v = line.split(":", 1)
                    info[k.strip()] = v.strip()
    except OSError:
        pass
    return info


def cpu_flags():
    return set(cpuinfo().get("flags", "").split())


def cpu_summary():
    """"<model name> (family F model M): <flags>", the format of tg::cpu::summary()."""
    info = cpuinfo()
    flags = set(info.get("flags", "").split())
    return (f"{info.get('model name', 'unknown CPU')} (family {info.get('cpu family', '?')} model {info.get('model', '?')}):"
            + "".join(f" {f}" for f in CPU_FLAGS if f in flags))


def openblas_core():
    """The core type OpenBLAS took in this process (openblas_get_corename), or "" when libopenblas is not
    mapped in it."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return ""


def openblas_env():
    """The OPENBLAS_* variables of this process's environment (they steer the core type, the threads and
    the cache sizes OpenBLAS assumes), "NAME=value" joined by spaces."""
    return " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_"))


def autocast(precision):
    """torch.autocast("cpu", dtype=torch.bfloat16) for bf16 (cache_enabled by default, as users write it),
    a context that does nothing for f32."""
    if precision == "bf16":
        import torch
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def fields(precision):
    """The JSON fields a PyTorch reference adds to its record (call after its runs: OpenBLAS is loaded)."""
    return dict(precision=precision,
                autocast="torch.autocast('cpu', dtype=torch.bfloat16)" if precision == "bf16" else "off",
                cpu=cpu_summary(), openblas_core=openblas_core(), openblas_env=openblas_env())
