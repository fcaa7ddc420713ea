// Shape ops. reshape (and flatten/unsqueeze/squeeze, which are reshapes) is a view sharing storage;
// the others copy into a new contiguous tensor. All work for every dtype (i64 included); i64
// tensors never require grad, so only floating inputs are ever recorded.
//
// Two copy kernels serve every op here, forward and backward:
//  - copy_blocks: dst[o, m, :] = src[o, m, :] over an (outer, mid, inner) view of both sides with
//    their own strides; concat, stack, narrow, slice and the scatter backward of narrow/slice.
//  - permute_copy: a general permutation. Dimensions are merged where the permutation keeps them
//    adjacent; if the innermost output run is contiguous in the input it is copied with std::copy
//    per row, otherwise a tiled 2-D transpose moves TxT blocks (both sides stay in cache).
#include <immintrin.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/error_text.h"
#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/reduce.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/kernels/view.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/pending.h"
#include "autograd/tape.h"

namespace tg {

namespace {

// ---- kernels ---------------------------------------------------------------------------------

/// dst[o*d_o + m*d_m + j] = src[o*s_o + m*s_m + j] for o < outer, m < mid, j < inner.
template <class T>
void copy_blocks_typed(const T* src, T* dst, std::int64_t outer, std::int64_t mid, std::int64_t inner, std::int64_t s_o,
                       std::int64_t s_m, std::int64_t d_o, std::int64_t d_m) {
  if (outer == 0 || mid == 0 || inner == 0) return;
  // Rows contiguous on both sides along mid: one run of mid*inner per outer index.
  if (s_m == inner && d_m == inner) {
    inner *= mid;
    mid = 1;
  }
  // Fully contiguous on both sides: one flat run, split in fixed chunks.
  if (mid == 1 && (outer == 1 || (s_o == inner && d_o == inner))) {
    const std::int64_t n = outer * inner;
    const std::int64_t chunks = (n + kernels::kGrainCheap - 1) / kernels::kGrainCheap;
    kernels::parallel_for(chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
      const std::int64_t b = c0 * kernels::kGrainCheap, e = std::min(n, c1 * kernels::kGrainCheap);
      std::copy(src + b, src + e, dst + b);
    });
    return;
  }
  const std::int64_t rows = outer * mid;
  const std::int64_t grain = std::max<std::int64_t>(1, kernels::kGrainCheap / inner);
  kernels::parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    std::int64_t o = r0 / mid, m = r0 % mid;
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* s = src + o * s_o + m * s_m;
      std::copy(s, s + inner, dst + o * d_o + m * d_m);
      if (++m == mid) {
        m = 0;
        ++o;
      }
    }
  });
}

void copy_blocks(const Tensor& src, std::int64_t src_offset, Tensor& dst, std::int64_t dst_offset,
                 std::int64_t outer, std::int64_t mid, std::int64_t inner, std::int64_t s_o, std::int64_t s_m,
                 std::int64_t d_o, std::int64_t d_m) {
  kernels::dispatch_any(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_blocks_typed(src.data<T>() + src_offset, dst.data<T>() + dst_offset, outer, mid, inner, s_o, s_m, d_o, d_m);
  });
}

/// normalize_axis, with x's shape in the message.
int axis_of(const char* op, std::int64_t axis, int ndim, const Shape& shape) {
  if (axis < -ndim || axis >= ndim)
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                                shape.str() + " (" + std::to_string(ndim) + " valid axes)");
  return normalize_axis(op, axis, ndim);
}

/// Product of shape[begin, end).
std::int64_t prod(const Shape& s, int begin, int end) {
  std::int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= s[i];
  return p;
}

/// Odometer over `n` dimensions with per-dimension strides: tracks the offset of a linear index.
struct Odometer {
  int n = 0;
  const std::int64_t* dims = nullptr;
  const std::int64_t* strides = nullptr;
  std::int64_t idx[Shape::kMaxDims] = {};
  std::int64_t offset = 0;

  Odometer(int n_, const std::int64_t* dims_, const std::int64_t* strides_, std::int64_t linear)
      : n(n_), dims(dims_), strides(strides_) {
    for (int d = n - 1; d >= 0; --d) {
      idx[d] = linear % dims[d];
      linear /= dims[d];
      offset += idx[d] * strides[d];
    }
  }
  void next() {
    for (int d = n - 1; d >= 0; --d) {
      offset += strides[d];
      if (++idx[d] < dims[d]) return;
      offset -= idx[d] * strides[d];
      idx[d] = 0;
    }
  }
};

/// A permutation of at most Shape::kMaxDims axes, stored inline.
struct Perm {
  int v[Shape::kMaxDims] = {};
  int n = 0;
  int operator[](int i) const { return v[i]; }
  const int* begin() const { return v; }
  const int* end() const { return v + n; }
  static Perm identity(int n) {
    Perm p;
    p.n = n;
    for (int i = 0; i < n; ++i) p.v[i] = i;
    return p;
  }
  Perm inverse() const {
    Perm inv;
    inv.n = n;
    for (int i = 0; i < n; ++i) inv.v[v[i]] = i;
    return inv;
  }
};

