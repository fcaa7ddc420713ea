// Convolution, pooling, batch_norm and group_norm (autograd/ops_conv.h).
//
// conv: per image, im2col (rows (c, kh, kw), columns (oh, ow)) and one GEMM per group,
// Y_g = W_g col_g; a 1x1 kernel with stride 1 and no padding reads the image itself. Images run in
// parallel (each on the serial GEMM); one image uses the parallel GEMM. The backward makes the
// column matrix once per image for both gradients: dW_g += dY_g col_gᵀ, and col2im(W_gᵀ dY_g) for
// the input. Weight and bias gradients sum over fixed blocks of images, then the blocks in order,
// so the result does not depend on the thread count. conv, conv_input (the transposed conv) and
// conv_weight are each other's derivatives, so each records the other two as its backward, and
// every order of derivative is available.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/ops_conv.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_norm.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/tape.h"

namespace tg {

namespace {

using std::int64_t;

[[noreturn]] void fail(const char* op, const std::string& what) { throw std::invalid_argument(std::string(op) + ": " + what); }

std::string pair_str(int64_t a, int64_t b, const char* sep = " x ") {
  return "(" + std::to_string(a) + sep + std::to_string(b) + ")";
}

void check_tensor(const char* op, const char* what, const Tensor& t, const Tensor& like) {
  if (!t.defined()) fail(op, std::string(what) + " is undefined");
  if (!is_floating(t.dtype()))
    fail(op, std::string("expects floating-point tensors, got ") + what + " " + std::string(dtype_name(t.dtype())) +
                 " of shape " + t.shape().str());
  if (like.defined() && t.dtype() != like.dtype())
    fail(op, std::string(what) + " " + t.shape().str() + " is " + std::string(dtype_name(t.dtype())) + ", input " +
                 like.shape().str() + " is " + std::string(dtype_name(like.dtype())));
}

// ---- convolution geometry ------------------------------------------------------------------

struct ConvParams {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW;
  ConvParams p;
  int64_t Cg() const { return C / p.groups; }
  int64_t Og() const { return O / p.groups; }
  int64_t K() const { return Cg() * KH * KW; }  // rows of one group's column matrix
  int64_t OHW() const { return OH * OW; }
  bool direct() const { return KH == 1 && KW == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0; }
};

int64_t conv_out(int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

// Checks x (N, C, H, W) against a weight of shape w (O, C / groups, KH, KW); `xs`/`ws` are the
// shapes as the caller gave them (conv1d's are 3-D), for the messages.
ConvGeom conv_geom(const char* op, const Shape& x, const Shape& w, const ConvParams& p, const Shape& xs,
                   const Shape& ws) {
  if (p.sh <= 0 || p.sw <= 0) fail(op, "stride must be positive, got " + pair_str(p.sh, p.sw, ", "));
  if (p.dh <= 0 || p.dw <= 0) fail(op, "dilation must be positive, got " + pair_str(p.dh, p.dw, ", "));
  if (p.ph < 0 || p.pw < 0) fail(op, "padding must be non-negative, got " + pair_str(p.ph, p.pw, ", "));
  if (p.groups <= 0) fail(op, "groups must be positive, got " + std::to_string(p.groups));
  ConvGeom g{x[0], x[1], x[2], x[3], w[0], w[2], w[3], 0, 0, p};
  for (int64_t d : w)
    if (d <= 0) fail(op, "weight " + ws.str() + " has an empty dimension");
  if (g.O % p.groups != 0)
    fail(op, "out_channels " + std::to_string(g.O) + " of weight " + ws.str() + " are not divisible by groups=" +
                 std::to_string(p.groups));
  if (g.C % p.groups != 0)
    fail(op, "input " + xs.str() + " has " + std::to_string(g.C) + " channels, not divisible by groups=" +
                 std::to_string(p.groups));
  if (g.C != w[1] * p.groups)
    fail(op, "input " + xs.str() + " has " + std::to_string(g.C) + " channels, but weight " + ws.str() +
                 " with groups=" + std::to_string(p.groups) + " expects " + std::to_string(w[1] * p.groups));
  const int64_t eh = p.dh * (g.KH - 1) + 1, ew = p.dw * (g.KW - 1) + 1;
  const bool one_d = xs.size() != 4 && ws.size() == 3;
  if (g.H + 2 * p.ph < eh || g.W + 2 * p.pw < ew) {
    if (one_d)
      fail(op, "padded input length " + std::to_string(g.W + 2 * p.pw) + " (input " + xs.str() + ", padding " +
                   std::to_string(p.pw) + ") is smaller than the dilated kernel " + std::to_string(ew) + " (weight " +
                   ws.str() + ")");
    fail(op, "padded input size " + pair_str(g.H + 2 * p.ph, g.W + 2 * p.pw) + " (input " + xs.str() + ", padding " +
                 pair_str(p.ph, p.pw, ", ") + ") is smaller than the dilated kernel " + pair_str(eh, ew) +
                 " (weight " + ws.str() + ")");
  }
  g.OH = conv_out(g.H, p.ph, p.dh, g.KH, p.sh);
  g.OW = conv_out(g.W, p.pw, p.dw, g.KW, p.sw);
  return g;
}

// ---- conv kernels ----------------------------------------------------------------------------

// Columns [lo, hi) of an output row whose input column ow * sw + off lies in [0, W).
inline void valid_range(int64_t off, int64_t sw, int64_t W, int64_t OW, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
  hi = W - 1 - off < 0 ? 0 : std::min(OW, (W - 1 - off) / sw + 1);
  lo = std::min(lo, OW);
  hi = std::max(hi, lo);
}

template <class T>
void im2col(const T* x, const ConvGeom& g, T* col) {
  const ConvParams& p = g.p;
  for (int64_t c = 0; c < g.Cg() * p.groups; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = col + ((c * g.KH + kh) * g.KW + kw) * g.OHW();
        const int64_t off = kw * p.dw - p.pw;
        int64_t lo, hi;
        valid_range(off, p.sw, g.W, g.OW, lo, hi);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          T* out = row + oh * g.OW;
          const int64_t ih = oh * p.sh - p.ph + kh * p.dh;
          if (ih < 0 || ih >= g.H) {
            std::fill(out, out + g.OW, T(0));
            continue;
          }
          const T* in = x + (c * g.H + ih) * g.W + off;
          std::fill(out, out + lo, T(0));
          if (p.sw == 1)
            std::memcpy(out + lo, in + lo, sizeof(T) * (hi - lo));
          else
            for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * p.sw];
          std::fill(out + hi, out + g.OW, T(0));
        }
      }
}

// x += col2im(col): the adjoint of im2col.
template <class T>
void col2im_add(const T* col, const ConvGeom& g, T* x) {
  const ConvParams& p = g.p;
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* row = col + ((c * g.KH + kh) * g.KW + kw) * g.OHW();
        const int64_t off = kw * p.dw - p.pw;
        int64_t lo, hi;
        valid_range(off, p.sw, g.W, g.OW, lo, hi);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * p.sh - p.ph + kh * p.dh;
          if (ih < 0 || ih >= g.H) continue;
          const T* src = row + oh * g.OW;
          T* out = x + (c * g.H + ih) * g.W + off;
          for (int64_t ow = lo; ow < hi; ++ow) out[ow * p.sw] += src[ow];
        }
      }
}

