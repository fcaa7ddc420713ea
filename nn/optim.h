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
//
// Parameter groups, as torch's optimizer.param_groups: each group has its own parameters and
// options, the ones it does not set taken from the optimizer's (its defaults). The usual "no weight
// decay on norms and biases":
//
//   tg::nn::AdamW opt({tg::nn::ParamGroup(decay), tg::nn::ParamGroup(no_decay).weight_decay(0.0)},
//                     tg::nn::AdamWOptions(3e-4));
//   for (auto& group : opt.param_groups()) group.set_lr(group.lr() * 0.5);   // param_group["lr"] *= 0.5
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

/// Base of every optimizer's options (LibTorch's torch::optim::OptimizerOptions): what a parameter
/// group holds and what schedulers change. Cast to the optimizer's own type (SGDOptions,
/// AdamOptions) for its other hyperparameters.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  /// Unchecked (as LibTorch's); ParamGroup::set_lr and Optimizer::set_lr check the value.
  virtual void set_lr(double lr) = 0;

 protected:
  OptimizerOptions() = default;
  OptimizerOptions(const OptimizerOptions&) = default;
  OptimizerOptions& operator=(const OptimizerOptions&) = default;
};

/// Options of SGD (torch.optim.SGD). Chainable setters; validated when the optimizer is built.
class SGDOptions : public OptimizerOptions {
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
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<SGDOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }

 private:
  double lr_;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;
};

/// Options of Adam/AdamW (torch.optim.Adam / AdamW). Chainable setters; validated when the
/// optimizer is built.
class AdamOptions : public OptimizerOptions {
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
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }

 private:
  double lr_;
  double beta1_ = 0.9, beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_ = 0.0;
  bool decoupled_ = false;
};

/// A parameter group (one of torch's optimizer.param_groups): parameters and the options they are
/// updated with. Given to an optimizer (its constructor or add_param_group) it sets only the options
/// that differ from the optimizer's defaults, as torch's {"params": ..., "weight_decay": 0.0}:
/// ParamGroup(no_decay).weight_decay(0.0). Setting an option the optimizer does not have (momentum
/// for Adam) is an error when the group is added. Inside the optimizer (param_groups()) the group
/// holds all its options: lr()/set_lr(), or options() cast to the optimizer's options type.
class ParamGroup {
 public:
  explicit ParamGroup(NamedTensors params);
  /// Unnamed parameters are named by their index among all the optimizer's parameters ("0", "1",
  /// ... over the groups in order), as the keys of a PyTorch optimizer state_dict.
  explicit ParamGroup(const std::vector<Tensor>& params);
  ParamGroup(const ParamGroup& other);
  ParamGroup& operator=(const ParamGroup& other);
  ParamGroup(ParamGroup&&) noexcept = default;
  ParamGroup& operator=(ParamGroup&&) noexcept = default;
  ~ParamGroup();

  /// Before the group is added: the learning rate it sets. Inside an optimizer: set_lr(v).
  ParamGroup& lr(double v);
  /// Options the group sets before it is added (std::logic_error afterwards: change them through
  /// options()).
  ParamGroup& weight_decay(double v);
  ParamGroup& momentum(double v);
  ParamGroup& dampening(double v);
  ParamGroup& nesterov(bool v);
  ParamGroup& betas(double beta1, double beta2);
  ParamGroup& eps(double v);

  /// The options set by the setters above (unset: the optimizer's).
  struct Overrides {
    std::optional<double> lr, weight_decay, momentum, dampening, eps;
    std::optional<bool> nesterov;
    std::optional<std::pair<double, double>> betas;
  };
  const Overrides& overrides() const { return overrides_; }

  /// The group's parameters (handles shared with the module), named as in the optimizer's state.
  const NamedTensors& params() const { return params_; }
  /// True once the group is in an optimizer, which gave it its full options.
  bool has_options() const { return options_ != nullptr; }
  /// The group's options inside an optimizer, e.g. static_cast<AdamOptions&>(g.options());
  /// std::logic_error before.
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  /// The group's learning rate (before it is added: the one it sets, else NaN).
  double lr() const;
  /// Sets the group's learning rate (param_group["lr"] = v); must be >= 0 (std::invalid_argument).
  void set_lr(double v);

 private:
  friend class Optimizer;
  NamedTensors params_;
  bool unnamed_ = false;
  Overrides overrides_;
  std::unique_ptr<OptimizerOptions> options_;
  std::size_t first_ = 0;  // index of the group's first parameter among the optimizer's
};

