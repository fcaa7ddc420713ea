// Matrix products. Every product goes through kernels::gemm, with transposes expressed as
// gemm flags (no transposed copies), so forward and backward share one tuned kernel.
#include <stdexcept>
#include <string>

#include "autograd/compact_grad.h"
#include "autograd/kernels/bf16_weights.h"
#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/kernels/reduce.h"
#include "autograd/kernels/view.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/pending.h"
#include "autograd/tape.h"

namespace tg {

namespace {

[[noreturn]] void shape_error(const char* op, const Tensor& a, const Tensor& b, const char* why) {
  throw std::invalid_argument(std::string(op) + ": " + why + ": got " + a.shape().str() + " and " + b.shape().str());
}

// C (batch x M x N) = op(A) op(B), each operand either batched (stride = matrix size) or shared.
struct Product {
  bool ta = false, tb = false;
  std::int64_t batch = 1, M = 0, N = 0, K = 0;
  std::int64_t lda = 0, ldb = 0, sa = 0, sb = 0;
  std::int64_t sc = -1;  // C's batch stride: M * N unless given; 0 sums the entries into one C
  bool bf16 = false;     // recorded under autocast: operands rounded to bf16, float32 sums
};

/// C = op(A) op(B) + beta C (beta 0: C is only written).
void product_into(const Product& p, const Tensor& A, const Tensor& B, Tensor& C, double beta) {
  if (p.bf16) {
    kernels::bf16::gemm_batched(p.ta, p.tb, p.batch, p.M, p.N, p.K, A.data<float>(), p.lda, p.sa, B.data<float>(), p.ldb,
                                p.sb, static_cast<float>(beta), C.data<float>(), p.N, p.sc < 0 ? p.M * p.N : p.sc);
    return;
  }
  kernels::dispatch_floating("matmul", A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::gemm_batched<T>(p.ta, p.tb, p.batch, p.M, p.N, p.K, T(1), A.data<T>(), p.lda, p.sa, B.data<T>(), p.ldb,
                             p.sb, static_cast<T>(beta), C.template data<T>(), p.N, p.sc < 0 ? p.M * p.N : p.sc);
  });
}

Tensor run(const Product& p, const Tensor& A, const Tensor& B, const Shape& out_shape) {
  Tensor C = Tensor::empty(out_shape, A.dtype());
  product_into(p, A, B, C, 0.0);
  return C;
}

/// A gradient op(A) op(B), as a term for BackwardContext::accumulate: added with beta = 1 into a
/// gradient the input already has (no temporary), or run with beta = 0 into a new tensor.
struct ProductGrad {
  Product p;
  const Tensor &A, &B;
  const Shape& shape;
  void add_into(Tensor& buffer) const { product_into(p, A, B, buffer, 1.0); }
  Tensor make() const { return run(p, A, B, shape); }
};

/// Under autocast, a gradient G op(W)ᵀ whose right operand is a cached weight: op(W)ᵀ is packed
/// once for every product recorded with that weight (LazyPacked), not once per backward.
struct CachedWeightGrad {
  Product p;  // batch 1, B = the weight in the orientation the gradient reads
  const Tensor &A, &W;
  std::shared_ptr<kernels::bf16::LazyPacked> lazy;
  const Shape& shape;
  const kernels::bf16::PackedB& packed() const {
    return lazy->get(p.tb, p.K, p.N, W.data<float>(), p.ldb);
  }
  void add_into(Tensor& buffer) const {
    kernels::bf16::gemm_packed(p.ta, p.M, A.data<float>(), p.lda, packed(), 1.0f, buffer.data<float>(), p.N);
  }
  Tensor make() const {
    Tensor C = Tensor::empty(shape, DType::f32);
    kernels::bf16::gemm_packed(p.ta, p.M, A.data<float>(), p.lda, packed(), 0.0f, C.data<float>(), p.N);
    return C;
  }
};

/// A linear layer's weight gradient Gᵀ X (p.ta, batch 1: G (K rows, M = out), X (K, N = in)), which a
/// leaf that allows it keeps as the pair when that is smaller than the dense (out, in) matrix.
struct WeightGrad : ProductGrad {
  std::shared_ptr<CompactGrad> compact() const {
    if (p.K * (p.M + p.N) >= p.M * p.N) return nullptr;
    return low_rank_grad(kernels::view_as(A, Shape{p.K, p.M}), kernels::view_as(B, Shape{p.K, p.N}));
  }
};

}  // namespace