/// dst[i * ld_dst + j] = src[j * ld_src + i] for an 8x8 block of 4-byte elements (bits moved as floats).
inline void transpose8x8_32(const void* src_v, std::int64_t ld_src, void* dst_v, std::int64_t ld_dst) {
  const float* src = static_cast<const float*>(src_v);
  float* dst = static_cast<float*>(dst_v);
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * ld_src);
  __m256 t[8], u[8];
  for (int j = 0; j < 8; j += 2) t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]), t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  for (int j = 0; j < 8; j += 4) {
    u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44), u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
    u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44), u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + j * ld_dst, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
    _mm256_storeu_ps(dst + (j + 4) * ld_dst, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
  }
}

template <class T>
void permute_typed(const T* src, T* dst, const Shape& in_shape, const Perm& perm) {
  const int n = in_shape.size();
  std::int64_t in_stride[Shape::kMaxDims];
  for (int d = n - 1; d >= 0; --d) in_stride[d] = d == n - 1 ? 1 : in_stride[d + 1] * in_shape[d + 1];
  // Output dimensions with their input strides; size-1 dims dropped, adjacent runs merged.
  std::int64_t D[Shape::kMaxDims], S[Shape::kMaxDims];
  int m = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t size = in_shape[perm[i]], stride = in_stride[perm[i]];
    if (size == 1) continue;
    if (m > 0 && S[m - 1] == stride * size) {
      D[m - 1] *= size;
      S[m - 1] = stride;
      continue;
    }
    D[m] = size;
    S[m] = stride;
    ++m;
  }
  const std::int64_t total = in_shape.numel();
  if (total == 0) return;
  if (m == 0) {
    dst[0] = src[0];
    return;
  }
  if (S[m - 1] == 1) {
    // The innermost output run is contiguous in the input: copy whole rows.
    const std::int64_t L = D[m - 1], rows = total / L;
    kernels::parallel_for(rows, std::max<std::int64_t>(1, kernels::kGrainCheap / L), [&](std::int64_t r0, std::int64_t r1) {
      Odometer od(m - 1, D, S, r0);
      for (std::int64_t r = r0; r < r1; ++r, od.next()) std::copy(src + od.offset, src + od.offset + L, dst + r * L);
    });
    return;
  }
  // Tiled transpose between output dim k (input stride 1) and the innermost output dim.
  std::int64_t O[Shape::kMaxDims];  // output strides
  O[m - 1] = 1;
  for (int d = m - 2; d >= 0; --d) O[d] = O[d + 1] * D[d + 1];
  int k = 0;
  while (S[k] != 1) ++k;  // exists: the input's innermost non-unit dim keeps stride 1
  std::int64_t OD[Shape::kMaxDims], OS_in[Shape::kMaxDims], OS_out[Shape::kMaxDims];
  int q = 0;
  for (int d = 0; d < m - 1; ++d) {
    if (d == k) continue;
    OD[q] = D[d];
    OS_in[q] = S[d];
    OS_out[q] = O[d];
    ++q;
  }
  constexpr std::int64_t kTile = 32;
  const std::int64_t A = D[k], B = D[m - 1], a_out = O[k], b_in = S[m - 1];
  const std::int64_t a_tiles = (A + kTile - 1) / kTile;
  const std::int64_t units = (total / (A * B)) * a_tiles;
  kernels::parallel_for(units, std::max<std::int64_t>(1, kernels::kGrainCheap / (kTile * B)), [&](std::int64_t u0, std::int64_t u1) {
    for (std::int64_t u = u0; u < u1; ++u) {
      const std::int64_t outer = u / a_tiles, ta = u % a_tiles;
      const Odometer in_od(q, OD, OS_in, outer), out_od(q, OD, OS_out, outer);
      const T* s = src + in_od.offset;
      T* d = dst + out_od.offset;
      const std::int64_t a0 = ta * kTile, a1 = std::min(A, a0 + kTile);
      for (std::int64_t b0 = 0; b0 < B; b0 += kTile) {
        const std::int64_t b1 = std::min(B, b0 + kTile);
        std::int64_t a = a0;
        if constexpr (sizeof(T) == 4) {
          // 8x8 blocks through registers: eight row loads and eight row stores instead of 64
          // strided scalar moves.
          for (; a + 8 <= a1; a += 8) {
            std::int64_t b = b0;
            for (; b + 8 <= b1; b += 8) transpose8x8_32(s + a + b * b_in, b_in, d + a * a_out + b, a_out);
            for (std::int64_t i = a; i < a + 8; ++i)
              for (std::int64_t bb = b; bb < b1; ++bb) d[i * a_out + bb] = s[i + bb * b_in];
          }
        }
        for (; a < a1; ++a)
          for (std::int64_t b = b0; b < b1; ++b) d[a * a_out + b] = s[a + b * b_in];
      }
    }
  });
}

Tensor permute_kernel(const Tensor& x, const Perm& perm) {
  Shape out;
  for (int p : perm) out.push_back(x.shape()[p]);
  Tensor y = Tensor::empty(out, x.dtype());
  kernels::dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    permute_typed(x.data<T>(), y.data<T>(), x.shape(), perm);
  });
  return y;
}

/// Elements [start, start + length) of x along `axis` (already validated), contiguous.
Tensor narrow_kernel(const Tensor& x, int axis, std::int64_t start, std::int64_t length) {
  Shape out = x.shape();
  out[axis] = length;
  Tensor y = Tensor::empty(out, x.dtype());
  const std::int64_t outer = prod(x.shape(), 0, axis), inner = prod(x.shape(), axis + 1, x.dim());
  const std::int64_t size = x.shape()[axis];
  copy_blocks(x, start * inner, y, 0, outer, 1, length * inner, size * inner, 0, length * inner, 0);
  return y;
}