template <class T>
void gemm_any(bool parallel, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
              int64_t ldb, T beta, T* C, int64_t ldc) {
  if (parallel)
    kernels::gemm<T>(ta, tb, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc);
  else
    kernels::gemm_serial<T>(ta, tb, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void conv_forward(const T* x, const T* w, const T* b, T* y, const ConvGeom& g) {
  const int64_t G = g.p.groups, K = g.K(), OHW = g.OHW(), Og = g.Og(), img = g.C * g.H * g.W;
  auto image = [&](int64_t n, T* col, bool parallel) {
    const T* src = x + n * img;
    if (!g.direct()) {
      im2col(src, g, col);
      src = col;
    }
    T* yn = y + n * g.O * OHW;
    for (int64_t gr = 0; gr < G; ++gr)
      gemm_any<T>(parallel, false, false, Og, OHW, K, w + gr * Og * K, K, src + gr * K * OHW, OHW, T(0),
                  yn + gr * Og * OHW, OHW);
    if (b)
      for (int64_t o = 0; o < g.O; ++o) {
        T* row = yn + o * OHW;
        for (int64_t i = 0; i < OHW; ++i) row[i] += b[o];
      }
  };
  const int64_t col_size = g.direct() ? 0 : G * K * OHW;
  if (g.N == 1) {
    std::unique_ptr<T[]> col(new T[col_size]);
    image(0, col.get(), true);
    return;
  }
  kernels::parallel_for(g.N, 1, [&](int64_t n0, int64_t n1) {
    std::unique_ptr<T[]> col(new T[col_size]);
    for (int64_t n = n0; n < n1; ++n) image(n, col.get(), false);
  });
}

// Gradients of conv for the pointers that are not null: gx (overwritten), gw, gb (overwritten).
// x is read only for gw, w only for gx.
template <class T>
void conv_backward(const T* x, const T* w, const T* gy, T* gx, T* gw, T* gb, const ConvGeom& g) {
  const int64_t G = g.p.groups, K = g.K(), OHW = g.OHW(), Og = g.Og(), img = g.C * g.H * g.W;
  const int64_t wsize = g.O * K;
  const bool sums = gw || gb;
  // Blocks of images whose weight/bias gradients are summed separately, then in block order. Their
  // number depends on the shapes only, and the partial sums stay within ~4M elements.
  const int64_t blocks = !sums ? g.N : std::clamp<int64_t>(std::min<int64_t>(8, (int64_t{1} << 22) / std::max<int64_t>(1, wsize + g.O)), 1, std::max<int64_t>(1, g.N));
  const int64_t col_size = g.direct() ? 0 : G * K * OHW;
  std::vector<T> partial(sums ? blocks * (wsize + g.O) : 0, T(0));
  auto block = [&](int64_t bk, bool parallel) {
    const int64_t n0 = g.N * bk / blocks, n1 = g.N * (bk + 1) / blocks;
    std::unique_ptr<T[]> col(new T[gw ? col_size : 0]), dcol(new T[gx ? col_size : 0]);
    T* pw = sums ? partial.data() + bk * (wsize + g.O) : nullptr;
    for (int64_t n = n0; n < n1; ++n) {
      const T* gyn = gy + n * g.O * OHW;
      if (gw) {
        const T* src = x + n * img;
        if (!g.direct()) {
          im2col(src, g, col.get());
          src = col.get();
        }
        for (int64_t gr = 0; gr < G; ++gr)
          gemm_any<T>(parallel, false, true, Og, K, OHW, gyn + gr * Og * OHW, OHW, src + gr * K * OHW, OHW,
                      n == n0 ? T(0) : T(1), pw + gr * Og * K, K);
      }
      if (gb)
        for (int64_t o = 0; o < g.O; ++o) {
          T s = 0;
          for (int64_t i = 0; i < OHW; ++i) s += gyn[o * OHW + i];
          pw[wsize + o] += s;
        }
      if (gx) {
        T* gxn = gx + n * img;
        if (g.direct()) {
          for (int64_t gr = 0; gr < G; ++gr)
            gemm_any<T>(parallel, true, false, K, OHW, Og, w + gr * Og * K, K, gyn + gr * Og * OHW, OHW, T(0),
                        gxn + gr * K * OHW, OHW);
        } else {
          for (int64_t gr = 0; gr < G; ++gr)
            gemm_any<T>(parallel, true, false, K, OHW, Og, w + gr * Og * K, K, gyn + gr * Og * OHW, OHW, T(0),
                        dcol.get() + gr * K * OHW, OHW);
          std::fill(gxn, gxn + img, T(0));
          col2im_add(dcol.get(), g, gxn);
        }
      }
    }
  };
  if (blocks == 1)
    block(0, true);
  else
    kernels::parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t bk = b0; bk < b1; ++bk) block(bk, false);
    });
  for (int64_t i = 0; sums && i < wsize + g.O; ++i) {
    T s = 0;
    for (int64_t bk = 0; bk < blocks; ++bk) s += partial[bk * (wsize + g.O) + i];
    if (i < wsize && gw) gw[i] = s;
    if (i >= wsize && gb) gb[i - wsize] = s;
  }
}

