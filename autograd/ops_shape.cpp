// Shape ops. reshape is a view (shares storage); the others copy into a new contiguous tensor.
#include <stdexcept>
#include <string>

#include "autograd/kernels/view.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace tg {

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
  return record("reshape", kernels::view_as(x, target), {x}, [in = x.shape()](BackwardContext& ctx) {
    ctx.accumulate(0, kernels::view_as(ctx.grad_output(), in));
  });
}

Tensor view(const Tensor& x, const Shape& shape) { return reshape(x, shape); }

}  // namespace tg