/// Scatters g (x narrowed/sliced along `axis`: start, start+step, ...) into zeros of `shape`.
Tensor scatter_slice(const Tensor& g, const Shape& shape, int axis, std::int64_t start, std::int64_t step) {
  Tensor gx = Tensor::zeros(shape, g.dtype());
  const std::int64_t outer = prod(shape, 0, axis), inner = prod(shape, axis + 1, shape.size());
  const std::int64_t size = shape[axis], count = g.shape()[axis];
  copy_blocks(g, 0, gx, start * inner, outer, count, inner, count * inner, inner, size * inner, step * inner);
  return gx;
}

/// dst (shape of the sliced tensor) += g at the slice's positions: the backward of a slice when the
/// input's gradient already exists, without a zero-filled full-size temporary (the decoder slices
/// one time step of its (B, T, E) embeddings per step).
void add_slice_into(Tensor& dst, const Tensor& g, int axis, std::int64_t start, std::int64_t step) {
  const Shape& shape = dst.shape();
  const std::int64_t outer = prod(shape, 0, axis), inner = prod(shape, axis + 1, shape.size());
  const std::int64_t size = shape[axis], count = g.shape()[axis];
  kernels::dispatch_floating("slice", g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = g.data<T>();
    T* d = dst.data<T>();
    const std::int64_t rows = outer * count;
    kernels::parallel_for(rows, std::max<std::int64_t>(1, kernels::kGrainCheap / std::max<std::int64_t>(inner, 1)),
                          [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t o = r / count, m = r % count;
        const T* s = src + r * inner;
        T* t = d + (o * size + start + m * step) * inner;
        for (std::int64_t j = 0; j < inner; ++j) t[j] += s[j];
      }
    });
  });
}

/// The backward of slice: added where the slice came from, in place when the input has a gradient.
struct SliceGrad {
  const Tensor& g;
  const Shape& in;
  int axis;
  std::int64_t start, step;
  void add_into(Tensor& buffer) const { add_slice_into(buffer, g, axis, start, step); }
  Tensor make() const { return scatter_slice(g, in, axis, start, step); }
};

/// g (a slice of a tensor of shape `in`) placed where it was taken, zeros elsewhere, with
/// differentiable ops (the double backward of slicing).
Tensor place_slice(const Tensor& g, const Shape& in, int axis, std::int64_t start, std::int64_t step) {
  const std::int64_t count = g.shape()[axis];
  std::vector<std::int64_t> where(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) where[static_cast<std::size_t>(i)] = start + i * step;
  return index_add(Tensor::zeros(in, g.dtype()), axis, Tensor::from_vector(where, {count}), g);
}

void accumulate_slice(BackwardContext& ctx, const Shape& in, int axis, std::int64_t start, std::int64_t step) {
  ctx.accumulate(0, SliceGrad{ctx.grad_output(), in, axis, start, step});
}

// The shapes of a join's inputs for a message: all of them when they are few; else the first and
// input `odd` (the one found wrong), so the message stays short for hundreds of inputs.
std::string shapes_str(TensorList xs, std::size_t odd) {
  std::string s;
  if (xs.size() <= 6) {
    for (std::size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i].shape().str();
    return s;
  }
  return xs[0].shape().str() + " (tensor 0) and " + xs[odd].shape().str() + " (tensor " + std::to_string(odd) +
         ") of " + std::to_string(xs.size()) + " tensors";
}

// An int list for a message, elided after its first 8 values.
std::string ints_str(IntList values) {
  std::vector<std::string> items;
  for (const std::int64_t v : values) items.push_back(std::to_string(v));
  return join_elided(items, 8);
}

/// A transpose of the last two dims, written on first read: matmul takes it as a GEMM flag on
/// the source instead (deferred_transpose_source), so q kᵀ never copies k.
struct DeferredTranspose final : PendingFill {
  Tensor src;  // detached handle to the input's buffer
  void* dst = nullptr;
  Shape out;
  Perm perm;
  const Tensor* source() const override { return &src; }
  void fill() override {
    kernels::dispatch_any(src.dtype(), [&](auto tag) {
      using T = decltype(tag);
      permute_typed(src.data<T>(), static_cast<T*>(dst), src.shape(), perm);
    });
  }
};

Tensor deferred_transpose(const Tensor& x, const Perm& perm) {
  Shape out;
  for (int p : perm) out.push_back(x.shape()[p]);
  Tensor y = Tensor::empty(out, x.dtype());
  auto pending = std::allocate_shared<DeferredTranspose>(PoolAllocator<DeferredTranspose>());
  pending->src = kernels::view_as(x, x.shape());
  pending->dst = y.impl()->data;
  pending->out = out;
  pending->perm = perm;
  y.impl()->pending = std::move(pending);
  return y;
}

Tensor permute_impl(const char* op, const Tensor& x, const Perm& perm, bool defer = false) {
  Tensor y = defer ? deferred_transpose(x, perm) : permute_kernel(x, perm);
  return record(op, y, {x}, Saves::none(), [inv = perm.inverse()](BackwardContext& ctx) {
    ctx.accumulate(0, permute_kernel(ctx.grad_output(), inv));
  }, [inv = perm.inverse()](GradGraphContext& ctx) {
    std::int64_t order[Shape::kMaxDims];
    for (int i = 0; i < inv.n; ++i) order[i] = inv[i];
    ctx.accumulate(0, permute(ctx.grad_output(), IntList(order, static_cast<std::size_t>(inv.n))));
  });
}

}  // namespace

