#pragma once
// Shape: up to 8 dimensions stored inline, so creating a tensor never allocates for its shape.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace tg {

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(const std::vector<std::int64_t>& dims);
  template <class It> Shape(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::int64_t operator[](int i) const { return dims_[i]; }
  std::int64_t& operator[](int i) { return dims_[i]; }
  const std::int64_t* begin() const { return dims_; }
  const std::int64_t* end() const { return dims_ + n_; }
  std::int64_t* begin() { return dims_; }
  std::int64_t* end() { return dims_ + n_; }
  std::int64_t back() const { return dims_[n_ - 1]; }
  void push_back(std::int64_t d) {
    if (n_ == kMaxDims) throw_too_many_dims();
    dims_[n_++] = d;
  }
  void insert(int pos, std::int64_t d);
  void erase(int pos);

  /// Product of the dimensions (1 for a scalar shape).
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < n_; ++i) n *= dims_[i];
    return n;
  }
  std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }
  /// "[2, 3]" as used in every error message.
  std::string str() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  [[noreturn]] static void throw_too_many_dims();
  std::int64_t dims_[kMaxDims] = {};
  int n_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

/// NumPy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
/// Element strides of a contiguous tensor of shape `s` read inside the broadcast shape `out`
/// (out.size() entries; 0 along broadcast or missing dimensions).
void broadcast_strides(const Shape& s, const Shape& out, std::int64_t* strides);

[[noreturn]] void throw_axis_out_of_range(const char* op, std::int64_t axis, int ndim);

/// Wraps a possibly negative axis into [0, ndim); throws naming `op` when out of range.
inline int normalize_axis(const char* op, std::int64_t axis, int ndim) {
  const std::int64_t wrapped = axis < 0 ? axis + ndim : axis;
  if (wrapped < 0 || wrapped >= ndim) throw_axis_out_of_range(op, axis, ndim);
  return static_cast<int>(wrapped);
}

}  // namespace tg
