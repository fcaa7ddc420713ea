#include "autograd/kernels/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/parallel_for.h"

namespace tg::kernels {

namespace {

// y[i] = f(a[SA * i], b[SB * i]) for strides 0 (broadcast scalar) or 1: compile-time strides let the
// compiler vectorise the loop.
template <int SA, int SB, class T, class F>
void run_flat(const T* a, const T* b, bool* y, std::int64_t n, const F& f) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = f(a[SA * i], b[SB * i]);
}

template <class T, class F>
void run_inner(const T* a, std::int64_t sa, const T* b, std::int64_t sb, bool* y, std::int64_t n, const F& f) {
  if (sa && sb) run_flat<1, 1>(a, b, y, n, f);
  else if (sa) run_flat<1, 0>(a, b, y, n, f);
  else if (sb) run_flat<0, 1>(a, b, y, n, f);
  else run_flat<0, 0>(a, b, y, n, f);
}

/// y (bool, the broadcast shape) = f(a, b); a and b hold T.
template <class T, class F>
Tensor broadcast_to_bool(const Tensor& a, const Tensor& b, const char* name, const F& f) {
  const Shape out = broadcast_shapes(name, a.shape(), b.shape());
  Tensor y = Tensor::empty(out, DType::b8);
  const std::int64_t total = out.numel();
  if (total == 0) return y;
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  bool* py = y.data<bool>();
  const bool a_full = a.shape() == out, b_full = b.shape() == out;
  if ((a_full || a.numel() == 1) && (b_full || b.numel() == 1)) {  // one flat run
    const std::int64_t sa = a_full ? 1 : 0, sb = b_full ? 1 : 0;
    parallel_for(total, kGrainCheap, [&](std::int64_t i0, std::int64_t i1) {
      run_inner(pa + sa * i0, sa, pb + sb * i0, sb, py + i0, i1 - i0, f);
    });
    return y;
  }
  // Rows along the last dim, an odometer over the others (as where's kernel).
  const int n = out.size();
  std::int64_t as[Shape::kMaxDims] = {}, bs[Shape::kMaxDims] = {};
  broadcast_strides(a.shape(), out, as);
  broadcast_strides(b.shape(), out, bs);
  const std::int64_t inner = out[n - 1], ai = as[n - 1], bi = bs[n - 1];
  parallel_for(total / inner, std::max<std::int64_t>(1, kGrainCheap / inner), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t rem = r, ao = 0, bo = 0;
      for (int d = n - 2; d >= 0; --d) {
        const std::int64_t i = rem % out[d];
        rem /= out[d];
        ao += i * as[d];
        bo += i * bs[d];
      }
      run_inner(pa + ao, ai, pb + bo, bi, py + r * inner, inner, f);
    }
  });
  return y;
}

template <class T>
Tensor compare_typed(Compare op, const Tensor& a, const Tensor& b, const char* name) {
  switch (op) {
    case Compare::eq: return broadcast_to_bool<T>(a, b, name, [](T x, T y) { return x == y; });
    case Compare::ne: return broadcast_to_bool<T>(a, b, name, [](T x, T y) { return x != y; });
    case Compare::lt: return broadcast_to_bool<T>(a, b, name, [](T x, T y) { return x < y; });
    case Compare::le: return broadcast_to_bool<T>(a, b, name, [](T x, T y) { return x <= y; });
    case Compare::gt: return broadcast_to_bool<T>(a, b, name, [](T x, T y) { return x > y; });
    case Compare::ge: return broadcast_to_bool<T>(a, b, name, [](T x, T y) { return x >= y; });
  }
  throw std::logic_error("compare: unknown op");
}

template <class T, class F>
Tensor map_to_bool(const Tensor& x, const F& f) {
  Tensor y = Tensor::empty(x.shape(), DType::b8);
  const T* px = x.data<T>();
  bool* py = y.data<bool>();
  parallel_for(x.numel(), kGrainCheap, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) py[i] = f(px[i]);
  });
  return y;
}

}  // namespace

Tensor compare(Compare op, const Tensor& a, const Tensor& b, const char* name) {
  if (a.dtype() != b.dtype())
    throw std::logic_error(std::string(name) + ": compare kernel needs one dtype (promote first)");
  return dispatch_any(a.dtype(), [&](auto tag) { return compare_typed<decltype(tag)>(op, a, b, name); });
}

Tensor logical(Logical op, const Tensor& a, const Tensor& b, const char* name) {
  if (a.dtype() != DType::b8 || b.dtype() != DType::b8)
    throw std::logic_error(std::string(name) + ": logical kernel needs bool tensors");
  switch (op) {
    case Logical::land: return broadcast_to_bool<bool>(a, b, name, [](bool x, bool y) { return x && y; });
    case Logical::lor: return broadcast_to_bool<bool>(a, b, name, [](bool x, bool y) { return x || y; });
    case Logical::lxor: return broadcast_to_bool<bool>(a, b, name, [](bool x, bool y) { return x != y; });
  }
  throw std::logic_error("logical: unknown op");
}

Tensor predicate(Predicate op, const Tensor& x) {
  return dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      constexpr T inf = std::numeric_limits<T>::infinity();
      switch (op) {
        case Predicate::isnan: return map_to_bool<T>(x, [](T v) { return v != v; });
        case Predicate::isinf: return map_to_bool<T>(x, [](T v) { return std::abs(v) == inf; });
        case Predicate::isfinite: return map_to_bool<T>(x, [](T v) { return std::abs(v) < inf; });
        case Predicate::nonzero: return map_to_bool<T>(x, [](T v) { return v != T(0); });
      }
    } else {
      switch (op) {
        case Predicate::isnan:
        case Predicate::isinf: return map_to_bool<T>(x, [](T) { return false; });
        case Predicate::isfinite: return map_to_bool<T>(x, [](T) { return true; });
        case Predicate::nonzero: return map_to_bool<T>(x, [](T v) { return v != T(0); });
      }
    }
    throw std::logic_error("predicate: unknown op");
  });
}

Tensor sum_integral(const Tensor& x, const Axes& axes, bool keepdim) {
  if (x.dtype() != DType::i64 && x.dtype() != DType::b8)
    throw std::logic_error("sum_integral: needs an int64 or bool tensor");
  const Shape& in = x.shape();
  Tensor y = Tensor::zeros(reduced_shape(in, axes, keepdim), DType::i64);
  std::int64_t* py = y.data<std::int64_t>();
  // Output stride of each input dim (0 along reduced dims); an odometer walks x in order, so the
  // result does not depend on any thread count.
  const int n = in.size();
  std::int64_t stride[Shape::kMaxDims] = {}, coord[Shape::kMaxDims] = {};
  for (std::int64_t d = n - 1, s = 1; d >= 0; --d) {
    if (axes.contains(static_cast<int>(d))) continue;
    stride[d] = s;
    s *= in[static_cast<int>(d)];
  }
  dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool>) {
      const T* px = x.data<T>();
      std::int64_t offset = 0;
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        // Unsigned addition: int64 overflow wraps, as PyTorch's, instead of being undefined.
        py[offset] = static_cast<std::int64_t>(static_cast<std::uint64_t>(py[offset]) + static_cast<std::uint64_t>(px[i]));
        for (int d = n - 1; d >= 0; --d) {
          offset += stride[d];
          if (++coord[d] < in[d]) break;
          offset -= stride[d] * in[d];
          coord[d] = 0;
        }
      }
    }
  });
  return y;
}

}  // namespace tg::kernels
