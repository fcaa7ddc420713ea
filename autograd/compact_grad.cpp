#include "autograd/compact_grad.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/gemm.h"
#include "autograd/memory.h"
#include "autograd/parallel.h"

namespace tg {

void CompactGrad::read_rows(std::int64_t r0, std::int64_t r1, void* out) const {
  if (!(0 <= r0 && r0 <= r1 && r1 <= rows()))
    throw std::out_of_range(std::string(kind()) + " gradient of shape " + shape_.str() + ": rows [" +
                            std::to_string(r0) + ", " + std::to_string(r1) + ") out of range");
  rows_impl(r0, r1, out);
}

Tensor CompactGrad::dense() const {
  Tensor d = Tensor::empty(shape_, dtype_);
  kernels::dispatch_floating("CompactGrad::dense", dtype_, [&](auto tag) { read_rows(0, rows(), d.data<decltype(tag)>()); });
  return d;
}

namespace {

/// Multiplies n elements by the scale as the dense path's clip_grad_norm does (one rounding in T),
/// so a scaled compact gradient has the dense one's bits.
template <class T> void apply_scale(T* p, std::int64_t n, double scale) {
  if (scale == 1.0) return;
  const T c = static_cast<T>(scale);
  for (std::int64_t i = 0; i < n; ++i) p[i] *= c;
}

// ---- low rank: dW = scale Gᵀ X ------------------------------------------------------------------

class LowRankGrad final : public CompactGrad {
 public:
  LowRankGrad(Tensor g, Tensor x)
      : CompactGrad(Shape{g.size(1), x.size(1)}, g.dtype()), g_(std::move(g)), x_(std::move(x)) {}
  const char* kind() const override { return "low_rank"; }
  std::int64_t bytes() const override {
    return (g_.numel() + x_.numel()) * static_cast<std::int64_t>(dtype_size(dtype()));
  }

 private:
  // ‖Gᵀ X‖² = Σ_ij (G Gᵀ)_ij (X Xᵀ)_ij: two N x N Gram matrices instead of the out x in product
  // (for the paper-sized readout N² out = 1320² x 30000 against N out in = 1320 x 30000 x 3620, and
  // no dense dW). The Gram matrices are symmetric, so only blocks (a, b) with a <= b are formed,
  // off-diagonal ones counted twice. Each block's sum is kept and the sums are added in block
  // order: the norm does not depend on the number of threads.
  double unscaled_squared_norm() const override {
    return kernels::dispatch_floating("low_rank_grad", dtype(), [&](auto tag) {
      using T = decltype(tag);
      constexpr std::int64_t kBlock = 128;
      const std::int64_t n = g_.size(0), out = g_.size(1), in = x_.size(1);
      const std::int64_t blocks = (n + kBlock - 1) / kBlock;
      PooledVector<std::pair<std::int64_t, std::int64_t>> pairs;
      for (std::int64_t a = 0; a < blocks; ++a)
        for (std::int64_t b = a; b < blocks; ++b) pairs.emplace_back(a, b);
      PooledVector<double> sums(pairs.size(), 0.0);
      const T* g = g_.data<T>();
      const T* x = x_.data<T>();
      const int tasks = static_cast<int>(std::min<std::int64_t>(num_threads(), static_cast<std::int64_t>(pairs.size())));
      auto body = [&](int task) {
        PooledVector<T> gram_g(kBlock * kBlock), gram_x(kBlock * kBlock);
        for (std::size_t p = static_cast<std::size_t>(task); p < pairs.size(); p += static_cast<std::size_t>(tasks)) {
          const auto [a, b] = pairs[p];
          const std::int64_t a0 = a * kBlock, b0 = b * kBlock;
          const std::int64_t ma = std::min(kBlock, n - a0), mb = std::min(kBlock, n - b0);
          kernels::gemm<T>(false, true, ma, mb, out, T(1), g + a0 * out, out, g + b0 * out, out, T(0), gram_g.data(), mb);
          kernels::gemm<T>(false, true, ma, mb, in, T(1), x + a0 * in, in, x + b0 * in, in, T(0), gram_x.data(), mb);
          double s = 0.0;
          for (std::int64_t i = 0; i < ma * mb; ++i) s += static_cast<double>(gram_g[i]) * static_cast<double>(gram_x[i]);
          sums[p] = a == b ? s : 2.0 * s;
        }
      };
      run_tasks(tasks, body);
      double total = 0.0;
      for (double s : sums) total += s;
      return std::max(total, 0.0);  // rounding can take a (near-)zero norm below zero
    });
  }

  // Rows [r0, r1) of Gᵀ X: the dense backward's product (linear's dW) restricted to those rows.
  void rows_impl(std::int64_t r0, std::int64_t r1, void* out) const override {
    kernels::dispatch_floating("low_rank_grad", dtype(), [&](auto tag) {
      using T = decltype(tag);
      const std::int64_t n = g_.size(0), cols = g_.size(1), in = x_.size(1);
      T* o = static_cast<T*>(out);
      kernels::gemm<T>(true, false, r1 - r0, in, n, T(1), g_.data<T>() + r0, cols, x_.data<T>(), in, T(0), o, in);
      apply_scale(o, (r1 - r0) * in, scale_value());
    });
  }

