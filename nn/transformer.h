#pragma once
// torch.nn.TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder, TransformerDecoder
// and Transformer (PyTorch 1.13): the same children, parameter names and order (state_dict keys such
// as "decoder.layers.1.multihead_attn.in_proj_weight"), defaults and forward (post-norm by default,
// pre-norm with norm_first), built from MultiheadAttention, Linear, LayerNorm and Dropout.
//
// Masks are MultiheadAttention's: a bool mask's true entries (an i64 mask's nonzero ones) may NOT be
// attended, as PyTorch's; a floating mask is added to the scores (e.g. generate_square_subsequent_mask).
//
// Stacks copy their layer as PyTorch's _get_clones does with copy.deepcopy: TransformerEncoder(layer, n)
// holds n clones of `layer` (same options, same initial values, own parameters); the prototype itself
// is not registered. Transformer then re-draws every parameter of dim > 1 with xavier_uniform_, as
// torch's _reset_parameters (so the clones' matrices differ, their biases stay equal).
//
// PyTorch's inference fast paths (nested tensors, _transformer_encoder_layer_fwd) are not
// reproduced; they compute the same function.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/tensor.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/multihead_attention.h"
#include "nn/normalization.h"
#include "nn/packed_tokens.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// The feed-forward block's named activations: torch's "relu" and "gelu" (exact), and
/// gelu_tanh (F.gelu(x, approximate="tanh")), silu, tanh and sigmoid, which torch takes as callables.
enum class TransformerActivation { relu, gelu, gelu_tanh, silu, tanh, sigmoid };

/// The `activation` option of the Transformer layers, as torch's argument that takes a string or a
/// callable: converts implicitly from a TransformerActivation or from any callable
/// Tensor(const Tensor&) (a lambda, tg::relu, an nn::GELU module's forward wrapped in a lambda), so
/// `.activation = TransformerActivation::gelu` and `.activation = [](const Tensor& x) { ... }` both
/// work. A callable runs as given on every call (it must be differentiable, and is copied with the
/// options when a stack clones its layer, as torch's deepcopy does).
class TransformerActivationFn {
 public:
  using Function = std::function<Tensor(const Tensor&)>;
  TransformerActivationFn(TransformerActivation kind = TransformerActivation::relu) : kind_(kind) {}  // NOLINT
  template <class F>
    requires(std::is_invocable_r_v<Tensor, const F&, const Tensor&> &&
             !std::is_same_v<std::decay_t<F>, TransformerActivation> &&
             !std::is_same_v<std::decay_t<F>, TransformerActivationFn>)
  TransformerActivationFn(F fn) : fn_(std::move(fn)) {  // NOLINT: implicit, as torch's argument
    if (!fn_) throw std::invalid_argument("TransformerActivationFn: empty callable");
  }

  /// The activation applied to x.
  Tensor operator()(const Tensor& x) const;
  /// Whether this is the named activation `kind` (false for a callable).
  bool operator==(TransformerActivation kind) const { return !fn_ && kind_ == kind; }
  bool is_callable() const { return static_cast<bool>(fn_); }
  /// The named activation; meaningless for a callable.
  TransformerActivation kind() const { return kind_; }
  /// "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid" or "<callable>".
  std::string str() const;

 private:
  TransformerActivation kind_ = TransformerActivation::relu;
  Function fn_;
};

/// Options of TransformerEncoderLayer and TransformerDecoderLayer, named as torch's constructor
/// arguments.
struct TransformerLayerOptions {
  std::int64_t d_model;
  std::int64_t nhead;
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  TransformerActivationFn activation = TransformerActivation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  std::shared_ptr<Generator> generator{};  ///< dropout masks (null: the layer's own Generator(0))
};
using TransformerEncoderLayerOptions = TransformerLayerOptions;
using TransformerDecoderLayerOptions = TransformerLayerOptions;

class TransformerEncoderLayer;
class TransformerDecoderLayer;

