#pragma once
// Run-time dtype to compile-time element type, for ops (installed). f(T{}) is called with a value of the
// element type, so kernels are written once as templates and instantiated for float and double.
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
    default: return f(std::int64_t{});
  }
}

}  // namespace tg::kernels
