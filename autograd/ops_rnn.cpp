// Fused recurrent cells. The GRU cell's elementwise part (after its two GEMMs) is one pass over
// memory forward and one backward, instead of a dozen recorded ops and their temporaries.
// Rows are independent and every element, a row's tail included, goes through the same SIMD
// code, so results are bitwise independent of the thread count.
#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/fast_math.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_rnn.h"
#include "autograd/ops_shape.h"
#include "autograd/tape.h"

namespace tg {

namespace {

template <class T> using Batch = xsimd::batch<T>;

// Calls f(x, y) on SIMD batches for lanes [0, n) of NI input rows and NO output rows; a null
// output is not stored. The tail goes through f via zero-padded buffers, so an element's result
// does not depend on its position in the row (nor on how rows are split between threads).
template <class T, std::size_t NI, std::size_t NO, class F>
void map_lanes(const std::array<const T*, NI>& in, const std::array<T*, NO>& out, std::int64_t n, const F& f) {
  constexpr std::int64_t W = Batch<T>::size;
  std::array<Batch<T>, NI> x;
  std::array<Batch<T>, NO> y;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    for (std::size_t k = 0; k < NI; ++k) x[k] = Batch<T>::load_unaligned(in[k] + i);
    f(x, y);
    for (std::size_t k = 0; k < NO; ++k)
      if (out[k]) y[k].store_unaligned(out[k] + i);
  }
  if (i < n) {
    alignas(64) T buf[W] = {};
    for (std::size_t k = 0; k < NI; ++k) {
      std::copy(in[k] + i, in[k] + n, buf);
      x[k] = Batch<T>::load_aligned(buf);
    }
    f(x, y);
    for (std::size_t k = 0; k < NO; ++k)
      if (out[k]) {
        y[k].store_aligned(buf);
        std::copy(buf, buf + (n - i), out[k] + i);
      }
  }
}

// Elements of h per TBB task. Serially, in float32 on the 2-core target, the forward costs ~1 ns
// per element (three rational tanh, kernels/fast_math.h) and the backward ~0.7 ns (memory-bound);
// these grains give each task 8-20 us of work: (64, 32) stays serial, (64, 256) splits its
// forward only, (80, 1000) splits both.
constexpr std::int64_t kForwardGrain = 8192;
constexpr std::int64_t kBackwardGrain = 32768;

std::int64_t rows_per_task(std::int64_t grain, std::int64_t H) {
  return std::max<std::int64_t>(1, grain / std::max<std::int64_t>(1, H));
}

// saved (B, 4H), per row [r | z | n | gh_n]: what the backward needs besides h (storing them
// costs no transcendental in the backward); null when nothing is recorded.
template <class T>
void gru_forward(const T* gi, const T* gh, const T* h, T* out, T* saved, std::int64_t B, std::int64_t H) {
  kernels::parallel_for(B, rows_per_task(kForwardGrain, H), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const T *gib = gi + b * 3 * H, *ghb = gh + b * 3 * H;
      T* s = saved ? saved + b * 4 * H : nullptr;
      auto part = [&](int k) { return s ? s + k * H : nullptr; };
      map_lanes<T, 7, 5>({gib, gib + H, gib + 2 * H, ghb, ghb + H, ghb + 2 * H, h + b * H},
                         {out + b * H, part(0), part(1), part(2), part(3)}, H, [](const auto& x, auto& y) {
                           const auto& [gi_r, gi_z, gi_n, gh_r, gh_z, gh_n, hv] = x;
                           const Batch<T> r = kernels::gate_sigmoid(gi_r + gh_r);
                           const Batch<T> z = kernels::gate_sigmoid(gi_z + gh_z);
                           const Batch<T> n = kernels::gate_tanh(gi_n + r * gh_n);
                           y = {n + z * (hv - n), r, z, n, gh_n};  // (1 - z) n + z h, as the composite
                         });
    }
  });
}

// Given g = dL/dh': dh = g z; through z: g (h - n) z (1 - z) to gi_z and gh_z; through n:
// a = g (1 - z)(1 - n²) to gi_n, a r to gh_n, and a gh_n r (1 - r) to gi_r and gh_r.
// Null outputs are not written.
template <class T>
void gru_backward(const T* g, const T* h, const T* saved, T* dgi, T* dgh, T* dh, std::int64_t B, std::int64_t H) {
  kernels::parallel_for(B, rows_per_task(kBackwardGrain, H), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* s = saved + b * 4 * H;
      T* di = dgi ? dgi + b * 3 * H : nullptr;
      T* dhh = dgh ? dgh + b * 3 * H : nullptr;
      auto at = [](T* p, std::int64_t off) { return p ? p + off : nullptr; };
      map_lanes<T, 6, 7>({g + b * H, h + b * H, s, s + H, s + 2 * H, s + 3 * H},
                         {di, at(di, H), at(di, 2 * H), dhh, at(dhh, H), at(dhh, 2 * H), at(dh, b * H)}, H,
                         [](const auto& x, auto& y) {
                           const auto& [gv, hv, r, z, n, gh_n] = x;
                           const Batch<T> one(T(1));
                           const Batch<T> d_z = gv * (hv - n) * z * (one - z);
                           const Batch<T> d_n = gv * (one - z) * (one - n * n);
                           const Batch<T> d_r = d_n * gh_n * r * (one - r);
                           y = {d_r, d_z, d_n, d_r, d_z, d_n * r, gv * z};
                         });
    }
  });
}