/// Children in torch's order: self_attn, linear1 (d_model -> dim_feedforward), dropout, linear2,
/// norm1, norm2, dropout1, dropout2. state_dict keys as torch's ("self_attn.in_proj_weight", ...).
class TransformerEncoderLayerImpl : public Module {
 public:
  using options_type = TransformerEncoderLayerOptions;
  TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options, Generator& gen);

  /// src (S, N, E) ((N, S, E) with batch_first); src_mask (S, S) and src_key_padding_mask (N, S)
  /// as MultiheadAttention's (i64 nonzero = may not attend, or floating, added).
  Tensor forward(const Tensor& src, const Tensor& src_mask = Tensor(), const Tensor& src_key_padding_mask = Tensor());
  /// forward() on packed tokens (nn/packed_tokens.h): src (tokens.tokens(), E) -> (tokens, E), with
  /// the feed-forward block, the norms, the dropouts and the projections run on the tokens only;
  /// masks as forward()'s, over the padded length. The rows equal forward()'s on tokens.unpack(src)
  /// (batch_first) at the tokens' positions when no token attends to a padded position (masked by
  /// src_key_padding_mask, or after it under a causal mask): the padding's keys and values are
  /// zeros here, not projections of the padded input.
  Tensor forward_packed(const Tensor& src, const PackedTokens& tokens, const Tensor& src_mask = Tensor(),
                        const Tensor& src_key_padding_mask = Tensor());
  /// A new layer with the same options, a copy of every parameter (same dtype and requires_grad)
  /// and the same training mode: copy.deepcopy. The clone shares options().generator.
  TransformerEncoderLayer clone() const;
  /// forward() between the forward hooks, which see the three tensors (undefined when omitted).
  Tensor operator()(const Tensor& src, const Tensor& src_mask = Tensor(), const Tensor& src_key_padding_mask = Tensor()) {
    return with_forward_hooks({src, src_mask, src_key_padding_mask},
                              [this](const std::vector<Tensor>& in) { return forward(in[0], in[1], in[2]); });
  }
  std::string extra_repr() const override;
  const TransformerEncoderLayerOptions& options() const { return options_; }

  MultiheadAttention self_attn{nullptr};
  Linear linear1{nullptr}, linear2{nullptr};
  Dropout dropout{nullptr}, dropout1{nullptr}, dropout2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr};

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerEncoderLayerOptions options_;
};
TG_MODULE(TransformerEncoderLayer);

/// What TransformerDecoderLayer::forward_step keeps between steps: the projected keys and values of
/// the target positions seen so far, and of the memory (projected at the first step).
struct TransformerDecoderLayerCache {
  Tensor self_key, self_value;      ///< (N, nhead, T, d_model / nhead)
  Tensor memory_key, memory_value;  ///< (N, nhead, S, d_model / nhead)
  /// The rows of in_proj_weight / in_proj_bias for self q, k, v and cross q, cut at the first step
  /// rather than at every step: views sharing the parameters' buffers (not copies), marked with
  /// autocast::mark_cacheable, so that under autocast their bf16 copies are cached as the
  /// parameters' are (renewed when a parameter is written in place, kept across decodes).
  Tensor projection_weights[4], projection_biases[4];
  /// Target positions seen so far (T).
  std::int64_t length() const { return self_key.defined() ? self_key.size(2) : 0; }
};

