"""The BLAS a PyTorch reference process runs on, recorded with every result (the references must run
on OpenBLAS, never reference BLAS)."""


def blas_in_use():
    """"OpenBLAS" when libopenblas is mapped into this process (Debian's libblas.so.3 alternative with
    libopenblas0-pthread), else the path of the libblas mapped (reference BLAS: many times slower,
    not a fair reference), or "unknown"."""
    other = "unknown"
    with open("/proc/self/maps") as f:
        for line in f:
            if "libopenblas" in line:
                return "OpenBLAS"
            if "libblas" in line:
                other = line.split()[-1]
    return other
