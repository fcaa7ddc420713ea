// Indexing, masking and dropout: index_select, embedding, where, masked_fill, dropout.
//
// index_select/embedding copy whole rows of `inner` contiguous elements. Their backward is a
// scatter-add into zeros that walks the indices in order (repeated indices add up in a fixed
// order), parallel only across independent output positions (outer index, feature chunk), so the
// gradient is bitwise identical for any thread count.
//
// dropout: p must be in [0, 1); p == 1 throws std::invalid_argument (the 1/(1-p) scaling is
// undefined, and a layer that always outputs zeros is almost certainly a configuration error).
// One draw from `gen` seeds a splitmix64 stream whose output k decides elements 2k and 2k + 1
// (apply_dropout, below); the backward draws the same decisions again, so no mask is kept. With
// !training or p == 0 the input is returned unchanged and `gen` is not advanced.
#include <immintrin.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "autograd/compact_grad.h"
#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/kernels/reduce.h"
#include "autograd/kernels/view.h"
#include "autograd/ops_compare.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "autograd/tape.h"

namespace tg {

namespace {

// ---- gather / scatter-add of rows ----------------------------------------------------------------

/// x viewed as (outer, size, inner); `index` holds K validated row numbers in [0, size).
struct RowsView {
  std::int64_t outer = 1, size = 1, inner = 1;
};

RowsView rows_view(const Shape& s, int axis) {
  RowsView v;
  for (int i = 0; i < axis; ++i) v.outer *= s[i];
  v.size = s[axis];
  for (int i = axis + 1; i < s.size(); ++i) v.inner *= s[i];
  return v;
}

void check_index(const char* op, const Tensor& index, const char* what) {
  if (index.dtype() != DType::i64)
    throw std::invalid_argument(std::string(op) + ": " + what + " must be int64, got " +
                                std::string(dtype_name(index.dtype())) + " of shape " + index.shape().str());
}

/// "x float32 [2, 3]": an operand's name, dtype and shape, for dtype errors.
std::string described(const char* what, const Tensor& t) {
  return std::string(what) + " " + std::string(dtype_name(t.dtype())) + " " + t.shape().str();
}

/// The dtype checks of the ops that add one tensor into another (scatter_add, index_add): as
/// torch's, the two need one dtype (no promotion); `floating_only` also refuses int64 and bool.
void check_add_dtypes(const char* op, const Tensor& x, const char* what, const Tensor& src, bool floating_only) {
  if (x.dtype() != src.dtype())
    throw std::invalid_argument(std::string(op) + ": dtypes differ: " + described("x", x) + " and " + described(what, src));
  if (floating_only && !is_floating(x.dtype()))
    throw std::invalid_argument(std::string(op) + ": needs floating tensors: " + described("x", x) + " and " +
                                described(what, src));
}

void check_range(const char* op, const std::int64_t* idx, std::int64_t n, std::int64_t size, const Shape& x_shape, int axis) {
  for (std::int64_t k = 0; k < n; ++k)
    if (idx[k] < 0 || idx[k] >= size)
      throw std::out_of_range(std::string(op) + ": index " + std::to_string(idx[k]) + " is out of range for axis " +
                              std::to_string(axis) + " of size " + std::to_string(size) + " (shape " + x_shape.str() + ")");
}

/// out (outer, K, inner) = x (outer, size, inner) at rows idx.
Tensor gather_rows(const Tensor& x, const RowsView& v, const std::int64_t* idx, std::int64_t K, const Shape& out_shape) {
  Tensor y = Tensor::empty(out_shape, x.dtype());
  if (y.numel() == 0) return y;
  kernels::dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    const std::int64_t inner = v.inner;
    kernels::parallel_for(v.outer * K, std::max<std::int64_t>(1, kernels::kGrainCheap / inner), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t o = r / K, k = r % K;
        const T* s = src + (o * v.size + idx[k]) * inner;
        std::copy(s, s + inner, dst + r * inner);
      }
    });
  });
  return y;
}

