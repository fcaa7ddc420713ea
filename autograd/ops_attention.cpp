// Fused additive (Bahdanau) attention scores. The composite
//   w_v(tanh(unsqueeze(query, 2) + unsqueeze(keys, 1))).squeeze(-1)
// materialises two (B, Q, K, H) tensors per decoder step and runs a GEMM with one output column;
// its backward allocates a (B, K, H) key gradient per step and adds it to the running one. Here the
// forward is one pass of tanh + dot products, and the backward recomputes tanh (cheaper than
// keeping (B, Q, K, H) per step alive until backward) and adds straight into the key gradient.
// tanh is kernels::gate_tanh (rational in float32, see kernels/fast_math.h), the same function
// forward and backward, so the recomputed values equal the forward's.
//
// scaled_dot_product_attention: argument checks, the mask's interpretation (mask_arg, the one
// place that reads a mask's dtype) and the broadcast of batch dims into per-problem offsets are
// here; the tiled kernels are in kernels/attention.cpp. The composite, kept as
// scaled_dot_product_attention_composed, serves the attention weights and differentiable masks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/attention.h"
#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/fast_math.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/kernels/reduce.h"
#include "autograd/memory.h"
#include "autograd/ops_attention.h"
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

// Shapes first, then dtypes: one floating dtype for all three, no promotion (as the other fused
// ops, linear and layer_norm). Dtype errors name each operand's dtype and shape, as linear's.
void check_shapes(const Tensor& query, const Tensor& keys, const Tensor& w) {
  for (const auto& [what, x] : {std::pair<const char*, const Tensor*>{"query", &query}, {"keys", &keys}, {"w", &w}})
    if (!x->defined()) throw std::invalid_argument(std::string(kOp) + ": " + what + " is undefined");
  const bool ok = query.dim() == 3 && keys.dim() == 3 && w.dim() == 1 && query.size(0) == keys.size(0) &&
                  query.size(2) == keys.size(2) && w.size(0) == query.size(2);
  if (!ok)
    throw std::invalid_argument(std::string(kOp) + ": expects query (B, Q, H), keys (B, K, H) and w (H), got query " +
                                query.shape().str() + ", keys " + keys.shape().str() + " and w " + w.shape().str());
  const bool same = query.dtype() == keys.dtype() && query.dtype() == w.dtype();
  if (!same || !is_floating(query.dtype()))
    throw std::invalid_argument(std::string(kOp) + ": " + (same ? "needs floating tensors" : "dtypes differ") +
                                ": query " + std::string(dtype_name(query.dtype())) + " " + query.shape().str() +
                                ", keys " + std::string(dtype_name(keys.dtype())) + " " + keys.shape().str() + ", w " +
                                std::string(dtype_name(w.dtype())) + " " + w.shape().str());
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

namespace {

constexpr const char* kSdpa = "scaled_dot_product_attention";

[[noreturn]] void sdpa_fail(const std::string& why, const Tensor& query, const Tensor& key, const Tensor& value,
                            const Tensor& attn_mask) {
  throw std::invalid_argument(std::string(kSdpa) + ": " + why + ": query " + query.shape().str() + ", key " +
                              key.shape().str() + ", value " + value.shape().str() +
                              (attn_mask.defined() ? ", attn_mask " + attn_mask.shape().str() : std::string()));
}

void check_sdpa(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask, double dropout_p,
                bool is_causal, const Generator* gen) {
  auto fail = [&](const std::string& why) { sdpa_fail(why, query, key, value, attn_mask); };
  if (!query.defined() || !key.defined() || !value.defined())
    throw std::invalid_argument(std::string(kSdpa) + ": query, key and value must be defined");
  if (query.dim() < 2 || key.dim() < 2 || value.dim() < 2) fail("query, key and value need at least 2 dims");
  if (query.size(-1) != key.size(-1)) fail("query and key differ in their last dim");
  if (key.size(-2) != value.size(-2)) fail("key and value differ in length");
  if (!(dropout_p >= 0.0 && dropout_p < 1.0)) fail("dropout_p must be in [0, 1)");
  if (dropout_p > 0.0 && gen == nullptr) fail("dropout_p > 0 needs a generator");
  if (is_causal && attn_mask.defined()) fail("is_causal and attn_mask together");
}

// The mask in the kernel's terms and the tensor it reads: the one place where a mask's dtype is
// interpreted (bool: true = may attend, read as i64; i64: nonzero = may attend; floating: added to
// the scores).
struct MaskArg {
  kernels::AttentionMaskKind kind = kernels::AttentionMaskKind::none;
  Tensor data;
};

MaskArg mask_arg(const Tensor& attn_mask, DType dtype) {
  if (!attn_mask.defined()) return {};
  if (attn_mask.dtype() == DType::i64) return {kernels::AttentionMaskKind::allow, attn_mask.detach()};
  if (attn_mask.dtype() == DType::b8) return {kernels::AttentionMaskKind::allow, attn_mask.detach().to(DType::i64)};
  return {kernels::AttentionMaskKind::additive, attn_mask.detach().to(dtype)};
}

// The composite's form of an allow mask: nonzero where attention is blocked (masked_fill's sense).
Tensor blocked_positions(const MaskArg& mask) {
  Tensor blocked = Tensor::empty(mask.data.shape(), DType::i64);
  const std::int64_t* m = mask.data.data<std::int64_t>();
  std::int64_t* b = blocked.data<std::int64_t>();
  for (std::int64_t i = 0; i < mask.data.numel(); ++i) b[i] = m[i] == 0;
  return blocked;
}

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - std::min(2, s.size())); }

