// Fused additive (Bahdanau) attention scores. The composite
//   w_v(tanh(unsqueeze(query, 2) + unsqueeze(keys, 1))).squeeze(-1)
// materialises two (B, Q, K, H) tensors per decoder step and runs a GEMM with one output column;
// its backward allocates a (B, K, H) key gradient per step and adds it to the running one. Here the
// forward is one pass of tanh + dot products, and the backward recomputes tanh (cheaper than
// keeping (B, Q, K, H) per step alive until backward) and adds straight into the key gradient.
// tanh is kernels::gate_tanh (rational in float32, see kernels/fast_math.h), the same function
// forward and backward, so the recomputed values equal the forward's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/fast_math.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_compare.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/random.h"
#include "autograd/tape.h"

namespace tg {

namespace {

template <class T> using Batch = xsimd::batch<T>;
constexpr const char* kOp = "additive_attention_scores";

// Σ_h w[h] tanh(q[h] + k[h])
template <class T>
T score(const T* q, const T* k, const T* w, std::int64_t H) {
  constexpr std::int64_t W = Batch<T>::size;
  Batch<T> acc(T(0));
  std::int64_t h = 0;
  for (; h + W <= H; h += W)
    acc = xsimd::fma(Batch<T>::load_unaligned(w + h),
                     kernels::gate_tanh(Batch<T>::load_unaligned(q + h) + Batch<T>::load_unaligned(k + h)), acc);
  T s = xsimd::hadd(acc);
  for (; h < H; ++h) s += w[h] * kernels::gate_tanh(q[h] + k[h]);
  return s;
}

// With t = tanh(q + k) and u = c w (1 - t²): dk += u, dq += u, dw += c t.
template <class T>
void score_backward(T c, const T* q, const T* k, const T* w, T* dk, T* dq, T* dw, std::int64_t H) {
  constexpr std::int64_t W = Batch<T>::size;
  const Batch<T> cb(c), one(T(1));
  std::int64_t h = 0;
  for (; h + W <= H; h += W) {
    const Batch<T> t = kernels::gate_tanh(Batch<T>::load_unaligned(q + h) + Batch<T>::load_unaligned(k + h));
    const Batch<T> u = cb * Batch<T>::load_unaligned(w + h) * xsimd::fnma(t, t, one);
    if (dk) (Batch<T>::load_unaligned(dk + h) + u).store_unaligned(dk + h);
    if (dq) (Batch<T>::load_unaligned(dq + h) + u).store_unaligned(dq + h);
    if (dw) xsimd::fma(cb, t, Batch<T>::load_unaligned(dw + h)).store_unaligned(dw + h);
  }
  for (; h < H; ++h) {
    const T t = kernels::gate_tanh(q[h] + k[h]);
    const T u = c * w[h] * (T(1) - t * t);
    if (dk) dk[h] += u;
    if (dq) dq[h] += u;
    if (dw) dw[h] += c * t;
  }
}

void check_shapes(const Tensor& query, const Tensor& keys, const Tensor& w) {
  for (const auto& [what, x] : {std::pair<const char*, const Tensor*>{"query", &query}, {"keys", &keys}, {"w", &w}}) {
    if (!x->defined()) throw std::invalid_argument(std::string(kOp) + ": " + what + " is undefined");
    if (!is_floating(x->dtype()))
      throw std::invalid_argument(std::string(kOp) + ": expects floating-point tensors, got " + what + " of dtype " +
                                  std::string(dtype_name(x->dtype())));
  }
  const bool ok = query.dim() == 3 && keys.dim() == 3 && w.dim() == 1 && query.size(0) == keys.size(0) &&
                  query.size(2) == keys.size(2) && w.size(0) == query.size(2);
  if (!ok)
    throw std::invalid_argument(std::string(kOp) + ": expects query (B, Q, H), keys (B, K, H) and w (H), got query " +
                                query.shape().str() + ", keys " + keys.shape().str() + " and w " + w.shape().str());
  if (query.dtype() != keys.dtype() || query.dtype() != w.dtype())
    throw std::invalid_argument(std::string(kOp) + ": dtypes differ: query " + std::string(dtype_name(query.dtype())) +
                                ", keys " + std::string(dtype_name(keys.dtype())) + ", w " +
                                std::string(dtype_name(w.dtype())));
}

// Batch entries per task: enough tanh work per task to pay for it (kGrainTranscendental elements).
std::int64_t batch_grain(std::int64_t per_entry) {
  return std::max<std::int64_t>(1, kernels::kGrainTranscendental / std::max<std::int64_t>(1, per_entry));
}

}  // namespace

Tensor additive_attention_scores(const Tensor& query, const Tensor& keys, const Tensor& w) {
  check_shapes(query, keys, w);
  const std::int64_t B = keys.size(0), Q = query.size(1), K = keys.size(1), H = keys.size(2);
  Tensor scores = Tensor::empty({B, Q, K}, keys.dtype());
  kernels::dispatch_floating(kOp, keys.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *pq = query.data<T>(), *pk = keys.data<T>(), *pw = w.data<T>();
    T* ps = scores.data<T>();
    kernels::parallel_for(B * Q, batch_grain(K * H), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t row = begin; row < end; ++row) {
        const std::int64_t b = row / Q;
        for (std::int64_t k = 0; k < K; ++k) ps[row * K + k] = score(pq + row * H, pk + (b * K + k) * H, pw, H);
      }
    });
  });
  return record(kOp, scores, {query, keys, w},
                [query = query.detach(), keys = keys.detach(), w = w.detach()](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const std::int64_t B = keys.size(0), Q = query.size(1), K = keys.size(1), H = keys.size(2);
    Tensor dq = ctx.needs_grad(0) ? Tensor::zeros(query.shape(), query.dtype()) : Tensor();
    // dw: one partial row per batch entry, summed in batch order so that the result does not
    // depend on how the entries were split between threads.
    Tensor dw_parts = ctx.needs_grad(2) ? Tensor::zeros({B, H}, keys.dtype()) : Tensor();
    // One pass computes all three; the keys (read at every decoder step) take theirs in place.
    auto run = [&](Tensor* dk) {
      kernels::dispatch_floating(kOp, keys.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T *pg = g.data<T>(), *pq = query.data<T>(), *pk = keys.data<T>(), *pw = w.data<T>();
        T* pdq = dq.defined() ? dq.data<T>() : nullptr;
        T* pdk = dk ? dk->data<T>() : nullptr;
        T* pdw = dw_parts.defined() ? dw_parts.data<T>() : nullptr;
        kernels::parallel_for(B, batch_grain(Q * K * H), [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t b = begin; b < end; ++b)
            for (std::int64_t q = 0; q < Q; ++q) {
              const std::int64_t row = b * Q + q;
              for (std::int64_t k = 0; k < K; ++k) {
                const T c = pg[row * K + k];
                if (c == T(0)) continue;  // masked positions: nothing flows back
                score_backward(c, pq + row * H, pk + (b * K + k) * H, pw, pdk ? pdk + (b * K + k) * H : nullptr,
                               pdq ? pdq + row * H : nullptr, pdw ? pdw + b * H : nullptr, H);
              }
            }
        });
      });
    };
    if (ctx.needs_grad(1)) ctx.accumulate(1, [&](Tensor& dk) { run(&dk); });
    else run(nullptr);
    if (dq.defined()) ctx.accumulate(0, std::move(dq));
    if (dw_parts.defined()) ctx.accumulate(2, sum(dw_parts, {0}));
  }, [query, keys, w](GradGraphContext& ctx) {  // the composed scores, differentiated
    ctx.backward_through(sum(tanh(unsqueeze(query, 2) + unsqueeze(keys, 1)) * w, {3}));
  });
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal, double scale,
                                    Generator* gen, Tensor* weights) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("scaled_dot_product_attention: " + why + ": query " + query.shape().str() + ", key " +
                                key.shape().str() + ", value " + value.shape().str() +
                                (attn_mask.defined() ? ", attn_mask " + attn_mask.shape().str() : std::string()));
  };
  if (query.dim() < 2 || key.dim() < 2 || value.dim() < 2) fail("query, key and value need at least 2 dims");
  if (query.size(-1) != key.size(-1)) fail("query and key differ in their last dim");
  if (key.size(-2) != value.size(-2)) fail("key and value differ in length");
  if (!(dropout_p >= 0.0 && dropout_p < 1.0)) fail("dropout_p must be in [0, 1)");
  if (dropout_p > 0.0 && gen == nullptr) fail("dropout_p > 0 needs a generator");
  if (is_causal && attn_mask.defined()) fail("is_causal and attn_mask together");
  const std::int64_t L = query.size(-2), S = key.size(-2);
  const double s = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  Tensor scores = matmul(query, transpose(key, -2, -1)) * s;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) scores = masked_fill(scores, triu(Tensor::ones({L, S}, DType::i64), 1), neg_inf);
  if (attn_mask.defined()) {
    if (!is_floating(attn_mask.dtype())) {
      scores = masked_fill(scores, logical_not(attn_mask), neg_inf);  // masked_fill wants true = blocked
    } else {
      scores = scores + attn_mask;
    }
  }
  Tensor attn = softmax(scores, -1);
  if (weights) *weights = attn;
  if (dropout_p > 0.0) attn = dropout(attn, dropout_p, *gen, true);
  return matmul(attn, value);
}

}  // namespace tg
