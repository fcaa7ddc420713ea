#pragma once
// Tensor indexing as LibTorch's C++ frontend spells it (torch::indexing): x[1:, 0] is
// index(x, {Slice(1, None), 0}) and x[idx] = v is index_put(x, {idx}, v). Implemented beside
// their backward in autograd/ops_indexing.cpp.
//
// An index list holds, left to right, one entry per indexed dim (as in Python):
//   Slice(start, stop, step)  the dim kept with every step-th element of [start, stop); None bounds
//                             are the ends, negative ones count from the end, then both are clamped
//                             to [0, size] (Python slicing). step > 0, as torch (0 or negative
//                             is an error).
//   an integer                selects one element and removes the dim; negative counts from the
//                             end; outside [-size, size) is std::out_of_range naming the dim and size.
//   None                      inserts a dim of size 1 (consumes no dim of x).
//   Ellipsis or "..."         as many full slices as the other entries leave dims (at most one).
//   true / false              a new dim of size 1 / 0 (torch's x[True], x[False]; also a 0-dim bool tensor).
//   a bool tensor (mask)      of k dims: consumes k dims of x, whose sizes it must equal, and keeps
//                             the positions where it is true, in row-major order, as one dim
//                             (torch's x[mask]; it is the k int64 index tensors of nonzero(mask)).
//   an int64 tensor           advanced indexing: the dim is replaced by the index tensor's elements
//                             (negative values count from the end). All advanced indices (int64
//                             tensors and masks) are broadcast together, and their broadcast dims
//                             appear in the result where the first of them stood when they are
//                             adjacent, else in front of all other dims: torch's (and NumPy's)
//                             rule, applied after the integers have removed their dims, so
//                             x[i, 0, j] keeps i and j's dims in place and x[i, :, j] moves them
//                             first. Dims of x after the last entry are kept whole.
// Unlike torch there is no uint8 mask (tapegrad has no uint8 dtype) and two Ellipsis are an error.
//
// Results are new tensors, never views (tapegrad has no views yet): writing into the result of
// index() does not change x, as it does in torch for slices and integers; use index_put, which is
// out of place too (torch.index_put, not index_put_: it returns x with the writes, x unchanged).
//
// Errors are one-line messages naming the op, the index position (0-based, in the list as
// written) and the shapes: std::invalid_argument for a malformed index (too many indices, a mask
// whose shape does not match, a non-integer index tensor, a zero step, index tensors that do not
// broadcast), std::out_of_range for an integer or index value outside its dim.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "autograd/tensor.h"

namespace tg {
namespace indexing {

/// An absent bound of a Slice, or an index entry that inserts a dim of size 1 (torch::indexing::None).
inline constexpr std::nullopt_t None = std::nullopt;

/// The type of Ellipsis (torch::indexing::EllipsisIndexType).
struct EllipsisIndexType final {
  explicit constexpr EllipsisIndexType() = default;
};
/// "as many full slices as needed" (torch::indexing::Ellipsis, Python's ...).
inline constexpr EllipsisIndexType Ellipsis{};

/// start:stop:step (torch::indexing::Slice); absent values are None, as in Python. The step is
/// checked by the op that uses the slice (it must be > 0).
class Slice {
 public:
  explicit Slice(std::optional<std::int64_t> start = std::nullopt, std::optional<std::int64_t> stop = std::nullopt,
                 std::optional<std::int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step) {}
  /// As torch's Slice: 0, INT64_MAX and 1 for absent values.
  std::int64_t start() const { return start_.value_or(0); }
  std::int64_t stop() const;
  std::int64_t step() const { return step_.value_or(1); }

 private:
  std::optional<std::int64_t> start_, stop_, step_;
};

/// One entry of an index list (torch::indexing::TensorIndex), made implicitly from None,
/// Ellipsis, "...", an integer, a bool, a Slice or a Tensor.
class TensorIndex {
 public:
  enum class Kind : std::uint8_t { none, ellipsis, integer, boolean, slice, tensor };

  TensorIndex(std::nullopt_t) : kind_(Kind::none) {}                 // NOLINT: implicit, as torch
  TensorIndex(EllipsisIndexType) : kind_(Kind::ellipsis) {}          // NOLINT
  /// Only "..." (an Ellipsis); any other string throws std::invalid_argument.
  TensorIndex(const char* str);                                     // NOLINT
  TensorIndex(std::int64_t integer) : kind_(Kind::integer), integer_(integer) {}  // NOLINT
  TensorIndex(int integer) : kind_(Kind::integer), integer_(integer) {}           // NOLINT
  /// A bool, not an integer (only an actual bool picks this constructor).
  template <class T, std::enable_if_t<std::is_same_v<T, bool>, int> = 0>
  TensorIndex(T boolean) : kind_(Kind::boolean), boolean_(boolean) {}  // NOLINT
  TensorIndex(Slice slice) : kind_(Kind::slice), slice_(slice) {}     // NOLINT
  TensorIndex(Tensor tensor) : kind_(Kind::tensor), tensor_(std::move(tensor)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_ellipsis() const { return kind_ == Kind::ellipsis; }
  bool is_integer() const { return kind_ == Kind::integer; }
  bool is_boolean() const { return kind_ == Kind::boolean; }
  bool is_slice() const { return kind_ == Kind::slice; }
  bool is_tensor() const { return kind_ == Kind::tensor; }
  std::int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  std::int64_t integer_ = 0;
  bool boolean_ = false;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace indexing

/// x indexed by `indices` (LibTorch's x.index({...}), Python's x[...]; the rules above). A new
/// tensor of x's dtype, any dtype; differentiable in x: the backward is
/// index_put(zeros_like(x), indices, grad, true), so repeated positions add up.
Tensor index(const Tensor& x, std::initializer_list<indexing::TensorIndex> indices);
Tensor index(const Tensor& x, const std::vector<indexing::TensorIndex>& indices);
/// x with `values` written at the positions index(x, indices) reads (torch.index_put, out of place:
/// x itself is unchanged). values has x's dtype (as torch) and broadcasts to the shape
/// index(x, indices) has. accumulate adds values there instead, repeated positions adding up.
/// Without accumulate, a position named more than once gets the value written last in the
/// row-major order of the indexed shape (torch leaves this undefined; here it is deterministic).
/// Differentiable in x and values, as torch: x's gradient is the output's with the written
/// positions zeroed (unchanged with accumulate); values' is index(grad, indices) summed over
/// the dims values was broadcast along, so with repeats and no accumulate every repeat gets the
/// gradient of the position it names, not only the one written last (torch's formula too).
Tensor index_put(const Tensor& x, std::initializer_list<indexing::TensorIndex> indices, const Tensor& values,
                 bool accumulate = false);
Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                 bool accumulate = false);
/// x with `value` written at the indexed positions (x.index_put_({...}, scalar)).
Tensor index_put(const Tensor& x, std::initializer_list<indexing::TensorIndex> indices, double value);
Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices, double value);
/// The elements of x where the bool `mask` is true, as a 1-D tensor in row-major order
/// (torch.masked_select); x and mask broadcast together first. Differentiable in x.
Tensor masked_select(const Tensor& x, const Tensor& mask);
/// x's slice `index` along `dim`, without that dim (torch.select: x[:, ..., index]); negative dim
/// and index count from the end. A new tensor (torch: a view). Differentiable in x.
Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index);

}  // namespace tg
