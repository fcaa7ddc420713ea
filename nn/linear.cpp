#include "nn/linear.h"

#include <stdexcept>

#include "autograd/ops_matmul.h"
#include "nn/init.h"

namespace tg::nn {

LinearImpl::LinearImpl(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias)
    : in_features_(in_features), out_features_(out_features) {
  if (in_features <= 0 || out_features <= 0)
    throw std::invalid_argument("Linear: in_features and out_features must be positive, got " +
                                std::to_string(in_features) + " and " + std::to_string(out_features));
  weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
  if (bias) this->bias = register_parameter("bias", Tensor::empty({out_features}));
  init::linear_default_(weight, this->bias, gen);
}

Tensor LinearImpl::forward(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != in_features_)
    throw std::invalid_argument("Linear: input of shape " + x.shape().str() + " does not end in in_features=" +
                                std::to_string(in_features_));
  return tg::linear(x, weight, bias);
}

std::string LinearImpl::extra_repr() const {
  return "in_features=" + std::to_string(in_features_) + ", out_features=" + std::to_string(out_features_) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

}  // namespace tg::nn