/// Base of all optimizers: the parameter groups, the named parameters of all groups,
/// per-parameter state buffers and step counts, and checkpointing of the state.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Applies one update to every parameter that has a gradient, each with its group's options.
  virtual void step() = 0;
  /// "SGD", "Adam", "AdamW": used in error messages.
  virtual std::string name() const = 0;
  /// Drops every parameter's gradient (zero_grad(set_to_none=True), as Module::zero_grad).
  void zero_grad();

  /// The first group's learning rate: for an optimizer built from one parameter list, its only one.
  double lr() const;
  /// Sets every group's learning rate (for schedules); must be >= 0. Nothing changes on an error.
  void set_lr(double lr);
  /// The parameter groups in order (torch's optimizer.param_groups). Each group's lr and options
  /// can be changed in place; the list itself only grows, through add_param_group.
  std::span<ParamGroup> param_groups() { return groups_; }
  std::span<const ParamGroup> param_groups() const { return groups_; }
  /// Adds a group (torch's add_param_group): options it does not set come from the optimizer's
  /// defaults (the options it was built with). Throws std::invalid_argument for an empty group,
  /// a parameter already in the optimizer or an invalid option; nothing is added then.
  void add_param_group(ParamGroup group);
  /// The options the optimizer was built with (torch's optimizer.defaults).
  virtual const OptimizerOptions& defaults() const = 0;
  /// Number of step() calls so far (restored by load_state_dict).
  std::int64_t step_count() const { return step_count_; }
  /// The parameters of all groups, in group order (handles shared with the module).
  const NamedTensors& named_parameters() const { return params_; }

  /// The state as named tensors: "optimizer.<buffer>.<param name>" for each state buffer
  /// (e.g. exp_avg, exp_avg_sq, momentum_buffer), "optimizer.step.<param name>" (i64 per-parameter
  /// update count) and "optimizer.step" (i64 number of step() calls). Keys do not depend on how the
  /// parameters are grouped. Hyperparameters (lr, betas, the groups) are not included: they come
  /// from the options and groups the optimizer is built with (torch's state_dict has them).
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
  /// `buffers`: names of the per-parameter state tensors the subclass may keep (same shape and
  /// dtype as the parameter, created by the subclass on the parameter's first update; which ones a
  /// parameter keeps is keeps_buffer()). `lr` (the defaults') is checked here (before the
  /// parameters, as PyTorch). The groups' options are filled by the subclass with resolve_groups().
  Optimizer(std::vector<ParamGroup> groups, double lr, std::vector<std::string> buffers, const char* who);
  /// The full options of a group: the defaults with the group's overrides, validated
  /// (std::invalid_argument naming the group `index`).
  virtual std::unique_ptr<OptimizerOptions> resolve(const ParamGroup& group, std::size_t index) const = 0;
  /// Whether parameter i keeps state buffer b (default: every buffer).
  virtual bool keeps_buffer(std::size_t i, std::size_t b) const;
  /// Gives every group without options its resolved ones (subclass constructors call it last).
  void resolve_groups();
  /// The options of the group holding parameter i.
  const OptimizerOptions& options_of(std::size_t i) const { return *groups_[group_of_[i]].options_; }

  struct ParamState {
    std::vector<Tensor> buffers;  // undefined until the first update of this parameter
    std::int64_t step = 0;        // number of updates applied to this parameter
  };
  /// The state buffer `b` of parameter `i`, converted to the parameter's dtype if it has changed.
  Tensor& buffer(std::size_t i, std::size_t b);
  static void check_lr(const char* who, double lr);
  /// Calls f(group, first, last) for every group: its parameters are params_[first, last).
  template <class F> void for_each_group(F&& f) {
    for (std::size_t g = 0; g < groups_.size(); ++g)
      f(*groups_[g].options_, groups_[g].first_, groups_[g].first_ + groups_[g].params_.size());
  }

  NamedTensors params_;
  std::vector<ParamState> state_;
  std::vector<std::string> buffer_names_;
  std::int64_t step_count_ = 0;

 private:
  /// Checks `group`'s parameters against those already held, names unnamed ones, and appends them.
  void append_group(ParamGroup group, const std::string& who);

  std::vector<ParamGroup> groups_;
  std::vector<std::size_t> group_of_;  // parameter index -> group index
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
  /// Parameter groups; options a group does not set come from `defaults`.
  SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults);
  void step() override;
  std::string name() const override { return "SGD"; }
  /// The first group's options (for an optimizer built from one parameter list, its options).
  const SGDOptions& options() const { return static_cast<const SGDOptions&>(param_groups()[0].options()); }
  const SGDOptions& defaults() const override { return defaults_; }

 private:
  std::unique_ptr<OptimizerOptions> resolve(const ParamGroup& group, std::size_t index) const override;
  bool keeps_buffer(std::size_t i, std::size_t b) const override;
  SGDOptions defaults_;
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
  /// Parameter groups; options a group does not set come from `defaults` (decoupled weight decay,
  /// Adam or AdamW, is the optimizer's, not a group's).
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults = AdamOptions());
  void step() override;
  std::string name() const override { return defaults_.decoupled_weight_decay() ? "AdamW" : "Adam"; }
  /// The first group's options (for an optimizer built from one parameter list, its options).
  const AdamOptions& options() const { return static_cast<const AdamOptions&>(param_groups()[0].options()); }
  const AdamOptions& defaults() const override { return defaults_; }

 private:
  std::unique_ptr<OptimizerOptions> resolve(const ParamGroup& group, std::size_t index) const override;
  AdamOptions defaults_;
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
  /// Parameter groups; options a group does not set come from `defaults`.
  AdamW(std::vector<ParamGroup> groups, AdamOptions defaults = AdamWOptions());
};

/// Names unnamed parameters "0", "1", ....
NamedTensors name_by_index(const std::vector<Tensor>& params);

}  // namespace tg::nn