/// The backward of gather_rows: zeros of x_shape, then g's rows added at their indices in order.
Tensor scatter_add_rows(const Tensor& g, const RowsView& v, const Tensor& index, const Shape& x_shape) {
  Tensor gx = Tensor::zeros(x_shape, g.dtype());
  kernels::scatter_add_rows(gx, g, index.data<std::int64_t>(), index.numel(), v.outer, v.size, v.inner);
  return gx;
}

/// An embedding table's gradient as a term: dense, or just the rows looked up (K, D) for a table
/// that allows compact gradients, when that is smaller. The dense form is built whole and then
/// added, so a repeated id sums in the same order on both paths.
struct TableGrad {
  const Tensor& g;  // (K, D)
  const RowsView& v;
  const Tensor& ids;
  const Shape& table;
  Tensor make() const { return scatter_add_rows(g, v, ids, table); }
  std::shared_ptr<CompactGrad> compact() const { return sparse_rows_grad(g, ids, table); }
};

// ---- where ---------------------------------------------------------------------------------------

Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& out) {
  Tensor y = Tensor::empty(out, a.dtype());
  const std::int64_t total = out.numel();
  if (total == 0) return y;
  const int n = out.size();
  std::int64_t cs[Shape::kMaxDims] = {}, as[Shape::kMaxDims] = {}, bs[Shape::kMaxDims] = {};
  broadcast_strides(cond.shape(), out, cs);
  broadcast_strides(a.shape(), out, as);
  broadcast_strides(b.shape(), out, bs);
  const std::int64_t inner = n == 0 ? 1 : out[n - 1];
  const std::int64_t ci = n == 0 ? 0 : cs[n - 1], ai = n == 0 ? 0 : as[n - 1], bi = n == 0 ? 0 : bs[n - 1];
  const int outer_n = std::max(0, n - 1);
  kernels::dispatch_any(cond.dtype(), [&](auto ctag) {
    using C = decltype(ctag);
    kernels::dispatch_any(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const C* pc = cond.data<C>();
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* py = y.data<T>();
      kernels::parallel_for(total / inner, std::max<std::int64_t>(1, kernels::kGrainCheap / inner), [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          std::int64_t rem = r, co = 0, ao = 0, bo = 0;
          for (int d = outer_n - 1; d >= 0; --d) {
            const std::int64_t i = rem % out[d];
            rem /= out[d];
            co += i * cs[d];
            ao += i * as[d];
            bo += i * bs[d];
          }
          T* dst = py + r * inner;
          for (std::int64_t j = 0; j < inner; ++j) dst[j] = pc[co + j * ci] != C(0) ? pa[ao + j * ai] : pb[bo + j * bi];
        }
      });
    });
  });
  return y;
}

}  // namespace

// ---- ops -----------------------------------------------------------------------------------------

