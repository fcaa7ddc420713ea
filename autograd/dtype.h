#pragma once
// Element types. Floating tensors (f32 for training, f64 for gradient checks) carry gradients;
// i64 tensors hold indices, token ids and lengths; b8 tensors (torch.bool, element type bool, one
// byte each) hold the results of comparisons and masks.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tg {

enum class DType : std::uint8_t { f32, f64, i64, b8 };

std::string_view dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);
inline bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::b8; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

/// Run-time dtype to compile-time element type, for code written once as a template: calls
/// f(float{}) for f32 and f(double{}) for f64, and throws std::invalid_argument naming `op` for any
/// other dtype.
template <class F> decltype(auto) dispatch_floating(const char* op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    default:
      throw std::invalid_argument(std::string(op) + ": expects a floating-point tensor, got " +
                                  std::string(dtype_name(dtype)));
  }
}

}  // namespace tg
