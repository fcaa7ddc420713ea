#pragma once
// xtensor interop: a tapegrad tensor seen as an xtensor container without a copy, and a tensor made
// from any xtensor expression. Opt-in: this header pulls in xtensor, so no other public header
// includes it; link the CMake target tapegrad::xtensor (tapegrad plus xtensor) to use it.
//
//   tg::Tensor t = tg::Tensor::zeros({2, 3}, tg::DType::f64);
//   auto v = tg::as_xtensor<double>(t);       // xt::xarray_adaptor over t's buffer
//   v(1, 2) = 5.0;                            // t.at({1, 2}) == 5
//   tg::Tensor u = tg::from_xtensor(xt::exp(v) + xt::arange<double>(3));  // broadcasting expression
//
// Views are outside autograd, like Tensor::copy_: writing through one into a tensor that a recorded
// op saved for its backward changes that backward's result (as writing to PyTorch's `.data` does).
#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnoalias.hpp>

#include "autograd/dtype.h"
#include "autograd/tensor.h"

namespace tg {

namespace xt_interop {

/// The tapegrad dtype of an xtensor element type: float, double, bool (b8; what xtensor's
/// comparisons yield) and any other integer of at most 64 bits (held as i64). Other types
/// (complex, ...) do not compile.
template <class T> constexpr DType dtype_for() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, bool>) return DType::b8;
  else {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) <= 8,
                  "tg::from_xtensor: element type must be float, double or an integer type");
    return DType::i64;
  }
}

template <class T> const Tensor& checked(const char* fn, const Tensor& t) {
  if (!t.defined()) throw std::invalid_argument(std::string(fn) + ": undefined tensor");
  if (t.dtype() != dtype_of_v<T>) throw_dtype_mismatch(t.dtype(), dtype_of_v<T>);
  return t;
}

inline std::vector<std::size_t> xshape(const Shape& s) { return {s.begin(), s.end()}; }

template <std::size_t N> std::array<std::size_t, N> xshape(const char* fn, const Shape& s) {
  if (s.size() != static_cast<int>(N))
    throw std::invalid_argument(std::string(fn) + ": tensor of shape " + s.str() + " is not of rank " +
                                std::to_string(N));
  std::array<std::size_t, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = static_cast<std::size_t>(s[static_cast<int>(i)]);
  return out;
}

}  // namespace xt_interop

/// A read-write xtensor view (row-major, the tensor's shape) of t's elements; no copy. T must be the
/// tensor's element type (float for f32, double for f64, std::int64_t for i64, bool for b8), else
/// std::invalid_argument. The view stays valid while the tensor's buffer lives.
template <class T> auto as_xtensor(Tensor& t) {
  xt_interop::checked<T>("tg::as_xtensor", t);
  return xt::adapt(t.data<T>(), static_cast<std::size_t>(t.numel()), xt::no_ownership(),
                   xt_interop::xshape(t.shape()));
}

/// A read-only view of t's elements.
template <class T> auto as_xtensor(const Tensor& t) {
  xt_interop::checked<T>("tg::as_xtensor", t);
  return xt::adapt(t.data<T>(), static_cast<std::size_t>(t.numel()), xt::no_ownership(),
                   xt_interop::xshape(t.shape()));
}

/// A read-write view of fixed rank N (an xtensor_adaptor: static shape type, cheaper indexing);
/// std::invalid_argument when t's rank is not N.
template <class T, std::size_t N> auto as_xtensor(Tensor& t) {
  xt_interop::checked<T>("tg::as_xtensor", t);
  return xt::adapt(t.data<T>(), static_cast<std::size_t>(t.numel()), xt::no_ownership(),
                   xt_interop::xshape<N>("tg::as_xtensor", t.shape()));
}

/// A read-only view of fixed rank N.
template <class T, std::size_t N> auto as_xtensor(const Tensor& t) {
  xt_interop::checked<T>("tg::as_xtensor", t);
  return xt::adapt(t.data<T>(), static_cast<std::size_t>(t.numel()), xt::no_ownership(),
                   xt_interop::xshape<N>("tg::as_xtensor", t.shape()));
}

/// A new tensor holding the evaluated expression, computed straight into its buffer. The dtype
/// follows the element type: f32 for float, f64 for double, b8 for bool, i64 for other integers. The result is a leaf
/// that does not require grad.
template <class E> Tensor from_xtensor(const xt::xexpression<E>& expression) {
  const E& e = expression.derived_cast();
  using Source = std::decay_t<typename E::value_type>;
  constexpr DType dtype = xt_interop::dtype_for<Source>();
  using T = std::conditional_t<
      dtype == DType::f32, float,
      std::conditional_t<dtype == DType::f64, double, std::conditional_t<dtype == DType::b8, bool, std::int64_t>>>;
  std::vector<std::int64_t> dims(e.shape().begin(), e.shape().end());
  Tensor out = Tensor::empty(Shape(dims), dtype);
  auto view = as_xtensor<T>(out);
  if constexpr (std::is_same_v<Source, T>) xt::noalias(view) = e;
  else xt::noalias(view) = xt::cast<T>(e);
  return out;
}

/// A copy of t's elements as an xt::xarray<T> (T the tensor's element type).
template <class T> xt::xarray<T> to_xarray(const Tensor& t) {
  return xt::xarray<T>(as_xtensor<T>(t));
}

}  // namespace tg