// ---- views ---------------------------------------------------------------------------------------

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape target = shape;
  int infer = -1;
  std::int64_t known = 1;
  for (int i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) throw std::invalid_argument("reshape: only one dimension can be -1, got " + shape.str());
      infer = i;
    } else if (target[i] < 0) {
      throw std::invalid_argument("reshape: invalid dimension in " + shape.str());
    } else {
      known *= target[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      throw std::invalid_argument("reshape: cannot reshape " + x.shape().str() + " into " + shape.str());
    target[infer] = x.numel() / known;
  }
  if (target.numel() != x.numel())
    throw std::invalid_argument("reshape: cannot reshape " + x.shape().str() + " (" + std::to_string(x.numel()) +
                                " elements) into " + shape.str());
  return record("reshape", kernels::view_as(x, target), {x}, Saves::none(), [in = x.shape()](BackwardContext& ctx) {
    ctx.accumulate(0, kernels::view_as(ctx.grad_output(), in));
  }, [](GradGraphContext& ctx) { ctx.accumulate(0, reshape(ctx.grad_output(), ctx.input_shape(0))); });
}

Tensor view(const Tensor& x, const Shape& shape) { return reshape(x, shape); }

Tensor flatten(const Tensor& x, std::int64_t start_axis, std::int64_t end_axis) {
  if (x.dim() == 0) return reshape(x, Shape{1});  // as torch.flatten of a scalar
  const int s = axis_of("flatten", start_axis, x.dim(), x.shape()), e = axis_of("flatten", end_axis, x.dim(), x.shape());
  if (s > e)
    throw std::invalid_argument("flatten: start axis " + std::to_string(start_axis) + " comes after end axis " +
                                std::to_string(end_axis) + " for shape " + x.shape().str());
  Shape out;
  for (int i = 0; i < s; ++i) out.push_back(x.shape()[i]);
  out.push_back(prod(x.shape(), s, e + 1));
  for (int i = e + 1; i < x.dim(); ++i) out.push_back(x.shape()[i]);
  return reshape(x, out);
}

Tensor unsqueeze(const Tensor& x, std::int64_t axis) {
  const int a = axis_of("unsqueeze", axis, x.dim() + 1, x.shape());
  Shape out = x.shape();
  out.insert(a, 1);
  return reshape(x, out);
}

Tensor squeeze(const Tensor& x, std::int64_t axis) {
  const int a = axis_of("squeeze", axis, x.dim(), x.shape());
  Shape out = x.shape();
  if (out[a] == 1) out.erase(a);  // an axis of another size is kept, as torch.squeeze(x, dim)
  return reshape(x, out);
}

Tensor squeeze(const Tensor& x) {
  Shape out;
  for (auto d : x.shape())
    if (d != 1) out.push_back(d);
  return reshape(x, out);
}

// ---- permutations --------------------------------------------------------------------------------

Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1) {
  const int a = axis_of("transpose", axis0, x.dim(), x.shape()), b = axis_of("transpose", axis1, x.dim(), x.shape());
  Perm perm = Perm::identity(x.dim());
  std::swap(perm.v[a], perm.v[b]);
  const int n = x.dim();
  const bool last_two = a != b && std::min(a, b) == n - 2 && std::max(a, b) == n - 1;
  return permute_impl("transpose", x, perm, last_two && is_floating(x.dtype()) && x.numel() > 0);
}

Tensor permute(const Tensor& x, IntList order) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("permute: order (" + ints_str(order) + ") " + why + " for shape " + x.shape().str());
  };
  if (static_cast<int>(order.size()) != x.dim()) throw bad("has the wrong length");
  Perm perm;
  bool seen[Shape::kMaxDims] = {};
  for (auto a : order) {
    if (a < -x.dim() || a >= x.dim()) throw bad("has an axis out of range");
    const int n = axis_of("permute", a, x.dim(), x.shape());
    if (seen[n]) throw bad("repeats an axis");
    seen[n] = true;
    perm.v[perm.n++] = n;
  }
  return permute_impl("permute", x, perm);
}

Tensor deferred_transpose_source(const Tensor& x) {
  const auto* d = x.defined() ? dynamic_cast<const DeferredTranspose*>(x.impl()->pending.get()) : nullptr;
  if (!d || d->done() || d->dst != x.impl()->data || !(d->out == x.shape())) return Tensor();
  return d->src;
}

// ---- joining -------------------------------------------------------------------------------------

