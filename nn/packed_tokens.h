#pragma once
// The tokens of a padded batch, packed into one (tokens, ...) matrix, so that position-wise layers
// (linear, layer norm, dropout, a feed-forward block) run on the tokens only and not on the
// padding: TransformerEncoderLayer / TransformerDecoderLayer / MultiheadAttention::forward_packed
// take this layout. Row n of a (N, T, ...) batch holds tokens at positions 0 .. valid_len[n] - 1.
//
//   const nn::PackedTokens tokens(valid_len, T);   // valid_len (N) int64
//   Tensor h = tokens.pack(x);                     // (N, T, E) -> (tokens, E)
//   h = layer->forward_packed(h, tokens, Tensor(), key_padding_mask);
//   Tensor padded = tokens.unpack(h);              // (N, T, E), zeros at the padding
//
// tapegrad's own (PyTorch 1.13's nested tensors are a prototype).
#include <cstdint>

#include "autograd/tensor.h"

namespace tg::nn {

class PackedTokens {
 public:
  /// valid_len: (N) int64, each in [0, length]. Throws std::invalid_argument otherwise.
  PackedTokens(const Tensor& valid_len, std::int64_t length);

  std::int64_t batch() const { return batch_; }
  std::int64_t length() const { return length_; }
  std::int64_t tokens() const { return index_.numel(); }
  /// (tokens) int64: the flat position n * length + t of each token, in row-major order.
  const Tensor& index() const { return index_; }

  /// (N, length, ...) -> (tokens, ...): the rows of the tokens. Differentiable (twice: the
  /// gradient of each is the other).
  Tensor pack(const Tensor& padded) const;
  /// (tokens, ...) -> (N, length, ...), zeros at the padding. Differentiable.
  Tensor unpack(const Tensor& packed) const;

 private:
  std::int64_t batch_, length_;
  Tensor index_;
  Tensor offsets_;  // (N + 1) int64: row n's tokens are packed rows offsets_[n] .. offsets_[n + 1] - 1
};

}  // namespace tg::nn