/// Children in torch's order: self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2,
/// norm3, dropout1, dropout2, dropout3.
class TransformerDecoderLayerImpl : public Module {
 public:
  using options_type = TransformerDecoderLayerOptions;
  TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options, Generator& gen);

  /// tgt (T, N, E) and memory (S, N, E) ((N, T, E), (N, S, E) with batch_first; unbatched (T, E),
  /// (S, E)) -> like tgt. tgt_mask (T, T), memory_mask (T, S), tgt_key_padding_mask (N, T),
  /// memory_key_padding_mask (N, S), as MultiheadAttention's; undefined = none. With
  /// `memory_weights`, the cross-attention (multihead_attn) weights per head go there: (N, nhead, T, S)
  /// (before attention dropout; differentiable). Costs nothing when null.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), Tensor* memory_weights = nullptr);
  /// forward() on packed tokens, as TransformerEncoderLayer::forward_packed (the same condition for
  /// equal rows, in both attentions): tgt (tgt_tokens.tokens(), E) and memory
  /// (memory_tokens.tokens(), E) -> (tgt tokens, E). Masks as forward()'s.
  Tensor forward_packed(const Tensor& tgt, const PackedTokens& tgt_tokens, const Tensor& memory,
                        const PackedTokens& memory_tokens, const Tensor& tgt_mask = Tensor(),
                        const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                        const Tensor& memory_key_padding_mask = Tensor());
  /// forward() between the forward hooks, which see the six tensors (undefined when omitted).
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                    const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                    const Tensor& memory_key_padding_mask = Tensor()) {
    return with_forward_hooks({tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask},
                              [this](const std::vector<Tensor>& in) {
                                return forward(in[0], in[1], in[2], in[3], in[4], in[5]);
                              });
  }

  /// Incremental decoding: `tgt` holds only the new positions (T_new, N, E) (batch_first:
  /// (N, T_new, E)); they attend causally to themselves and to every position already in `cache`,
  /// whose self-attention keys and values are appended to. Equals the rows of forward() with a
  /// causal tgt_mask (no tgt_key_padding_mask) for those positions, at the cost of the new rows
  /// only. The memory's keys and values are projected at the first call and reused: pass the same
  /// memory each step, or a fresh cache for a new one. No attention dropout here, so this throws in
  /// training mode with dropout > 0 (use forward() to train). Batched inputs only; no memory_mask
  /// or tgt_key_padding_mask. Each step appends to the cache with concat (a copy of the cache).
  /// `memory_weights` as in forward(): (N, nhead, T_new, S).
  Tensor forward_step(const Tensor& tgt, const Tensor& memory, TransformerDecoderLayerCache& cache,
                      const Tensor& memory_key_padding_mask = Tensor(), Tensor* memory_weights = nullptr);

  /// As TransformerEncoderLayer::clone.
  TransformerDecoderLayer clone() const;
  std::string extra_repr() const override;
  const TransformerDecoderLayerOptions& options() const { return options_; }

  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  Linear linear1{nullptr}, linear2{nullptr};
  Dropout dropout{nullptr}, dropout1{nullptr}, dropout2{nullptr}, dropout3{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};

 private:
  /// The three residual blocks, post-norm or pre-norm, shared by forward and forward_step (a
  /// template, not std::function: a step allocates nothing for the blocks).
  template <class SelfBlock, class CrossBlock>
  Tensor residual_blocks(Tensor x, const SelfBlock& self_block, const CrossBlock& cross_block);
  Tensor feed_forward(const Tensor& x);
  TransformerDecoderLayerOptions options_;
};
TG_MODULE(TransformerDecoderLayer);

/// torch.nn.TransformerEncoder(encoder_layer, num_layers, norm=None): children "layers" (a
/// ModuleList of num_layers clones of encoder_layer) and, when given, "norm" applied after the
/// last layer. (enable_nested_tensor and mask_check concern torch's fast path only.)
class TransformerEncoderImpl : public Module {
 public:
  TransformerEncoderImpl(const TransformerEncoderLayer& encoder_layer, std::int64_t num_layers,
                         LayerNorm norm = nullptr);

  /// As TransformerEncoderLayer::forward, through every layer, then norm.
  Tensor forward(const Tensor& src, const Tensor& mask = Tensor(), const Tensor& src_key_padding_mask = Tensor());
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }
  /// Layer `i` (0-based) with its own type.
  const TransformerEncoderLayer& layer(std::int64_t i) const { return layers_.at(i); }

  ModuleList layers{nullptr};
  LayerNorm norm{nullptr};  ///< empty without a final norm

 private:
  std::vector<TransformerEncoderLayer> layers_;
};
TG_MODULE(TransformerEncoder);