Tensor index_select(const Tensor& x, std::int64_t axis, const Tensor& index) {
  check_index("index_select", index, "index");
  if (index.dim() != 1)
    throw std::invalid_argument("index_select: index must be 1-D, got shape " + index.shape().str() + " (x shape " +
                                x.shape().str() + ")");
  if (x.dim() == 0) throw std::invalid_argument("index_select: x must have at least one dimension, got shape []");
  if (axis < -x.dim() || axis >= x.dim())
    throw std::invalid_argument("index_select: axis " + std::to_string(axis) + " is out of range for shape " +
                                x.shape().str());
  const int a = normalize_axis("index_select", axis, x.dim());
  const RowsView v = rows_view(x.shape(), a);
  const std::int64_t K = index.numel();
  const std::int64_t* idx = index.data<std::int64_t>();
  check_range("index_select", idx, K, v.size, x.shape(), a);
  Shape out = x.shape();
  out[a] = K;
  Tensor y = gather_rows(x, v, idx, K, out);
  return record("index_select", y, {x}, Saves::none(), [v, index = index.detach(), in = x.shape()](BackwardContext& ctx) {
    ctx.accumulate(0, scatter_add_rows(ctx.grad_output(), v, index, in));
  }, [a, index](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    ctx.accumulate(0, index_add(Tensor::zeros(ctx.input_shape(0), g.dtype()), a, index, g));
  });
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_index("embedding", ids, "ids");
  if (weight.dim() != 2)
    throw std::invalid_argument("embedding: weight must be 2-D (V, D), got shape " + weight.shape().str() +
                                " (ids shape " + ids.shape().str() + ")");
  const RowsView v = rows_view(weight.shape(), 0);
  const std::int64_t K = ids.numel();
  const std::int64_t* idx = ids.data<std::int64_t>();
  check_range("embedding", idx, K, v.size, weight.shape(), 0);
  Shape out = ids.shape();
  out.push_back(weight.shape()[1]);
  Tensor y = gather_rows(weight, v, idx, K, out);
  return record("embedding", y, {weight}, Saves::none(), [v, ids = ids.detach(), in = weight.shape()](BackwardContext& ctx) {
    const Tensor g = kernels::view_as(ctx.grad_output(), Shape{ids.numel(), in[1]});
    ctx.accumulate(0, TableGrad{g, v, ids, in});
  }, [ids](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Shape in = ctx.input_shape(0);
    ctx.accumulate(0, index_add(Tensor::zeros(in, g.dtype()), 0, reshape(ids, Shape{ids.numel()}),
                                reshape(g, Shape{ids.numel(), in[1]})));
  });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape out;
  try {
    out = broadcast_shapes("where", broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("where: shapes " + described("cond", cond) + ", " + described("a", a) + ", " +
                                described("b", b) + " cannot be broadcast together");
  }
  // Mixed dtypes as torch.where: both converted to result_type(a, b) first. Tensor::to is
  // differentiable, so each input's gradient comes back in its own dtype.
  if (a.dtype() != b.dtype()) {
    const DType common = result_type(a, b);
    return where(cond, a.to(common), b.to(common));
  }
  Tensor y = where_kernel(cond, a, b, out);
  return record("where", y, {a, b}, Saves::none(), [cond = cond.detach(), sa = a.shape(), sb = b.shape()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Tensor zero = Tensor::zeros(Shape{}, g.dtype());
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(where_kernel(cond, g, zero, g.shape()), sa));
    if (ctx.needs_grad(1)) ctx.accumulate(1, kernels::sum_to(where_kernel(cond, zero, g, g.shape()), sb));
  }, [cond](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Tensor zero = Tensor::zeros(Shape{}, g.dtype());
    if (ctx.needs_grad(0)) ctx.accumulate_sum_to(0, where(cond, g, zero));
    if (ctx.needs_grad(1)) ctx.accumulate_sum_to(1, where(cond, zero, g));
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  bool ok = mask.dim() <= x.dim();
  for (int i = 0; ok && i < mask.dim(); ++i) {
    const std::int64_t dm = mask.shape()[i], dx = x.shape()[i + (x.dim() - mask.dim())];
    ok = dm == 1 || dm == dx;
  }
  if (!ok)
    throw std::invalid_argument("masked_fill: mask of shape " + mask.shape().str() +
                                " cannot be broadcast to x of shape " + x.shape().str());
  return where(mask, Tensor::scalar(value, x.dtype()), x);
}

namespace {

#ifdef __AVX2__
/// Stream outputs k0 .. k0 + 3 of SplitMix64::at(seed, k): as 8 x 32 bits in memory order, the
/// decisions of elements 2 k0 .. 2 k0 + 7. AVX2 has no 64-bit multiply: three 32 x 32 -> 64 ones.
inline __m256i splitmix4(std::uint64_t seed, std::uint64_t k0) {
  constexpr std::uint64_t kStep = SplitMix64::kIncrement;
  const std::uint64_t z0 = seed + (k0 + 1) * kStep;
  __m256i z = _mm256_set_epi64x(static_cast<long long>(z0 + 3 * kStep), static_cast<long long>(z0 + 2 * kStep),
                                static_cast<long long>(z0 + kStep), static_cast<long long>(z0));
  auto mul = [](__m256i a, std::uint64_t c) {
    const __m256i c_lo = _mm256_set1_epi64x(static_cast<long long>(c & 0xFFFFFFFFULL));
    const __m256i c_hi = _mm256_set1_epi64x(static_cast<long long>(c >> 32));
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo), _mm256_mul_epu32(a, c_hi));
    return _mm256_add_epi64(_mm256_mul_epu32(a, c_lo), _mm256_slli_epi64(cross, 32));
  };
  z = mul(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), SplitMix64::kMix1);
  z = mul(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), SplitMix64::kMix2);
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}
#endif