Tensor concat(TensorList xs, std::int64_t axis) {
  if (xs.empty()) throw std::invalid_argument("concat: expects at least one tensor");
  const Tensor& x0 = xs[0];
  if (x0.dim() == 0) throw std::invalid_argument("concat: cannot concatenate 0-dimensional tensors (shapes " + shapes_str(xs, 0) + ")");
  const int a = axis_of("concat", axis, x0.dim(), x0.shape());
  Shape out = x0.shape();
  out[a] = 0;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    if (x.dtype() != x0.dtype())
      throw std::invalid_argument("concat: dtypes differ: " + std::string(dtype_name(x0.dtype())) + " and " +
                                  std::string(dtype_name(x.dtype())) + " (shapes " + shapes_str(xs, k) + ")");
    bool ok = x.dim() == x0.dim();
    for (int i = 0; ok && i < x.dim(); ++i) ok = i == a || x.shape()[i] == x0.shape()[i];
    if (!ok)
      throw std::invalid_argument("concat: shapes " + shapes_str(xs, k) + " differ outside axis " + std::to_string(axis));
    out[a] += x.shape()[a];
  }
  Tensor y = Tensor::empty(out, x0.dtype());
  const std::int64_t outer = prod(out, 0, a), inner = prod(out, a + 1, out.size());
  PooledVector<std::int64_t> sizes;
  sizes.reserve(xs.size());
  std::int64_t offset = 0;
  for (const Tensor& x : xs) {
    const std::int64_t len = x.shape()[a] * inner;
    copy_blocks(x, 0, y, offset * inner, outer, 1, len, len, 0, out[a] * inner, 0);
    sizes.push_back(x.shape()[a]);
    offset += x.shape()[a];
  }
  return record("concat", y, xs.data(), xs.size(), Saves::none(), [a, sizes = std::move(sizes)](BackwardContext& ctx) {
    std::int64_t start = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (ctx.needs_grad(static_cast<int>(i))) ctx.accumulate(static_cast<int>(i), narrow_kernel(ctx.grad_output(), a, start, sizes[i]));
      start += sizes[i];
    }
  }, [a](GradGraphContext& ctx) {
    std::int64_t start = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const std::int64_t size = ctx.input_shape(i)[a];
      if (ctx.needs_grad(i)) ctx.accumulate(i, narrow(ctx.grad_output(), a, start, size));
      start += size;
    }
  });
}

Tensor stack(TensorList xs, std::int64_t axis) {
  if (xs.empty()) throw std::invalid_argument("stack: expects at least one tensor");
  const Tensor& x0 = xs[0];
  const int a = axis_of("stack", axis, x0.dim() + 1, x0.shape());
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    if (!(x.shape() == x0.shape()))
      throw std::invalid_argument("stack: expects tensors of one shape, got " + shapes_str(xs, k));
    if (x.dtype() != x0.dtype())
      throw std::invalid_argument("stack: dtypes differ: " + std::string(dtype_name(x0.dtype())) + " and " +
                                  std::string(dtype_name(x.dtype())) + " (shapes " + shapes_str(xs, k) + ")");
  }
  Shape out = x0.shape();
  out.insert(a, static_cast<std::int64_t>(xs.size()));
  Tensor y = Tensor::empty(out, x0.dtype());
  const std::int64_t outer = prod(out, 0, a), inner = prod(out, a + 1, out.size());
  const std::int64_t n = static_cast<std::int64_t>(xs.size());
  for (std::int64_t i = 0; i < n; ++i) copy_blocks(xs[i], 0, y, i * inner, outer, 1, inner, inner, 0, n * inner, 0);
  return record("stack", y, xs.data(), xs.size(), Saves::none(), [a, in = x0.shape()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    for (std::int64_t i = 0; i < g.shape()[a]; ++i)
      if (ctx.needs_grad(static_cast<int>(i))) ctx.accumulate(static_cast<int>(i), kernels::view_as(narrow_kernel(g, a, i, 1), in));
  }, [a](GradGraphContext& ctx) {
    for (int i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.needs_grad(i)) ctx.accumulate(i, squeeze(narrow(ctx.grad_output(), a, i, 1), a));
  });
}

// ---- slicing -------------------------------------------------------------------------------------

Tensor narrow(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t length) {
  const int a = axis_of("narrow", axis, x.dim(), x.shape());
  const std::int64_t size = x.shape()[a];
  const std::int64_t s = start < 0 ? start + size : start;  // negative start counts from the end
  if (s < 0 || length < 0 || s + length > size)
    throw std::invalid_argument("narrow: start " + std::to_string(start) + " and length " + std::to_string(length) +
                                " are out of range for axis " + std::to_string(axis) + " of shape " + x.shape().str());
  return record("narrow", narrow_kernel(x, a, s, length), {x}, Saves::none(), [a, s, in = x.shape()](BackwardContext& ctx) {
    ctx.accumulate(0, scatter_slice(ctx.grad_output(), in, a, s, 1));
  }, [a, s](GradGraphContext& ctx) { ctx.accumulate(0, place_slice(ctx.grad_output(), ctx.input_shape(0), a, s, 1)); });
}

Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) {
  const int a = axis_of("slice", axis, x.dim(), x.shape());
  if (step <= 0)
    throw std::invalid_argument("slice: step must be positive, got " + std::to_string(step) + " for shape " + x.shape().str());
  const std::int64_t size = x.shape()[a];
  // Python slicing: negative bounds count from the end, then both are clamped to [0, size].
  auto clamp = [size](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + size : v, 0, size); };
  const std::int64_t s = clamp(start), e = clamp(end);
  const std::int64_t count = e > s ? (e - s + step - 1) / step : 0;
  if (step == 1) {
    return record("slice", narrow_kernel(x, a, s, count), {x}, Saves::none(),
                  [a, s, in = x.shape()](BackwardContext& ctx) { accumulate_slice(ctx, in, a, s, 1); },
                  [a, s](GradGraphContext& ctx) {
                    ctx.accumulate(0, place_slice(ctx.grad_output(), ctx.input_shape(0), a, s, 1));
                  });
  }
  Shape out = x.shape();
  out[a] = count;
  Tensor y = Tensor::empty(out, x.dtype());
  const std::int64_t outer = prod(out, 0, a), inner = prod(out, a + 1, out.size());
  copy_blocks(x, s * inner, y, 0, outer, count, inner, size * inner, step * inner, count * inner, inner);
  return record("slice", y, {x}, Saves::none(),
                [a, s, step, in = x.shape()](BackwardContext& ctx) { accumulate_slice(ctx, in, a, s, step); },
                [a, s, step](GradGraphContext& ctx) {
                  ctx.accumulate(0, place_slice(ctx.grad_output(), ctx.input_shape(0), a, s, step));
                });
}

