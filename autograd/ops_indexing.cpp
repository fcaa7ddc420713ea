// Tensor indexing (index, index_put, masked_select, select): see autograd/ops_indexing.h for the rules.
//
// An index list is first turned into a Plan for x's shape: where each element of the result is
// read from in x. The result is a product of units in row-major order, each unit one dim kept
// from x (a slice: a start folded into the base offset, a stride), a new dim of size 1 (stride 0)
// or the advanced block (the broadcast index tensors: one offset into x per element of their
// broadcast shape, precomputed). Integers only move the base offset. Following torch's order,
// the basic entries (slices, integers, None, Ellipsis) are applied first and the advanced
// block is placed last: where its first dim stood if its dims are adjacent, else in front.
//
// Both ops walk the result's elements in row-major order with their offsets into x: index
// gathers, index_put scatters (assigning, so that the last write wins, or adding). The walk is
// serial, so a repeated position gets the same result for any thread count.
//
// Each derivative is written once, with public differentiable ops, and serves both backwards:
// the kernel backward (recording off) and the differentiable one of create_graph (recording on),
// as index_put and index recorded again on the same plan. The closures keep the plan (shapes and
// the advanced block's offsets), not the index tensors.
#include "autograd/ops_indexing.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/kernels/dispatch.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/shape.h"
#include "autograd/tape.h"

