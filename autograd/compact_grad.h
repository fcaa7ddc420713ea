#pragma once
// Compact gradients: a leaf's gradient kept in a form much smaller than the dense (rows, cols)
// tensor, for the two parameters that dominate a translation model's memory:
//   * low rank: a linear layer's weight gradient dW = scale Gᵀ X, with G (N, out) the gradient of the
//     output and X (N, in) the input, kept as the pair when N (out + in) < out in (the 30000-word
//     readout at the paper's sizes: 151 MiB of G instead of a 414 MiB dW);
//   * sparse rows: an embedding table's gradient as the rows the batch looked up.
// A leaf opts in with Tensor::allow_compact_grad() (e.g. `layer.weight.allow_compact_grad()`;
// models::allow_compact_grads does it for a translator); ops whose backward can produce a compact
// gradient then hand it to the tape instead of a dense one when the leaf has no gradient yet, and
// fall back to the dense gradient otherwise.
//
// Consumers that know the form read it without ever building the dense tensor: clip_grad_norm
// takes squared_norm() and scale(), the optimizers read_rows() a block of rows at a time into
// scratch. Everything else sees a dense gradient: Tensor::grad() converts a compact gradient to a
// dense one on first access (gradcheck therefore checks the compact path, through dense()). A
// second gradient arriving for the same leaf (a layer used twice in one graph) also converts it.
// The values are the dense gradient's: read_rows() is computed with the same kernels and summation
// order, so it gives the same bits (tests/autograd/test_compact_grad.cpp); only squared_norm() of a
// low-rank gradient is computed differently (from Gram matrices, below) and agrees to rounding.
#include <cstdint>
#include <memory>
#include <span>

#include "autograd/dtype.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"

namespace tg {

class CompactGrad {
 public:
  virtual ~CompactGrad() = default;

  /// Shape (rows, cols) and dtype of the dense gradient this stands for.
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::int64_t rows() const { return shape_[0]; }
  std::int64_t cols() const { return shape_[1]; }
  /// "low_rank" or "sparse_rows" (error messages, tests).
  virtual const char* kind() const = 0;
  /// Bytes held (the form's tensors), to compare with the dense rows() * cols() elements.
  virtual std::int64_t bytes() const = 0;

  /// Sum of the squares of all elements, in double.
  double squared_norm() const { return scale_ * scale_ * unscaled_squared_norm(); }
  /// Multiplies the gradient by `factor` (clip_grad_norm); costs nothing until rows are read.
  void scale(double factor) { scale_ *= factor; }
  /// Writes rows [r0, r1) of the dense gradient to `out`, (r1 - r0) x cols() elements of dtype(),
  /// row-major. Runs on the calling thread's share of the pool (num_threads()); callers reading
  /// blocks from several run_tasks() tasks get serial kernels in each.
  void read_rows(std::int64_t r0, std::int64_t r1, void* out) const;
  /// The dense gradient, as a new tensor.
  Tensor dense() const;
  /// "sparse_rows": the rows present, sorted and unique (every other row of the dense gradient is
  /// zero); empty for other kinds. Lets data-parallel training send only these rows.
  virtual std::span<const std::int64_t> row_ids() const { return {}; }

 protected:
  CompactGrad(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {}
  double scale_value() const { return scale_; }

 private:
  virtual double unscaled_squared_norm() const = 0;
  /// read_rows, the scale applied (after the product, as clipping scales a dense gradient).
  virtual void rows_impl(std::int64_t r0, std::int64_t r1, void* out) const = 0;

  Shape shape_;
  DType dtype_;
  double scale_ = 1.0;
};

/// dW = Gᵀ X for a weight (out, in): g (N, out), x (N, in), same floating dtype. Keeps handles to
/// both (neither is copied; both must stay unmodified, as every saved tensor).
std::shared_ptr<CompactGrad> low_rank_grad(const Tensor& g, const Tensor& x);

/// The gradient of a (V, D) table looked up at `ids` (K i64 values in [0, V)) whose outputs
/// received `g` (K, D): row ids[k] gets g[k], repeated ids summed in order of k. Returns null when
/// the sparse form would not be smaller than the dense table (most rows touched).
std::shared_ptr<CompactGrad> sparse_rows_grad(const Tensor& g, const Tensor& ids, const Shape& table_shape);

}  // namespace tg
