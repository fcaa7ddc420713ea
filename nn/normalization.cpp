#include "nn/normalization.h"

#include <sstream>
#include <stdexcept>

#include "autograd/ops_norm.h"

namespace tg::nn {

namespace {

void check_normalized_shape(const Shape& s, const char* layer) {
  if (s.empty()) throw std::invalid_argument(std::string(layer) + ": normalized_shape must not be empty");
  for (std::int64_t d : s)
    if (d <= 0)
      throw std::invalid_argument(std::string(layer) + ": normalized_shape " + s.str() +
                                  " must have positive dimensions");
}

// Checks that x ends in `s` (the layer's name in the message; the op would name itself).
void check_trailing(const Tensor& x, const Shape& s, const char* layer) {
  const int k = s.size(), n = x.dim();
  bool ok = n >= k;
  for (int i = 0; ok && i < k; ++i) ok = x.shape()[n - k + i] == s[i];
  if (!ok)
    throw std::invalid_argument(std::string(layer) + ": input of shape " + x.shape().str() +
                                " does not end in normalized_shape " + s.str());
}

// PyTorch prints normalized_shape as a tuple: "(8,)", "(2, 3)".
std::string tuple_str(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

LayerNormImpl::LayerNormImpl(Shape normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape_(normalized_shape), eps_(eps), affine_(elementwise_affine) {
  check_normalized_shape(normalized_shape_, "LayerNorm");
  if (affine_) {
    weight = register_parameter("weight", Tensor::ones(normalized_shape_));
    bias = register_parameter("bias", Tensor::zeros(normalized_shape_));
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) const {
  check_trailing(x, normalized_shape_, "LayerNorm");
  return tg::layer_norm(x, normalized_shape_, weight, bias, eps_);  // fused (autograd/ops_norm.h)
}

std::string LayerNormImpl::extra_repr() const {
  std::ostringstream os;
  os << tuple_str(normalized_shape_) << ", eps=" << eps_ << ", elementwise_affine=" << (affine_ ? "true" : "false");
  return os.str();
}

RMSNormImpl::RMSNormImpl(Shape normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape_(normalized_shape), eps_(eps), affine_(elementwise_affine) {
  check_normalized_shape(normalized_shape_, "RMSNorm");
  if (affine_) weight = register_parameter("weight", Tensor::ones(normalized_shape_));
}

Tensor RMSNormImpl::forward(const Tensor& x) const {
  check_trailing(x, normalized_shape_, "RMSNorm");
  return tg::rms_norm(x, normalized_shape_, weight, eps_);  // fused (autograd/ops_norm.h)
}

std::string RMSNormImpl::extra_repr() const {
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