  Tensor g_, x_;
};

// ---- sparse rows --------------------------------------------------------------------------------

class SparseRowsGrad final : public CompactGrad {
 public:
  SparseRowsGrad(Shape shape, PooledVector<std::int64_t> ids, Tensor values)
      : CompactGrad(std::move(shape), values.dtype()), ids_(std::move(ids)), values_(std::move(values)) {}
  const char* kind() const override { return "sparse_rows"; }
  std::span<const std::int64_t> row_ids() const override { return {ids_.data(), ids_.size()}; }
  std::int64_t bytes() const override {
    return values_.numel() * static_cast<std::int64_t>(dtype_size(dtype())) +
           static_cast<std::int64_t>(ids_.size() * sizeof(std::int64_t));
  }

 private:
  double unscaled_squared_norm() const override {
    return kernels::dispatch_floating("sparse_rows_grad", dtype(), [&](auto tag) {
      const auto* v = values_.data<decltype(tag)>();
      double s = 0.0;
      for (std::int64_t i = 0, n = values_.numel(); i < n; ++i) s += static_cast<double>(v[i]) * static_cast<double>(v[i]);
      return s;
    });
  }

  void rows_impl(std::int64_t r0, std::int64_t r1, void* out) const override {
    kernels::dispatch_floating("sparse_rows_grad", dtype(), [&](auto tag) {
      using T = decltype(tag);
      const std::int64_t d = cols();
      T* o = static_cast<T*>(out);
      std::fill(o, o + (r1 - r0) * d, T(0));
      const T* v = values_.data<T>();
      auto it = std::lower_bound(ids_.begin(), ids_.end(), r0);
      for (; it != ids_.end() && *it < r1; ++it) {
        const auto slot = static_cast<std::int64_t>(it - ids_.begin());
        std::copy(v + slot * d, v + (slot + 1) * d, o + (*it - r0) * d);
      }
      apply_scale(o, (r1 - r0) * d, scale_value());
    });
  }

  PooledVector<std::int64_t> ids_;  // sorted, unique: the rows present
  Tensor values_;                   // (ids_.size(), cols): row ids_[s] of the gradient
};

}  // namespace

std::shared_ptr<CompactGrad> low_rank_grad(const Tensor& g, const Tensor& x) {
  if (g.dim() != 2 || x.dim() != 2 || g.size(0) != x.size(0) || g.dtype() != x.dtype() || !is_floating(g.dtype()))
    throw std::invalid_argument("low_rank_grad: need g (N, out) and x (N, in) of one floating dtype, got " +
                                g.shape().str() + " " + std::string(dtype_name(g.dtype())) + " and " + x.shape().str() +
                                " " + std::string(dtype_name(x.dtype())));
  return std::allocate_shared<LowRankGrad>(PoolAllocator<LowRankGrad>(), g, x);
}

std::shared_ptr<CompactGrad> sparse_rows_grad(const Tensor& g, const Tensor& ids, const Shape& table_shape) {
  const std::int64_t k = ids.numel();
  if (table_shape.size() != 2 || g.dim() != 2 || g.size(0) != k || g.size(1) != table_shape[1])
    throw std::invalid_argument("sparse_rows_grad: need g (K, D) for K ids into a (V, D) table, got g " + g.shape().str() +
                                ", " + std::to_string(k) + " ids, table " + table_shape.str());
  const std::int64_t v = table_shape[0], d = table_shape[1];
  const std::int64_t* idx = ids.data<std::int64_t>();
  // Slot of each touched row; the touched rows come out sorted by scanning the table's rows.
  PooledVector<std::int32_t> slot(static_cast<std::size_t>(v), -1);
  for (std::int64_t i = 0; i < k; ++i) {
    if (idx[i] < 0 || idx[i] >= v)
      throw std::out_of_range("sparse_rows_grad: id " + std::to_string(idx[i]) + " outside a table of " +
                              std::to_string(v) + " rows");
    slot[static_cast<std::size_t>(idx[i])] = 0;
  }
  PooledVector<std::int64_t> rows;
  for (std::int64_t r = 0; r < v; ++r)
    if (slot[static_cast<std::size_t>(r)] == 0) {
      slot[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(rows.size());
      rows.push_back(r);
    }
  const auto u = static_cast<std::int64_t>(rows.size());
  if (u * (d + 1) >= v * d) return nullptr;  // no smaller than the dense table
  // The dense backward's kernel with each id replaced by its row's slot: every row's sum is
  // formed in the dense gradient's order.
  PooledVector<std::int64_t> slots(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < k; ++i) slots[static_cast<std::size_t>(i)] = slot[static_cast<std::size_t>(idx[i])];
  Tensor values = Tensor::zeros(Shape{u, d}, g.dtype());
  kernels::scatter_add_rows(values, g, slots.data(), k, 1, u, d);
  return std::allocate_shared<SparseRowsGrad>(PoolAllocator<SparseRowsGrad>(), table_shape, std::move(rows),
                                              std::move(values));
}

}  // namespace tg
