#pragma once
// Run-time dtype to compile-time element type, for ops (installed). f(T{}) is called with a value of the
// element type, so kernels are written once as templates and instantiated for float and double
// (dispatch_floating) or for every dtype, int64_t and bool included (dispatch_any).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "autograd/dtype.h"

namespace tg::kernels {

using tg::dispatch_floating;  // autograd/dtype.h

template <class F>
decltype(auto) dispatch_any(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i64: return f(std::int64_t{});
    case DType::b8: return f(bool{});
  }
  throw std::logic_error("dispatch_any: unknown dtype");
}

}  // namespace tg::kernels