namespace tg {

namespace indexing {

std::int64_t Slice::stop() const { return stop_.value_or(std::numeric_limits<std::int64_t>::max()); }

TensorIndex::TensorIndex(const char* str) : kind_(Kind::ellipsis) {
  if (str == nullptr || std::string(str) != "...")
    throw std::invalid_argument(std::string("TensorIndex: expected \"...\" for an Ellipsis, got \"") +
                                (str ? str : "(null)") + "\"");
}

}  // namespace indexing

namespace {

using indexing::TensorIndex;

/// One dim of the result, or the advanced block (which is 0 or more dims of the result).
struct Unit {
  std::int64_t size = 0;      // positions along this unit (the advanced block: its broadcast numel)
  std::int64_t stride = 0;    // offset in x between consecutive positions (a plain dim)
  bool advanced = false;      // read the offsets from Plan::table instead
};

/// How index(x, indices) reads x, for one shape of x.
struct Plan {
  Shape x_shape;
  Shape out_shape;             // the indexed shape
  std::int64_t base = 0;       // offset in x of the result's first element (integers, slice starts)
  std::vector<Unit> units;     // in the result's order
  std::vector<std::int64_t> table;  // the advanced block: offset in x per element of its broadcast shape
};
using PlanPtr = std::shared_ptr<const Plan>;

/// Row-major element strides of a contiguous tensor of `shape`.
std::vector<std::int64_t> strides_of(const Shape& shape) {
  std::vector<std::int64_t> s(shape.size());
  std::int64_t acc = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

std::string position(std::size_t k) { return "index position " + std::to_string(k); }

/// An advanced index acting on one dim of the basic result: the int64 tensor and that dim.
struct Advanced {
  Tensor index;        // int64, values not yet checked
  std::size_t k;       // index position in the list (for messages)
  int dim;             // dim of the basic result it indexes
  int x_dim;           // dim of x it indexes (-1 for the dim that true/false insert, never out of range)
};

/// The rows of nonzero(mask) as `mask.dim()` int64 tensors of the true positions' coordinates.
std::vector<Tensor> mask_coordinates(const Tensor& mask) {
  const Shape& s = mask.shape();
  const int k = s.size();
  const bool* m = mask.data<bool>();
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < mask.numel(); ++i) count += m[i] ? 1 : 0;
  std::vector<Tensor> out;
  std::vector<std::int64_t*> cols;
  for (int j = 0; j < k; ++j) {
    out.push_back(Tensor::empty({count}, DType::i64));
    cols.push_back(out.back().data<std::int64_t>());
  }
  std::vector<std::int64_t> coord(k, 0);
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < mask.numel(); ++i) {
    if (m[i]) {
      for (int j = 0; j < k; ++j) cols[j][n] = coord[j];
      ++n;
    }
    for (int j = k - 1; j >= 0; --j) {  // row-major odometer
      if (++coord[j] < s[j]) break;
      coord[j] = 0;
    }
  }
  return out;
}

PlanPtr make_plan(const char* op, const Shape& xs, const TensorIndex* idx, std::size_t n) {
  const int ndim = xs.size();
  const std::string where = " (x " + xs.str() + ")";
  // How many dims of x the entries consume, to size the Ellipsis; the checks that need no values.
  int consumed = 0;
  bool ellipsis = false;
  for (std::size_t k = 0; k < n; ++k) {
    const TensorIndex& t = idx[k];
    int uses = 0;
    if (t.is_integer() || t.is_slice()) {
      uses = 1;
    } else if (t.is_ellipsis()) {
      if (ellipsis)
        throw std::invalid_argument(std::string(op) + ": an index can hold only one Ellipsis, found a second at " +
                                    position(k) + where);
      ellipsis = true;
    } else if (t.is_tensor()) {
      const Tensor& i = t.tensor();
      if (!i.defined())
        throw std::invalid_argument(std::string(op) + ": undefined tensor at " + position(k) + where);
      if (i.dtype() == DType::b8) uses = i.dim();
      else if (i.dtype() == DType::i64) uses = 1;
      else
        throw std::invalid_argument(std::string(op) + ": tensors used as indices must be int64 or bool, got " +
                                    std::string(dtype_name(i.dtype())) + " " + i.shape().str() + " at " + position(k) +
                                    where);
    }
    if (consumed + uses > ndim)
      throw std::invalid_argument(std::string(op) + ": too many indices for tensor of dimension " + std::to_string(ndim) +
                                  ": " + position(k) + " would index dim " + std::to_string(consumed + uses - 1) + where);
    consumed += uses;
  }

  // The basic entries, left to right, over the dims of the basic result.
  auto plan = std::make_shared<Plan>();
  plan->x_shape = xs;
  const std::vector<std::int64_t> xstride = strides_of(xs);
  std::vector<std::int64_t> size, stride;  // the basic result's dims
  std::vector<Advanced> adv;
  int xd = 0;
  auto keep = [&](std::int64_t sz, std::int64_t st) {
    size.push_back(sz);
    stride.push_back(st);
  };
  for (std::size_t k = 0; k < n; ++k) {
    const TensorIndex& t = idx[k];
    if (t.is_none()) {
      keep(1, 0);
    } else if (t.is_ellipsis()) {
      for (int j = 0; j < ndim - consumed; ++j, ++xd) keep(xs[xd], xstride[xd]);
    } else if (t.is_integer()) {
      const std::int64_t d = xs[xd], i = t.integer();
      if (i < -d || i >= d)
        throw std::out_of_range(std::string(op) + ": index " + std::to_string(i) + " is out of range for dim " +
                                std::to_string(xd) + " of size " + std::to_string(d) + " at " + position(k) + where);
      plan->base += (i < 0 ? i + d : i) * xstride[xd];
      ++xd;
    } else if (t.is_slice()) {
      const indexing::Slice& s = t.slice();
      if (s.step() <= 0)
        throw std::invalid_argument(std::string(op) + ": slice step must be positive, got " + std::to_string(s.step()) +
                                    " at " + position(k) + where);
      const std::int64_t d = xs[xd];
      auto clamp = [d](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + d : v, 0, d); };
      const std::int64_t b = clamp(s.start()), e = clamp(s.stop());
      const std::int64_t count = e > b ? (e - b - 1) / s.step() + 1 : 0;
      plan->base += b * xstride[xd];
      keep(count, s.step() * xstride[xd]);
      ++xd;
    } else if (t.is_boolean() || (t.is_tensor() && t.tensor().dtype() == DType::b8 && t.tensor().dim() == 0)) {
      // torch: a dim of size 1, indexed by [0] (true) or by nothing (false).
      const bool on = t.is_boolean() ? t.boolean() : t.tensor().item() != 0;
      Tensor i = Tensor::zeros({on ? 1 : 0}, DType::i64);
      adv.push_back({i, k, static_cast<int>(size.size()), -1});
      keep(1, 0);
    } else if (t.tensor().dtype() == DType::b8) {
      const Tensor& mask = t.tensor();
      const int k_dims = mask.dim();
      for (int j = 0; j < k_dims; ++j)
        if (mask.shape()[j] != xs[xd + j]) {
          const Shape part(xs.begin() + xd, xs.begin() + xd + k_dims);
          const std::string dims = k_dims == 1 ? "dim " + std::to_string(xd)
                                               : "dims " + std::to_string(xd) + ".." + std::to_string(xd + k_dims - 1);
          throw std::invalid_argument(std::string(op) + ": the mask " + mask.shape().str() + " at " + position(k) +
                                      " does not match the sizes " + part.str() + " of " + dims + where);
        }
      std::vector<Tensor> cols = mask_coordinates(mask);
      for (int j = 0; j < k_dims; ++j, ++xd) {
        adv.push_back({cols[j], k, static_cast<int>(size.size()), xd});
        keep(xs[xd], xstride[xd]);
      }
    } else {  // int64
      adv.push_back({t.tensor(), k, static_cast<int>(size.size()), xd});
      keep(xs[xd], xstride[xd]);
      ++xd;
    }
  }
  for (; xd < ndim; ++xd) keep(xs[xd], xstride[xd]);