namespace {

/// (B, M, K) x (B, K, N), one GEMM per batch entry. A 2-D operand, (M, K) or (K, N), is shared by
/// every entry (batch stride 0, no copy); its gradient sums the entries' products. `as` and `bs`
/// hold the elements: a and b themselves, or (ta / tb) the sources of their deferred transposes,
/// read through the GEMM's transpose flags.
Tensor batched(const Tensor& a, const Tensor& b, std::int64_t B, const Tensor& as, bool ta, const Tensor& bs, bool tb) {
  const bool share_a = a.dim() == 2, share_b = b.dim() == 2;
  const std::int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const std::int64_t sa = share_a ? 0 : M * K, sb = share_b ? 0 : K * N;
  const std::int64_t lda = ta ? M : K, ldb = tb ? K : N;
  const bool bf16 = kernels::bf16::autocast_applies(a, b);
  Tensor y = run({ta, tb, B, M, N, K, lda, ldb, sa, sb, -1, bf16}, as, bs, Shape{B, M, N});
  // Each operand is read for the other's gradient only (a transposed one: its source, see Saves).
  const Saves saves = Saves::none().and_input(0, b.requires_grad()).and_input(1, a.requires_grad());
  return record("matmul", y, {a, b}, saves, [as = as.detach(), bs = bs.detach(), ta, tb, B, M, N, K, sa, sb, bf16,
                                      a_shape = a.shape(), b_shape = b.shape()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    // G op(B)ᵀ and op(A)ᵀ G. A shared operand's gradient is written with C stride 0: the entries
    // are summed into it.
    if (ctx.needs_grad(0))
      ctx.accumulate(0, ProductGrad{{false, !tb, B, M, K, N, N, tb ? K : N, M * N, sb, sa, bf16}, g, bs, a_shape});
    if (ctx.needs_grad(1))
      ctx.accumulate(1, ProductGrad{{!ta, false, B, K, N, M, ta ? M : K, N, sa, M * N, sb, bf16}, as, g, b_shape});
  }, [a, b, share_a, share_b](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Tensor at = transpose(a, -2, -1), bt = transpose(b, -2, -1);
    if (ctx.needs_grad(0)) ctx.accumulate(0, share_a ? sum(matmul(g, bt), {0}) : matmul(g, bt));
    if (ctx.needs_grad(1)) ctx.accumulate(1, share_b ? sum(matmul(at, g), {0}) : matmul(at, g));
  });
}

/// The product of every dimension but the last: the rows of a (..., K) operand, also when K = 0.
std::int64_t prod_leading(const Shape& s) {
  std::int64_t n = 1;
  for (int d = 0; d + 1 < s.size(); ++d) n *= s[d];
  return n;
}

/// (..., M, K) x (K, N): the leading dimensions fold into M, one GEMM. `bs` holds b's elements:
/// b itself, or (tb) the (N, K) source of its deferred transpose.
Tensor folded(const Tensor& a, const Tensor& b, const Tensor& bs, bool tb) {
  const std::int64_t K = a.size(-1), N = b.size(-1);
  Shape out_shape = a.shape();
  out_shape[out_shape.size() - 1] = N;
  const std::int64_t rows = prod_leading(a.shape());
  const std::int64_t ldb = tb ? K : N;
  const bool bf16 = kernels::bf16::autocast_applies(a, b);
  // Under autocast a parameter's packed bf16 copy comes from the weight cache (autograd/autocast.h).
  const kernels::bf16::CachedWeight cached =
      bf16 ? kernels::bf16::cached_weight(bs, tb, K, N, ldb) : kernels::bf16::CachedWeight{};
  Tensor y;
  if (cached.packed) {
    y = Tensor::empty(out_shape, DType::f32);
    kernels::bf16::gemm_packed(false, rows, a.data<float>(), K, *cached.packed, 0.0f, y.data<float>(), N);
  } else {
    y = run({false, tb, 1, rows, N, K, K, ldb, 0, 0, -1, bf16}, a, bs, out_shape);
  }
  const Saves saves = Saves::none().and_input(0, b.requires_grad()).and_input(1, a.requires_grad());
  return record("matmul", y, {a, b}, saves, [a = a.detach(), bs = bs.detach(), tb, ldb, rows, N, K, bf16, lazy = cached.other,
                                      b_shape = b.shape()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Product da{false, !tb, 1, rows, K, N, N, ldb, 0, 0, -1, bf16};  // G op(B)ᵀ
    if (ctx.needs_grad(0)) {
      if (lazy) ctx.accumulate(0, CachedWeightGrad{da, g, bs, lazy, a.shape()});
      else ctx.accumulate(0, ProductGrad{da, g, bs, a.shape()});
    }
    if (ctx.needs_grad(1)) ctx.accumulate(1, ProductGrad{{true, false, 1, K, N, rows, K, N, 0, 0, -1, bf16}, a, g, b_shape});  // Aᵀ G
  }, [a, b, rows](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, matmul(g, transpose(b, 0, 1)));
    if (ctx.needs_grad(1))
      ctx.accumulate(1, matmul(transpose(reshape(a, Shape{rows, a.size(-1)}), 0, 1), reshape(g, Shape{rows, g.size(-1)})));
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !is_floating(a.dtype()))  // as torch.matmul: no promotion
    throw std::invalid_argument(std::string("matmul: ") + (a.dtype() != b.dtype() ? "dtypes differ" : "needs floating tensors") +
                                ": " + std::string(dtype_name(a.dtype())) + " " + a.shape().str() + " and " +
                                std::string(dtype_name(b.dtype())) + " " + b.shape().str());
  if (a.dim() == 0 || b.dim() == 0) shape_error("matmul", a, b, "both operands need at least 1 dimension");
  if (a.size(-1) != b.size(b.dim() == 1 ? 0 : -2)) shape_error("matmul", a, b, "inner dimensions differ");
  // Vectors as in torch.matmul: 1-D x 1-D is the dot product; a 1-D operand becomes a matrix
  // (a row on the left, a column on the right) whose added dimension is removed from the result.
  if (a.dim() == 1 && b.dim() == 1) return sum(a * b);
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);
  const std::int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  // An operand that is x.transpose(-2, -1) not yet written reaches the GEMM as a transpose flag on
  // x: its copy is never made (unless something else reads it).
  const Tensor a_src = deferred_transpose_source(a), b_src = deferred_transpose_source(b);
  const bool tb = b_src.defined();
  if (b.dim() == 2) return folded(a, b, tb ? b_src : b, tb);
  // Batch dimensions broadcast. A right operand with a single matrix folds into one GEMM.
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes("matmul", batch_a, batch_b);
  } catch (const std::invalid_argument&) {  // its message names the batch parts only
    shape_error("matmul", a, b, "batch dimensions do not broadcast");
  }
  Shape out = batch;
  out.push_back(M), out.push_back(N);
  if (batch_b.numel() == 1) {
    const Tensor b2 = reshape(b, Shape{K, N});
    return reshape(folded(a, b2, tb ? kernels::view_as(b_src, Shape{N, K}) : b2, tb), out);
  }
  // Each operand either has a matrix per batch entry or one matrix shared by all (read with batch
  // stride 0); only an operand broadcast along some batch dimensions but not all is expanded.
  const std::int64_t B = batch.numel();
  auto operand = [&](const Tensor& x, const Shape& xb, std::int64_t rows, std::int64_t cols) {
    if (xb.numel() == 1) return reshape(x, Shape{rows, cols});
    Shape full = batch;
    full.push_back(rows), full.push_back(cols);
    return reshape(xb.numel() == B ? x : expand(x, full), Shape{B, rows, cols});
  };
  // The elements of an operand: itself, or the source of its deferred transpose (stored (cols, rows)).
  auto storage = [&](const Tensor& src, const Shape& xb, std::int64_t rows, std::int64_t cols) {
    return xb.numel() == 1 ? kernels::view_as(src, Shape{cols, rows}) : kernels::view_as(src, Shape{B, cols, rows});
  };
  const bool ta = a_src.defined() && (batch_a.numel() == 1 || batch_a.numel() == B);
  const bool tbb = tb && (batch_b.numel() == B);
  const Tensor ar = operand(a, batch_a, M, K), br = operand(b, batch_b, K, N);
  return reshape(batched(ar, br, B, ta ? storage(a_src, batch_a, M, K) : ar, ta,
                         tbb ? storage(b_src, batch_b, K, N) : br, tbb), out);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  auto fail = [&](const char* why) {
    throw std::invalid_argument(std::string("linear: ") + why + ": input " + x.shape().str() + ", weight " +
                                weight.shape().str() + ", bias " + (bias.defined() ? bias.shape().str() : "none"));
  };
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype()) || !is_floating(x.dtype()))
    throw std::invalid_argument(std::string("linear: ") + (is_floating(x.dtype()) ? "dtypes differ" : "needs floating tensors") +
                                ": input " + std::string(dtype_name(x.dtype())) + " " + x.shape().str() + ", weight " +
                                std::string(dtype_name(weight.dtype())) + " " + weight.shape().str() + ", bias " +
                                (bias.defined() ? std::string(dtype_name(bias.dtype())) + " " + bias.shape().str() : "none"));
  if (weight.dim() != 2 || x.dim() < 1) fail("weight must be (out, in) and input (..., in)");
  const std::int64_t in = weight.size(1), out = weight.size(0);
  if (x.size(-1) != in) fail("input features differ from weight's in_features");
  if (bias.defined() && !(bias.shape() == Shape{out})) fail("bias must be (out)");
  const std::int64_t rows = prod_leading(x.shape());
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = out;

  Tensor y = Tensor::empty(out_shape, x.dtype());
  const bool bf16 = kernels::bf16::autocast_applies(x, weight);
  std::shared_ptr<kernels::bf16::LazyPacked> lazy;  // W for G W, packed once per cached weight
  if (bf16) {
    const float* pb = bias.defined() ? bias.data<float>() : nullptr;
    const kernels::bf16::CachedWeight cached = kernels::bf16::cached_weight(weight, true, in, out, in);
    if (cached.packed)
      kernels::bf16::gemm_packed(false, rows, x.data<float>(), in, *cached.packed, 0.0f, y.data<float>(), out, pb);
    else
      kernels::bf16::gemm(false, true, rows, out, in, x.data<float>(), in, weight.data<float>(), in, 0.0f,
                          y.data<float>(), out, pb);
    lazy = cached.other;
  } else {
    kernels::dispatch_floating("linear", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* py = y.template data<T>();
      const T* pb = bias.defined() ? bias.data<T>() : nullptr;  // added in the GEMM's store
      kernels::gemm<T>(false, true, rows, out, in, T(1), x.data<T>(), in, weight.data<T>(), in, T(0), py, out, pb);
    });
  }
  auto backward = [x = x.detach(), w = weight.detach(), rows, in, out, bf16, lazy](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Product dx{false, false, 1, rows, in, out, out, in, 0, 0, -1, bf16};  // G W
    if (ctx.needs_grad(0)) {
      if (lazy) ctx.accumulate(0, CachedWeightGrad{dx, g, w, lazy, x.shape()});
      else ctx.accumulate(0, ProductGrad{dx, g, w, x.shape()});
    }
    if (ctx.needs_grad(1)) ctx.accumulate(1, WeightGrad{{{true, false, 1, out, in, rows, out, in, 0, 0, -1, bf16}, g, x, w.shape()}});  // Gᵀ x
    if (ctx.needs_grad(2)) ctx.accumulate(2, kernels::sum(kernels::view_as(g, Shape{rows, out}), {0}, false));
  };
  auto graph = [x, weight, rows, in, out](GradGraphContext& ctx) {
    const Tensor g2 = reshape(ctx.grad_output(), Shape{rows, out});
    if (ctx.needs_grad(0)) ctx.accumulate(0, matmul(ctx.grad_output(), weight));
    if (ctx.needs_grad(1)) ctx.accumulate(1, matmul(transpose(g2, 0, 1), reshape(x, Shape{rows, in})));
    if (ctx.needs_grad(2)) ctx.accumulate(2, sum(g2, {0}));
  };
  // x is read for the weight's gradient, the weight for x's; the bias never.
  const Saves saves = Saves::none().and_input(0, weight.requires_grad()).and_input(1, x.requires_grad());
  if (bias.defined()) return record("linear", y, {x, weight, bias}, saves, std::move(backward), std::move(graph));
  return record("linear", y, {x, weight}, saves, std::move(backward), std::move(graph));
}

}  // namespace tg