/// A gate's saved activation `value` as a graph tensor of its pre-activation `pre`, recorded with the
/// derivative written in the value itself (σ' = s (1 - s), tanh' = 1 - t²), as tg::sigmoid and
/// tg::tanh record theirs: differentiable to any order, and `pre`'s data is never read.
Tensor gate_of(const Tensor& pre, const Tensor& value, bool is_tanh) {
  auto slope = [is_tanh](const Tensor& s) { return is_tanh ? 1.0 - s * s : s * (1.0 - s); };
  return record("gru_cell_fused", value, {pre}, Saves::output(),
                [value, slope](BackwardContext& ctx) { ctx.accumulate(0, ctx.grad_output() * slope(value)); },
                [value, slope](GradGraphContext& ctx) {
                  ctx.accumulate(0, ctx.grad_output() * slope(ctx.output(value)));
                });
}

/// The differentiable backward of gru_cell_fused: the composite h' = n + z (h - n) rebuilt on graph
/// tensors from what the kernel closure saved (r, z, n, gh_n and h), so the cell keeps no copy of
/// gi and gh. The gates come from gate_of, so the inputs' data is read only by the products: h,
/// and gh_n in r gh_n; zeros stand in for the rest of gi and gh.
struct GruGraph {
  Tensor saved, h;
  std::int64_t B, H;
  void operator()(GradGraphContext& ctx) const {
    const Tensor part[4] = {narrow(saved, 1, 0, H), narrow(saved, 1, H, H), narrow(saved, 1, 2 * H, H),
                            narrow(saved, 1, 3 * H, H)};  // r, z, n, gh_n
    const Tensor gi = ctx.input(0, Tensor::zeros({B, 3 * H}, h.dtype()));
    const Tensor gh = ctx.input(1, concat({Tensor::zeros({B, 2 * H}, h.dtype()), part[3]}, 1));
    const Tensor hg = ctx.input(2, h);
    auto gate = [&](int k) { return narrow(gi, 1, k * H, H) + narrow(gh, 1, k * H, H); };
    const Tensor r = gate_of(gate(0), part[0], false);
    const Tensor z = gate_of(gate(1), part[1], false);
    const Tensor n = gate_of(narrow(gi, 1, 2 * H, H) + r * narrow(gh, 1, 2 * H, H), part[2], true);
    ctx.backward_through(n + z * (hg - n));
  }
};

std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().str() : "undefined"; }

void check_gru_args(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  const std::string op = "gru_cell_fused";
  if (!h.defined() || h.dim() != 2)
    throw std::invalid_argument(op + ": h must be (B, H), got shape " + shape_of(h));
  const Shape gates{h.size(0), 3 * h.size(1)};
  if (!gi.defined() || !gh.defined() || !(gi.shape() == gates) || !(gh.shape() == gates))
    throw std::invalid_argument(op + ": gi of shape " + shape_of(gi) + " and gh of shape " + shape_of(gh) +
                                " must both be (B, 3H) = " + gates.str() + " for h of shape " + h.shape().str());
  if (!is_floating(h.dtype()) || gi.dtype() != h.dtype() || gh.dtype() != h.dtype())
    throw std::invalid_argument(op + ": gi, gh and h must be all float32 or all float64, got " + std::string(dtype_name(gi.dtype())) +
                                ", " + std::string(dtype_name(gh.dtype())) + " and " + std::string(dtype_name(h.dtype())) +
                                " (shapes " + gi.shape().str() + ", " + gh.shape().str() + ", " + h.shape().str() + ")");
}

}  // namespace

Tensor gru_cell_fused(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  const char* op = "gru_cell_fused";
  check_gru_args(gi, gh, h);
  const std::int64_t B = h.size(0), H = h.size(1);
  const bool recording = GradMode::enabled() && (gi.requires_grad() || gh.requires_grad() || h.requires_grad());
  Tensor out = Tensor::empty(h.shape(), h.dtype());
  Tensor saved = recording ? Tensor::empty(Shape{B, 4 * H}, h.dtype()) : Tensor();
  kernels::dispatch_floating(op, h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gru_forward<T>(gi.data<T>(), gh.data<T>(), h.data<T>(), out.data<T>(), recording ? saved.data<T>() : nullptr, B, H);
  });
  const Tensor h_data = recording ? h.detach() : Tensor();  // one handle for both backwards
  return record(op, out, {gi, gh, h}, Saves::inputs(2), [saved, h = h_data, B, H, op](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    const Shape gates{B, 3 * H};
    Tensor dgi = ctx.needs_grad(0) ? Tensor::empty(gates, h.dtype()) : Tensor();
    Tensor dgh = ctx.needs_grad(1) ? Tensor::empty(gates, h.dtype()) : Tensor();
    Tensor dh = ctx.needs_grad(2) ? Tensor::empty(h.shape(), h.dtype()) : Tensor();
    kernels::dispatch_floating(op, h.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto ptr = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
      gru_backward<T>(g.data<T>(), h.data<T>(), saved.data<T>(), ptr(dgi), ptr(dgh), ptr(dh), B, H);
    });
    if (dgi.defined()) ctx.accumulate(0, std::move(dgi));
    if (dgh.defined()) ctx.accumulate(1, std::move(dgh));
    if (dh.defined()) ctx.accumulate(2, std::move(dh));
  }, GruGraph{saved, h_data, B, H});
}

}  // namespace tg