// ---- splitting -----------------------------------------------------------------------------------

namespace {

/// A tensor of `shape` sharing x's buffer from element `offset` on (outside autograd).
Tensor offset_view(const Tensor& x, std::int64_t offset, const Shape& shape) {
  auto impl = TensorImpl::make(*x.impl());
  impl->data = static_cast<char*>(impl->data) + offset * static_cast<std::int64_t>(dtype_size(x.dtype()));
  impl->shape = shape;
  impl->meta.reset();
  return Tensor(std::move(impl));
}

/// A split piece's backward: adds its gradient into the hub's buffer `acc` (x's shape), then
/// reaches the hub with a zero. One object for both backwards keeps it within BackwardFn's inline size.
struct PieceBackward {
  std::shared_ptr<Tensor> acc;
  int a;
  std::int64_t start, len;
  Shape in;
  void operator()(BackwardContext& ctx) const {
    const Tensor& g = ctx.grad_output();
    if (!acc->defined()) *acc = Tensor::zeros(in, g.dtype());
    Shape with_axis = in;
    with_axis[a] = len;
    add_slice_into(*acc, kernels::view_as(g, with_axis), a, start, 1);
    ctx.accumulate(0, Tensor::zeros({}, g.dtype()));  // reaches the hub
  }
  void graph(GradGraphContext& ctx) const {
    const Tensor& g = ctx.grad_output();
    Shape with_axis = in;
    with_axis[a] = len;
    const Tensor placed = place_slice(reshape(g, with_axis), in, a, start, 1);
    *acc = acc->defined() ? *acc + placed : placed;
    ctx.accumulate(0, Tensor::zeros({}, g.dtype()));
  }
};

/// Pieces of x along axis a with the given sizes (validated: non-negative, summing to the size);
/// `drop_axis` removes the axis from each piece (unbind).
PooledVector<Tensor> split_pieces(const char* op, const Tensor& x, int a, IntList sizes, bool drop_axis) {
  const Shape& in = x.shape();
  const std::int64_t outer = prod(in, 0, a), inner = prod(in, a + 1, in.size());
  PooledVector<Tensor> out;
  out.reserve(sizes.size());
  if (sizes.size() == 1 && !drop_axis) {
    out.push_back(x);
    return out;
  }
  const bool record_grad = GradMode::enabled() && x.requires_grad();
  std::shared_ptr<Tensor> acc;  // d loss / d x, filled by the pieces' backward
  Tensor hub;
  if (record_grad) {
    acc = std::allocate_shared<Tensor>(PoolAllocator<Tensor>());
    // Recorded before the pieces, so its backward runs after all of theirs and hands x the sum once.
    hub = record(op, Tensor::zeros({}, x.dtype()), {x}, Saves::none(), [acc](BackwardContext& ctx) {
      Tensor g = std::move(*acc);
      *acc = Tensor();
      if (g.defined()) ctx.accumulate(0, std::move(g));
    }, [acc](GradGraphContext& ctx) {
      Tensor g = std::move(*acc);
      *acc = Tensor();
      if (g.defined()) ctx.accumulate(0, g);
    });
  }
  std::int64_t start = 0;
  for (const std::int64_t len : sizes) {
    Shape with_axis = in;
    with_axis[a] = len;
    Shape piece_shape;
    for (int i = 0; i < with_axis.size(); ++i)
      if (!(drop_axis && i == a)) piece_shape.push_back(with_axis[i]);
    Tensor piece = outer == 1 ? offset_view(x, start * inner, piece_shape)
                              : kernels::view_as(narrow_kernel(x, a, start, len), piece_shape);
    if (record_grad)
      piece = record(op, std::move(piece), {hub}, Saves::none(), PieceBackward{acc, a, start, len, in});
    out.push_back(std::move(piece));
    start += len;
  }
  return out;
}

}  // namespace

PooledVector<Tensor> split(const Tensor& x, std::int64_t split_size, std::int64_t axis) {
  if (x.dim() == 0) throw std::invalid_argument("split: cannot split a 0-dimensional tensor");
  const int a = axis_of("split", axis, x.dim(), x.shape());
  const std::int64_t size = x.shape()[a];
  if (split_size < 0 || (split_size == 0 && size > 0))
    throw std::invalid_argument("split: split_size must be positive (0 only for an empty axis), got " +
                                std::to_string(split_size) + " for axis " + std::to_string(axis) + " of shape " +
                                x.shape().str());
  const std::int64_t n = split_size == 0 ? 1 : std::max<std::int64_t>(1, (size + split_size - 1) / split_size);
  PooledVector<std::int64_t> sizes(static_cast<std::size_t>(n), split_size);
  sizes.back() = size - split_size * (n - 1);
  return split_pieces("split", x, a, IntList(sizes.data(), sizes.size()), false);
}

