#pragma once
// Gradient check of a whole module in float64: every trainable parameter and every floating input,
// each reported on its own line (name, entries checked, worst absolute and relative error, pass or
// fail, time).
//
//   model->to(tg::DType::f64);
//   auto report = tg::nn::gradcheck(model, {x});            // a module (or holder) with forward(Tensor)
//   auto report = tg::nn::gradcheck(model,                   // any forward
//       [&](const std::vector<Tensor>& in) { return model->loss(in[0], in[1]); }, {src, tgt});
//   std::cout << report.str();  if (!report) ...
//
// What is compared: the output y is reduced to the scalar s = sum(r * y) with a fixed random r
// (uniform in [-1, 1], from `seed`; r = 1 for a one-element output), the analytic gradient of s
// from one backward() against central differences (s(θ + eps) - s(θ - eps)) / 2 eps, entry by
// entry. For a one-element output that is exactly tg::gradcheck; for a larger one it checks the
// vector-Jacobian product with r, which catches any wrong Jacobian entry except on a measure-zero
// set of r, at one backward instead of one per output element. An entry passes when
// |analytic - numeric| <= atol + rtol |numeric| (tg::gradcheck's rule and defaults).
//
// forward must be deterministic (dropout off or p = 0) and must not change the module. The
// parameters' grad() are restored afterwards; the module is otherwise untouched. The calling
// thread's tape is reset (tape::reset()), so graphs recorded before the call cannot be used after.
#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

struct ModuleGradcheckOptions {
  GradcheckOptions tolerances;   ///< eps, atol, rtol, as tg::gradcheck
  /// At most this many entries per tensor, picked at random (distinct, from `seed` and the tensor's
  /// position); 0 checks every entry.
  std::int64_t max_entries = 0;
  std::uint64_t seed = 0;        ///< the subsample and the projection r
  bool check_inputs = true;      ///< also check floating inputs (as tensors "input 0", ...)
};

/// One parameter's (or input's) result.
struct TensorGradcheck {
  std::string name;              ///< qualified parameter name, or "input K"
  Shape shape;
  std::int64_t numel = 0;
  std::int64_t checked = 0;      ///< entries compared
  double max_abs_error = 0;      ///< max |analytic - numeric|
  double max_rel_error = 0;      ///< max |analytic - numeric| / max(|analytic|, |numeric|, atol)
  bool ok = true;
  double seconds = 0;            ///< wall time of this tensor's finite differences
  // The entry with the largest excess over its tolerance, |analytic - numeric| - (atol + rtol |numeric|).
  std::int64_t worst_element = -1;
  double analytic = 0, numeric = 0;
};

struct ModuleGradcheckReport {
  std::vector<TensorGradcheck> tensors;  ///< parameters in named_parameters() order, then inputs
  bool ok = true;
  double seconds = 0;            ///< total, including the forward and backward passes
  explicit operator bool() const { return ok; }
  /// A table, one line per tensor, and a summary line.
  std::string str() const;
};

std::ostream& operator<<(std::ostream& os, const ModuleGradcheckReport& report);

/// Checks d sum(r * fn(inputs)) / d(every trainable parameter of `module`, every floating input).
/// Parameters that require grad and floating inputs must be float64 (std::invalid_argument naming
/// the first that is not); other inputs (i64 ids, lengths) are passed through unchanged.
ModuleGradcheckReport gradcheck(Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                const std::vector<Tensor>& inputs, const ModuleGradcheckOptions& options = {});

/// The same for a module whose forward takes the inputs as tensors: forward(inputs[0], ...), one
/// to three of them (calls forward(), not operator(): forward hooks do not run).
template <class M>
  requires std::derived_from<M, Module>
ModuleGradcheckReport gradcheck(M& module, const std::vector<Tensor>& inputs, const ModuleGradcheckOptions& options = {}) {
  auto fn = [&module](const std::vector<Tensor>& in) -> Tensor {
    if constexpr (requires(const Tensor& a) { { module.forward(a) } -> std::convertible_to<Tensor>; })
      if (in.size() == 1) return module.forward(in[0]);
    if constexpr (requires(const Tensor& a) { { module.forward(a, a) } -> std::convertible_to<Tensor>; })
      if (in.size() == 2) return module.forward(in[0], in[1]);
    if constexpr (requires(const Tensor& a) { { module.forward(a, a, a) } -> std::convertible_to<Tensor>; })
      if (in.size() == 3) return module.forward(in[0], in[1], in[2]);
    throw std::invalid_argument("nn::gradcheck: " + module.name() + "::forward does not take " +
                                std::to_string(in.size()) + " tensors returning a Tensor; pass a function");
  };
  return gradcheck(static_cast<Module&>(module), fn, inputs, options);
}

/// gradcheck of the module a holder holds: nn::gradcheck(layer, inputs), with or without a function.
template <class M>
ModuleGradcheckReport gradcheck(const ModuleHolder<M>& module, const std::vector<Tensor>& inputs,
                                const ModuleGradcheckOptions& options = {}) {
  return gradcheck(*module, inputs, options);
}
template <class M>
ModuleGradcheckReport gradcheck(const ModuleHolder<M>& module,
                                const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                const std::vector<Tensor>& inputs, const ModuleGradcheckOptions& options = {}) {
  return gradcheck(static_cast<Module&>(*module), fn, inputs, options);
}

}  // namespace tg::nn
