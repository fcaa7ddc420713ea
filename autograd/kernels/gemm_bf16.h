#pragma once
// bfloat16 matrix products with float32 accumulation (autocast, autograd/autocast.h). The operands
// are float32 tensors rounded to bf16 (round to nearest even) when they are packed; the result is
// float32. Kernels chosen at run time: AVX-512 BF16 (vdpbf16ps) where the CPU has it, otherwise
// AVX2 + FMA reading the same bf16 packed operands (half the bytes of float32) and widening them in
// registers. Internal to the library (not installed). Design and figures: docs/performance.md,
// "bf16 mixed precision".
#include <bit>
#include <cstdint>
#include <memory>

namespace tg::kernels::bf16 {

/// float32 -> bf16 bits, round to nearest even; a NaN stays a NaN (made quiet, sign kept), ±inf and
/// ±0 are kept, subnormals round like any other value (no flush to zero), overflow gives ±inf. The
/// one conversion of the library: every vector path is tested bit-identical to it.
inline std::uint16_t from_float(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
/// f rounded to the nearest bf16, as float32.
inline float round(float f) { return to_float(from_float(f)); }

/// n floats to bf16 bits (from_float on each, vectorised).
void convert(const float* src, std::int64_t n, std::uint16_t* dst);

/// The kernel families; `best` is the fastest the CPU has.
enum class Path { avx2, avx512bf16 };
/// Whether this CPU has the bf16 dot-product instructions (avx512_bf16).
bool hardware();
/// The path taken by default: avx512bf16 when hardware(), else avx2. TG_BF16_PATH=avx2 forces the
/// fallback (for measurements).
Path default_path();
bool available(Path path);
const char* path_name(Path path);

/// From this many rows of C the avx2 path widens the packed bf16 operand back to float32 and runs the
/// float32 GEMM on the bf16 values (the float32 FMA peak is its limit); below, it widens in
/// registers and reads half the bytes (batch-1 decoding is bound by reading the weights).
inline constexpr std::int64_t kAvx2WidenRows = 8;

/// op(B) (K x N) rounded to bf16 and packed for the kernels: 32-column panels, inside a panel the
/// pairs (k, k+1) of each column side by side (the operand layout of vdpbf16ps), K padded to even
/// and N to a multiple of 32 with zeros. Read-only once built: shared between threads.
struct PackedB {
  std::int64_t K = 0, N = 0;
  std::int64_t pairs = 0, panels = 0;  // (K + 1) / 2, (N + 31) / 32
  std::uint16_t* data = nullptr;       // panels * pairs * 64 values
  std::shared_ptr<void> owner;
  std::size_t bytes() const { return static_cast<std::size_t>(panels * pairs * 64) * 2; }
};
/// trans_b: B stored (N, K) with leading dimension ldb (a linear layer's weight); else (K, N).
PackedB pack_b(bool trans_b, std::int64_t K, std::int64_t N, const float* B, std::int64_t ldb);
/// The same into `P`, reusing its buffer when P holds a packing of the same K and N (no
/// allocation: the weight cache renews a copy this way after each optimizer step); else P gets a new
/// buffer. Nobody may read P meanwhile.
void pack_b(bool trans_b, std::int64_t K, std::int64_t N, const float* B, std::int64_t ldb, PackedB& P);

/// C = op(A) op(B) + beta C (+ bias on every row, length N, optional), with A and B rounded to bf16
/// and every sum accumulated in float32. Same conventions as kernels::gemm (row-major; trans_a: A
/// stored (K, M); beta == 0 does not read C). Results do not depend on the thread count (K is
/// never split). The avx2 path below kAvx2WidenRows rows adds each column's products in the order
/// k = 0, 1, ..., K-1 as gemm_reference does; from there it sums as the float32 GEMM does.
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
          const float* bias = nullptr, Path path = default_path());
/// The same with op(B) packed already (a cached weight).
void gemm_packed(bool trans_a, std::int64_t M, const float* A, std::int64_t lda, const PackedB& B, float beta,
                 float* C, std::int64_t ldc, const float* bias = nullptr, Path path = default_path());
/// gemm packs op(B) for the call, except for at most kDirectRows rows: then it runs the float32
/// GEMM on the unrounded operands (more accurate; rounding B alone costs more than that product,
/// packing it far more). A cached weight (gemm_packed) is always read in bf16.
inline constexpr std::int64_t kDirectRows = 4;
/// gemm on the calling thread only (one product per task of a batched product).
void gemm_serial(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                 std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                 Path path = default_path());

/// `batch` products as kernels::gemm_batched: matrix i uses A + i*stride_a, B + i*stride_b,
/// C + i*stride_c; a stride of 0 shares one matrix (B then packed once); stride_c == 0 sums the
/// entries into one C in batch order.
void gemm_batched(bool trans_a, bool trans_b, std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K,
                  const float* A, std::int64_t lda, std::int64_t stride_a, const float* B, std::int64_t ldb,
                  std::int64_t stride_b, float beta, float* C, std::int64_t ldc, std::int64_t stride_c,
                  Path path = default_path());

/// Plain loops with the same contract: inputs rounded with from_float, products summed in float32
/// in the order k = 0..K-1 with fmaf. The avx2 path equals it bit for bit.
void gemm_reference(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                    const float* bias = nullptr);

namespace detail {
/// The AVX-512 BF16 micro-kernel (gemm_bf16_avx512.cpp, compiled with -mavx512bf16): rows
/// [0, rows) of C (rows <= 12) times one 32-column panel. `a` holds the rows' bf16 pairs, `a_stride`
/// uint32 pairs apart; `cols` valid columns of the panel.
void kernel_avx512bf16(int rows, int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride,
                       const std::uint16_t* panel, float beta, float* C, std::int64_t ldc, const float* bias);
}  // namespace detail

}  // namespace tg::kernels::bf16