/// One TransformerDecoderLayerCache per layer of a TransformerDecoder.
struct TransformerDecoderCache {
  std::vector<TransformerDecoderLayerCache> layers;
  /// Target positions seen so far.
  std::int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
};

/// torch.nn.TransformerDecoder(decoder_layer, num_layers, norm=None): children "layers" and
/// optional "norm", as TransformerEncoder.
class TransformerDecoderImpl : public Module {
 public:
  TransformerDecoderImpl(const TransformerDecoderLayer& decoder_layer, std::int64_t num_layers,
                         LayerNorm norm = nullptr);

  /// As TransformerDecoderLayer::forward, through every layer, then norm.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor());
  /// As TransformerDecoderLayer::forward_step through every layer (cache.layers is sized on first
  /// use), then norm.
  Tensor forward_step(const Tensor& tgt, const Tensor& memory, TransformerDecoderCache& cache,
                      const Tensor& memory_key_padding_mask = Tensor());
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }
  const TransformerDecoderLayer& layer(std::int64_t i) const { return layers_.at(i); }

  ModuleList layers{nullptr};
  LayerNorm norm{nullptr};  ///< empty without a final norm

 private:
  std::vector<TransformerDecoderLayer> layers_;
};
TG_MODULE(TransformerDecoder);

/// Options of Transformer, named and defaulted as torch's constructor arguments (custom_encoder and
/// custom_decoder are not offered).
struct TransformerOptions {
  std::int64_t d_model = 512;
  std::int64_t nhead = 8;
  std::int64_t num_encoder_layers = 6;
  std::int64_t num_decoder_layers = 6;
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  TransformerActivationFn activation = TransformerActivation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  std::shared_ptr<Generator> generator{};  ///< dropout masks (null: the model's own Generator(0))
};

/// Transformer::forward's optional masks, in torch's argument order (designated initializers:
/// model.forward(src, tgt, {.tgt_mask = m, .src_key_padding_mask = p})).
struct TransformerMasks {
  Tensor src_mask{}, tgt_mask{}, memory_mask{};
  Tensor src_key_padding_mask{}, tgt_key_padding_mask{}, memory_key_padding_mask{};
};

/// torch.nn.Transformer: children "encoder" (TransformerEncoder with a final "norm") and "decoder"
/// (TransformerDecoder with a final "norm"); both norms exist whatever norm_first, as in torch.
class TransformerImpl : public Module {
 public:
  using options_type = TransformerOptions;
  TransformerImpl(const TransformerOptions& options, Generator& gen);

  /// src (S, N, E), tgt (T, N, E) ((N, S, E), (N, T, E) with batch_first) -> (T, N, E): the decoder
  /// over the encoder's output. Throws std::invalid_argument when the batch sizes differ or a
  /// feature size is not d_model.
  Tensor forward(const Tensor& src, const Tensor& tgt, const TransformerMasks& masks = {});
  /// (sz, sz) float mask: 0 on and below the diagonal, -inf above (torch's; a causal tgt_mask).
  static Tensor generate_square_subsequent_mask(std::int64_t sz, DType dtype = DType::f32);
  std::string extra_repr() const override;
  const TransformerOptions& options() const { return options_; }

  TransformerEncoder encoder{nullptr};
  TransformerDecoder decoder{nullptr};

 private:
  TransformerOptions options_;
};
/// Holder of a TransformerImpl, with its static generate_square_subsequent_mask, so that
/// nn::Transformer::generate_square_subsequent_mask(4) reads as torch's.
class Transformer : public ModuleHolder<TransformerImpl> {
 public:
  using ModuleHolder<TransformerImpl>::ModuleHolder;
  using Impl = TransformerImpl;
  static Tensor generate_square_subsequent_mask(std::int64_t sz, DType dtype = DType::f32) {
    return TransformerImpl::generate_square_subsequent_mask(sz, dtype);
  }
};

}  // namespace tg::nn
