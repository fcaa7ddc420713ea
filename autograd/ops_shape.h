#pragma once
// Shape ops: views, transposes, joins and slices.
// Implemented beside their backward in autograd/ops_shape.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>

#include "autograd/array_ref.h"
#include "autograd/tensor.h"

namespace tg {

/// Same elements, new shape (one dimension may be -1). Shares storage: a view.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor view(const Tensor& x, const Shape& shape);  // alias of reshape
Tensor flatten(const Tensor& x, std::int64_t start_axis = 0, std::int64_t end_axis = -1);
Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1);
Tensor permute(const Tensor& x, IntList order);
Tensor unsqueeze(const Tensor& x, std::int64_t axis);
Tensor squeeze(const Tensor& x, std::int64_t axis);  // axis must have size 1
Tensor squeeze(const Tensor& x);                      // drops every size-1 axis
Tensor concat(TensorList xs, std::int64_t axis = 0);
Tensor stack(TensorList xs, std::int64_t axis = 0);
/// Elements [start, start + length) along `axis` (torch.narrow; a negative start counts from the end).
Tensor narrow(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t length);
/// Elements start, start+step, ... below end along `axis`; negative start/end count from the end,
/// then both are clamped to [0, size] as in Python slicing (so start >= end gives an empty axis). step > 0.
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1);

}  // namespace tg
