#pragma once
// Indexing, masking and dropout.
// Implemented beside their backward in autograd/ops_index.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes, or
// std::out_of_range for an index value outside its axis.
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

class Generator;

/// Rows of x along `axis` picked by the 1-D i64 `index`; backward scatter-adds (repeats add up).
Tensor index_select(const Tensor& x, std::int64_t axis, const Tensor& index);
/// out[i][j][k] = x[i][index[i][j][k]][k] for dim = 1, likewise for any dim (torch.gather): index is
/// i64 with x's number of dims, and no larger than x in the others. Backward scatter-adds.
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
/// x with src[i][j][k] added at x[i][index[i][j][k]][k] for dim = 1 (torch.scatter_add); index as
/// in gather, no larger than src. x and src of one dtype, any (no promotion, as torch). Differentiable
/// in x and src.
Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
/// x with alpha * source's slices added at the positions the 1-D i64 `index` names along `dim`
/// (torch.index_add); repeats add up. x and source of one floating dtype (no promotion, as torch;
/// torch also adds integer tensors). Differentiable in x and source.
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);
/// gather after broadcasting x and indices against each other in every dim but `dim`
/// (torch.take_along_dim).
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::int64_t dim);
/// weight (V, D) gathered at i64 ids of any shape -> ids.shape + (D); backward scatter-adds.
/// The table comes first, as in tg::nn::Embedding's state (F.embedding takes (input, weight)).
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// cond ? a : b elementwise with broadcasting of all three (torch.where). cond is bool, as PyTorch;
/// a cond of another dtype is read as nonzero = true (PyTorch refuses it), which older callers use.
/// a and b of different dtypes are converted to result_type(a, b) first, as torch.where (float32
/// and float64 give float64); each gets its gradient in its own dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever mask (broadcast to x; torch also broadcasts x to the mask) is true
/// (torch.masked_fill); no gradient flows there. A mask of another dtype than bool is read as
/// nonzero = true (PyTorch refuses it).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// Inverted dropout: zeroes with probability p, scales the rest by 1/(1-p); identity when
/// !training or p == 0 (returns x itself; `gen` is not advanced). Each call takes one
/// gen.next_u64() and draws the mask from it, the same for any thread count; the backward draws
/// the same mask again, so no mask is kept. p must be in [0, 1): p == 1 throws
/// std::invalid_argument (use a zero tensor if you really want no signal).
Tensor dropout(const Tensor& x, double p, Generator& gen, bool training = true);

}  // namespace tg