// Shapes and per-problem offsets of one call: the broadcast batch dims flattened to BH problems.
struct SdpaLayout {
  Shape batch;  // broadcast batch dims
  std::int64_t BH = 1, L = 0, S = 0, E = 0, Ev = 0;
  PooledVector<std::int64_t> q_off, k_off, v_off, m_off;  // pooled: a step allocates nothing from the system once warm
  std::int64_t m_sl = 0, m_ss = 0;
};

SdpaLayout sdpa_layout(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  SdpaLayout lay;
  lay.L = q.size(-2);
  lay.S = k.size(-2);
  lay.E = q.size(-1);
  lay.Ev = v.size(-1);
  try {
    lay.batch = broadcast_shapes(kSdpa, broadcast_shapes(kSdpa, batch_of(q.shape()), batch_of(k.shape())), batch_of(v.shape()));
    if (mask.defined()) lay.batch = broadcast_shapes(kSdpa, lay.batch, batch_of(mask.shape()));
  } catch (const std::invalid_argument&) {
    sdpa_fail("batch dims do not broadcast", q, k, v, mask);
  }
  Shape full = lay.batch;
  full.push_back(lay.L);
  full.push_back(lay.S);
  if (mask.defined()) {
    bool ok = mask.dim() <= full.size();
    for (int i = 1; ok && i <= std::min(2, mask.dim()); ++i)
      ok = mask.shape()[mask.dim() - i] == 1 || mask.shape()[mask.dim() - i] == full[full.size() - i];
    if (!ok) sdpa_fail("attn_mask does not broadcast to (..., L, S) = " + full.str(), q, k, v, mask);
  }
  lay.BH = lay.batch.numel();
  const int nb = lay.batch.size();
  std::int64_t qs[Shape::kMaxDims], ks[Shape::kMaxDims], vs[Shape::kMaxDims], ms[Shape::kMaxDims];
  broadcast_strides(batch_of(q.shape()), lay.batch, qs);
  broadcast_strides(batch_of(k.shape()), lay.batch, ks);
  broadcast_strides(batch_of(v.shape()), lay.batch, vs);
  if (mask.defined()) {
    broadcast_strides(mask.shape(), full, ms);
    lay.m_sl = ms[nb];
    lay.m_ss = ms[nb + 1];
  }
  for (auto* o : {&lay.q_off, &lay.k_off, &lay.v_off, &lay.m_off}) o->resize(static_cast<std::size_t>(lay.BH));
  std::int64_t idx[Shape::kMaxDims] = {};
  for (std::int64_t bh = 0; bh < lay.BH; ++bh) {
    std::int64_t oq = 0, ok = 0, ov = 0, om = 0;
    for (int d = 0; d < nb; ++d) {
      oq += idx[d] * qs[d];
      ok += idx[d] * ks[d];
      ov += idx[d] * vs[d];
      if (mask.defined()) om += idx[d] * ms[d];
    }
    lay.q_off[bh] = oq * lay.L * lay.E;
    lay.k_off[bh] = ok * lay.S * lay.E;
    lay.v_off[bh] = ov * lay.S * lay.Ev;
    lay.m_off[bh] = om;
    for (int d = nb - 1; d >= 0; --d) {  // next multi-index, row-major
      if (++idx[d] < lay.batch[d]) break;
      idx[d] = 0;
    }
  }
  return lay;
}