// out = in * (0 or 1 / (1 - p)) with dropout's decisions for the splitmix64 stream `seed`: its
// output k decides elements 2k (low 32 bits) and 2k + 1 (high 32 bits), and u < p 2^32 drops.
// Reading the stream at any k lets threads split the work with the same bits for any thread count.
void apply_dropout(const Tensor& in, Tensor& out, std::uint64_t seed, double p) {
  kernels::dispatch_floating("dropout", in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    const auto threshold = static_cast<std::uint64_t>(p * 0x1.0p32);  // p < 1: fits in 32 bits
    const std::int64_t n = in.numel();
    kernels::parallel_for((n + 1) / 2, kernels::kGrainCheap / 2, [&](std::int64_t b, std::int64_t e) {
      std::int64_t k = b;
#ifdef __AVX2__
      if constexpr (std::is_same_v<T, float>) {
        // 8 elements at a time with the scalar loop's bits: the factor is 0 or scale, then one multiply
        // (so a dropped inf or NaN still gives NaN). Unsigned u < t is signed (u ^ 2^31) < (t ^ 2^31).
        const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000U));
        const __m256i limit = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(threshold))), flip);
        const __m256 scale8 = _mm256_set1_ps(scale);
        for (; k + 4 <= e && 2 * k + 8 <= n; k += 4) {
          const __m256i r = splitmix4(seed, static_cast<std::uint64_t>(k));
          const __m256 dropped = _mm256_castsi256_ps(_mm256_cmpgt_epi32(limit, _mm256_xor_si256(r, flip)));
          _mm256_storeu_ps(dst + 2 * k, _mm256_mul_ps(_mm256_loadu_ps(src + 2 * k), _mm256_andnot_ps(dropped, scale8)));
        }
      }
#endif
      for (; k < e; ++k) {
        const std::uint64_t r = SplitMix64::at(seed, static_cast<std::uint64_t>(k));
        dst[2 * k] = src[2 * k] * ((r & 0xFFFFFFFFULL) < threshold ? T(0) : scale);
        if (2 * k + 1 < n) dst[2 * k + 1] = src[2 * k + 1] * ((r >> 32) < threshold ? T(0) : scale);
      }
    });
  });
}

}  // namespace

Tensor dropout(const Tensor& x, double p, Generator& gen, bool training) {
  if (!(p >= 0.0 && p < 1.0))
    throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p) + " (x shape " +
                                x.shape().str() + ")");
  if (!training || p == 0.0) return x;
  // No mask is kept: the backward draws the same decisions again from the call's seed (one draw
  // from `gen`), so no mask of x's size is written, held until the backward, or read.
  const std::uint64_t seed = gen.next_u64();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  apply_dropout(x, y, seed, p);
  return record(
      "dropout", y, {x}, Saves::none(),
      [seed, p](BackwardContext& ctx) {
        const Tensor& g = ctx.grad_output();
        Tensor dx = Tensor::empty(g.shape(), g.dtype());
        apply_dropout(g, dx, seed, p);
        ctx.accumulate(0, std::move(dx));
      },
      [seed, p](GradGraphContext& ctx) {
        const Tensor& g = ctx.grad_output();
        Tensor mask = Tensor::empty(g.shape(), g.dtype());
        apply_dropout(Tensor::ones(g.shape(), g.dtype()), mask, seed, p);
        ctx.accumulate(0, g * mask);
      });
}

