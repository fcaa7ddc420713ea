// Tiled attention on the CPU (contract in kernels/attention.h). Work is split in blocks of bq
// query rows and bk keys; every product of two blocks is one call of the library's GEMM (small
// enough to stay on the calling thread), and the softmax runs on the bq x bk block of scores
// between them, which stays in L1/L2. A row's arithmetic does not depend on how the blocks are
// shared between threads, and the backward's partial query gradients (when the keys are split for
// parallelism) are added in a fixed order, so results do not depend on the thread count.
// With at most kSaveProbsMaxKeys keys the forward can keep the probabilities, exp(s - lse) as the
// backward would recompute them, bit for bit: the backward reads them and does six products, not seven.
#include "autograd/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/kernels/reduce.h"
#include "autograd/memory.h"
#include "autograd/random.h"

namespace tg::kernels {

namespace {

template <class T> using Batch = xsimd::batch<T>;
// Block sides: 128 x 128 (a float score block of 64 KiB stays in L2) measured a few % faster than
// 64 x 64 at T = 128 and 512; causal attention takes 64 x 64, which wastes less on the diagonal
// blocks, half of whose scores are masked (docs/performance_history.md).
constexpr std::int64_t kMaxBlock = 128;
std::int64_t block_side(bool causal) { return causal ? 64 : kMaxBlock; }
// Aim for at least this many flops per parallel task (a TBB task costs a few microseconds).
constexpr double kTaskFlops = 1e6;

template <class T> constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// Dropout factors (0 or 1/(1-p)) of elements first, ..., first + n - 1 of the (BH, L, S)
// probabilities: the mask tg::dropout draws for a tensor of that shape from the same seed.
template <class T>
void dropout_factors(const AttentionProblem<T>& p, std::uint64_t first, std::int64_t n, T* f) {
  const auto threshold = static_cast<std::uint64_t>(p.dropout_p * 0x1.0p32);
  const T keep = static_cast<T>(1.0 / (1.0 - p.dropout_p));
  for (std::int64_t c = 0; c < n; ++c) {
    const std::uint64_t i = first + static_cast<std::uint64_t>(c);
    const std::uint64_t r = SplitMix64::at(p.seed, i / 2);
    const std::uint64_t u = (i & 1) ? r >> 32 : r & 0xFFFFFFFFULL;
    f[c] = u < threshold ? T(0) : keep;
  }
}

template <class T>
using GemmFn = void (*)(bool, bool, std::int64_t, std::int64_t, std::int64_t, T, const T*, std::int64_t, const T*,
                        std::int64_t, T, T*, std::int64_t);
template <class T>
void gemm_maybe_parallel(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* A,
                         std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
  gemm<T>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
// The product of two blocks. With tasks enough for every thread it stays on the task's thread: the
// library GEMM would split a 128 x 128 product again (a nested TBB loop, the shared operand packed
// twice). With few tasks (few heads) the products are where the parallelism is.
template <class T>
GemmFn<T> block_product(std::int64_t tasks) {
  return tasks >= 2 * std::int64_t{num_threads()} ? &gemm_serial<T> : &gemm_maybe_parallel<T>;
}

// Sb (nq x nk, leading dim bk) = scale q[i0:] k[j0:]ᵀ + mask, causal positions -inf.
template <class T>
void score_block(GemmFn<T> mm, const AttentionProblem<T>& p, std::int64_t bh, std::int64_t i0, std::int64_t nq,
                 std::int64_t j0, std::int64_t nk, T* Sb, std::int64_t bk) {
  mm(false, true, nq, nk, p.E, p.scale, p.q + p.q_off[bh] + i0 * p.E, p.E, p.k + p.k_off[bh] + j0 * p.E, p.E,
          T(0), Sb, bk);
  if (p.mask_kind == AttentionMaskKind::additive) {
    for (std::int64_t r = 0; r < nq; ++r) {
      const T* m = p.mask_add + p.mask_off[bh] + (i0 + r) * p.mask_sl + j0 * p.mask_ss;
      T* s = Sb + r * bk;
      for (std::int64_t c = 0; c < nk; ++c) s[c] += m[c * p.mask_ss];
    }
  } else if (p.mask_kind == AttentionMaskKind::allow) {
    for (std::int64_t r = 0; r < nq; ++r) {
      const std::int64_t* m = p.mask_allow + p.mask_off[bh] + (i0 + r) * p.mask_sl + j0 * p.mask_ss;
      T* s = Sb + r * bk;
      for (std::int64_t c = 0; c < nk; ++c)
        if (m[c * p.mask_ss] == 0) s[c] = kNegInf<T>;
    }
  }
  if (p.causal && j0 + nk - 1 > i0)
    for (std::int64_t r = 0; r < nq; ++r)
      for (std::int64_t c = std::max<std::int64_t>(0, i0 + r + 1 - j0); c < nk; ++c) Sb[r * bk + c] = kNegInf<T>;
}

std::int64_t task_grain(double unit_flops) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(kTaskFlops / std::max(unit_flops, 1.0)));
}

}  // namespace

