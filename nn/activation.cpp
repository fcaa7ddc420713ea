#include "nn/activation.h"

namespace tg::nn {

Tensor ReLUImpl::forward(const Tensor& x) const { return tg::relu(x); }

Tensor GELUImpl::forward(const Tensor& x) const { return tg::gelu(x, approximate_); }

std::string GELUImpl::extra_repr() const {
  return approximate_ == GeluApproximate::tanh ? "approximate='tanh'" : "approximate='none'";
}

Tensor TanhImpl::forward(const Tensor& x) const { return tg::tanh(x); }

Tensor SigmoidImpl::forward(const Tensor& x) const { return tg::sigmoid(x); }

Tensor SiLUImpl::forward(const Tensor& x) const { return tg::silu(x); }

}  // namespace tg::nn