// ---- conv ops: forward, input gradient, weight gradient; each the others' derivative ---------

Tensor conv_op(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p, const char* op);
Tensor conv_input_op(const Shape& xs, const Tensor& w, const Tensor& gy, const ConvParams& p);
Tensor conv_weight_op(const Tensor& x, const Shape& ws, const Tensor& gy, const ConvParams& p);

ConvGeom geom_of(const Shape& xs, const Shape& ws, const ConvParams& p) {
  ConvGeom g{xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], 0, 0, p};
  g.OH = conv_out(g.H, p.ph, p.dh, g.KH, p.sh);
  g.OW = conv_out(g.W, p.pw, p.dw, g.KW, p.sw);
  return g;
}

// The backward of conv(x, w) + b, in the kernel closure (detached tensors, recording off) and in
// the graph closure (graph tensors): the same formulas.
struct ConvBackward {
  Tensor x, w;  // detached
  ConvParams p;
  int ib;
  const char* op;
  void operator()(BackwardContext& ctx) const {
    const Tensor& gy = ctx.grad_output();
    const bool need_x = ctx.needs_grad(0), need_w = ctx.needs_grad(1), need_b = ib > 0 && ctx.needs_grad(ib);
    const ConvGeom g = geom_of(x.shape(), w.shape(), p);
    Tensor dx = need_x ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
    Tensor dw = need_w ? Tensor::empty(w.shape(), x.dtype()) : Tensor();
    Tensor db = need_b ? Tensor::empty(Shape{g.O}, x.dtype()) : Tensor();
    kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto ptr = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
      conv_backward<T>(x.data<T>(), w.data<T>(), gy.data<T>(), ptr(dx), ptr(dw), ptr(db), g);
    });
    if (need_x) ctx.accumulate(0, std::move(dx));
    if (need_w) ctx.accumulate(1, std::move(dw));
    if (need_b) ctx.accumulate(ib, std::move(db));
  }
  void graph(GradGraphContext& ctx) const {
    const Tensor& gy = ctx.grad_output();
    if (ctx.needs_grad(0)) ctx.accumulate(0, conv_input_op(x.shape(), ctx.input(1, w), gy, p));
    if (ctx.needs_grad(1)) ctx.accumulate(1, conv_weight_op(ctx.input(0, x), w.shape(), gy, p));
    if (ib > 0 && ctx.needs_grad(ib)) ctx.accumulate(ib, sum(gy, {0, 2, 3}));
  }
};

Tensor conv_op(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p, const char* op) {
  const ConvGeom g = geom_of(x.shape(), w.shape(), p);
  Tensor y = Tensor::empty(Shape{g.N, g.O, g.OH, g.OW}, x.dtype());
  kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    conv_forward<T>(x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr, y.data<T>(), g);
  });
  const Tensor inputs[3] = {x, w, b};
  const int ib = b.defined() ? 2 : -1;
  return record(op, y, inputs, b.defined() ? 3 : 2, Saves::inputs(0, 1), ConvBackward{x.detach(), w.detach(), p, ib, op});
}

// conv_input(gy, w): inputs {gy, w}. For a seed v (input-shaped): d gy = conv(v, w), d w = conv_weight(v, gy).
struct ConvInputBackward {
  Tensor gy, w;
  ConvParams p;
  Shape xs;
  void run(const Tensor& v, const Tensor& gy_, const Tensor& w_, bool need_gy, bool need_w, auto&& deliver) const {
    if (need_gy) deliver(0, conv_op(v, w_, Tensor(), p, "conv2d"));
    if (need_w) deliver(1, conv_weight_op(v, w_.shape(), gy_, p));
  }
  void operator()(BackwardContext& ctx) const {
    run(ctx.grad_output(), gy, w, ctx.needs_grad(0), ctx.needs_grad(1),
        [&](int i, Tensor g) { ctx.accumulate(i, std::move(g)); });
  }
  void graph(GradGraphContext& ctx) const {
    run(ctx.grad_output(), ctx.input(0, gy), ctx.input(1, w), ctx.needs_grad(0), ctx.needs_grad(1),
        [&](int i, const Tensor& g) { ctx.accumulate(i, g); });
  }
};

Tensor conv_input_op(const Shape& xs, const Tensor& w, const Tensor& gy, const ConvParams& p) {
  const ConvGeom g = geom_of(xs, w.shape(), p);
  Tensor dx = Tensor::empty(xs, w.dtype());
  kernels::dispatch_floating("conv2d_input", w.dtype(), [&](auto tag) {
    using T = decltype(tag);
    conv_backward<T>(nullptr, w.data<T>(), gy.data<T>(), dx.data<T>(), nullptr, nullptr, g);
  });
  return record("conv2d_input", dx, {gy, w}, Saves::inputs(0, 1), ConvInputBackward{gy.detach(), w.detach(), p, xs});
}

// conv_weight(x, gy): inputs {x, gy}. For a seed V (weight-shaped): d x = conv_input(V, gy), d gy = conv(x, V).
struct ConvWeightBackward {
  Tensor x, gy;
  ConvParams p;
  void run(const Tensor& v, const Tensor& x_, const Tensor& gy_, bool need_x, bool need_gy, auto&& deliver) const {
    if (need_x) deliver(0, conv_input_op(x_.shape(), v, gy_, p));
    if (need_gy) deliver(1, conv_op(x_, v, Tensor(), p, "conv2d"));
  }
  void operator()(BackwardContext& ctx) const {
    run(ctx.grad_output(), x, gy, ctx.needs_grad(0), ctx.needs_grad(1),
        [&](int i, Tensor g) { ctx.accumulate(i, std::move(g)); });
  }
  void graph(GradGraphContext& ctx) const {
    run(ctx.grad_output(), ctx.input(0, x), ctx.input(1, gy), ctx.needs_grad(0), ctx.needs_grad(1),
        [&](int i, const Tensor& g) { ctx.accumulate(i, g); });
  }
};

