#pragma once
// ArrayRef: a non-owning view of a contiguous sequence (like PyTorch's ArrayRef). Op parameters
// that take a list (axes, tensors to concatenate) take a view, so `sum(x, {0, 1})` and
// `concat({a, b})` pass a braced list without building a std::vector, and a std::vector (with any
// allocator) still converts. The viewed elements must outlive the view: use it as a parameter, never
// keep one built from a braced list in a variable.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace tg {

class Tensor;

template <class T> class ArrayRef {
 public:
  constexpr ArrayRef() noexcept = default;
  constexpr ArrayRef(const T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  // Implicit on purpose, as the std::vector parameters these views replace. A braced list passed
  // to a function lives until the end of the call's full expression, which is all a parameter
  // needs (GCC warns about the view outliving it in general; that is the documented contract).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  constexpr ArrayRef(std::initializer_list<T> list) noexcept : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  template <class A>
  ArrayRef(const std::vector<T, A>& v) noexcept : data_(v.data()), size_(v.size()) {}  // NOLINT

  constexpr const T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const T* begin() const noexcept { return data_; }
  constexpr const T* end() const noexcept { return data_ + size_; }
  constexpr const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  constexpr const T& front() const noexcept { return data_[0]; }
  constexpr const T& back() const noexcept { return data_[size_ - 1]; }
  /// An owning copy.
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  const T* data_ = nullptr;
  std::size_t size_ = 0;
};

using IntList = ArrayRef<std::int64_t>;
using TensorList = ArrayRef<Tensor>;

}  // namespace tg
