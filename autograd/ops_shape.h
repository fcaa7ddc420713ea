#pragma once
// Shape ops: views, transposes, joins and slices.
// Implemented beside their backward in autograd/ops_shape.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>

#include "autograd/array_ref.h"
#include "autograd/memory.h"
#include "autograd/tensor.h"

namespace tg {

/// Same elements, new shape (one dimension may be -1). Shares storage: a view.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor view(const Tensor& x, const Shape& shape);  // alias of reshape
Tensor flatten(const Tensor& x, std::int64_t start_axis = 0, std::int64_t end_axis = -1);
/// A new contiguous tensor with two axes swapped. Swapping the last two axes of a floating tensor
/// defers the copy to the first read of the result: matmul takes such an operand as a GEMM
/// transpose flag on x and never writes it. The copy is taken from x when it is written, so an
/// in-place change to x before then is seen (as through PyTorch's transpose view), and one after
/// it is not (the result then holds its own elements, unlike a view).
Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1);
Tensor permute(const Tensor& x, IntList order);
Tensor unsqueeze(const Tensor& x, std::int64_t axis);
Tensor squeeze(const Tensor& x, std::int64_t axis);  // drops axis if its size is 1, else keeps x's shape
Tensor squeeze(const Tensor& x);                      // drops every size-1 axis
/// xs must share one dtype (torch.cat / torch.stack promote mixed dtypes).
Tensor concat(TensorList xs, std::int64_t axis = 0);
Tensor stack(TensorList xs, std::int64_t axis = 0);
/// Elements [start, start + length) along `axis` (torch.narrow; a negative start counts from the end).
Tensor narrow(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t length);
/// Elements start, start+step, ... below end along `axis`; negative start/end count from the end,
/// then both are clamped to [0, size] as in Python slicing (so start >= end gives an empty axis). step > 0.
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1);

// Splitting, as torch.split / split_with_sizes / chunk / unbind. Pieces along axis 0 (or any axis
// with only size-1 axes before it) are views sharing x's buffer; pieces along other axes are copies
// (PyTorch returns strided views there; tapegrad's tensors are contiguous). A single piece that is
// all of x is x itself. In backward every piece adds its gradient into one buffer of x's shape, which
// reaches x once: splitting into T pieces costs O(T), not T full-size gradients. The result comes
// from the caching allocator (no system allocation in steady state).

/// Pieces of `split_size` along `axis`, the last one smaller if the size does not divide
/// (split_size 0 only for an empty axis, which gives one empty piece).
PooledVector<Tensor> split(const Tensor& x, std::int64_t split_size, std::int64_t axis = 0);
/// Pieces of the given sizes along `axis`; they must sum to the axis' size.
PooledVector<Tensor> split(const Tensor& x, IntList split_sizes, std::int64_t axis = 0);
PooledVector<Tensor> split_with_sizes(const Tensor& x, IntList split_sizes, std::int64_t axis = 0);
/// At most `chunks` pieces of ceil(size / chunks) along `axis` (fewer when they run out, as PyTorch;
/// `chunks` empty pieces for an empty axis).
PooledVector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t axis = 0);
/// The slices along `axis`, each without that axis.
PooledVector<Tensor> unbind(const Tensor& x, std::int64_t axis = 0);

// Broadcasting, tiling, reordering and masking (torch.expand, repeat, flip, roll, tril/triu, pad).
// Results are new contiguous tensors (PyTorch's expand returns a stride-0 view; tapegrad's tensors
// are contiguous, so it copies), differentiable in x.
/// x broadcast to `shape` (NumPy rules; -1 keeps x's size in that position, new leading dims allowed).
Tensor expand(const Tensor& x, const Shape& shape);
/// expand without -1 (torch.broadcast_to).
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// x tiled `repeats[d]` times along each dim (torch.Tensor.repeat; more repeats than dims add
/// leading dims).
Tensor repeat(const Tensor& x, IntList repeats);
/// x reversed along each of `dims`.
Tensor flip(const Tensor& x, IntList dims);
/// x rotated by shifts[i] along dims[i] (torch.roll); with `dims` empty, the flattened x rotated
/// by the single shift and reshaped back.
Tensor roll(const Tensor& x, IntList shifts, IntList dims = {});
/// The lower (tril) / upper (triu) triangle of the last two dims, from `diagonal` (0: the main
/// diagonal, > 0 above it, < 0 below); the rest zero, whatever it held (inf and NaN included).
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);
/// Constant padding (torch.nn.functional.pad, mode "constant"): `pads` holds (before, after) pairs
/// starting from the LAST dim, as PyTorch; negative values crop.
Tensor pad(const Tensor& x, IntList pads, double value = 0.0);

}  // namespace tg
