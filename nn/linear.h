#pragma once
// Linear: y = x Wᵀ + b, as torch.nn.Linear (same parameter names, layout and initialisation).
#include <cstdint>
#include <string>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// torch.nn.Linear: parameters "weight" (out, in) and "bias" (out), both initialised
/// U(-1/sqrt(in), 1/sqrt(in)) from `gen` (weight first, then bias, as PyTorch draws them).
class LinearImpl : public Module {
 public:
  /// Float32 parameters; convert with to(DType) for float64.
  LinearImpl(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias = true);

  /// x (..., in) -> (..., out), via tg::linear.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); }); }

  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }
  std::string extra_repr() const override;

  Tensor weight;  ///< (out_features, in_features)
  Tensor bias;    ///< (out_features), undefined when built with bias = false

 private:
  std::int64_t in_features_, out_features_;
};
TG_MODULE(Linear);

}  // namespace tg::nn
