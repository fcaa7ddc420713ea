#include "nn/embedding.h"

#include <stdexcept>
#include <vector>

#include "autograd/ops_index.h"
#include "nn/init.h"

namespace tg::nn {

EmbeddingImpl::EmbeddingImpl(std::int64_t num_embeddings, std::int64_t embedding_dim, Generator& gen,
                             std::optional<std::int64_t> padding_idx)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  if (num_embeddings <= 0 || embedding_dim <= 0)
    throw std::invalid_argument("Embedding: num_embeddings and embedding_dim must be positive, got " +
                                std::to_string(num_embeddings) + " and " + std::to_string(embedding_dim));
  if (padding_idx) {
    const std::int64_t p = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
    if (p < 0 || p >= num_embeddings)
      throw std::invalid_argument("Embedding: padding_idx " + std::to_string(*padding_idx) +
                                  " is out of range for num_embeddings=" + std::to_string(num_embeddings));
    padding_idx_ = p;
  }
  weight = register_parameter("weight", Tensor::empty({num_embeddings, embedding_dim}));
  init::normal_(weight, gen);
  if (padding_idx_) {  // the weight is freshly made float32: zero the row in its buffer
    float* row = weight.data<float>() + *padding_idx_ * embedding_dim;
    for (std::int64_t j = 0; j < embedding_dim; ++j) row[j] = 0.0f;
  }
}

Tensor EmbeddingImpl::forward(const Tensor& ids) const {
  if (ids.dtype() != DType::i64)
    throw std::invalid_argument("Embedding: ids must be i64, got " + std::string(dtype_name(ids.dtype())) +
                                " of shape " + ids.shape().str());
  Tensor y = tg::embedding(weight, ids);
  if (!padding_idx_ || !y.requires_grad()) return y;
  // Padding positions take the detached value: the padding row gets no gradient.
  const std::int64_t* id = ids.data<std::int64_t>();
  bool any = false;
  std::vector<std::int64_t> is_pad(static_cast<std::size_t>(ids.numel()));
  for (std::int64_t i = 0; i < ids.numel(); ++i) any |= (is_pad[i] = id[i] == *padding_idx_) != 0;
  if (!any) return y;
  Shape mask_shape = ids.shape();
  mask_shape.push_back(1);
  return tg::where(Tensor::from_vector(is_pad, mask_shape), y.detach(), y);
}

std::string EmbeddingImpl::extra_repr() const {
  std::string s = std::to_string(num_embeddings_) + ", " + std::to_string(embedding_dim_);
  if (padding_idx_) s += ", padding_idx=" + std::to_string(*padding_idx_);
  return s;
}

}  // namespace tg::nn