template <class T>
kernels::AttentionProblem<T> sdpa_problem(const SdpaLayout& lay, const Tensor& q, const Tensor& k, const Tensor& v,
                                          const MaskArg& mask, double scale, bool causal, double dropout_p,
                                          std::uint64_t seed) {
  kernels::AttentionProblem<T> p;
  p.BH = lay.BH;
  p.L = lay.L;
  p.S = lay.S;
  p.E = lay.E;
  p.Ev = lay.Ev;
  p.q = q.data<T>();
  p.k = k.data<T>();
  p.v = v.data<T>();
  p.q_off = lay.q_off.data();
  p.k_off = lay.k_off.data();
  p.v_off = lay.v_off.data();
  p.scale = static_cast<T>(scale);
  p.causal = causal;
  p.mask_kind = mask.kind;
  if (mask.kind == kernels::AttentionMaskKind::additive) p.mask_add = mask.data.data<T>();
  if (mask.kind == kernels::AttentionMaskKind::allow) p.mask_allow = mask.data.data<std::int64_t>();
  p.mask_off = lay.m_off.data();
  p.mask_sl = lay.m_sl;
  p.mask_ss = lay.m_ss;
  p.dropout_p = dropout_p;
  p.seed = seed;
  return p;
}

Shape with_last2(Shape s, std::int64_t a, std::int64_t b) {
  s.push_back(a);
  s.push_back(b);
  return s;
}

// torch's scale=None: 1/sqrt(E); a given scale as it is.
double resolved_scale(std::optional<double> scale, std::int64_t E) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(E));
}

// The positional overloads' scale: <= 0 means None.
std::optional<double> positional_scale(double scale) {
  return scale > 0 ? std::optional<double>(scale) : std::nullopt;
}

// The options' generator, or, when dropout needs one and none is given, default_generator() with
// its mutex held for the call (as the sampling ops without a generator argument).
template <class F>
Tensor with_options_generator(const ScaledDotProductAttentionOptions& o, F&& f) {
  if (o.generator != nullptr || !(o.dropout_p > 0.0)) return f(o.generator);
  std::lock_guard<std::mutex> lock(default_generator_mutex());
  return f(&default_generator());
}

// The composed form's probabilities: softmax(q kᵀ scale + mask), causal positions -inf.
Tensor composed_probabilities(const Tensor& query, const Tensor& key, const Tensor& attn_mask, bool is_causal,
                              std::optional<double> scale) {
  const std::int64_t L = query.size(-2), S = key.size(-2);
  const double s = resolved_scale(scale, query.size(-1));
  Tensor scores = matmul(query, transpose(key, -2, -1)) * s;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) scores = masked_fill(scores, triu(Tensor::ones({L, S}, DType::i64), 1), neg_inf);
  if (attn_mask.defined()) {
    const MaskArg mask = mask_arg(attn_mask, scores.dtype());
    if (mask.kind == kernels::AttentionMaskKind::allow) scores = masked_fill(scores, blocked_positions(mask), neg_inf);
    else scores = scores + attn_mask;  // the caller's tensor: a mask that requires grad gets one
  }
  return softmax(scores, -1);
}

// The composed form with given dropout factors (undefined: no dropout).
Tensor sdpa_composed(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
                     bool is_causal, std::optional<double> scale, const Tensor& dropout_factors) {
  Tensor attn = composed_probabilities(query, key, attn_mask, is_causal, scale);
  if (dropout_factors.defined()) attn = attn * dropout_factors;
  return matmul(attn, value);
}

Tensor sdpa_composed_op(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
                        double dropout_p, bool is_causal, std::optional<double> scale, Generator* gen,
                        Tensor* weights) {
  check_sdpa(query, key, value, attn_mask, dropout_p, is_causal, gen);
  Tensor attn = composed_probabilities(query, key, attn_mask, is_causal, scale);
  if (weights) *weights = attn;
  if (dropout_p > 0.0) attn = dropout(attn, dropout_p, *gen, true);
  return matmul(attn, value);
}