PooledVector<Tensor> split_with_sizes(const Tensor& x, IntList split_sizes, std::int64_t axis) {
  if (x.dim() == 0) throw std::invalid_argument("split_with_sizes: cannot split a 0-dimensional tensor");
  const int a = axis_of("split_with_sizes", axis, x.dim(), x.shape());
  std::int64_t total = 0;
  bool negative = false;
  for (const std::int64_t s : split_sizes) {
    negative |= s < 0;
    total += s;
  }
  if (split_sizes.empty() || negative || total != x.shape()[a]) {
    throw std::invalid_argument("split_with_sizes: sizes [" + ints_str(split_sizes) + "] must be non-negative and sum to " +
                                std::to_string(x.shape()[a]) + " (axis " + std::to_string(axis) + " of shape " +
                                x.shape().str() + ")");
  }
  return split_pieces("split_with_sizes", x, a, split_sizes, false);
}

PooledVector<Tensor> split(const Tensor& x, IntList split_sizes, std::int64_t axis) {
  return split_with_sizes(x, split_sizes, axis);
}

PooledVector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t axis) {
  if (x.dim() == 0) throw std::invalid_argument("chunk: cannot chunk a 0-dimensional tensor");
  const int a = axis_of("chunk", axis, x.dim(), x.shape());
  if (chunks <= 0)
    throw std::invalid_argument("chunk: chunks must be positive, got " + std::to_string(chunks) + " for shape " +
                                x.shape().str());
  const std::int64_t size = x.shape()[a], split_size = (size + chunks - 1) / chunks;
  if (size == 0) {  // as PyTorch: `chunks` empty pieces
    PooledVector<std::int64_t> sizes(static_cast<std::size_t>(chunks), 0);
    return split_pieces("chunk", x, a, IntList(sizes.data(), sizes.size()), false);
  }
  return split(x, split_size, a);
}

PooledVector<Tensor> unbind(const Tensor& x, std::int64_t axis) {
  if (x.dim() == 0) throw std::invalid_argument("unbind: cannot unbind a 0-dimensional tensor");
  const int a = axis_of("unbind", axis, x.dim(), x.shape());
  PooledVector<std::int64_t> sizes(static_cast<std::size_t>(x.shape()[a]), 1);
  return split_pieces("unbind", x, a, IntList(sizes.data(), sizes.size()), true);
}

// ---- broadcasting, tiling, reordering, masking --------------------------------------------------

namespace {

/// y (shape `out`) = x broadcast, any dtype: each output element reads x at its coordinates with
/// broadcast dims pinned to 0.
Tensor broadcast_copy(const Tensor& x, const Shape& out) {
  Tensor y = Tensor::empty(out, x.dtype());
  const int n = out.size();
  std::int64_t stride[Shape::kMaxDims] = {};
  broadcast_strides(x.shape(), out, stride);
  kernels::dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    std::int64_t coord[Shape::kMaxDims] = {}, offset = 0;
    for (std::int64_t p = 0; p < y.numel(); ++p) {
      dst[p] = src[offset];
      for (int d = n - 1; d >= 0; --d) {  // next coordinate, odometer-style
        offset += stride[d];
        if (++coord[d] < out[d]) break;
        offset -= stride[d] * out[d];
        coord[d] = 0;
      }
    }
  });
  return y;
}

Shape expanded_shape(const char* op, const Tensor& x, const Shape& shape, bool allow_minus_one) {
  auto fail = [&] {
    throw std::invalid_argument(std::string(op) + ": cannot broadcast " + x.shape().str() + " to " + shape.str());
  };
  if (shape.size() < x.dim()) fail();
  Shape out = shape;
  const int lead = shape.size() - x.dim();
  for (int d = 0; d < shape.size(); ++d) {
    const std::int64_t want = shape[d];
    if (d < lead) {
      if (want < 0) fail();  // -1 is not allowed for a new leading dim, as PyTorch
      continue;
    }
    const std::int64_t have = x.shape()[d - lead];
    if (want == -1 && allow_minus_one) out[d] = have;
    else if (want < 0 || (have != 1 && have != want)) fail();
  }
  return out;
}

Tensor expand_impl(const char* op, const Tensor& x, const Shape& out) {
  if (out == x.shape()) return x;
  Tensor y = broadcast_copy(x, out);
  return record(
      op, y, {x}, Saves::none(), [in = x.shape()](BackwardContext& ctx) { ctx.accumulate(0, kernels::sum_to(ctx.grad_output(), in)); },
      [](GradGraphContext& ctx) { ctx.accumulate_sum_to(0, ctx.grad_output()); });
}

}  // namespace

Tensor expand(const Tensor& x, const Shape& shape) { return expand_impl("expand", x, expanded_shape("expand", x, shape, true)); }

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  return expand_impl("broadcast_to", x, expanded_shape("broadcast_to", x, shape, false));
}