Tensor conv_weight_op(const Tensor& x, const Shape& ws, const Tensor& gy, const ConvParams& p) {
  const ConvGeom g = geom_of(x.shape(), ws, p);
  Tensor dw = Tensor::empty(ws, x.dtype());
  kernels::dispatch_floating("conv2d_weight", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    conv_backward<T>(x.data<T>(), nullptr, gy.data<T>(), nullptr, dw.data<T>(), nullptr, g);
  });
  return record("conv2d_weight", dw, {x, gy}, Saves::inputs(0, 1), ConvWeightBackward{x.detach(), gy.detach(), p});
}

// conv1d and conv2d: checks in the caller's terms, "same"/"valid" padding, unbatched input, and
// conv1d as conv2d over a height of 1.
Tensor conv_entry(const char* op, int spatial, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  IntPair stride, const ConvPadding& padding, IntPair dilation, int64_t groups) {
  check_tensor(op, "input", input, Tensor());
  check_tensor(op, "weight", weight, input);
  if (bias.defined()) check_tensor(op, "bias", bias, input);
  const char* layout = spatial == 2 ? "(N, C, H, W) or (C, H, W)" : "(N, C, L) or (C, L)";
  if (input.dim() != spatial + 1 && input.dim() != spatial + 2)
    fail(op, std::string("expects an input ") + layout + ", got " + input.shape().str());
  if (weight.dim() != spatial + 2)
    fail(op, std::string("expects a ") + std::to_string(spatial + 2) + "-D weight (out_channels, in_channels / groups, " +
                 (spatial == 2 ? "kH, kW" : "kW") + "), got " + weight.shape().str());
  if (bias.defined() && !(bias.shape() == Shape{weight.size(0)}))
    fail(op, "bias " + bias.shape().str() + " does not match out_channels " + std::to_string(weight.size(0)) +
                 " of weight " + weight.shape().str());
  const bool batched = input.dim() == spatial + 2;
  Tensor x = batched ? input : unsqueeze(input, 0);
  Tensor w = weight;
  ConvParams p{stride.h, stride.w, padding.value.h, padding.value.w, dilation.h, dilation.w, groups};
  if (spatial == 1) {
    x = unsqueeze(x, 2);
    w = unsqueeze(w, 2);
    p.sh = 1;
    p.ph = 0;
    p.dh = 1;
    if (!padding.mode && padding.value.h != padding.value.w)
      fail(op, "padding is one number, got " + pair_str(padding.value.h, padding.value.w, ", "));
  }
  if (padding.mode) {
    p.ph = p.pw = 0;
    if (*padding.mode == PaddingMode::same) {
      if (p.sh != 1 || p.sw != 1) fail(op, "padding='same' is not supported for strided convolutions");
      const int64_t th = p.dh * (w.size(2) - 1), tw = p.dw * (w.size(3) - 1);
      p.ph = th / 2;
      p.pw = tw / 2;
      // An odd total: the extra element goes after, as PyTorch (an explicit pad of the input).
      if (th % 2 || tw % 2) x = pad(x, {0, tw % 2, 0, th % 2});
    }
  }
  conv_geom(op, x.shape(), w.shape(), p, input.shape(), weight.shape());
  Tensor y = conv_op(x, w, bias, p, op);
  if (spatial == 1) y = squeeze(y, 2);
  return batched ? y : squeeze(y, 0);
}

// Checks and parameters of torch.nn.grad.conv2d_input / conv2d_weight.
ConvParams grad_params(const char* op, const Shape& xs, const Shape& ws, const Tensor& gy, IntPair s, IntPair pd,
                       IntPair d, int64_t groups) {
  if (xs.size() != 4 || ws.size() != 4)
    fail(op, "expects a 4-D input size and weight, got " + xs.str() + " and " + ws.str());
  ConvParams p{s.h, s.w, pd.h, pd.w, d.h, d.w, groups};
  const ConvGeom g = conv_geom(op, xs, ws, p, xs, ws);
  const Shape want{g.N, g.O, g.OH, g.OW};
  if (!(gy.shape() == want))
    fail(op, "grad_output " + gy.shape().str() + " does not match the output " + want.str() + " of input " + xs.str() +
                 " and weight " + ws.str());
  return p;
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntPair stride, ConvPadding padding,
              IntPair dilation, std::int64_t groups) {
  return conv_entry("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::int64_t stride, ConvPadding padding,
              std::int64_t dilation, std::int64_t groups) {
  return conv_entry("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output, IntPair stride,
                    IntPair padding, IntPair dilation, std::int64_t groups) {
  check_tensor("conv2d_input", "weight", weight, Tensor());
  check_tensor("conv2d_input", "grad_output", grad_output, weight);
  const ConvParams p =
      grad_params("conv2d_input", input_size, weight.shape(), grad_output, stride, padding, dilation, groups);
  return conv_input_op(input_size, weight, grad_output, p);
}

Tensor conv2d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output, IntPair stride,
                     IntPair padding, IntPair dilation, std::int64_t groups) {
  check_tensor("conv2d_weight", "input", input, Tensor());
  check_tensor("conv2d_weight", "grad_output", grad_output, input);
  const ConvParams p =
      grad_params("conv2d_weight", input.shape(), weight_size, grad_output, stride, padding, dilation, groups);
  return conv_weight_op(input, weight_size, grad_output, p);
}

// ---- pooling -----------------------------------------------------------------------------------

namespace {

struct PoolGeom {
  int64_t P, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
};

// torch's pooling_output_shape: with ceil_mode the last window must start inside the input or
// the left padding.
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Brings a pooling input to (N, C, H, W) (3-D: a batch of 1; `one_d`: (N, C, L) or (C, L) with a
// height of 1) and checks the window; `shape_in` is what the caller gave, for the messages.
PoolGeom pool_geom(const char* op, const Tensor& input, bool one_d, IntPair k, IntPair s, IntPair pd, IntPair d,
                   bool ceil_mode, Tensor& x4) {
  check_tensor(op, "input", input, Tensor());
  const int lo = one_d ? 2 : 3;
  if (input.dim() != lo && input.dim() != lo + 1)
    fail(op, std::string("expects an input ") + (one_d ? "(N, C, L) or (C, L)" : "(N, C, H, W) or (C, H, W)") +
                 ", got " + input.shape().str());
  for (int i = 1; i < input.dim(); ++i)
    if (input.size(i) == 0) fail(op, "input " + input.shape().str() + " has an empty non-batch dimension");
  x4 = input.dim() == lo ? unsqueeze(input, 0) : input;
  if (one_d) x4 = unsqueeze(x4, 2);
  const auto one = [&](int64_t a, int64_t b) { return one_d ? std::to_string(b) : pair_str(a, b, ", "); };
  if (k.h <= 0 || k.w <= 0) fail(op, "kernel_size must be positive, got " + one(k.h, k.w));
  if (s.h <= 0 || s.w <= 0) fail(op, "stride must be positive, got " + one(s.h, s.w));
  if (d.h <= 0 || d.w <= 0) fail(op, "dilation must be positive, got " + one(d.h, d.w));
  if (pd.h < 0 || pd.w < 0 || pd.h > k.h / 2 || pd.w > k.w / 2)
    fail(op, "padding " + one(pd.h, pd.w) + " must be non-negative and at most half of kernel_size " + one(k.h, k.w));
  PoolGeom g{x4.size(0) * x4.size(1), x4.size(2), x4.size(3), 0, 0, k.h, k.w, s.h, s.w, pd.h, pd.w, d.h, d.w};
  g.OH = pool_out(g.H, k.h, pd.h, s.h, d.h, ceil_mode);
  g.OW = pool_out(g.W, k.w, pd.w, s.w, d.w, ceil_mode);
  if (g.OH < 1 || g.OW < 1)
    fail(op, "input " + input.shape().str() + " is too small for kernel_size " + one(k.h, k.w) + " (dilation " +
                 one(d.h, d.w) + ", padding " + one(pd.h, pd.w) + "): the output would be " + one(g.OH, g.OW));
  return g;
}

// Restores the caller's layout: drops the height of 1 (1-D) and the batch of 1 (unbatched).
Tensor pool_result(const Tensor& y, const Tensor& input, bool one_d) {
  Tensor out = one_d ? squeeze(y, 2) : y;
  return input.dim() == (one_d ? 2 : 3) ? squeeze(out, 0) : out;
}

// Planes per task: about 32K window elements each.
int64_t plane_grain(const PoolGeom& g) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, g.OH * g.OW * g.kh * g.kw)); }