Tensor sdpa_fused_op(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
                     double dropout_p, bool is_causal, std::optional<double> scale, Generator* gen, Tensor* weights) {
  check_sdpa(query, key, value, attn_mask, dropout_p, is_causal, gen);
  // The weights are the L x S matrix the tiled kernel avoids; a mask that wants a gradient needs
  // the scores' gradient: both take the composed path, as do empty keys (an empty sum, not NaN).
  if (weights || (attn_mask.defined() && attn_mask.requires_grad()) || key.size(-2) == 0 || key.size(-1) == 0)
    return sdpa_composed_op(query, key, value, attn_mask, dropout_p, is_causal, scale, gen, weights);
  if (!is_floating(query.dtype()) || key.dtype() != query.dtype() || value.dtype() != query.dtype())
    sdpa_fail("expects query, key and value of one floating dtype, got " + std::string(dtype_name(query.dtype())) + ", " +
                  std::string(dtype_name(key.dtype())) + ", " + std::string(dtype_name(value.dtype())),
              query, key, value, attn_mask);
  const MaskArg mask = mask_arg(attn_mask, query.dtype());
  const SdpaLayout lay = sdpa_layout(query, key, value, mask.data);
  const double s = resolved_scale(scale, lay.E);
  const std::uint64_t seed = dropout_p > 0.0 ? gen->next_u64() : 0;  // one draw, as tg::dropout
  Tensor out = Tensor::empty(with_last2(lay.batch, lay.L, lay.Ev), query.dtype());
  Tensor lse = Tensor::empty(Shape{lay.BH * lay.L}, query.dtype());
  // Short key ranges: the backward reads the forward's probabilities (at most kSaveProbsMaxKeys
  // per query row) instead of recomputing q kᵀ, the seventh product.
  const Tensor qkv[] = {query, key, value};
  Tensor probs = lay.S <= kernels::kSaveProbsMaxKeys && detail::should_record(qkv, 3)
                     ? Tensor::empty(Shape{lay.BH * lay.L * lay.S}, query.dtype())
                     : Tensor();
  kernels::dispatch_floating(kSdpa, query.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::attention_forward(sdpa_problem<T>(lay, query, key, value, mask, s, is_causal, dropout_p, seed),
                               out.data<T>(), lse.data<T>(), probs.defined() ? probs.data<T>() : nullptr);
  });
  return record(kSdpa, out, {query, key, value},
                [q = query.detach(), k = key.detach(), v = value.detach(), m = mask.data, kind = mask.kind,
                 o = out.detach(), lse, probs, s, is_causal, dropout_p, seed](BackwardContext& ctx) {
    const SdpaLayout lay = sdpa_layout(q, k, v, m);
    const Tensor& g = ctx.grad_output();
    Tensor dq = Tensor::empty(with_last2(lay.batch, lay.L, lay.E), q.dtype());
    Tensor dk = ctx.needs_grad(1) ? Tensor::empty(with_last2(lay.batch, lay.S, lay.E), q.dtype()) : Tensor();
    Tensor dv = ctx.needs_grad(2) ? Tensor::empty(with_last2(lay.batch, lay.S, lay.Ev), q.dtype()) : Tensor();
    kernels::dispatch_floating(kSdpa, q.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::attention_backward(sdpa_problem<T>(lay, q, k, v, MaskArg{kind, m}, s, is_causal, dropout_p, seed),
                                  o.data<T>(), lse.data<T>(), g.data<T>(), dq.data<T>(),
                                  dk.defined() ? dk.data<T>() : nullptr, dv.defined() ? dv.data<T>() : nullptr,
                                  probs.defined() ? probs.data<T>() : nullptr);
    });
    if (ctx.needs_grad(0)) ctx.accumulate(0, kernels::sum_to(std::move(dq), q.shape()));
    if (dk.defined()) ctx.accumulate(1, kernels::sum_to(std::move(dk), k.shape()));
    if (dv.defined()) ctx.accumulate(2, kernels::sum_to(std::move(dv), v.shape()));
  }, [query, key, value, attn_mask, dropout_p, is_causal, scale, seed](GradGraphContext& ctx) {
    // With dropout, the forward's mask is rebuilt from its seed (the same factors the kernels
    // applied) and multiplied into the composed form's probabilities.
    Tensor factors;
    if (dropout_p > 0.0) {
      const SdpaLayout lay = sdpa_layout(query, key, value, mask_arg(attn_mask, query.dtype()).data);
      factors = Tensor::empty(with_last2(lay.batch, lay.L, lay.S), query.dtype());
      kernels::dispatch_floating(kSdpa, query.dtype(), [&](auto tag) {
        using T = decltype(tag);
        kernels::attention_dropout_factors<T>(dropout_p, seed, factors.numel(), factors.data<T>());
      });
    }
    ctx.backward_through(sdpa_composed(query, key, value, attn_mask, is_causal, scale, factors));
  });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options) {
  return with_options_generator(options, [&](Generator* gen) {
    return sdpa_fused_op(query, key, value, options.attn_mask, options.dropout_p, options.is_causal, options.scale, gen,
                         options.weights);
  });
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal, double scale,
                                    Generator* gen, Tensor* weights) {
  return sdpa_fused_op(query, key, value, attn_mask, dropout_p, is_causal, positional_scale(scale), gen, weights);
}

Tensor scaled_dot_product_attention_composed(const Tensor& query, const Tensor& key, const Tensor& value,
                                             const ScaledDotProductAttentionOptions& options) {
  return with_options_generator(options, [&](Generator* gen) {
    return sdpa_composed_op(query, key, value, options.attn_mask, options.dropout_p, options.is_causal, options.scale,
                            gen, options.weights);
  });
}

Tensor scaled_dot_product_attention_composed(const Tensor& query, const Tensor& key, const Tensor& value,
                                             const Tensor& attn_mask, double dropout_p, bool is_causal, double scale,
                                             Generator* gen, Tensor* weights) {
  return sdpa_composed_op(query, key, value, attn_mask, dropout_p, is_causal, positional_scale(scale), gen, weights);
}

}  // namespace tg
