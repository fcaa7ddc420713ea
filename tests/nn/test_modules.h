#pragma once
// Small modules shared by the nn tests (real layers live in nn/ once written).
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/random.h"
#include "nn/init.h"
#include "nn/module.h"

namespace tg::nn::testing {

/// y = x Wᵀ + b with torch.nn.Linear's default initialisation.
class Linear : public Module {
 public:
  Linear(std::int64_t in, std::int64_t out, Generator& gen, bool bias = true) : in_(in), out_(out) {
    weight = register_parameter("weight", Tensor::empty({out, in}));
    if (bias) this->bias = register_parameter("bias", Tensor::empty({out}));
    init::linear_default_(weight, this->bias, gen);
  }
  Tensor forward(const Tensor& x) const { return tg::linear(x, weight, bias); }
  std::string extra_repr() const override {
    return "in_features=" + std::to_string(in_) + ", out_features=" + std::to_string(out_) +
           ", bias=" + (bias.defined() ? "true" : "false");
  }
  Tensor weight, bias;

 private:
  std::int64_t in_, out_;
};

/// Two linear layers with tanh between them.
class Mlp : public Module {
 public:
  Mlp(std::int64_t in, std::int64_t hidden, std::int64_t out, Generator& gen) {
    fc1 = register_module("fc1", std::make_shared<Linear>(in, hidden, gen));
    fc2 = register_module("fc2", std::make_shared<Linear>(hidden, out, gen));
  }
  Tensor forward(const Tensor& x) const { return fc2->forward(tg::tanh(fc1->forward(x))); }
  std::shared_ptr<Linear> fc1, fc2;
};

}  // namespace tg::nn::testing
