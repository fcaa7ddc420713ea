#pragma once
// Embedding: a lookup table of vectors, as torch.nn.Embedding.
#include <cstdint>
#include <optional>
#include <string>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// torch.nn.Embedding: parameter "weight" (num_embeddings, embedding_dim) ~ N(0, 1) from `gen`.
///
/// padding_idx (negative counts from the end, as PyTorch): that row is zeroed at construction and
/// never receives a gradient. tg::embedding scatter-adds into every looked-up row, so forward()
/// routes the padding positions of the output through a detached copy (tg::where on ids ==
/// padding_idx): same values, zero gradient contribution to that row, as PyTorch's
/// embedding_backward which skips padding_idx.
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(std::int64_t num_embeddings, std::int64_t embedding_dim, Generator& gen,
                std::optional<std::int64_t> padding_idx = std::nullopt);

  /// i64 ids of any shape -> ids.shape + (embedding_dim). Throws for ids out of range.
  Tensor forward(const Tensor& ids) const;
  Tensor operator()(const Tensor& ids) const { return with_forward_hooks(ids, [this](const Tensor& v) { return forward(v); }); }

  std::int64_t num_embeddings() const { return num_embeddings_; }
  std::int64_t embedding_dim() const { return embedding_dim_; }
  /// The padding row (already made non-negative), if any.
  std::optional<std::int64_t> padding_idx() const { return padding_idx_; }
  std::string extra_repr() const override;

  Tensor weight;  ///< (num_embeddings, embedding_dim)

 private:
  std::int64_t num_embeddings_, embedding_dim_;
  std::optional<std::int64_t> padding_idx_;
};
TG_MODULE(Embedding);

}  // namespace tg::nn
