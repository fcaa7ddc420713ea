#include "nn/packed_tokens.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "autograd/dtype.h"
#include "autograd/parallel.h"
#include "autograd/tape.h"

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
  offsets_ = Tensor::empty({batch_ + 1}, DType::i64);
  std::int64_t* p = index_.data<std::int64_t>();
  std::int64_t* offset = offsets_.data<std::int64_t>();
  offset[0] = 0;
  for (std::int64_t b = 0; b < batch_; ++b) {
    for (std::int64_t t = 0; t < len[b]; ++t) *p++ = b * length + t;
    offset[b + 1] = offset[b] + len[b];
  }
}

namespace {

[[noreturn]] void fail(const char* op, const std::string& why, const Tensor& x, std::int64_t batch, std::int64_t length) {
  throw std::invalid_argument(std::string("PackedTokens::") + op + ": " + why + ": got " + x.shape().str() + " for " +
                              std::to_string(batch) + " rows of length " + std::to_string(length));
}

// pack and unpack are copies: a row's tokens are consecutive both in the packed matrix and at the
// start of its padded row, so each batch row is one block copy (and unpack's padding one fill).
enum class Direction { pack, unpack };

/// Copies between packed (tokens, ...) and padded (N, length, ...) data; `row_bytes` per token.
void copy_rows(Direction dir, const char* src, char* dst, const Tensor& offset_tensor, std::int64_t length,
               std::size_t row_bytes) {
  const std::int64_t batch = offset_tensor.numel() - 1;
  const std::int64_t* offsets = offset_tensor.data<std::int64_t>();
  const auto padded_row = static_cast<std::size_t>(length) * row_bytes;
  // About 256 KiB of output per task.
  const std::int64_t grain = std::max<std::int64_t>(1, static_cast<std::int64_t>((std::size_t{1} << 18) / std::max<std::size_t>(padded_row, 1)));
  tg::parallel_for(batch, grain, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const auto first = static_cast<std::size_t>(offsets[b]);
      const std::size_t bytes = static_cast<std::size_t>(offsets[b + 1] - offsets[b]) * row_bytes;
      const std::size_t padded_at = static_cast<std::size_t>(b) * padded_row, packed_at = first * row_bytes;
      if (dir == Direction::unpack) {
        if (bytes) std::memcpy(dst + padded_at, src + packed_at, bytes);
        std::memset(dst + padded_at + bytes, 0, padded_row - bytes);  // all-zero bits: 0.0 in every dtype
      } else if (bytes) {
        std::memcpy(dst + packed_at, src + padded_at, bytes);
      }
    }
  });
}

Tensor copied(Direction dir, const Tensor& x, const Shape& shape, const Tensor& offsets, std::int64_t length) {
  Tensor y = Tensor::empty(shape, x.dtype());
  const std::int64_t rows = dir == Direction::pack ? y.size(0) : x.size(0);
  const std::size_t row_bytes =
      rows > 0 ? static_cast<std::size_t>((dir == Direction::pack ? y.numel() : x.numel()) / rows) * dtype_size(x.dtype()) : 0;
  copy_rows(dir, static_cast<const char*>(x.data_ptr()), static_cast<char*>(y.data_ptr()), offsets, length, row_bytes);
  return y;
}

}  // namespace

Tensor PackedTokens::pack(const Tensor& padded) const {
  if (padded.dim() < 2 || padded.size(0) != batch_ || padded.size(1) != length_)
    fail("pack", "expected (N, length, ...)", padded, batch_, length_);
  Shape rows = padded.shape();
  rows.erase(0);
  rows[0] = tokens();
  const PackedTokens self = *this;
  return record("packed_tokens_pack", copied(Direction::pack, padded, rows, offsets_, length_), {padded},
                [self](BackwardContext& ctx) { ctx.accumulate(0, self.unpack(ctx.grad_output())); },
                [self](GradGraphContext& ctx) { ctx.accumulate(0, self.unpack(ctx.grad_output())); });
}

Tensor PackedTokens::unpack(const Tensor& packed) const {
  if (packed.dim() < 1 || packed.size(0) != tokens()) fail("unpack", "expected (tokens, ...)", packed, batch_, length_);
  Shape padded = packed.shape();
  padded[0] = length_;
  padded.insert(0, batch_);
  const PackedTokens self = *this;
  return record("packed_tokens_unpack", copied(Direction::unpack, packed, padded, offsets_, length_), {packed},
                [self](BackwardContext& ctx) { ctx.accumulate(0, self.pack(ctx.grad_output())); },
                [self](GradGraphContext& ctx) { ctx.accumulate(0, self.pack(ctx.grad_output())); });
}

}  // namespace tg::nn
