#pragma once
// Activation functions as modules (torch.nn.ReLU, GELU, Tanh, Sigmoid, SiLU), so they can sit in
// a Sequential. They hold no parameters and forward to the tg:: ops of autograd/ops_elementwise.h.
// Several small classes share this header, as in PyTorch's torch/nn/modules/activation.py.
#include <string>

#include "autograd/ops_elementwise.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

/// torch.nn.ReLU: max(x, 0) (tg::relu).
class ReLUImpl : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
};
TG_MODULE(ReLU);

/// torch.nn.GELU(approximate='none' | 'tanh') (tg::gelu).
class GELUImpl : public Module {
 public:
  explicit GELUImpl(GeluApproximate approximate = GeluApproximate::none) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
  GeluApproximate approximate() const { return approximate_; }
  /// "approximate='none'" or "approximate='tanh'", as PyTorch.
  std::string extra_repr() const override;

 private:
  GeluApproximate approximate_;
};
TG_MODULE(GELU);

/// torch.nn.Tanh (tg::tanh).
class TanhImpl : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
};
TG_MODULE(Tanh);

/// torch.nn.Sigmoid: 1 / (1 + exp(-x)) (tg::sigmoid).
class SigmoidImpl : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
};
TG_MODULE(Sigmoid);

/// torch.nn.SiLU: x * sigmoid(x) (tg::silu).
class SiLUImpl : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }
};
TG_MODULE(SiLU);

}  // namespace tg::nn
