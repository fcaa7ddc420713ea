#include "nn/utils.h"

#include <algorithm>
#include <cmath>

#include "autograd/compact_grad.h"
#include "autograd/dtype.h"
#include "autograd/memory.h"
#include "autograd/parallel.h"
#include "autograd/tape.h"

namespace tg::nn {

namespace {
/// Sum of squares in double. Four interleaved partial sums (a fixed order, so still
/// deterministic) let the loop run without waiting on one long add chain.
template <class T> double sum_squares(const T* x, std::int64_t n) {
  double acc[4] = {0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += static_cast<double>(x[i + k]) * static_cast<double>(x[i + k]);
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}
}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  // Two passes over the parameters' gradients. Each gradient's sum of squares is taken over fixed
  // blocks of kBlock elements (in parallel) and the block sums are added in order, so the norm is
  // the same for any thread count. Scratch comes from the caching allocator: a training step
  // allocates nothing here.
  // A compact gradient (autograd/compact_grad.h) gives its sum of squares and is scaled in place
  // without being made dense.
  constexpr std::int64_t kBlock = 16384;
  auto for_each_grad = [&](auto&& dense, auto&& compact) {
    for (const auto& p : params) {
      if (!p.defined()) continue;
      if (auto c = p.compact_grad()) {
        compact(*c);
        continue;
      }
      Tensor g = p.grad();
      if (g.defined()) dense(g);
    }
  };
  double total = 0.0;
  PooledVector<double> block_sums;
  for_each_grad([&](const Tensor& g) {
    const std::int64_t n = g.numel(), blocks = (n + kBlock - 1) / kBlock;
    block_sums.assign(static_cast<std::size_t>(blocks), 0.0);
    dispatch_floating("clip_grad_norm", g.dtype(), [&](auto tag) {
      const auto* x = g.data<decltype(tag)>();
      parallel_for(blocks, std::max<std::int64_t>(1, kGrainCheap / kBlock), [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b)
          block_sums[static_cast<std::size_t>(b)] = sum_squares(x + b * kBlock, std::min(kBlock, n - b * kBlock));
      });
    });
    for (double s : block_sums) total += s;
  }, [&](const CompactGrad& c) { total += c.squared_norm(); });
  const double norm = std::sqrt(total);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    NoGradGuard no_grad;
    for_each_grad([&](Tensor& g) {
      dispatch_floating("clip_grad_norm", g.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* p = g.data<T>();
        const T c = static_cast<T>(coef);
        parallel_for_aligned(g.numel(), kGrainCheap, 64, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) p[i] *= c;
        });
      });
    }, [&](CompactGrad& c) { c.scale(coef); });
  }
  return norm;
}

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  std::vector<Tensor> ts;
  for (const auto& [_, t] : params) ts.push_back(t);
  return clip_grad_norm(ts, max_norm);
}

}  // namespace tg::nn