template <class T>
void max_pool_forward(const T* x, T* y, int64_t* idx, const PoolGeom& g) {
  // Valid output columns of each kernel column, computed once (not per row).
  std::vector<int64_t> lo(g.kw), hi(g.kw);
  for (int64_t j = 0; j < g.kw; ++j) valid_range(j * g.dw - g.pw, g.sw, g.W, g.OW, lo[j], hi[j]);
  kernels::parallel_for(g.P, plane_grain(g), [&](int64_t p0, int64_t p1) {
    const int64_t H = g.H, W = g.W, OW = g.OW, sw = g.sw;
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        T* best = y + (p * g.OH + oh) * OW;
        int64_t* at = idx + (p * g.OH + oh) * OW;
        std::fill(best, best + OW, -std::numeric_limits<T>::infinity());
        std::fill(at, at + OW, int64_t{-1});
        // Window positions in row-major order, each over the whole output row (independent
        // outputs side by side instead of one compare chain per output). As PyTorch: the first
        // valid position, then any later one that is greater or NaN, takes the maximum.
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= H) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t base = ih * W + j * g.dw - g.pw;
            const T* row = xp + base;
            for (int64_t ow = lo[j]; ow < hi[j]; ++ow) {
              const T v = row[ow * sw], b = best[ow];
              const int64_t a = at[ow];
              const bool take = (v > b) | (v != v) | (a < 0);
              best[ow] = take ? v : b;
              at[ow] = take ? base + ow * sw : a;
            }
          }
        }
      }
    }
  });
}

// gx (zeroed here) with gy added at each window's maximum.
template <class T>
void max_pool_backward(const T* gy, const int64_t* idx, T* gx, const PoolGeom& g) {
  kernels::parallel_for(g.P, plane_grain(g), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gxp = gx + p * g.H * g.W;
      std::fill(gxp, gxp + g.H * g.W, T(0));
      const int64_t o = p * g.OH * g.OW;
      for (int64_t i = 0; i < g.OH * g.OW; ++i)
        if (idx[o + i] >= 0) gxp[idx[o + i]] += gy[o + i];
    }
  });
}

std::tuple<Tensor, Tensor> max_pool_impl(const char* op, bool one_d, const Tensor& input, IntPair k,
                                         std::optional<IntPair> stride, IntPair pd, IntPair d, bool ceil_mode) {
  Tensor x;
  const PoolGeom g = pool_geom(op, input, one_d, k, stride.value_or(k), pd, d, ceil_mode, x);
  const Shape ys{x.size(0), x.size(1), g.OH, g.OW};
  Tensor y = Tensor::empty(ys, x.dtype()), idx = Tensor::empty(ys, DType::i64);
  kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_pool_forward<T>(x.data<T>(), y.data<T>(), idx.data<int64_t>(), g);
  });
  struct Backward {
    Tensor idx;
    Shape xs;
    PoolGeom g;
    const char* op;
    void operator()(BackwardContext& ctx) const {
      const Tensor& gy = ctx.grad_output();
      Tensor gx = Tensor::empty(xs, gy.dtype());
      kernels::dispatch_floating(op, gy.dtype(), [&](auto tag) {
        using T = decltype(tag);
        max_pool_backward<T>(ctx.grad_output().data<T>(), idx.data<int64_t>(), gx.data<T>(), g);
      });
      ctx.accumulate(0, std::move(gx));
    }
    // The gradient scattered to the saved maxima: linear in gy, and locally constant in x (so x
    // needs no capture).
    void graph(GradGraphContext& ctx) const {
      const Tensor& gy = ctx.grad_output();
      const Tensor flat = scatter_add(Tensor::zeros(Shape{g.P, g.H * g.W}, gy.dtype()), 1,
                                      reshape(idx, Shape{g.P, g.OH * g.OW}), reshape(gy, Shape{g.P, g.OH * g.OW}));
      ctx.accumulate(0, reshape(flat, xs));
    }
  };
  y = record(op, y, {x}, Saves::none(), Backward{idx, x.shape(), g, op});
  return {pool_result(y, input, one_d), pool_result(idx, input, one_d)};
}

