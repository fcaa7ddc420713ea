#pragma once
// torch.nn.TransformerEncoderLayer (PyTorch 1.13): the same children, parameter names and order,
// defaults and forward (post-norm by default, pre-norm with norm_first), built from
// MultiheadAttention, Linear, LayerNorm and Dropout.
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/tensor.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/multihead_attention.h"
#include "nn/normalization.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// The feed-forward block's activation (torch's "relu" | "gelu").
enum class TransformerActivation { relu, gelu };

/// Options of TransformerEncoderLayer, named as torch's constructor arguments.
struct TransformerEncoderLayerOptions {
  std::int64_t d_model;
  std::int64_t nhead;
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  TransformerActivation activation = TransformerActivation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  std::shared_ptr<Generator> generator;  ///< dropout masks (null: the layer's own Generator(0))
};

/// Children in torch's order: self_attn, linear1 (d_model -> dim_feedforward), dropout, linear2,
/// norm1, norm2, dropout1, dropout2. state_dict keys as torch's ("self_attn.in_proj_weight", ...).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(const TransformerEncoderLayerOptions& options, Generator& gen);

  /// src (S, N, E) ((N, S, E) with batch_first); src_mask (S, S) and src_key_padding_mask (N, S)
  /// as MultiheadAttention's (i64 nonzero = may not attend, or floating, added).
  Tensor forward(const Tensor& src, const Tensor& src_mask = Tensor(), const Tensor& src_key_padding_mask = Tensor());
  /// forward() between the forward hooks, which see the three tensors (undefined when omitted).
  Tensor operator()(const Tensor& src, const Tensor& src_mask = Tensor(), const Tensor& src_key_padding_mask = Tensor()) {
    return with_forward_hooks({src, src_mask, src_key_padding_mask},
                              [this](const std::vector<Tensor>& in) { return forward(in[0], in[1], in[2]); });
  }
  std::string extra_repr() const override;
  const TransformerEncoderLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerEncoderLayerOptions options_;
};

}  // namespace tg::nn