template <class T>
void attention_forward(const AttentionProblem<T>& p, T* out, T* lse, T* probs) {
  if (probs && p.S > kSaveProbsMaxKeys)
    throw std::logic_error("attention_forward: probs kept only for S <= kSaveProbsMaxKeys");
  const std::int64_t L = p.L, S = p.S, Ev = p.Ev, bq = block_side(p.causal), bk = bq;
  const std::int64_t nqb = (L + bq - 1) / bq;
  const double unit_flops = 2.0 * double(std::min(L, bq)) * double(S) * double(p.E + Ev);
  const GemmFn<T> mm = block_product<T>(p.BH * nqb);
  parallel_for(p.BH * nqb, task_grain(unit_flops), [&](std::int64_t begin, std::int64_t end) {
    PooledVector<T> Sb(bq * bk), O(bq * Ev), F(p.dropout_p > 0 ? bk : 0);
    T m[kMaxBlock], l[kMaxBlock];
    for (std::int64_t u = begin; u < end; ++u) {
      const std::int64_t bh = u / nqb, i0 = (u % nqb) * bq, nq = std::min(bq, L - i0);
      std::fill(m, m + nq, kNegInf<T>);
      std::fill(l, l + nq, T(0));
      std::fill(O.begin(), O.begin() + nq * Ev, T(0));
      // Causal: keys after the block's last row are masked for every row of it.
      const std::int64_t s_end = p.causal ? std::min(S, i0 + nq) : S;
      for (std::int64_t j0 = 0; j0 < s_end; j0 += bk) {
        const std::int64_t nk = std::min(bk, s_end - j0);
        // Kept probabilities: the scores stay in probs (exponentiated once lse is known), their
        // exp(s - m) goes to Sb.
        T* Sc = probs ? probs + (bh * L + i0) * S + j0 : Sb.data();
        const std::int64_t lds = probs ? S : bk;
        score_block(mm, p, bh, i0, nq, j0, nk, Sc, lds);
        for (std::int64_t r = 0; r < nq; ++r) {
          const T* sc = Sc + r * lds;
          T* s = Sb.data() + r * bk;
          const T m_new = std::max(m[r], max_contiguous(sc, nk));
          const T m_use = m_new == kNegInf<T> ? T(0) : m_new;  // nothing allowed yet: all terms 0
          const T sum = exp_shift_sum(sc, s, nk, m_use);
          const T corr = std::exp(m[r] - m_use);
          l[r] = l[r] * corr + sum;
          m[r] = m_new;
          if (corr != T(1))
            for (std::int64_t c = 0; c < Ev; ++c) O[r * Ev + c] *= corr;
          if (p.dropout_p > 0) {
            dropout_factors(p, static_cast<std::uint64_t>((bh * L + i0 + r) * S + j0), nk, F.data());
            for (std::int64_t c = 0; c < nk; ++c) s[c] *= F[c];
          }
        }
        mm(false, false, nq, Ev, nk, T(1), Sb.data(), bk, p.v + p.v_off[bh] + j0 * Ev, Ev, T(1), O.data(), Ev);
      }
      for (std::int64_t r = 0; r < nq; ++r) {
        const T inv = T(1) / l[r];  // l = 0 (no allowed key): 0 * inf = NaN, as PyTorch
        T* o = out + (bh * L + i0 + r) * Ev;
        for (std::int64_t c = 0; c < Ev; ++c) o[c] = O[r * Ev + c] * inv;
        lse[bh * L + i0 + r] = (m[r] == kNegInf<T> ? T(0) : m[r]) + std::log(l[r]);
        if (probs) {  // exp(s - lse): the very values the backward would recompute
          T* pr = probs + (bh * L + i0 + r) * S;
          exp_shift_sum(pr, pr, s_end, lse[bh * L + i0 + r]);
          std::fill(pr + s_end, pr + S, T(0));
        }
      }
    }
  });
}

