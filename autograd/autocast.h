#pragma once
// Automatic mixed precision, as torch.autocast("cpu", dtype=torch.bfloat16): inside a Guard the
// matrix products (matmul, linear, and through them bmm-style batched products, the GRU's and the
// attention layers' projections) round their float32 operands to bfloat16 and accumulate in
// float32; every other op runs in float32 as before. Unlike torch, whose autocast returns bf16
// tensors, the products return float32 (tapegrad has no bf16 dtype yet): no bf16 elementwise
// kernels are needed and the output keeps float32's precision. Backward of a product recorded
// under autocast also uses bf16-rounded operands (as torch), wherever backward runs. Weights stay
// float32 (master weights), and so do gradients; no loss scaling is needed (bf16 has float32's
// exponent range). float64 tensors are never converted, so gradcheck is unaffected.
// Design, kernels and figures: docs/performance.md, "bf16 mixed precision".
#include <cstdint>

namespace tg {
class Tensor;
}

namespace tg::autocast {

enum class Precision : std::uint8_t { f32, bf16 };

/// RAII scope setting this thread's autocast state (torch.autocast's context manager): nestable,
/// restoring the previous state on exit; `enabled = false` (or Precision::f32) turns autocast off
/// inside an enabled scope. Other threads are unaffected (thread-local, as torch's), including
/// the threads of tg::run_tasks, whose tasks open their own Guard when they need one.
/// With `cache_enabled`, a parameter's bf16 copy is made once and reused for as long as the
/// parameter keeps its buffer and that buffer's version counter (Tensor::_version()) is unchanged:
/// an optimizer step, copy_, fill_ or any in-place op bumps it, and the next product repacks the
/// copy, into its old buffer when nothing else holds that (a steady training step allocates
/// nothing). Unlike torch's cast cache, the copies outlive the outermost Guard (so the next step
/// or decoding call packs nothing unless a weight changed); a thread keeps them until
/// clear_cache(), until the weight's buffer is freed (dropped when the outermost Guard exits),
/// or until the thread exits.
/// Code that writes a weight's elements through data<T>() must call
/// tg::autograd::increment_version(weight) afterwards, as torch requires in-place writes to go
/// through its ops: the cache cannot see such a write otherwise.
class Guard {
 public:
  explicit Guard(Precision precision = Precision::bf16, bool enabled = true, bool cache_enabled = true);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  bool prev_enabled_, prev_cache_;
};

/// True when products on this thread run in bf16 now.
bool is_enabled();
/// Whether this CPU has bf16 arithmetic (avx512_bf16); without it autocast runs a fallback that
/// reads bf16 operands (half the bytes) and computes in float32 (the same results, slower).
bool bf16_hardware();
/// The kernel path bf16 products take on this machine, for logs and --version lines.
const char* bf16_path();

/// Lets the weight cache keep a bf16 copy of t's buffer as it keeps a parameter's (a float32 leaf
/// that requires grad): under a caching Guard, a product whose right operand (linear's weight,
/// matmul's b) is t or another tensor viewing t's buffer reads a packed bf16 copy made once, renewed
/// when the buffer's version counter changes and dropped once the buffer is freed (at the outermost
/// Guard's exit after that, or at clear_cache()). Such a product is then read in bf16 at any number
/// of rows, as a parameter's: without the mark, a product of at most kernels::bf16::kDirectRows
/// rows runs in float32 on the unrounded operands, and a larger one rounds and packs its operand
/// at every call. For tensors that are not parameters but stay constant while products use them: a
/// frozen weight (requires_grad false), or views of a parameter's rows (what
/// nn::TransformerDecoderLayer::forward_step keeps for its projections; marking a view marks the
/// parameter's buffer, which changes nothing for the parameter itself). The caller promises what
/// the cache asks of parameters: every write to the buffer goes through an in-place op, copy_ or
/// fill_, or is followed by tg::autograd::increment_version. The mark belongs to the buffer for its
/// whole life and is shared by every tensor viewing it; a new buffer, even one at a freed buffer's
/// address, starts unmarked. An undefined tensor is ignored.
void mark_cacheable(const Tensor& t);
/// Whether products under a caching Guard may read t's bf16 copy from the cache: t is float32 and
/// is a leaf that requires grad (a parameter) or its buffer was marked by mark_cacheable.
bool is_cacheable(const Tensor& t);

/// Drops this thread's cached bf16 weights (their memory goes back to the caching allocator).
/// Never needed for correctness when every write bumps the weight's version (see Guard).
void clear_cache();

struct CacheStats {
  std::int64_t entries = 0;  ///< weights with a cached bf16 copy on this thread
  std::int64_t bytes = 0;    ///< bytes of those copies
  std::int64_t hits = 0;     ///< products that used a cached copy (this thread, since its start)
  std::int64_t packs = 0;    ///< copies made (this thread, since its start)
};
CacheStats cache_stats();

}  // namespace tg::autocast