// Average pooling of every kind: rectangular windows [h0, h1) x [w0, w1) inside the input (one
// range per output row and column) and a divisor per output element.
struct AvgPlan {
  int64_t P, H, W, OH, OW;
  std::vector<int64_t> h0, h1, w0, w1;
  std::vector<double> div;
};

template <class T>
void avg_forward(const T* x, T* y, const AvgPlan& a) {
  kernels::parallel_for(a.P, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, a.H * a.W)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * a.H * a.W;
      for (int64_t oh = 0; oh < a.OH; ++oh)
        for (int64_t ow = 0; ow < a.OW; ++ow) {
          T s = 0;
          for (int64_t ih = a.h0[oh]; ih < a.h1[oh]; ++ih)
            for (int64_t iw = a.w0[ow]; iw < a.w1[ow]; ++iw) s += xp[ih * a.W + iw];
          y[(p * a.OH + oh) * a.OW + ow] = a.h0[oh] < a.h1[oh] && a.w0[ow] < a.w1[ow] ? static_cast<T>(s / a.div[oh * a.OW + ow]) : T(0);
        }
    }
  });
}

// gx = the adjoint of avg_forward applied to gy.
template <class T>
void avg_adjoint(const T* gy, T* gx, const AvgPlan& a) {
  kernels::parallel_for(a.P, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, a.H * a.W)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gxp = gx + p * a.H * a.W;
      std::fill(gxp, gxp + a.H * a.W, T(0));
      for (int64_t oh = 0; oh < a.OH; ++oh)
        for (int64_t ow = 0; ow < a.OW; ++ow) {
          const T v = static_cast<T>(gy[(p * a.OH + oh) * a.OW + ow] / a.div[oh * a.OW + ow]);
          for (int64_t ih = a.h0[oh]; ih < a.h1[oh]; ++ih)
            for (int64_t iw = a.w0[ow]; iw < a.w1[ow]; ++iw) gxp[ih * a.W + iw] += v;
        }
    }
  });
}

Tensor avg_op(const Tensor& x, std::shared_ptr<const AvgPlan> plan, const char* op);

// The adjoint as an op of its own (the gradient of the pool, and linear), so that the pool's
// backward is differentiable: its derivative is the pool again.
Tensor avg_adjoint_op(const Tensor& gy, std::shared_ptr<const AvgPlan> plan, const Shape& xs, const char* op) {
  Tensor gx = Tensor::empty(xs, gy.dtype());
  kernels::dispatch_floating(op, gy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_adjoint<T>(gy.data<T>(), gx.data<T>(), *plan);
  });
  return record("avg_pool2d_backward", gx, {gy}, Saves::none(),
                [plan, op](BackwardContext& ctx) { ctx.accumulate(0, avg_op(ctx.grad_output(), plan, op)); },
                [plan, op](GradGraphContext& ctx) { ctx.accumulate(0, avg_op(ctx.grad_output(), plan, op)); });
}

Tensor avg_op(const Tensor& x, std::shared_ptr<const AvgPlan> plan, const char* op) {
  Tensor y = Tensor::empty(Shape{x.size(0), x.size(1), plan->OH, plan->OW}, x.dtype());
  kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_forward<T>(x.data<T>(), y.data<T>(), *plan);
  });
  const Shape xs = x.shape();
  return record(
      op, y, {x}, Saves::none(), [plan, xs, op](BackwardContext& ctx) { ctx.accumulate(0, avg_adjoint_op(ctx.grad_output(), plan, xs, op)); },
      [plan, xs, op](GradGraphContext& ctx) { ctx.accumulate(0, avg_adjoint_op(ctx.grad_output(), plan, xs, op)); });
}

