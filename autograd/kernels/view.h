#pragma once
// A handle to the same elements under another shape, outside autograd: for an op's backward,
// which must not record (installed).
#include <memory>
#include <stdexcept>

#include "autograd/tensor.h"

namespace tg::kernels {

inline Tensor view_as(const Tensor& x, const Shape& shape) {
  if (shape.numel() != x.numel())
    throw std::logic_error("view_as: " + x.shape().str() + " has a different size than " + shape.str());
  auto impl = TensorImpl::make(*x.impl());
  impl->shape = shape;
  impl->meta.reset();
  return Tensor(std::move(impl));
}

}  // namespace tg::kernels