  const int nb = static_cast<int>(size.size());
  auto plain = [&](int d) {
    plan->units.push_back({size[d], stride[d], false});
    plan->out_shape.push_back(size[d]);
  };
  if (adv.empty()) {
    for (int d = 0; d < nb; ++d) plain(d);
    return plan;
  }

  // The advanced block: broadcast the index tensors, check and combine their values.
  Shape bshape;
  for (const Advanced& a : adv) {
    const Shape& s = a.index.shape();
    const int m = std::max(bshape.size(), s.size());
    Shape out;
    for (int i = 0; i < m; ++i) {
      const int ia = i - (m - bshape.size()), ib = i - (m - s.size());
      const std::int64_t da = ia >= 0 ? bshape[ia] : 1, db = ib >= 0 ? s[ib] : 1;
      if (da != db && da != 1 && db != 1) {
        std::string shapes;
        for (const Advanced& b : adv) shapes += (shapes.empty() ? "" : ", ") + b.index.shape().str();
        throw std::invalid_argument(std::string(op) + ": the index tensor " + s.str() + " at " + position(a.k) +
                                    " does not broadcast with the ones before it (shapes " + shapes + ")" + where);
      }
      out.push_back(da == 1 ? db : da);
    }
    bshape = out;
  }
  const std::int64_t count = bshape.numel();
  plan->table.assign(count, 0);
  std::vector<std::int64_t> bstr(bshape.size());
  for (const Advanced& a : adv) {
    const std::int64_t d = size[a.dim], st = stride[a.dim];
    const std::int64_t* v = a.index.data<std::int64_t>();
    broadcast_strides(a.index.shape(), bshape, bstr.data());
    std::vector<std::int64_t> coord(bshape.size(), 0);
    std::int64_t off = 0;  // offset into a.index of element `e` of the broadcast shape
    for (std::int64_t e = 0; e < count; ++e) {
      const std::int64_t i = v[off];
      if (i < -d || i >= d)
        throw std::out_of_range(std::string(op) + ": index " + std::to_string(i) + " is out of range for dim " +
                                std::to_string(a.x_dim) + " of size " + std::to_string(d) + " in the index tensor " +
                                a.index.shape().str() + " at " + position(a.k) + where);
      plan->table[e] += (i < 0 ? i + d : i) * st;
      for (int j = bshape.size() - 1; j >= 0; --j) {
        off += bstr[j];
        if (++coord[j] < bshape[j]) break;
        off -= bstr[j] * bshape[j];
        coord[j] = 0;
      }
    }
  }

