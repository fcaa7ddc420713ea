// Comparisons, logical ops, predicates and bool reductions: promotion and validation here, the
// loops in autograd/kernels/compare.cpp. Nothing is recorded: the results have no gradient.
#include "autograd/ops_compare.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/kernels/compare.h"
#include "autograd/kernels/reduce.h"

namespace tg {

namespace {

using kernels::Compare;

// torch.result_type's categories: bool < integer < floating.
int category(DType d) {
  switch (d) {
    case DType::b8: return 0;
    case DType::i64: return 1;
    case DType::f32:
    case DType::f64: return 2;
  }
  return 0;
}

// A Python number's category: integral doubles that fit int64 are ints.
bool integral_scalar(double s) { return std::trunc(s) == s && std::abs(s) < 9.2233720368547758e18; }

void check_defined(const char* op, const Tensor& t, const char* what) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": " + what + " is undefined");
}

Tensor compare_tensors(Compare op, const char* name, const Tensor& a, const Tensor& b) {
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  const DType t = result_type(a, b);
  broadcast_shapes(name, a.shape(), b.shape());  // a shape error before any conversion
  return kernels::compare(op, a.detach().to(t), b.detach().to(t), name);
}

Tensor compare_scalar(Compare op, const char* name, const Tensor& a, double s) {
  check_defined(name, a, "a");
  const DType t = result_type(a, s);
  return kernels::compare(op, a.detach().to(t), Tensor::scalar(s, t), name);
}

Tensor as_bool(const Tensor& x) { return x.dtype() == DType::b8 ? x : kernels::predicate(kernels::Predicate::nonzero, x); }

Tensor logical(kernels::Logical op, const char* name, const Tensor& a, const Tensor& b) {
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  return kernels::logical(op, as_bool(a), as_bool(b), name);
}

kernels::Axes all_axes(int ndim) {
  kernels::Axes ax;
  for (int i = 0; i < ndim; ++i) ax.push_back(i);
  return ax;
}

// Nonzero counts of x over `ax` (int64) and the number of elements each count covers.
Tensor count(const Tensor& x, const kernels::Axes& ax, bool keepdim, std::int64_t* per_output) {
  std::int64_t n = 1;
  for (int a : ax) n *= x.shape()[a];
  if (per_output) *per_output = n;
  return kernels::sum_integral(as_bool(x), ax, keepdim);
}

Tensor bool_reduce(const char* name, const Tensor& x, const kernels::Axes& ax, bool keepdim, bool is_all) {
  std::int64_t n = 0;
  const Tensor c = count(x, ax, keepdim, &n);
  return is_all ? kernels::compare(Compare::eq, c, Tensor::scalar(static_cast<double>(n), DType::i64), name)
                : kernels::compare(Compare::gt, c, Tensor::scalar(0, DType::i64), name);
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  return DType::f64;  // f32 with f64: the only two different dtypes of one category
}

DType result_type(const Tensor& a, const Tensor& b) {
  if ((a.dim() == 0) == (b.dim() == 0)) return promote_types(a.dtype(), b.dtype());
  const Tensor& dimmed = a.dim() == 0 ? b : a;
  const Tensor& zero_dim = a.dim() == 0 ? a : b;
  return category(zero_dim.dtype()) > category(dimmed.dtype()) ? zero_dim.dtype() : dimmed.dtype();
}