Tensor repeat(const Tensor& x, IntList repeats) {
  if (static_cast<int>(repeats.size()) < x.dim())
    throw std::invalid_argument("repeat: " + std::to_string(repeats.size()) + " repeats for " + x.shape().str() +
                                " (at least one per dim)");
  if (2 * repeats.size() > static_cast<std::size_t>(Shape::kMaxDims))
    throw std::invalid_argument("repeat: " + std::to_string(repeats.size()) + " repeats for " + x.shape().str() + " (at most " +
                                std::to_string(Shape::kMaxDims / 2) + ")");
  // x as (1, d0, 1, d1, ...) expanded to (r0, d0, r1, d1, ...), then merged pairwise.
  const int n = static_cast<int>(repeats.size()), lead = n - x.dim();
  Shape spread, tiled, out;
  for (int d = 0; d < n; ++d) {
    const std::int64_t size = d < lead ? 1 : x.shape()[d - lead];
    if (repeats[d] < 0)
      throw std::invalid_argument("repeat: negative repeat " + std::to_string(repeats[d]) + " for " + x.shape().str());
    spread.push_back(1), spread.push_back(size);
    tiled.push_back(repeats[d]), tiled.push_back(size);
    out.push_back(repeats[d] * size);
  }
  return reshape(expand(reshape(x, spread), tiled), out);
}

Tensor flip(const Tensor& x, IntList dims) {
  Tensor y = x;
  std::uint32_t seen = 0;
  for (std::int64_t dim : dims) {
    const int a = axis_of("flip", dim, x.dim(), x.shape());
    if (seen & (1u << a))
      throw std::invalid_argument("flip: dim " + std::to_string(dim) + " given twice for " + x.shape().str());
    seen |= 1u << a;
    const std::int64_t size = x.shape()[a];
    std::vector<std::int64_t> reversed(static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < size; ++i) reversed[static_cast<std::size_t>(i)] = size - 1 - i;
    y = index_select(y, a, Tensor::from_vector(reversed, {size}));
  }
  return y;
}

Tensor roll(const Tensor& x, IntList shifts, IntList dims) {
  if (dims.empty()) {
    if (shifts.size() != 1)
      throw std::invalid_argument("roll: without dims, one shift is needed, got " + std::to_string(shifts.size()) +
                                  " for " + x.shape().str());
    return reshape(roll(reshape(x, Shape{x.numel()}), shifts, {0}), x.shape());
  }
  if (shifts.size() != dims.size())
    throw std::invalid_argument("roll: " + std::to_string(shifts.size()) + " shifts for " + std::to_string(dims.size()) +
                                " dims of " + x.shape().str());
  Tensor y = x;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    const int a = axis_of("roll", dims[k], x.dim(), x.shape());
    const std::int64_t size = x.shape()[a];
    if (size == 0) continue;
    const std::int64_t s = ((shifts[k] % size) + size) % size;
    if (s == 0) continue;
    const Tensor parts[2] = {narrow(y, a, size - s, s), narrow(y, a, 0, size - s)};
    y = concat(TensorList(parts, 2), a);
  }
  return y;
}

namespace {

Tensor triangle(const char* op, const Tensor& x, std::int64_t diagonal, bool lower) {
  if (x.dim() < 2) throw std::invalid_argument(std::string(op) + ": needs at least 2 dims, got " + x.shape().str());
  const std::int64_t rows = x.size(-2), cols = x.size(-1);
  std::vector<std::int64_t> drop(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      drop[static_cast<std::size_t>(i * cols + j)] = lower ? j - i > diagonal : j - i < diagonal;
  return masked_fill(x, Tensor::from_vector(drop, {rows, cols}), 0.0);
}

}  // namespace

Tensor tril(const Tensor& x, std::int64_t diagonal) { return triangle("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, std::int64_t diagonal) { return triangle("triu", x, diagonal, false); }

Tensor pad(const Tensor& x, IntList pads, double value) {
  if (pads.size() % 2 != 0 || static_cast<int>(pads.size() / 2) > x.dim())
    throw std::invalid_argument("pad: " + std::to_string(pads.size()) + " pad values for " + x.shape().str() +
                                " (an even number, two per dim at most)");
  Tensor y = x;
  for (std::size_t k = 0; k < pads.size() / 2; ++k) {
    const int a = x.dim() - 1 - static_cast<int>(k);  // pairs start from the last dim
    const std::int64_t before = pads[2 * k], after = pads[2 * k + 1];
    const std::int64_t size = y.shape()[a];
    if (size + std::min<std::int64_t>(before, 0) + std::min<std::int64_t>(after, 0) < 0)
      throw std::invalid_argument("pad: cropping " + std::to_string(-std::min<std::int64_t>(before, 0)) + " and " +
                                  std::to_string(-std::min<std::int64_t>(after, 0)) + " from dim " + std::to_string(a) +
                                  " of " + x.shape().str());
    if (before < 0 || after < 0)  // negative padding crops
      y = narrow(y, a, std::max<std::int64_t>(-before, 0), size + std::min<std::int64_t>(before, 0) + std::min<std::int64_t>(after, 0));
    if (before > 0 || after > 0) {
      Shape side = y.shape();
      side[a] = std::max<std::int64_t>(before, 0);
      const Tensor front = Tensor::full(side, value, y.dtype());
      side[a] = std::max<std::int64_t>(after, 0);
      const Tensor back = Tensor::full(side, value, y.dtype());
      const Tensor parts[3] = {front, y, back};
      y = concat(TensorList(parts, 3), a);
    }
  }
  return y;
}

}  // namespace tg
