#pragma once
// Dropout as a module, as torch.nn.Dropout.
#include <memory>
#include <string>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// torch.nn.Dropout: in training mode zeroes each element with probability p and scales the rest
/// by 1/(1-p) (tg::dropout); identity in eval mode. p in [0, 1): PyTorch also takes p = 1 (every
/// element zeroed), which no model here needs. The masks are drawn from `gen`, a generator
/// this module shares with its owner (so a model can seed all its dropout layers from one
/// generator); when null the module creates its own Generator(0).
class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);

  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }

  double p() const { return p_; }
  /// The generator the masks are drawn from (never null).
  const std::shared_ptr<Generator>& generator() const { return gen_; }
  std::string extra_repr() const override;

 private:
  double p_;
  std::shared_ptr<Generator> gen_;
};
TG_MODULE(Dropout);

}  // namespace tg::nn