// ---- gather / scatter_add / index_add / take_along_dim ------------------------------------------

namespace {

/// Checks gather/scatter's index against x (and src): i64, same number of dims, no larger than x
/// outside `dim` (and no larger than src anywhere), values in range along `dim`.
int check_gather(const char* op, const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor* src) {
  check_index(op, index, "index");
  const int a = normalize_axis(op, dim, std::max(x.dim(), 1));
  auto fail = [&](const char* why) {
    throw std::invalid_argument(std::string(op) + ": " + why + ": x " + x.shape().str() + ", index " +
                                index.shape().str() + (src ? ", src " + src->shape().str() : std::string()));
  };
  if (index.dim() != x.dim()) fail("index needs as many dims as x");
  if (src && src->dim() != x.dim()) fail("src needs as many dims as x");
  for (int d = 0; d < x.dim(); ++d) {
    if (d != a && index.shape()[d] > x.shape()[d]) fail("index is larger than x outside dim");
    if (src && index.shape()[d] > src->shape()[d]) fail("index is larger than src");
  }
  check_range(op, index.data<std::int64_t>(), index.numel(), x.dim() ? x.shape()[a] : 1, x.shape(), a);
  return a;
}

/// For each position p of `index` (row-major), calls fn(p, offset in a tensor of shape `target`
/// with dim `a` replaced by index[p], offset in a tensor of shape `other` at p's coordinates).
template <class Fn>
void for_each_indexed(const Tensor& index, int a, const Shape& target, const Shape& other, Fn&& fn) {
  const int n = index.dim();
  const std::int64_t* idx = index.data<std::int64_t>();
  std::int64_t ts[Shape::kMaxDims] = {}, os[Shape::kMaxDims] = {}, coord[Shape::kMaxDims] = {};
  for (std::int64_t d = n - 1, t = 1, o = 1; d >= 0; --d) {
    ts[d] = t, os[d] = o;
    t *= target[d], o *= other[d];
  }
  for (std::int64_t p = 0; p < index.numel(); ++p) {
    std::int64_t t_off = 0, o_off = 0;
    for (int d = 0; d < n; ++d) {
      t_off += (d == a ? idx[p] : coord[d]) * ts[d];
      o_off += coord[d] * os[d];
    }
    fn(p, t_off, o_off);
    for (int d = n - 1; d >= 0; --d) {
      if (++coord[d] < index.shape()[d]) break;
      coord[d] = 0;
    }
  }
}

/// out (index's shape) = x read at the indexed positions.
Tensor gather_kernel(const Tensor& x, int a, const Tensor& index) {
  Tensor y = Tensor::empty(index.shape(), x.dtype());
  kernels::dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_each_indexed(index, a, x.shape(), index.shape(), [&](std::int64_t, std::int64_t xo, std::int64_t yo) { py[yo] = px[xo]; });
  });
  return y;
}

