#pragma once
// Internal: the tiled (FlashAttention-style) attention kernels behind scaled_dot_product_attention.
// BH independent problems (the broadcast batch dims flattened), each softmax(scale q kᵀ + mask) v
// with q (L, E), k (S, E), v (S, Ev) at per-problem offsets. The forward walks blocks of keys
// with a running max and sum per query row, so its memory does not grow with S; it saves the
// row's log-sum-exp. The backward (FlashAttention-2) recomputes each block of probabilities from
// it instead of storing the L x S matrix, except for short key ranges (S <= kSaveProbsMaxKeys):
// there the forward may keep the probabilities, at most that many per query row, and the backward
// reads them instead of recomputing q kᵀ and its exp.
#include <cstdint>

namespace tg::kernels {

/// How the mask is given: nothing, added to the scores (T), or i64 where 0 blocks (a bool mask
/// is converted to this i64 form by scaled_dot_product_attention).
enum class AttentionMaskKind { none, additive, allow };

template <class T>
struct AttentionProblem {
  std::int64_t BH = 0, L = 0, S = 0, E = 0, Ev = 0;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  const std::int64_t *q_off = nullptr, *k_off = nullptr, *v_off = nullptr;  // per problem, in elements
  T scale = T(1);
  bool causal = false;  // row l sees keys s <= l, without a mask in memory
  AttentionMaskKind mask_kind = AttentionMaskKind::none;
  const T* mask_add = nullptr;               // additive
  const std::int64_t* mask_allow = nullptr;  // allow
  const std::int64_t* mask_off = nullptr;    // per problem
  std::int64_t mask_sl = 0, mask_ss = 0;     // strides along L and S (0 where broadcast)
  double dropout_p = 0;                      // on the probabilities, drawn from a splitmix64 stream:
  std::uint64_t seed = 0;                    // element i of (BH, L, S) by output i/2 + 1, half i%2
};

/// Longest key range for which the forward can keep the probabilities (one key block).
constexpr std::int64_t kSaveProbsMaxKeys = 128;

/// out (BH, L, Ev); lse (BH, L): log Σ exp of each row's scores (-inf for a row with no allowed
/// key, whose output is NaN as PyTorch's). probs (optional, only with S <= kSaveProbsMaxKeys):
/// the softmax (BH, L, S) before dropout as exp(score - lse), the values attention_backward would
/// recompute, bit for bit; 0 where masked, NaN in a row with no allowed key.
template <class T>
void attention_forward(const AttentionProblem<T>& p, T* out, T* lse, T* probs = nullptr);

/// Given out, lse and dout (BH, L, Ev): dq (BH, L, E), dk (BH, S, E), dv (BH, S, Ev), each
/// overwritten (nullptr: not needed; dq is always computed). probs: the forward's, or nullptr to
/// recompute them.
template <class T>
void attention_backward(const AttentionProblem<T>& p, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                        const T* probs = nullptr);

/// The dropout factors (0 or 1/(1 - dropout_p)) the two functions above apply to elements
/// [0, n) of the (BH, L, S) probabilities for `seed`: what a differentiable (create_graph) backward
/// multiplies its recomputed probabilities by.
template <class T>
void attention_dropout_factors(double dropout_p, std::uint64_t seed, std::int64_t n, T* factors);

}  // namespace tg::kernels
