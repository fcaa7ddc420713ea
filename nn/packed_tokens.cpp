#include "nn/packed_tokens.h"

#include <stdexcept>
#include <string>

#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"

namespace tg::nn {

PackedTokens::PackedTokens(const Tensor& valid_len, std::int64_t length) : batch_(0), length_(length) {
  if (!valid_len.defined() || valid_len.dtype() != DType::i64 || valid_len.dim() != 1)
    throw std::invalid_argument("PackedTokens: valid_len must be a 1-D int64 tensor, got " +
                                (valid_len.defined() ? valid_len.shape().str() + " " + std::string(dtype_name(valid_len.dtype()))
                                                     : std::string("an undefined tensor")));
  if (length < 0) throw std::invalid_argument("PackedTokens: length must be >= 0, got " + std::to_string(length));
  batch_ = valid_len.numel();
  const std::int64_t* len = valid_len.data<std::int64_t>();
  std::int64_t n = 0;
  for (std::int64_t b = 0; b < batch_; ++b) {
    if (len[b] < 0 || len[b] > length)
      throw std::invalid_argument("PackedTokens: valid_len[" + std::to_string(b) + "] = " + std::to_string(len[b]) +
                                  " is outside [0, " + std::to_string(length) + "]");
    n += len[b];
  }
  index_ = Tensor::empty({n}, DType::i64);
  std::int64_t* p = index_.data<std::int64_t>();
  for (std::int64_t b = 0; b < batch_; ++b)
    for (std::int64_t t = 0; t < len[b]; ++t) *p++ = b * length + t;
}

namespace {

[[noreturn]] void fail(const char* op, const std::string& why, const Tensor& x, std::int64_t batch, std::int64_t length) {
  throw std::invalid_argument(std::string("PackedTokens::") + op + ": " + why + ": got " + x.shape().str() + " for " +
                              std::to_string(batch) + " rows of length " + std::to_string(length));
}

}  // namespace

Tensor PackedTokens::pack(const Tensor& padded) const {
  if (padded.dim() < 2 || padded.size(0) != batch_ || padded.size(1) != length_)
    fail("pack", "expected (N, length, ...)", padded, batch_, length_);
  Shape rows = padded.shape();
  rows.erase(0);
  rows[0] = batch_ * length_;
  return index_select(reshape(padded, rows), 0, index_);
}

Tensor PackedTokens::unpack(const Tensor& packed) const {
  if (packed.dim() < 1 || packed.size(0) != tokens()) fail("unpack", "expected (tokens, ...)", packed, batch_, length_);
  Shape rows = packed.shape();
  rows[0] = batch_ * length_;
  Shape padded = packed.shape();
  padded[0] = length_;
  padded.insert(0, batch_);
  return reshape(index_add(Tensor::zeros(rows, packed.dtype()), 0, index_, packed), padded);
}

}  // namespace tg::nn