/// dst (x's shape) += src read at index's positions (src may be larger than index), in order.
void scatter_add_kernel(Tensor& dst, int a, const Tensor& index, const Tensor& src) {
  kernels::dispatch_any(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ps = src.data<T>();
    T* pd = dst.data<T>();
    for_each_indexed(index, a, dst.shape(), src.shape(), [&](std::int64_t, std::int64_t d, std::int64_t s) { pd[d] += ps[s]; });
  });
}

}  // namespace

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  const int a = check_gather("gather", x, dim, index, nullptr);
  Tensor y = gather_kernel(x, a, index);
  return record("gather", y, {x}, Saves::none(), [a, index = index.detach(), in = x.shape()](BackwardContext& ctx) {
    Tensor gx = Tensor::zeros(in, ctx.grad_output().dtype());
    scatter_add_kernel(gx, a, index, ctx.grad_output());
    ctx.accumulate(0, std::move(gx));
  }, [a, index](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    ctx.accumulate(0, scatter_add(Tensor::zeros(ctx.input_shape(0), g.dtype()), a, index, g));
  });
}

Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  check_add_dtypes("scatter_add", x, "src", src, false);
  const int a = check_gather("scatter_add", x, dim, index, &src);
  Tensor y = x.detach().clone();
  scatter_add_kernel(y, a, index, src);
  return record("scatter_add", y, {x, src}, Saves::none(), [a, index = index.detach(), src_shape = src.shape()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, g);
    if (ctx.needs_grad(1)) {  // src's elements that index covers get g at their target; the rest 0
      Tensor gs = Tensor::zeros(src_shape, g.dtype());
      kernels::dispatch_floating("scatter_add", g.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pg = g.data<T>();
        T* out = gs.data<T>();
        for_each_indexed(index, a, g.shape(), src_shape, [&](std::int64_t, std::int64_t go, std::int64_t so) { out[so] = pg[go]; });
      });
      ctx.accumulate(1, std::move(gs));
    }
  }, [a, index](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, g);
    if (ctx.needs_grad(1)) {  // g at the targets, zero-padded where src is larger than index
      const Shape src = ctx.input_shape(1);
      Tensor gs = gather(g, a, index);
      std::vector<std::int64_t> pads;
      for (int d = src.size() - 1; d >= 0; --d) pads.push_back(0), pads.push_back(src[d] - index.shape()[d]);
      if (!(gs.shape() == src)) gs = pad(gs, pads);
      ctx.accumulate(1, gs);
    }
  });
}

Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  check_index("index_add", index, "index");
  check_add_dtypes("index_add", x, "source", source, true);
  const int a = normalize_axis("index_add", dim, std::max(x.dim(), 1));
  bool ok = index.dim() == 1 && source.dim() == x.dim();
  for (int d = 0; ok && d < x.dim(); ++d) ok = d == a ? source.shape()[d] == index.numel() : source.shape()[d] == x.shape()[d];
  if (!ok)
    throw std::invalid_argument("index_add: source must be x's shape with dim " + std::to_string(dim) +
                                " of the 1-D index's length: x " + x.shape().str() + ", index " +
                                index.shape().str() + ", source " + source.shape().str());
  const RowsView v = rows_view(x.shape(), a);
  check_range("index_add", index.data<std::int64_t>(), index.numel(), v.size, x.shape(), a);
  Tensor y = x.detach().clone();
  const Tensor scaled = alpha == 1.0 ? source.detach() : kernels::unary(kernels::Unary::mul_scalar, source.detach(), alpha);
  kernels::scatter_add_rows(y, scaled, index.data<std::int64_t>(), index.numel(), v.outer, v.size, v.inner);
  return record("index_add", y, {x, source}, Saves::none(), [a, alpha, index = index.detach(), v](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, g);
    if (ctx.needs_grad(1)) {
      Shape out = g.shape();
      out[a] = index.numel();
      Tensor rows = gather_rows(g, v, index.data<std::int64_t>(), index.numel(), out);
      ctx.accumulate(1, alpha == 1.0 ? rows : kernels::unary(kernels::Unary::mul_scalar, rows, alpha));
    }
  }, [a, alpha, index](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, g);
    if (ctx.needs_grad(1)) ctx.accumulate(1, index_select(g, a, index) * alpha);
  });
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::int64_t dim) {
  check_index("take_along_dim", indices, "indices");
  if (x.dim() != indices.dim())
    throw std::invalid_argument("take_along_dim: x " + x.shape().str() + " and indices " + indices.shape().str() +
                                " need the same number of dims");
  const int a = normalize_axis("take_along_dim", dim, std::max(x.dim(), 1));
  Shape xs = x.shape(), is = indices.shape();
  for (int d = 0; d < x.dim(); ++d) {
    if (d == a) continue;
    const std::int64_t p = xs[d], q = is[d];
    if (p != q && p != 1 && q != 1)
      throw std::invalid_argument("take_along_dim: x " + x.shape().str() + " and indices " + indices.shape().str() +
                                  " do not broadcast outside dim " + std::to_string(dim));
    xs[d] = is[d] = std::max(p, q);
  }
  return gather(expand(x, xs), a, expand(indices, is));
}

}  // namespace tg