Tensor avg_pool_impl(const char* op, bool one_d, const Tensor& input, IntPair k, std::optional<IntPair> stride,
                     IntPair pd, bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  Tensor x;
  const PoolGeom g = pool_geom(op, input, one_d, k, stride.value_or(k), pd, 1, ceil_mode, x);
  if (divisor_override && *divisor_override == 0) fail(op, "divisor_override must be non-zero");
  auto plan = std::make_shared<AvgPlan>();
  AvgPlan& a = *plan;
  a.P = g.P, a.H = g.H, a.W = g.W, a.OH = g.OH, a.OW = g.OW;
  // As PyTorch: the window [start, start + k) clipped to the padded input for the divisor with
  // count_include_pad, then to the input for the sum.
  std::vector<int64_t> hs(g.OH), ws(g.OW);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t s = oh * g.sh - g.ph, e = std::min(s + g.kh, g.H + g.ph);
    hs[oh] = e - s;
    a.h0.push_back(std::max<int64_t>(s, 0));
    a.h1.push_back(std::min(e, g.H));
  }
  for (int64_t ow = 0; ow < g.OW; ++ow) {
    const int64_t s = ow * g.sw - g.pw, e = std::min(s + g.kw, g.W + g.pw);
    ws[ow] = e - s;
    a.w0.push_back(std::max<int64_t>(s, 0));
    a.w1.push_back(std::min(e, g.W));
  }
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow)
      a.div.push_back(divisor_override ? double(*divisor_override)
                      : count_include_pad ? double(hs[oh] * ws[ow])
                                          : double((a.h1[oh] - a.h0[oh]) * (a.w1[ow] - a.w0[ow])));
  return pool_result(avg_op(x, std::move(plan), op), input, one_d);
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntPair kernel_size,
                                                   std::optional<IntPair> stride, IntPair padding, IntPair dilation,
                                                   bool ceil_mode) {
  return max_pool_impl("max_pool2d", false, input, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor max_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride, IntPair padding,
                  IntPair dilation, bool ceil_mode) {
  return std::get<0>(max_pool_impl("max_pool2d", false, input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor max_pool1d(const Tensor& input, std::int64_t kernel_size, std::optional<std::int64_t> stride,
                  std::int64_t padding, std::int64_t dilation, bool ceil_mode) {
  return std::get<0>(max_pool_impl("max_pool1d", true, input, IntPair(1, kernel_size),
                                   IntPair(1, stride.value_or(kernel_size)), IntPair(0, padding), IntPair(1, dilation),
                                   ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, IntPair kernel_size, std::optional<IntPair> stride, IntPair padding,
                  bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  return avg_pool_impl("avg_pool2d", false, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override);
}

Tensor avg_pool1d(const Tensor& input, std::int64_t kernel_size, std::optional<std::int64_t> stride,
                  std::int64_t padding, bool ceil_mode, bool count_include_pad) {
  return avg_pool_impl("avg_pool1d", true, input, IntPair(1, kernel_size), IntPair(1, stride.value_or(kernel_size)),
                       IntPair(0, padding), ceil_mode, count_include_pad, std::nullopt);
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntPair output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_tensor(op, "input", input, Tensor());
  if (input.dim() != 3 && input.dim() != 4) fail(op, "expects an input (N, C, H, W) or (C, H, W), got " + input.shape().str());
  for (int i = 1; i < input.dim(); ++i)
    if (input.size(i) == 0) fail(op, "input " + input.shape().str() + " has an empty non-batch dimension");
  if (output_size.h <= 0 || output_size.w <= 0)
    fail(op, "output_size must be positive, got " + pair_str(output_size.h, output_size.w, ", "));
  const Tensor x = input.dim() == 3 ? unsqueeze(input, 0) : input;
  auto plan = std::make_shared<AvgPlan>();
  AvgPlan& a = *plan;
  a.P = x.size(0) * x.size(1), a.H = x.size(2), a.W = x.size(3), a.OH = output_size.h, a.OW = output_size.w;
  for (int64_t o = 0; o < a.OH; ++o) {
    a.h0.push_back(o * a.H / a.OH);
    a.h1.push_back(((o + 1) * a.H + a.OH - 1) / a.OH);
  }
  for (int64_t o = 0; o < a.OW; ++o) {
    a.w0.push_back(o * a.W / a.OW);
    a.w1.push_back(((o + 1) * a.W + a.OW - 1) / a.OW);
  }
  for (int64_t oh = 0; oh < a.OH; ++oh)
    for (int64_t ow = 0; ow < a.OW; ++ow) a.div.push_back(double((a.h1[oh] - a.h0[oh]) * (a.w1[ow] - a.w0[ow])));
  Tensor y = avg_op(x, std::move(plan), op);
  return input.dim() == 3 ? squeeze(y, 0) : y;
}

// ---- batch_norm, group_norm ----------------------------------------------------------------------

namespace {

// (C) -> (C, 1, ..., 1) broadcasting over (N, C, *) of rank `rank`.
Tensor per_channel(const Tensor& t, int rank) {
  Shape s{t.size(0)};
  for (int i = 2; i < rank; ++i) s.push_back(1);
  return reshape(t, s);
}

std::vector<int64_t> non_channel_dims(int rank) {
  std::vector<int64_t> d{0};
  for (int i = 2; i < rank; ++i) d.push_back(i);
  return d;
}

// The training-mode normalisation composed of reductions and elementwise ops: the reference of
// the fused kernel and its differentiable backward.
Tensor batch_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const auto dims = non_channel_dims(x.dim());
  Tensor y = (x - mean(x, dims, true)) * rsqrt(var(x, dims, Correction{0}, true) + eps);
  if (w.defined()) y = y * per_channel(w, x.dim());
  if (b.defined()) y = y + per_channel(b, x.dim());
  return y;
}

// Sums of a row in double over 8 fixed lanes (vectorisable without reassociation, the same
// result on any thread count).
template <class T, class F>
double lane_sum(int64_t n, F&& term) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += term(i + l);
  for (; i < n; ++i) acc[0] += term(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Per channel c of x viewed as (N, C, S): the batch mean and 1/sqrt(var + eps), sums in double as
// PyTorch's CPU kernel; y = x * a + (b - mean * a) with a = w / sqrt(var + eps).
template <class T>
void bn_forward(const T* x, const T* w, const T* b, T* y, T* mean_out, T* rstd_out, double* var_unbiased, int64_t N,
                int64_t C, int64_t S, double eps) {
  const int64_t cnt = N * S;
  kernels::parallel_for(C, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, cnt)), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = x + (n * C + c) * S;
        s += lane_sum<T>(S, [&](int64_t i) { return double(xr[i]); });
      }
      const double m = s / double(cnt);
      double v = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = x + (n * C + c) * S;
        v += lane_sum<T>(S, [&](int64_t i) { return (double(xr[i]) - m) * (double(xr[i]) - m); });
      }
      const double rstd = 1.0 / std::sqrt(v / double(cnt) + eps);
      mean_out[c] = static_cast<T>(m);
      rstd_out[c] = static_cast<T>(rstd);
      var_unbiased[c] = v / double(cnt - 1);
      const T a = static_cast<T>(rstd * (w ? double(w[c]) : 1.0));
      const T sh = static_cast<T>((b ? double(b[c]) : 0.0) - m * double(a));
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = x + (n * C + c) * S;
        T* yr = y + (n * C + c) * S;
        for (int64_t i = 0; i < S; ++i) yr[i] = xr[i] * a + sh;
      }
    }
  });
}

// PyTorch's batch_norm_backward (training): per channel, sum(g) and sum(g (x - mean)), then
// dx = (g - sum(g) / n - (x - mean) sum(g (x - mean)) rstd² / n) rstd w.
template <class T>
void bn_backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw, T* db, int64_t N,
                 int64_t C, int64_t S) {
  const int64_t cnt = N * S;
  kernels::parallel_for(C, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, cnt)), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double m = mean[c], r = rstd[c];
      double sg = 0, sgx = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* gr = g + (n * C + c) * S;
        const T* xr = x + (n * C + c) * S;
        sg += lane_sum<T>(S, [&](int64_t i) { return double(gr[i]); });
        sgx += lane_sum<T>(S, [&](int64_t i) { return double(gr[i]) * (double(xr[i]) - m); });
      }
      if (dw) dw[c] = static_cast<T>(sgx * r);
      if (db) db[c] = static_cast<T>(sg);
      if (!dx) continue;
      const double k = sgx * r * r / double(cnt), gm = sg / double(cnt), scale = r * (w ? double(w[c]) : 1.0);
      for (int64_t n = 0; n < N; ++n) {
        const T* gr = g + (n * C + c) * S;
        const T* xr = x + (n * C + c) * S;
        T* dr = dx + (n * C + c) * S;
        for (int64_t i = 0; i < S; ++i) dr[i] = static_cast<T>((double(gr[i]) - gm - (double(xr[i]) - m) * k) * scale);
      }
    }
  });
}

