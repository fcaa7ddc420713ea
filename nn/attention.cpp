#include "nn/attention.h"

#include <cmath>
#include <stdexcept>

#include "autograd/ops_attention.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"

namespace tg::nn {

namespace {

std::string shape_str(const Tensor& t) { return t.defined() ? t.shape().str() : "undefined"; }

/// Checks queries (B, Q, ·), keys (B, K, ·), values (B, K, ·) of one floating dtype.
void check_qkv(const char* who, const Tensor& q, const Tensor& k, const Tensor& v) {
  const bool ok = q.defined() && k.defined() && v.defined() && q.dim() == 3 && k.dim() == 3 && v.dim() == 3 &&
                  k.size(0) == q.size(0) && v.size(0) == q.size(0) && v.size(1) == k.size(1);
  if (!ok)
    throw std::invalid_argument(std::string(who) + ": expected queries (B, Q, q), keys (B, K, k), values (B, K, v), got " +
                                shape_str(q) + ", " + shape_str(k) + ", " + shape_str(v));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw std::invalid_argument(std::string(who) + ": queries, keys and values must have one dtype, got " +
                                std::string(dtype_name(q.dtype())) + ", " + std::string(dtype_name(k.dtype())) + ", " +
                                std::string(dtype_name(v.dtype())));
}

void check_dropout(const char* who, double p) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument(std::string(who) + ": dropout must be in [0, 1), got " + std::to_string(p));
}

}  // namespace

// ---- additive ------------------------------------------------------------------------------------

AdditiveAttentionImpl::AdditiveAttentionImpl(const AdditiveAttentionOptions& options, Generator& gen)
    : options_(options) {
  if (options.key_size() <= 0 || options.query_size() <= 0 || options.num_hiddens() <= 0)
    throw std::invalid_argument("AdditiveAttention: key_size, query_size and num_hiddens must be positive, got " +
                                std::to_string(options.key_size()) + ", " + std::to_string(options.query_size()) +
                                ", " + std::to_string(options.num_hiddens()));
  check_dropout("AdditiveAttention", options.dropout());
  W_k = register_module("W_k", Linear(options.key_size(), options.num_hiddens(), gen, false));
  W_q = register_module("W_q", Linear(options.query_size(), options.num_hiddens(), gen, false));
  w_v = register_module("w_v", Linear(options.num_hiddens(), 1, gen, false));
  dropout = register_module("dropout", Dropout(options.dropout(), options.generator()));
}

AdditiveAttentionImpl::AdditiveAttentionImpl(std::int64_t key_size, std::int64_t query_size, std::int64_t num_hiddens,
                                             double dropout, Generator& gen)
    : AdditiveAttentionImpl(AdditiveAttentionOptions(key_size, query_size, num_hiddens).dropout(dropout), gen) {}

Tensor AdditiveAttentionImpl::project_queries(const Tensor& queries) const { return W_q->forward(queries); }
Tensor AdditiveAttentionImpl::project_keys(const Tensor& keys) const { return W_k->forward(keys); }

Tensor AdditiveAttentionImpl::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                      const Tensor& valid_lens) {
  check_qkv("AdditiveAttention", queries, keys, values);
  return forward_projected(project_queries(queries), project_keys(keys), values, valid_lens);
}

Tensor AdditiveAttentionImpl::forward_projected(const Tensor& query_proj, const Tensor& key_proj, const Tensor& values,
                                                const Tensor& valid_lens, Tensor* weights_out) {
  check_qkv("AdditiveAttention", query_proj, key_proj, values);
  if (query_proj.size(2) != options_.num_hiddens() || key_proj.size(2) != options_.num_hiddens())
    throw std::invalid_argument("AdditiveAttention: projected queries and keys must end in num_hiddens=" +
                                std::to_string(options_.num_hiddens()) + ", got " + query_proj.shape().str() +
                                " and " + key_proj.shape().str());
  // w_v(tanh(q + k)) for every (query, key) pair, fused: no (B, Q, K, H) intermediate.
  const Tensor scores =
      additive_attention_scores(query_proj, key_proj, reshape(w_v->weight, {options_.num_hiddens()}));
  const Tensor weights = masked_softmax(scores, valid_lens);
  (weights_out ? *weights_out : attention_weights_) = weights.detach();
  return matmul(dropout->forward(weights), values);
}

// ---- dot product ---------------------------------------------------------------------------------

DotProductAttentionImpl::DotProductAttentionImpl(const DotProductAttentionOptions& options) : options_(options) {
  check_dropout("DotProductAttention", options.dropout());
  dropout = register_module("dropout", Dropout(options.dropout(), options.generator()));
}

DotProductAttentionImpl::DotProductAttentionImpl(double dropout, bool scaled)
    : DotProductAttentionImpl(DotProductAttentionOptions().dropout(dropout).scaled(scaled)) {}

Tensor DotProductAttentionImpl::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                        const Tensor& valid_lens, Tensor* weights_out) {
  check_qkv("DotProductAttention", queries, keys, values);
  if (keys.size(2) != queries.size(2))
    throw std::invalid_argument("DotProductAttention: queries and keys must have the same last dimension, got " +
                                queries.shape().str() + " and " + keys.shape().str());
  Tensor scores = matmul(queries, transpose(keys, 1, 2));  // (B, Q, K)
  if (options_.scaled()) scores = scores / std::sqrt(static_cast<double>(queries.size(2)));
  const Tensor weights = masked_softmax(scores, valid_lens);
  (weights_out ? *weights_out : attention_weights_) = weights.detach();
  return matmul(dropout->forward(weights), values);
}

std::string DotProductAttentionImpl::extra_repr() const { return options_.scaled() ? "scaled=true" : "scaled=false"; }

}  // namespace tg::nn
