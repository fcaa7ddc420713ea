#include "nn/activation.h"

namespace tg::nn {

Tensor ReLU::forward(const Tensor& x) const { return tg::relu(x); }

Tensor GELU::forward(const Tensor& x) const { return tg::gelu(x, approximate_); }

std::string GELU::extra_repr() const {
  return approximate_ == GeluApproximate::tanh ? "approximate='tanh'" : "approximate='none'";
}

Tensor Tanh::forward(const Tensor& x) const { return tg::tanh(x); }

Tensor Sigmoid::forward(const Tensor& x) const { return tg::sigmoid(x); }

Tensor SiLU::forward(const Tensor& x) const { return tg::silu(x); }

}  // namespace tg::nn