DType result_type(const Tensor& a, double s) {
  const int scalar_category = integral_scalar(s) ? 1 : 2;
  if (scalar_category <= category(a.dtype())) return a.dtype();
  return scalar_category == 1 ? DType::i64 : DType::f32;
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare_tensors(Compare::eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_tensors(Compare::ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_tensors(Compare::lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_tensors(Compare::le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_tensors(Compare::gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_tensors(Compare::ge, "ge", a, b); }
Tensor eq(const Tensor& a, double s) { return compare_scalar(Compare::eq, "eq", a, s); }
Tensor ne(const Tensor& a, double s) { return compare_scalar(Compare::ne, "ne", a, s); }
Tensor lt(const Tensor& a, double s) { return compare_scalar(Compare::lt, "lt", a, s); }
Tensor le(const Tensor& a, double s) { return compare_scalar(Compare::le, "le", a, s); }
Tensor gt(const Tensor& a, double s) { return compare_scalar(Compare::gt, "gt", a, s); }
Tensor ge(const Tensor& a, double s) { return compare_scalar(Compare::ge, "ge", a, s); }

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, double s) { return eq(a, s); }
Tensor operator!=(const Tensor& a, double s) { return ne(a, s); }
Tensor operator<(const Tensor& a, double s) { return lt(a, s); }
Tensor operator<=(const Tensor& a, double s) { return le(a, s); }
Tensor operator>(const Tensor& a, double s) { return gt(a, s); }
Tensor operator>=(const Tensor& a, double s) { return ge(a, s); }
// s OP a is a (mirrored OP) s.
Tensor operator==(double s, const Tensor& a) { return eq(a, s); }
Tensor operator!=(double s, const Tensor& a) { return ne(a, s); }
Tensor operator<(double s, const Tensor& a) { return gt(a, s); }
Tensor operator<=(double s, const Tensor& a) { return ge(a, s); }
Tensor operator>(double s, const Tensor& a) { return lt(a, s); }
Tensor operator>=(double s, const Tensor& a) { return le(a, s); }

Tensor logical_and(const Tensor& a, const Tensor& b) { return logical(kernels::Logical::land, "logical_and", a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return logical(kernels::Logical::lor, "logical_or", a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return logical(kernels::Logical::lxor, "logical_xor", a, b); }
Tensor logical_not(const Tensor& x) {
  check_defined("logical_not", x, "x");
  return kernels::compare(Compare::eq, as_bool(x), Tensor::scalar(0, DType::b8), "logical_not");
}

Tensor isnan(const Tensor& x) {
  check_defined("isnan", x, "x");
  return kernels::predicate(kernels::Predicate::isnan, x);
}
Tensor isinf(const Tensor& x) {
  check_defined("isinf", x, "x");
  return kernels::predicate(kernels::Predicate::isinf, x);
}
Tensor isfinite(const Tensor& x) {
  check_defined("isfinite", x, "x");
  return kernels::predicate(kernels::Predicate::isfinite, x);
}

Tensor any(const Tensor& x) {
  check_defined("any", x, "x");
  return bool_reduce("any", x, all_axes(x.dim()), false, false);
}
Tensor any(const Tensor& x, std::int64_t dim, bool keepdim) {
  check_defined("any", x, "x");
  kernels::Axes ax;
  if (x.dim() > 0) ax.push_back(normalize_axis("any", dim, x.dim()));
  else normalize_axis("any", dim, 1);  // a 0-dim tensor accepts dim 0 and -1, as PyTorch
  return bool_reduce("any", x, ax, keepdim, false);
}
Tensor all(const Tensor& x) {
  check_defined("all", x, "x");
  return bool_reduce("all", x, all_axes(x.dim()), false, true);
}
Tensor all(const Tensor& x, std::int64_t dim, bool keepdim) {
  check_defined("all", x, "x");
  kernels::Axes ax;
  if (x.dim() > 0) ax.push_back(normalize_axis("all", dim, x.dim()));
  else normalize_axis("all", dim, 1);
  return bool_reduce("all", x, ax, keepdim, true);
}

Tensor count_nonzero(const Tensor& x, IntList dims) {
  check_defined("count_nonzero", x, "x");
  kernels::Axes ax;
  for (auto d : dims) {
    const int a = normalize_axis("count_nonzero", d, x.dim());
    if (ax.contains(a))
      throw std::invalid_argument("count_nonzero: dim " + std::to_string(d) + " given twice for shape " + x.shape().str());
    ax.push_back(a);
  }
  ax.normalize();
  if (ax.empty()) ax = all_axes(x.dim());
  return count(x, ax, false, nullptr);
}

Tensor nonzero(const Tensor& x) {
  check_defined("nonzero", x, "x");
  const Tensor b = as_bool(x);
  const bool* pb = b.data<bool>();
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < b.numel(); ++i) n += pb[i];
  const int nd = x.dim();
  Tensor y = Tensor::empty({n, nd}, DType::i64);
  std::int64_t* py = y.data<std::int64_t>();
  std::int64_t coord[Shape::kMaxDims] = {};
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    if (pb[i]) py = std::copy(coord, coord + nd, py);
    for (int d = nd - 1; d >= 0; --d) {  // next coordinate, odometer-style
      if (++coord[d] < x.shape()[d]) break;
      coord[d] = 0;
    }
  }
  return y;
}

}  // namespace tg
