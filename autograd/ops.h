#pragma once
// Differentiable ops. Each is implemented beside its backward in one autograd/ops_<family>.cpp.
// Every op validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>
#include <vector>

#include "autograd/array_ref.h"
#include "autograd/tensor.h"

namespace tg {

class Generator;

// ---- elementwise, NumPy broadcasting (ops_elementwise.cpp) -----------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);
Tensor rsub(double s, const Tensor& a);  // s - a
Tensor rdiv(double s, const Tensor& a);  // s / a
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor square(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor operator-(const Tensor& x);

// ---- matrix products (ops_matmul.cpp) ------------------------------------------------------
/// (M,K)x(K,N); batched (B,M,K)x(B,K,N); (...,M,K)x(K,N) folds the leading dims into M.
Tensor matmul(const Tensor& a, const Tensor& b);
/// x Wᵀ + b as torch.nn.functional.linear: x (..., in), weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- reductions (ops_reduce.cpp) -----------------------------------------------------------
Tensor sum(const Tensor& x);  // over everything, 0-dim result
Tensor sum(const Tensor& x, IntList axes, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, IntList axes, bool keepdim = false);
/// Max over everything; the gradient goes to the first maximal element.
Tensor max(const Tensor& x);
/// Max over the axes; the gradient goes to the first maximal element along them.
Tensor max(const Tensor& x, IntList axes, bool keepdim = false);
/// Index of the first maximum along `axis` (i64, not differentiable).
Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdim = false);

// ---- softmax family and losses (ops_softmax.cpp) ---------------------------------------------
Tensor softmax(const Tensor& x, std::int64_t axis = -1);
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);
/// Softmax over the last axis where, as in d2l, positions at or beyond each row's valid length
/// are set to -1e6 first (finite, so a fully masked row gives uniform weights, not NaN).
/// valid_lens: i64 of shape (B) (one length per batch entry, shared by all rows of that entry) or
/// of scores.shape without the last axis (one length per row); undefined = no mask.
Tensor masked_softmax(const Tensor& scores, const Tensor& valid_lens);
/// Mean over targets != ignore_index of -log_softmax(logits)[target], as torch's
/// CrossEntropyLoss(ignore_index, reduction='mean'). logits (N, C) or (..., C), targets i64 of
/// logits.shape without the last axis. NaN when every target is ignored (as PyTorch).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100);

// ---- shape (ops_shape.cpp) -----------------------------------------------------------------
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

// ---- indexing, masking, dropout (ops_index.cpp) ----------------------------------------------
/// Rows of x along `axis` picked by the 1-D i64 `index`; backward scatter-adds (repeats add up).
Tensor index_select(const Tensor& x, std::int64_t axis, const Tensor& index);
/// weight (V, D) gathered at i64 ids of any shape -> ids.shape + (D); backward scatter-adds.
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// cond ? a : b elementwise with broadcasting of all three; cond is nonzero = true (any dtype).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever mask (broadcast to x) is nonzero; no gradient flows there.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// Inverted dropout: zeroes with probability p, scales the rest by 1/(1-p); identity when
/// !training or p == 0 (returns x itself; `gen` is not advanced). The mask comes from `gen`, one
/// gen.uniform() per element in element order (< p drops). p must be in [0, 1): p == 1 throws
/// std::invalid_argument (use a zero tensor if you really want no signal).
Tensor dropout(const Tensor& x, double p, Generator& gen, bool training = true);

// ---- fused recurrent and attention kernels (ops_rnn.cpp, ops_attention.cpp) -------------------
// Each equals a composite of the ops above (the tests gradcheck both and compare them); the fused
// forward makes one pass over memory and records one tape node instead of a dozen.

/// PyTorch's GRU cell after its two GEMMs: gi = x W_ihᵀ + b_ih and gh = h W_hhᵀ + b_hh, both
/// (B, 3H) in gate order r, z, n; h (B, H). Returns h' = (1 - z) n + z h with
/// r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r gh_n).
Tensor gru_cell_fused(const Tensor& gi, const Tensor& gh, const Tensor& h);

/// Bahdanau's additive scores: e[b, q, k] = Σ_h w[h] tanh(query[b, q, h] + keys[b, k, h]) for
/// query (B, Q, H), keys (B, K, H), w (H) -> (B, Q, K), without the (B, Q, K, H) intermediate.
Tensor additive_attention_scores(const Tensor& query, const Tensor& keys, const Tensor& w);

}  // namespace tg