  // Placement: torch's rule on the basic result's dims.
  const int first = adv.front().dim, last = adv.back().dim;
  const bool adjacent = last - first + 1 == static_cast<int>(adv.size());
  auto block = [&] {
    plan->units.push_back({count, 0, true});
    for (std::int64_t s : bshape) plan->out_shape.push_back(s);
  };
  auto is_adv = [&](int d) { return std::any_of(adv.begin(), adv.end(), [d](const Advanced& a) { return a.dim == d; }); };
  if (!adjacent) block();
  for (int d = 0; d < nb; ++d) {
    if (!is_adv(d)) plain(d);
    else if (adjacent && d == first) block();
  }
  return plan;
}

PlanPtr plan_for(const char* op, const Tensor& x, const TensorIndex* idx, std::size_t n) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": x is undefined");
  return make_plan(op, x.shape(), idx, n);
}

/// Calls f(o, offset) for every element o of the result, in row-major order, with its offset in x.
template <class F> struct Walk {
  const Plan& plan;
  F& f;
  std::int64_t o = 0;
  void run(std::size_t u, std::int64_t off) {
    const Unit& unit = plan.units[u];
    const bool inner = u + 1 == plan.units.size();
    for (std::int64_t p = 0; p < unit.size; ++p) {
      const std::int64_t at = off + (unit.advanced ? plan.table[p] : p * unit.stride);
      if (inner) f(o++, at);
      else run(u + 1, at);
    }
  }
};
template <class F> void for_each_offset(const Plan& plan, F&& f) {
  if (plan.units.empty()) {
    f(std::int64_t{0}, plan.base);
    return;
  }
  Walk<F> w{plan, f};
  w.run(0, plan.base);
}

Tensor gather(const Tensor& x, const Plan& plan) {
  Tensor y = Tensor::empty(plan.out_shape, x.dtype());
  kernels::dispatch_any(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for_each_offset(plan, [&](std::int64_t o, std::int64_t at) { dst[o] = src[at]; });
  });
  return y;
}

Tensor scatter(const Tensor& x, const Plan& plan, const Tensor& values, bool accumulate) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  detail::copy_elements(y, x);
  // values (already checked to broadcast to the indexed shape) read at the result's elements.
  const bool one = values.numel() == 1;
  const Tensor v = one || values.shape() == plan.out_shape ? values.detach() : expand(values.detach(), plan.out_shape);
  kernels::dispatch_any(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* src = v.data<T>();
    T* dst = y.data<T>();
    if (accumulate)
      for_each_offset(plan, [&](std::int64_t o, std::int64_t at) { dst[at] = static_cast<T>(dst[at] + src[one ? 0 : o]); });
    else
      for_each_offset(plan, [&](std::int64_t o, std::int64_t at) { dst[at] = src[one ? 0 : o]; });
  });
  return y;
}

/// g summed to `shape` (the dims it was broadcast along), in public ops: differentiable.
Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.dim() - shape.size();
  std::vector<std::int64_t> axes;
  for (int d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) axes.push_back(d);
  return reshape(sum(g, axes, true), shape);
}

Tensor index_planned(const Tensor& x, const PlanPtr& plan);
Tensor index_put_planned(const Tensor& x, const PlanPtr& plan, const Tensor& values, bool accumulate);

/// index's backward, one formula for both backwards: the gradient scattered back, repeats adding up.
struct IndexBackward {
  PlanPtr plan;
  template <class Ctx> void run(Ctx& ctx) const {
    const Tensor& g = ctx.grad_output();
    ctx.accumulate(0, index_put_planned(Tensor::zeros(plan->x_shape, g.dtype()), plan, g, true));
  }
  void operator()(BackwardContext& ctx) const { run(ctx); }
  void graph(GradGraphContext& ctx) const { run(ctx); }
};

/// index_put's backward: x gets the gradient without the written positions (all of it when
/// accumulating); values get the gradient read back at the indexed positions.
struct IndexPutBackward {
  PlanPtr plan;
  Shape values_shape;
  bool accumulate;
  template <class Ctx> void run(Ctx& ctx) const {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0))
      ctx.accumulate(0, accumulate ? g : index_put_planned(g, plan, Tensor::scalar(0.0, g.dtype()), false));
    if (ctx.needs_grad(1)) ctx.accumulate(1, sum_to_shape(index_planned(g, plan), values_shape));
  }
  void operator()(BackwardContext& ctx) const { run(ctx); }
  void graph(GradGraphContext& ctx) const { run(ctx); }
};