void check_channel_vector(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  check_tensor(op, what, t, x);
  if (!(t.shape() == Shape{x.size(1)}))
    fail(op, std::string(what) + " " + t.shape().str() + " does not match the " + std::to_string(x.size(1)) +
                 " channels of input " + x.shape().str());
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  check_tensor(op, "input", input, Tensor());
  if (input.dim() < 2) fail(op, "expects an input (N, C, *), got " + input.shape().str());
  check_channel_vector(op, "running_mean", running_mean, input);
  check_channel_vector(op, "running_var", running_var, input);
  check_channel_vector(op, "weight", weight, input);
  check_channel_vector(op, "bias", bias, input);
  const int64_t N = input.size(0), C = input.size(1), S = input.numel() / std::max<int64_t>(1, N * C);
  if (!training) {
    if (!running_mean.defined() || !running_var.defined())
      fail(op, "running_mean and running_var are required when not training (input " + input.shape().str() + ")");
    // Per-channel scale and shift from the running statistics, then one broadcast multiply-add.
    Tensor a = rsqrt(running_var + eps);
    if (weight.defined()) a = a * weight;
    Tensor shift = neg(running_mean * a);
    if (bias.defined()) shift = shift + bias;
    return input * per_channel(a, input.dim()) + per_channel(shift, input.dim());
  }
  if (N * S <= 1)
    fail(op, "expected more than 1 value per channel when training, got input " + input.shape().str());
  Tensor y = Tensor::empty(input.shape(), input.dtype());
  Tensor mean_t = Tensor::empty(Shape{C}, input.dtype()), rstd_t = Tensor::empty(Shape{C}, input.dtype());
  std::vector<double> var_unbiased(C);
  kernels::dispatch_floating(op, input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bn_forward<T>(input.data<T>(), weight.defined() ? weight.data<T>() : nullptr,
                  bias.defined() ? bias.data<T>() : nullptr, y.data<T>(), mean_t.data<T>(), rstd_t.data<T>(),
                  var_unbiased.data(), N, C, S, eps);
    // Running statistics: in place, outside autograd, as PyTorch (their versions bumped below).
    if (running_mean.defined()) {
      T* rm = const_cast<Tensor&>(running_mean).data<T>();
      const T* m = mean_t.data<T>();
      for (int64_t c = 0; c < C; ++c) rm[c] = static_cast<T>(momentum * double(m[c]) + (1 - momentum) * double(rm[c]));
    }
    if (running_var.defined()) {
      T* rv = const_cast<Tensor&>(running_var).data<T>();
      for (int64_t c = 0; c < C; ++c)
        rv[c] = static_cast<T>(momentum * var_unbiased[c] + (1 - momentum) * double(rv[c]));
    }
  });
  if (running_mean.defined()) autograd::increment_version(running_mean);
  if (running_var.defined()) autograd::increment_version(running_var);
  Tensor inputs[3] = {input};
  int count = 1;
  const int iw = weight.defined() ? count++ : -1;
  if (iw > 0) inputs[iw] = weight;
  const int ib = bias.defined() ? count++ : -1;
  if (ib > 0) inputs[ib] = bias;
  struct Backward {
    Tensor x, w, b, mean, rstd;  // detached
    int iw, ib;
    double eps;
    void operator()(BackwardContext& ctx) const {
      const int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<int64_t>(1, N * C);
      Tensor dx = ctx.needs_grad(0) ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
      Tensor dw = iw > 0 && ctx.needs_grad(iw) ? Tensor::empty(Shape{C}, x.dtype()) : Tensor();
      Tensor db = ib > 0 && ctx.needs_grad(ib) ? Tensor::empty(Shape{C}, x.dtype()) : Tensor();
      kernels::dispatch_floating("batch_norm", x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        auto ptr = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
        bn_backward<T>(ctx.grad_output().data<T>(), x.data<T>(), w.defined() ? w.data<T>() : nullptr, mean.data<T>(),
                       rstd.data<T>(), ptr(dx), ptr(dw), ptr(db), N, C, S);
      });
      if (dx.defined()) ctx.accumulate(0, std::move(dx));
      if (dw.defined()) ctx.accumulate(iw, std::move(dw));
      if (db.defined()) ctx.accumulate(ib, std::move(db));
    }
    void graph(GradGraphContext& ctx) const {
      ctx.backward_through(batch_norm_composed(ctx.input(0, x), iw > 0 ? ctx.input(iw, w) : Tensor(),
                                               ib > 0 ? ctx.input(ib, b) : Tensor(), eps));
    }
  };
  return record(op, y, inputs, static_cast<std::size_t>(count), Saves::inputs(0).and_input(iw, iw > 0),
                Backward{input.detach(), weight.defined() ? weight.detach() : Tensor(),
                         bias.defined() ? bias.detach() : Tensor(), mean_t, rstd_t, iw, ib, eps});
}

Tensor group_norm(const Tensor& input, std::int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "group_norm";
  check_tensor(op, "input", input, Tensor());
  if (input.dim() < 2) fail(op, "expects an input (N, C, *), got " + input.shape().str());
  if (num_groups <= 0) fail(op, "num_groups must be positive, got " + std::to_string(num_groups));
  const int64_t N = input.size(0), C = input.size(1);
  if (C % num_groups != 0)
    fail(op, "input " + input.shape().str() + " has " + std::to_string(C) + " channels, not divisible by num_groups=" +
                 std::to_string(num_groups));
  check_channel_vector(op, "weight", weight, input);
  check_channel_vector(op, "bias", bias, input);
  const int64_t M = input.numel() / std::max<int64_t>(1, N * num_groups);
  if (M == 0) fail(op, "input " + input.shape().str() + " is empty");
  // Each (sample, group) row normalised by the fused layer_norm, then the per-channel affine.
  Tensor y = reshape(layer_norm(reshape(input, Shape{N, num_groups, M}), Shape{M}, Tensor(), Tensor(), eps), input.shape());
  if (weight.defined()) y = y * per_channel(weight, input.dim());
  if (bias.defined()) y = y + per_channel(bias, input.dim());
  return y;
}

}  // namespace tg