template <class T>
void attention_backward(const AttentionProblem<T>& p, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                        const T* probs) {
  const std::int64_t BH = p.BH, L = p.L, S = p.S, E = p.E, Ev = p.Ev, bq = block_side(p.causal), bk = bq;
  const std::int64_t nqb = (L + bq - 1) / bq, nkb = (S + bk - 1) / bk;
  // D = rowsum(dout * out): the softmax backward's Σ_j dP_ij P_ij (also with dropout).
  PooledVector<T> D(static_cast<std::size_t>(BH * L));
  const std::int64_t row_grain = std::max<std::int64_t>(1, kGrainCheap / std::max<std::int64_t>(1, Ev));
  parallel_for(BH * L, row_grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      T s = 0;
      for (std::int64_t c = 0; c < Ev; ++c) s += dout[r * Ev + c] * out[r * Ev + c];
      D[r] = s;
    }
  });
  // Keys split in `chunks` per problem when there are few problems, so that tasks exist for every
  // thread; each chunk adds to its own partial dq, summed in chunk order below. The split depends
  // on the sizes only, not on the thread count.
  const std::int64_t want =
      std::clamp<std::int64_t>((16 + BH - 1) / std::max<std::int64_t>(BH, 1), 1, std::max<std::int64_t>(nkb, 1));
  const std::int64_t per = std::max<std::int64_t>(1, (nkb + want - 1) / want);
  const std::int64_t chunks = std::max<std::int64_t>(1, (nkb + per - 1) / per);
  PooledVector<T> parts(chunks > 1 ? static_cast<std::size_t>(BH * chunks * L * E) : 0, T(0));
  // No pass that zeroes the gradients: the first product into each block of dk, dv (its first
  // query block) and of dq (the first key block, unsplit keys) overwrites it (beta = 0, which adds
  // the same first term as 0 + x would); key blocks no query sees (causal, L < S) are zeroed.
  const double unit_flops = 2.0 * double(L) * double(std::min(S, per * bk)) * double(3 * E + 2 * Ev);
  const GemmFn<T> mm = block_product<T>(BH * chunks);
  parallel_for(BH * chunks, task_grain(unit_flops), [&](std::int64_t begin, std::int64_t end) {
    PooledVector<T> P(probs ? 0 : bq * bk), dP(bq * bk), F(p.dropout_p > 0 ? bq * bk : 0), Z(p.dropout_p > 0 ? bq * bk : 0);
    for (std::int64_t u = begin; u < end; ++u) {
      const std::int64_t bh = u / chunks, chunk = u % chunks;
      T* dQ = chunks == 1 ? dq + bh * L * E : parts.data() + (bh * chunks + chunk) * L * E;
      const T* V = p.v + p.v_off[bh];
      const T* K = p.k + p.k_off[bh];
      const T* Q = p.q + p.q_off[bh];
      for (std::int64_t jb = chunk * per; jb < std::min(nkb, (chunk + 1) * per); ++jb) {
        const std::int64_t j0 = jb * bk, nk = std::min(bk, S - j0);
        const std::int64_t qb_first = p.causal ? j0 / bq : 0;
        if (qb_first >= nqb) {
          if (dv) std::fill(dv + (bh * S + j0) * Ev, dv + (bh * S + j0 + nk) * Ev, T(0));
          if (dk) std::fill(dk + (bh * S + j0) * E, dk + (bh * S + j0 + nk) * E, T(0));
        }
        for (std::int64_t qb = qb_first; qb < nqb; ++qb) {
          const T beta_kv = qb == qb_first ? T(0) : T(1), beta_q = chunks == 1 && jb == 0 ? T(0) : T(1);
          const std::int64_t i0 = qb * bq, nq = std::min(bq, L - i0);
          const T* dO = dout + (bh * L + i0) * Ev;
          // The block of probabilities: the forward's, or recomputed from the scores and lse.
          const T* Pb = P.data();
          std::int64_t ldp = bk;
          if (probs) {
            Pb = probs + (bh * L + i0) * S + j0;
            ldp = S;
          } else {
            score_block(mm, p, bh, i0, nq, j0, nk, P.data(), bk);
            for (std::int64_t r = 0; r < nq; ++r) {
              T* row = P.data() + r * bk;
              exp_shift_sum(row, row, nk, lse[bh * L + i0 + r]);
            }
          }
          const T* Zp = Pb;
          std::int64_t ldz = ldp;
          if (p.dropout_p > 0) {
            for (std::int64_t r = 0; r < nq; ++r) {
              T* f = F.data() + r * bk;
              dropout_factors(p, static_cast<std::uint64_t>((bh * L + i0 + r) * S + j0), nk, f);
              for (std::int64_t c = 0; c < nk; ++c) Z[r * bk + c] = Pb[r * ldp + c] * f[c];
            }
            Zp = Z.data();
            ldz = bk;
          }
          if (dv) mm(true, false, nk, Ev, nq, T(1), Zp, ldz, dO, Ev, beta_kv, dv + (bh * S + j0) * Ev, Ev);
          mm(false, true, nq, nk, Ev, T(1), dO, Ev, V + j0 * Ev, Ev, T(0), dP.data(), bk);
          for (std::int64_t r = 0; r < nq; ++r) {
            const T d = D[bh * L + i0 + r];
            T* g = dP.data() + r * bk;
            const T* pr = Pb + r * ldp;
            if (p.mask_kind == AttentionMaskKind::allow && lse[bh * L + i0 + r] == kNegInf<T>) {
              // No allowed key: as the composite's masked_fill, nothing flows through masked scores
              // (the row's NaN weights still reach dv, as there).
              std::fill(g, g + nk, T(0));
            } else if (p.dropout_p > 0) {
              const T* f = F.data() + r * bk;
              for (std::int64_t c = 0; c < nk; ++c) g[c] = pr[c] * (g[c] * f[c] - d);
            } else {
              for (std::int64_t c = 0; c < nk; ++c) g[c] = pr[c] * (g[c] - d);
            }
          }
          mm(false, false, nq, E, nk, p.scale, dP.data(), bk, K + j0 * E, E, beta_q, dQ + i0 * E, E);
          if (dk) mm(true, false, nk, E, nq, p.scale, dP.data(), bk, Q + i0 * E, E, beta_kv, dk + (bh * S + j0) * E, E);
        }
      }
    }
  });
  if (chunks > 1)
    parallel_for(BH, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t bh = b; bh < e; ++bh)
        for (std::int64_t c = 0; c < chunks; ++c) {
          const T* part = parts.data() + (bh * chunks + c) * L * E;
          T* d = dq + bh * L * E;
          if (c == 0) std::copy(part, part + L * E, d);
          else
            for (std::int64_t i = 0; i < L * E; ++i) d[i] += part[i];
        }
    });
}

template <class T>
void attention_dropout_factors(double dropout_p, std::uint64_t seed, std::int64_t n, T* factors) {
  AttentionProblem<T> p;
  p.dropout_p = dropout_p;
  p.seed = seed;
  dropout_factors(p, 0, n, factors);
}

template void attention_dropout_factors<float>(double, std::uint64_t, std::int64_t, float*);
template void attention_dropout_factors<double>(double, std::uint64_t, std::int64_t, double*);
template void attention_forward<float>(const AttentionProblem<float>&, float*, float*, float*);
template void attention_forward<double>(const AttentionProblem<double>&, double*, double*, double*);
template void attention_backward<float>(const AttentionProblem<float>&, const float*, const float*, const float*,
                                        float*, float*, float*, const float*);
template void attention_backward<double>(const AttentionProblem<double>&, const double*, const double*, const double*,
                                         double*, double*, double*, const double*);

}  // namespace tg::kernels