Tensor index_planned(const Tensor& x, const PlanPtr& plan) {
  return record("index", gather(x, *plan), {x}, Saves::none(), IndexBackward{plan});
}

Tensor index_put_planned(const Tensor& x, const PlanPtr& plan, const Tensor& values, bool accumulate) {
  return record("index_put", scatter(x, *plan, values, accumulate), {x, values}, Saves::none(),
                IndexPutBackward{plan, values.shape(), accumulate});
}

Tensor index_impl(const char* op, const Tensor& x, const TensorIndex* idx, std::size_t n) {
  return index_planned(x, plan_for(op, x, idx, n));
}

Tensor index_put_impl(const Tensor& x, const TensorIndex* idx, std::size_t n, const Tensor& values, bool accumulate) {
  const char* op = "index_put";
  PlanPtr plan = plan_for(op, x, idx, n);
  if (!values.defined()) throw std::invalid_argument("index_put: values is undefined");
  if (values.dtype() != x.dtype())
    throw std::invalid_argument("index_put: values " + std::string(dtype_name(values.dtype())) + " " +
                                values.shape().str() + " must have x's dtype " + std::string(dtype_name(x.dtype())) +
                                " (x " + x.shape().str() + ")");
  const Shape& vs = values.shape();
  const Shape& os = plan->out_shape;
  bool fits = vs.size() <= os.size();
  for (int d = 0; fits && d < vs.size(); ++d) {
    const std::int64_t have = vs[vs.size() - 1 - d], want = os[os.size() - 1 - d];
    fits = have == want || have == 1;
  }
  if (!fits)
    throw std::invalid_argument("index_put: values of shape " + vs.str() + " cannot be broadcast to the indexed shape " +
                                os.str() + " (x " + x.shape().str() + ")");
  return index_put_planned(x, plan, values, accumulate);
}

}  // namespace

Tensor index(const Tensor& x, std::initializer_list<TensorIndex> indices) {
  return index_impl("index", x, indices.begin(), indices.size());
}
Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices) {
  return index_impl("index", x, indices.data(), indices.size());
}

Tensor index_put(const Tensor& x, std::initializer_list<TensorIndex> indices, const Tensor& values, bool accumulate) {
  return index_put_impl(x, indices.begin(), indices.size(), values, accumulate);
}
Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values, bool accumulate) {
  return index_put_impl(x, indices.data(), indices.size(), values, accumulate);
}
Tensor index_put(const Tensor& x, std::initializer_list<TensorIndex> indices, double value) {
  return index_put_impl(x, indices.begin(), indices.size(), Tensor::scalar(value, x.dtype()), false);
}
Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, double value) {
  return index_put_impl(x, indices.data(), indices.size(), Tensor::scalar(value, x.dtype()), false);
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  if (!x.defined() || !mask.defined()) throw std::invalid_argument("masked_select: x and mask must be defined");
  if (mask.dtype() != DType::b8)
    throw std::invalid_argument("masked_select: mask must be bool, got " + std::string(dtype_name(mask.dtype())) + " " +
                                mask.shape().str() + " (x " + x.shape().str() + ")");
  const Shape s = broadcast_shapes("masked_select", x.shape(), mask.shape());
  const Tensor xb = s == x.shape() ? x : expand(x, s);
  const Tensor mb = s == mask.shape() ? mask : expand(mask, s);
  const TensorIndex idx[] = {mb};
  return index_impl("masked_select", xb, idx, 1);
}

Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index) {
  if (!x.defined()) throw std::invalid_argument("select: x is undefined");
  const int d = normalize_axis("select", dim, x.dim());
  const std::int64_t size = x.shape()[d];
  if (index < -size || index >= size)
    throw std::out_of_range("select: index " + std::to_string(index) + " is out of range for dim " + std::to_string(d) +
                            " of size " + std::to_string(size) + " (x " + x.shape().str() + ")");
  std::vector<TensorIndex> idx(d, indexing::Slice());
  idx.emplace_back(index);
  return index_impl("select", x, idx.data(), idx.size());
}

}  // namespace tg
