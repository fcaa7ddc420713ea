#include "autograd/shape.h"

#include <ostream>
#include <sstream>
#include <stdexcept>

namespace tg {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  for (auto d : dims) push_back(d);
}

Shape::Shape(const std::vector<std::int64_t>& dims) {
  for (auto d : dims) push_back(d);
}

void Shape::throw_too_many_dims() {
  throw std::invalid_argument("tapegrad supports at most " + std::to_string(kMaxDims) + " dimensions");
}

void Shape::insert(int pos, std::int64_t d) {
  if (n_ == kMaxDims)
    throw std::invalid_argument("tapegrad supports at most " + std::to_string(kMaxDims) + " dimensions");
  for (int i = n_; i > pos; --i) dims_[i] = dims_[i - 1];
  dims_[pos] = d;
  ++n_;
}

void Shape::erase(int pos) {
  for (int i = pos; i + 1 < n_; ++i) dims_[i] = dims_[i + 1];
  --n_;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const int n = std::max(a.size(), b.size());
  Shape out;
  for (int i = 0; i < n; ++i) {
    const int ia = i - (n - a.size()), ib = i - (n - b.size());
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(std::string(op) + ": shapes " + a.str() + " and " + b.str() +
                                  " cannot be broadcast together");
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

void broadcast_strides(const Shape& s, const Shape& out, std::int64_t* strides) {
  const int n = out.size(), lead = n - s.size();
  std::int64_t acc = 1;
  for (int i = n - 1; i >= 0; --i) {
    const std::int64_t d = i >= lead ? s[i - lead] : 1;
    strides[i] = d == 1 ? 0 : acc;
    acc *= d;
  }
}

void throw_axis_out_of_range(const char* op, std::int64_t axis, int ndim) {
  throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) +
                              " is out of range for a tensor with " + std::to_string(ndim) + " dimensions");
}

}  // namespace tg
