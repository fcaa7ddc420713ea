#pragma once
// Optimizers with PyTorch 1.13's update rules (torch.optim.SGD, Adam, AdamW; single-tensor
// path, no amsgrad/maximize), over parameters addressed by name:
//
//   tg::nn::Adam opt(model.named_parameters(), tg::nn::AdamOptions(1e-3).weight_decay(1e-4));
//   loss.backward(); tg::nn::clip_grad_norm(model.parameters(), 5.0); opt.step(); opt.zero_grad();
//
// Updates run in place on the parameter buffers, outside autograd. Parameters without a gradient
// are skipped (their state and step count do not advance), as in PyTorch. A compact gradient
// (autograd/compact_grad.h) is read a block of rows at a time, never made dense: the update is the
// dense gradient's, bit for bit.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

/// Options of SGD (torch.optim.SGD). Chainable setters; validated when the optimizer is built.
class SGDOptions {
 public:
  /// lr is required, as in torch.optim.SGD.
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  double lr() const { return lr_; }
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  double weight_decay() const { return weight_decay_; }
  bool nesterov() const { return nesterov_; }

 private:
  double lr_;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;
};

/// Options of Adam/AdamW (torch.optim.Adam / AdamW). Chainable setters; validated when the
/// optimizer is built.
class AdamOptions {
 public:
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& lr(double v) { lr_ = v; return *this; }
  AdamOptions& betas(double beta1, double beta2) { beta1_ = beta1; beta2_ = beta2; return *this; }
  AdamOptions& eps(double v) { eps_ = v; return *this; }
  AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  /// true = AdamW: p *= 1 - lr * weight_decay before the update, instead of adding wd * p to the grad.
  AdamOptions& decoupled_weight_decay(bool v) { decoupled_ = v; return *this; }
  double lr() const { return lr_; }
  std::pair<double, double> betas() const { return {beta1_, beta2_}; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  bool decoupled_weight_decay() const { return decoupled_; }

 private:
  double lr_;
  double beta1_ = 0.9, beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_ = 0.0;
  bool decoupled_ = false;
};

/// Base of all optimizers: the named parameters, per-parameter state buffers and step counts,
/// the learning rate, and checkpointing of the state.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Applies one update to every parameter that has a gradient.
  virtual void step() = 0;
  /// "SGD", "Adam", "AdamW": used in error messages.
  virtual std::string name() const = 0;
  /// Drops every parameter's gradient (zero_grad(set_to_none=True), as Module::zero_grad).
  void zero_grad();

  /// The current learning rate: the one in the optimizer's options (its only home).
  virtual double lr() const = 0;
  /// Sets the learning rate in the options (for schedules); must be >= 0.
  void set_lr(double lr);
  /// Number of step() calls so far (restored by load_state_dict).
  std::int64_t step_count() const { return step_count_; }
  /// The parameters this optimizer updates (handles shared with the module).
  const NamedTensors& named_parameters() const { return params_; }

  /// The state as named tensors: "optimizer.<buffer>.<param name>" for each state buffer
  /// (e.g. exp_avg, exp_avg_sq, momentum_buffer), "optimizer.step.<param name>" (i64 per-parameter
  /// update count) and "optimizer.step" (i64 number of step() calls). Hyperparameters (lr, betas)
  /// are not included: they come from the options the optimizer is built with.
  NamedTensors state_dict() const;
  /// Replaces the whole state with `entries` (as written by state_dict()). Names, shapes and
  /// completeness are checked first; one std::runtime_error prefixed by `source` lists every
  /// problem and nothing is modified unless all checks pass.
  void load_state_dict(const NamedTensors& entries, const std::string& source = "load_state_dict");
  /// save_npz(path, state_dict()). Saved as float32 like every checkpoint: resumption is bitwise
  /// exact for float32 parameters.
  void save(const std::string& path) const;
  /// load_state_dict(load_npz(path)), errors prefixed "load <path>".
  void load(const std::string& path);

 protected:
  /// `buffers`: names of the per-parameter state tensors the subclass keeps (same shape and dtype
  /// as the parameter, created by the subclass on the parameter's first update).
  /// `lr` is checked here (before the parameters, as PyTorch) and kept by the subclass's options.
  Optimizer(NamedTensors params, double lr, std::vector<std::string> buffers, const char* who);
  /// Stores a checked learning rate in the subclass's options.
  virtual void store_lr(double lr) = 0;

  struct ParamState {
    std::vector<Tensor> buffers;  // undefined until the first update of this parameter
    std::int64_t step = 0;        // number of updates applied to this parameter
  };
  /// The state buffer `b` of parameter `i`, converted to the parameter's dtype if it has changed.
  Tensor& buffer(std::size_t i, std::size_t b);
  static void check_lr(const char* who, double lr);

  NamedTensors params_;
  std::vector<ParamState> state_;
  std::vector<std::string> buffer_names_;
  std::int64_t step_count_ = 0;
};

/// Stochastic gradient descent with optional momentum, dampening, Nesterov and (L2) weight decay:
///   d = g + wd p;  buf = d on the first step, else momentum buf + (1 - dampening) d;
///   d = nesterov ? d + momentum buf : buf;  p -= lr d.
class SGD : public Optimizer {
 public:
  /// Throws std::invalid_argument ("SGD: invalid momentum value -1", ...) for invalid options.
  SGD(NamedTensors params, const SGDOptions& options);
  /// Unnamed parameters are named "0", "1", ... (as in a PyTorch optimizer state_dict).
  SGD(const std::vector<Tensor>& params, const SGDOptions& options);
  void step() override;
  std::string name() const override { return "SGD"; }
  const SGDOptions& options() const { return options_; }
  double lr() const override { return options_.lr(); }

 private:
  void store_lr(double lr) override { options_.lr(lr); }
  SGDOptions options_;
};

/// Adam (and AdamW when decoupled_weight_decay): with t the parameter's step count,
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²;
///   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
class Adam : public Optimizer {
 public:
  /// Throws std::invalid_argument ("Adam: invalid learning rate -1", ...) for invalid options.
  Adam(NamedTensors params, const AdamOptions& options = AdamOptions());
  /// Unnamed parameters are named "0", "1", ....
  Adam(const std::vector<Tensor>& params, const AdamOptions& options = AdamOptions());
  void step() override;
  std::string name() const override { return options_.decoupled_weight_decay() ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return options_; }
  double lr() const override { return options_.lr(); }

 private:
  void store_lr(double lr) override { options_.lr(lr); }
  AdamOptions options_;
};

/// Options of AdamW (torch::optim::AdamWOptions): AdamOptions whose weight_decay starts at 1e-2,
/// torch.optim.AdamW's default. An AdamOptions given to AdamW keeps its own (default 0).
class AdamWOptions : public AdamOptions {
 public:
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay(1e-2); }
};

/// Adam with decoupled weight decay (torch.optim.AdamW), e.g. AdamW(params, AdamWOptions(3e-4)).
class AdamW : public Adam {
 public:
  /// `options` with decoupled_weight_decay forced on.
  AdamW(NamedTensors params, AdamOptions options = AdamWOptions());
  /// Unnamed parameters are named "0", "1", ....
  AdamW(const std::vector<Tensor>& params, AdamOptions options = AdamWOptions());
};

/// Names unnamed parameters "0", "1", ....
NamedTensors name_by_index(const std::vector<Tensor>& params);

}  // namespace tg::nn
