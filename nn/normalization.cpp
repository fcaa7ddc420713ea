#include "nn/normalization.h"

#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"

namespace tg::nn {

namespace {

void check_normalized_shape(const Shape& s, const char* layer) {
  if (s.empty()) throw std::invalid_argument(std::string(layer) + ": normalized_shape must not be empty");
  for (std::int64_t d : s)
    if (d <= 0)
      throw std::invalid_argument(std::string(layer) + ": normalized_shape " + s.str() +
                                  " must have positive dimensions");
}

// The trailing dims {-k, ..., -1} after checking that x ends in `s` (pooled: a forward allocates
// nothing from the system once warm).
PooledVector<std::int64_t> trailing_dims(const Tensor& x, const Shape& s, const char* layer) {
  const int k = s.size(), n = x.dim();
  bool ok = n >= k;
  for (int i = 0; ok && i < k; ++i) ok = x.shape()[n - k + i] == s[i];
  if (!ok)
    throw std::invalid_argument(std::string(layer) + ": input of shape " + x.shape().str() +
                                " does not end in normalized_shape " + s.str());
  PooledVector<std::int64_t> dims;
  dims.reserve(static_cast<std::size_t>(k));
  for (int i = -k; i < 0; ++i) dims.push_back(i);
  return dims;
}

// PyTorch prints normalized_shape as a tuple: "(8,)", "(2, 3)".
std::string tuple_str(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape_(normalized_shape), eps_(eps), affine_(elementwise_affine) {
  check_normalized_shape(normalized_shape_, "LayerNorm");
  if (affine_) {
    weight = register_parameter("weight", Tensor::ones(normalized_shape_));
    bias = register_parameter("bias", Tensor::zeros(normalized_shape_));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  const auto dims = trailing_dims(x, normalized_shape_, "LayerNorm");
  const Tensor centred = x - tg::mean(x, dims, /*keepdim=*/true);
  const Tensor var = tg::var(x, dims, Correction{0}, /*keepdim=*/true);  // biased, as PyTorch
  Tensor y = centred * tg::rsqrt(var + eps_);
  if (affine_) y = y * weight + bias;
  return y;
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << tuple_str(normalized_shape_) << ", eps=" << eps_ << ", elementwise_affine=" << (affine_ ? "true" : "false");
  return os.str();
}

RMSNorm::RMSNorm(Shape normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape_(normalized_shape), eps_(eps), affine_(elementwise_affine) {
  check_normalized_shape(normalized_shape_, "RMSNorm");
  if (affine_) weight = register_parameter("weight", Tensor::ones(normalized_shape_));
}

Tensor RMSNorm::forward(const Tensor& x) const {
  const auto dims = trailing_dims(x, normalized_shape_, "RMSNorm");
  const double eps = eps_.value_or(x.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                                            : std::numeric_limits<float>::epsilon());
  Tensor y = x * tg::rsqrt(tg::mean(tg::square(x), dims, /*keepdim=*/true) + eps);
  if (affine_) y = y * weight;
  return y;
}

std::string RMSNorm::extra_repr() const {
  std::ostringstream os;
  os << tuple_str(normalized_shape_) << ", eps=";
  if (eps_)
    os << *eps_;
  else
    os << "None";
  os << ", elementwise_affine=" << (affine_ ? "true" : "false");
  return os.str();
}

}  // namespace tg::nn
