#include "nn/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <set>
#include <stdexcept>

#include "autograd/dtype.h"
#include "autograd/error_text.h"
#include "nn/optim.h"
#include "nn/serialize.h"

// Every formula below is torch 1.13's (torch/optim/lr_scheduler.py) with its operations in the same
// order, so that the doubles are the same bit for bit: Python's a * b / c is (a * b) / c.

namespace tg::nn {

namespace {

void check_gamma(const char* who, double gamma) {
  if (!(gamma >= 0.0)) throw std::invalid_argument(std::string(who) + ": invalid gamma " + number_text(gamma));
}

std::vector<LambdaLR::Lambda> repeat(LambdaLR::Lambda f, std::size_t groups, const char* who) {
  if (!f) throw std::invalid_argument(std::string(who) + ": lr_lambda is empty");
  return std::vector<LambdaLR::Lambda>(groups, f);
}

std::vector<LambdaLR::Lambda> per_group(std::vector<LambdaLR::Lambda> fs, std::size_t groups, const char* who) {
  if (fs.size() != groups)
    throw std::invalid_argument(std::string(who) + ": expected " + std::to_string(groups) + " lr_lambdas, but got " +
                                std::to_string(fs.size()));
  for (const auto& f : fs)
    if (!f) throw std::invalid_argument(std::string(who) + ": an lr_lambda is empty");
  return fs;
}

Tensor f64s(const std::vector<double>& v) { return Tensor::from_vector(v, Shape{static_cast<std::int64_t>(v.size())}); }

}  // namespace

// ---- state loading ------------------------------------------------------------------------------

/// Reads typed values out of named tensors, collecting every problem in one report.
class SchedulerStateReader {
 public:
  explicit SchedulerStateReader(const NamedTensors& entries) {
    for (const char* title : {"missing", "unexpected", "shape mismatch", "invalid", "duplicated"}) report_.section(title);
    for (const auto& [key, t] : entries)
      if (!entries_.emplace(key, t).second) duplicated_.push_back(key);
  }
  std::optional<std::int64_t> i64(const std::string& key) {
    const Tensor* t = find(key);
    if (!t) return std::nullopt;
    if (t->numel() != 1) return shape(key, *t, "a scalar");
    return t->to_vector<std::int64_t>()[0];
  }
  std::optional<double> f64(const std::string& key) {
    const Tensor* t = find(key);
    if (!t) return std::nullopt;
    if (t->numel() != 1) return shape(key, *t, "a scalar");
    return t->to_vector<double>()[0];
  }
  /// `n` values, each a valid learning rate (>= 0).
  std::optional<std::vector<double>> lrs(const std::string& key, std::size_t n) {
    const Tensor* t = find(key);
    if (!t) return std::nullopt;
    if (!(t->shape() == Shape{static_cast<std::int64_t>(n)})) return shape(key, *t, "[" + std::to_string(n) + "]");
    std::vector<double> v = t->to_vector<double>();
    for (double x : v)
      if (!(x >= 0.0)) {
        report_.section("invalid").push_back(key + ": learning rate " + number_text(x));
        return std::nullopt;
      }
    return v;
  }
  /// Throws the report (unexpected and duplicated entries included) if anything is wrong.
  void finish(const std::string& source) {
    for (const auto& [key, t] : entries_)
      if (!used_.count(key)) report_.section("unexpected").push_back(key);
    for (const auto& key : duplicated_) report_.section("duplicated").push_back(key);
    report_.throw_if_any(source);
  }

 private:
  const Tensor* find(const std::string& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      report_.section("missing").push_back(key);
      return nullptr;
    }
    used_.insert(key);
    return &it->second;
  }
  std::nullopt_t shape(const std::string& key, const Tensor& t, const std::string& want) {
    report_.section("shape mismatch").push_back(key + ": file " + t.shape().str() + " vs " + want);
    return std::nullopt;
  }

  std::map<std::string, Tensor> entries_;
  std::set<std::string> used_;
  std::vector<std::string> duplicated_;
  LoadReport report_;
};

// ---- PerGroup -----------------------------------------------------------------------------------

std::vector<double> PerGroup::expand(std::size_t groups, const std::string& who, const std::string& what) const {
  if (!list_) return std::vector<double>(groups, values_.front());
  if (values_.size() != groups)
    throw std::invalid_argument(who + ": expected " + std::to_string(groups) + " values for " + what + ", got " +
                                std::to_string(values_.size()));
  return values_;
}

// ---- LRScheduler --------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const ParamGroup& g : optimizer.param_groups()) base_lrs_.push_back(g.lr());
  last_lrs_ = base_lrs_;
}

double LRScheduler::current_lr(std::size_t g) const { return optimizer_.param_groups()[g].lr(); }

void LRScheduler::apply(const std::vector<double>& lrs) {
  for (double lr : lrs)
    if (!(lr >= 0.0)) throw std::invalid_argument(optimizer_.name() + ": invalid learning rate " + number_text(lr));
  auto groups = optimizer_.param_groups();
  for (std::size_t g = 0; g < lrs.size(); ++g) groups[g].set_lr(lrs[g]);
  last_lrs_ = lrs;
}

void LRScheduler::step() {
  ++last_epoch_;
  try {
    apply(get_lr());
  } catch (...) {
    --last_epoch_;
    throw;
  }
}

void LRScheduler::restart() {
  const std::int64_t before = last_epoch_;
  last_epoch_ = 0;
  try {
    apply(closed_form_lr());
  } catch (...) {
    last_epoch_ = before;
    throw;
  }
}

void LRScheduler::save_extra(NamedTensors&, const std::string&) const {}

void LRScheduler::load_extra(SchedulerStateReader&, const std::string&, std::vector<std::function<void()>>&) {}

void LRScheduler::save(NamedTensors& out, const std::string& prefix) const {
  out.emplace_back(prefix + "last_epoch", Tensor::scalar(static_cast<double>(last_epoch_), DType::i64));
  out.emplace_back(prefix + "base_lrs", f64s(base_lrs_));
  out.emplace_back(prefix + "last_lrs", f64s(last_lrs_));
  save_extra(out, prefix);
}

void LRScheduler::load(SchedulerStateReader& in, const std::string& prefix, std::vector<std::function<void()>>& commit) {
  const auto epoch = in.i64(prefix + "last_epoch");
  const auto base = in.lrs(prefix + "base_lrs", num_groups());
  const auto last = in.lrs(prefix + "last_lrs", num_groups());
  load_extra(in, prefix, commit);
  commit.push_back([this, epoch, base, last] {  // run only when every entry was read
    last_epoch_ = *epoch;
    base_lrs_ = *base;
    last_lrs_ = *last;
  });
}

NamedTensors LRScheduler::state_dict() const {
  NamedTensors out;
  save(out, "lr_scheduler.");
  return out;
}

void LRScheduler::load_state_dict(const NamedTensors& entries, const std::string& source) {
  SchedulerStateReader in(entries);
  std::vector<std::function<void()>> commit;
  load(in, "lr_scheduler.", commit);
  in.finish(source);
  for (auto& f : commit) f();
  apply(last_lrs_);
  after_load();
}

// ---- StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR -----------------------------------

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) throw std::invalid_argument("StepLR: step_size must be >= 1, got " + std::to_string(step_size));
  check_gamma("StepLR", gamma);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> out;
  const bool decay = last_epoch() != 0 && last_epoch() % step_size_ == 0;
  for (std::size_t g = 0; g < num_groups(); ++g) out.push_back(decay ? current_lr(g) * gamma_ : current_lr(g));
  return out;
}

std::vector<double> StepLR::closed_form_lr() {
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch() / step_size_)));
  return out;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  check_gamma("MultiStepLR", gamma);
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  const auto [first, last] = std::equal_range(milestones_.begin(), milestones_.end(), last_epoch());
  const auto times = static_cast<double>(last - first);  // torch's Counter: a repeated milestone decays again
  std::vector<double> out;
  for (std::size_t g = 0; g < num_groups(); ++g)
    out.push_back(times == 0 ? current_lr(g) : current_lr(g) * std::pow(gamma_, times));
  return out;
}

std::vector<double> MultiStepLR::closed_form_lr() {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch()) - milestones_.begin();
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(base * std::pow(gamma_, static_cast<double>(passed)));
  return out;
}

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, std::int64_t total_iters)
    : LRScheduler(optimizer), factor_(factor), total_iters_(total_iters) {
  if (!(factor > 0.0 && factor <= 1.0))
    throw std::invalid_argument("ConstantLR: factor must be in (0, 1], got " + number_text(factor));
  initial_step();
}

std::vector<double> ConstantLR::get_lr() {
  std::vector<double> out;
  for (std::size_t g = 0; g < num_groups(); ++g) {
    const double lr = current_lr(g);
    if (last_epoch() == 0) out.push_back(lr * factor_);
    else if (last_epoch() != total_iters_) out.push_back(lr);
    else out.push_back(lr * (1.0 / factor_));
  }
  return out;
}

std::vector<double> ConstantLR::closed_form_lr() {
  const double after = last_epoch() >= total_iters_ ? 1.0 : 0.0;
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(base * (factor_ + after * (1.0 - factor_)));
  return out;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(optimizer), start_(start_factor), end_(end_factor), total_(total_iters) {
  if (!(start_factor > 0.0 && start_factor <= 1.0) || !(end_factor >= 0.0 && end_factor <= 1.0))
    throw std::invalid_argument("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got " +
                                number_text(start_factor) + " and " + number_text(end_factor));
  if (total_iters < 1) throw std::invalid_argument("LinearLR: total_iters must be >= 1, got " + std::to_string(total_iters));
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  const double e = static_cast<double>(last_epoch()), n = static_cast<double>(total_);
  std::vector<double> out;
  for (std::size_t g = 0; g < num_groups(); ++g) {
    const double lr = current_lr(g);
    if (last_epoch() == 0) out.push_back(lr * start_);
    else if (last_epoch() > total_) out.push_back(lr);
    else out.push_back(lr * (1.0 + (end_ - start_) / (n * start_ + (e - 1.0) * (end_ - start_))));
  }
  return out;
}

std::vector<double> LinearLR::closed_form_lr() {
  const double e = static_cast<double>(std::min(total_, last_epoch())), n = static_cast<double>(total_);
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(base * (start_ + (end_ - start_) * e / n));
  return out;
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  check_gamma("ExponentialLR", gamma);
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> out;
  for (std::size_t g = 0; g < num_groups(); ++g) out.push_back(last_epoch() == 0 ? current_lr(g) : current_lr(g) * gamma_);
  return out;
}

std::vector<double> ExponentialLR::closed_form_lr() {
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch())));
  return out;
}

// ---- LambdaLR, MultiplicativeLR -----------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda)
    : LRScheduler(optimizer), lambdas_(repeat(std::move(lr_lambda), num_groups(), "LambdaLR")),
      unscaled_base_lrs_(base_lrs()) {
  initial_step();
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler(optimizer), lambdas_(per_group(std::move(lr_lambdas), num_groups(), "LambdaLR")),
      unscaled_base_lrs_(base_lrs()) {
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> out;
  for (std::size_t g = 0; g < num_groups(); ++g) out.push_back(base_lrs()[g] * lambdas_[g](last_epoch()));
  return out;
}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, Lambda lr_lambda)
    : LRScheduler(optimizer), lambdas_(repeat(std::move(lr_lambda), num_groups(), "MultiplicativeLR")) {
  initial_step();
}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler(optimizer), lambdas_(per_group(std::move(lr_lambdas), num_groups(), "MultiplicativeLR")) {
  initial_step();
}

std::vector<double> MultiplicativeLR::get_lr() {
  std::vector<double> out;
  for (std::size_t g = 0; g < num_groups(); ++g)
    out.push_back(last_epoch() > 0 ? current_lr(g) * lambdas_[g](last_epoch()) : current_lr(g));
  return out;
}

// ---- CosineAnnealingLR --------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  if (T_max < 1) throw std::invalid_argument("CosineAnnealingLR: T_max must be >= 1, got " + std::to_string(T_max));
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  constexpr double pi = std::numbers::pi;
  const std::int64_t e = last_epoch();
  const double t = static_cast<double>(t_max_);
  std::vector<double> out;
  for (std::size_t g = 0; g < num_groups(); ++g) {
    const double lr = current_lr(g);
    if (e == 0) out.push_back(lr);
    else if ((e - 1 - t_max_) % (2 * t_max_) == 0)  // the bottom: 1 + cos is 0 in the recurrence
      out.push_back(lr + (base_lrs()[g] - eta_min_) * (1.0 - std::cos(pi / t)) / 2.0);
    else
      out.push_back((1.0 + std::cos(pi * static_cast<double>(e) / t)) /
                        (1.0 + std::cos(pi * static_cast<double>(e - 1) / t)) * (lr - eta_min_) +
                    eta_min_);
  }
  return out;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() {
  const double c = std::cos(std::numbers::pi * static_cast<double>(last_epoch()) / static_cast<double>(t_max_));
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(eta_min_ + (base - eta_min_) * (1.0 + c) / 2.0);
  return out;
}

// ---- SequentialLR -------------------------------------------------------------------------------

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  if (schedulers_.empty()) throw std::invalid_argument("SequentialLR: no schedulers");
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    const std::string at = "SequentialLR: scheduler " + std::to_string(i);
    if (!schedulers_[i]) throw std::invalid_argument(at + " is null");
    if (&schedulers_[i]->optimizer() != &optimizer)
      throw std::invalid_argument(at + " belongs to another optimizer than the one passed in");
    if (schedulers_[i]->num_groups() != num_groups())
      throw std::invalid_argument(at + " schedules " + std::to_string(schedulers_[i]->num_groups()) +
                                  " parameter groups, the optimizer has " + std::to_string(num_groups()));
    if (i > 0 && dynamic_cast<const SequentialLR*>(schedulers_[i].get()))
      throw std::invalid_argument(at + " is a SequentialLR, which cannot be restarted at a milestone");
  }
  if (milestones_.size() != schedulers_.size() - 1)
    throw std::invalid_argument("SequentialLR: expected one milestone fewer than schedulers, got " +
                                std::to_string(schedulers_.size()) + " schedulers and " +
                                std::to_string(milestones_.size()) + " milestones");
  // torch's schedulers share each group's initial_lr, set by the first one built: the first's base_lrs.
  const std::vector<double> first = schedulers_.front()->base_lrs_;
  std::function<void(LRScheduler&)> set_base = [&](LRScheduler& s) {
    s.base_lrs_ = first;
    if (auto* seq = dynamic_cast<SequentialLR*>(&s))
      for (auto& inner : seq->schedulers_) set_base(*inner);
  };
  set_base(*this);
  auto groups = optimizer.param_groups();
  for (std::size_t g = 0; g < num_groups(); ++g) groups[g].set_lr(base_lrs()[g]);
  for (auto& s : schedulers_) --s->last_epoch_;  // "undo" the step each took when it was built
  schedulers_.front()->initial_step();
  last_epoch_ = 0;
  last_lrs_ = schedulers_.front()->last_lrs_;
}

std::vector<double> SequentialLR::get_lr() { return last_lrs_; }

void SequentialLR::step() {
  ++last_epoch_;
  const auto idx = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                            milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  try {
    if (idx > 0 && milestones_[idx - 1] == last_epoch_) s.restart();
    else s.step();
  } catch (...) {
    --last_epoch_;
    throw;
  }
  last_lrs_ = s.last_lrs_;
}

void SequentialLR::save_extra(NamedTensors& out, const std::string& prefix) const {
  for (std::size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->save(out, prefix + "schedulers." + std::to_string(i) + ".");
}

void SequentialLR::load_extra(SchedulerStateReader& in, const std::string& prefix, std::vector<std::function<void()>>& commit) {
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->load(in, prefix + "schedulers." + std::to_string(i) + ".", commit);
}

void SequentialLR::after_load() {
  const auto idx = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  schedulers_[static_cast<std::size_t>(idx)]->after_load();  // the one in charge now
}

// ---- OneCycleLR ---------------------------------------------------------------------------------

OneCycleLR::OneCycleLR(Optimizer& optimizer, PerGroup max_lr, std::optional<std::int64_t> total_steps,
                       std::optional<std::int64_t> epochs, std::optional<std::int64_t> steps_per_epoch, double pct_start,
                       AnnealStrategy anneal_strategy, bool cycle_momentum, PerGroup base_momentum,
                       PerGroup max_momentum, double div_factor, double final_div_factor, bool three_phase)
    : LRScheduler(optimizer), anneal_(anneal_strategy), cycle_momentum_(cycle_momentum) {
  if (total_steps) {
    if (*total_steps <= 0)
      throw std::invalid_argument("OneCycleLR: expected positive integer total_steps, but got " + std::to_string(*total_steps));
    total_steps_ = *total_steps;
  } else {
    if (!epochs || !steps_per_epoch)
      throw std::invalid_argument("OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)");
    if (*epochs <= 0) throw std::invalid_argument("OneCycleLR: expected positive integer epochs, but got " + std::to_string(*epochs));
    if (*steps_per_epoch <= 0)
      throw std::invalid_argument("OneCycleLR: expected positive integer steps_per_epoch, but got " +
                                  std::to_string(*steps_per_epoch));
    total_steps_ = *epochs * *steps_per_epoch;
  }
  const double total = static_cast<double>(total_steps_);
  if (three_phase)
    phases_ = {{pct_start * total - 1, 0, 1, 0, 1}, {2 * pct_start * total - 2, 1, 0, 1, 0}, {total - 1, 0, 2, 0, 0}};
  else
    phases_ = {{pct_start * total - 1, 0, 1, 0, 1}, {total - 1, 1, 2, 1, 0}};
  if (!(pct_start >= 0.0 && pct_start <= 1.0))
    throw std::invalid_argument("OneCycleLR: expected float between 0 and 1 pct_start, but got " + number_text(pct_start));

  max_lr_ = max_lr.expand(num_groups(), "OneCycleLR", "max_lr");
  for (std::size_t g = 0; g < num_groups(); ++g) {
    initial_lr_.push_back(max_lr_[g] / div_factor);
    min_lr_.push_back(initial_lr_[g] / final_div_factor);
  }
  set_base_lrs(initial_lr_);  // torch's group["initial_lr"]
  if (cycle_momentum_) {
    const OptimizerOptions& d = optimizer.defaults();
    if (!dynamic_cast<const SGDOptions*>(&d) && !dynamic_cast<const AdamOptions*>(&d))
      throw std::invalid_argument("OneCycleLR: optimizer must support momentum with `cycle_momentum` option enabled");
    max_momentum_ = max_momentum.expand(num_groups(), "OneCycleLR", "max_momentum");
    base_momentum_ = base_momentum.expand(num_groups(), "OneCycleLR", "base_momentum");
    for (std::size_t g = 0; g < num_groups(); ++g) set_momentum(g, max_momentum_[g]);
  }
  initial_step();
}

void OneCycleLR::set_momentum(std::size_t group, double momentum) {
  OptimizerOptions& o = optimizer().param_groups()[group].options();
  if (auto* adam = dynamic_cast<AdamOptions*>(&o)) adam->betas(momentum, adam->betas().second);
  else static_cast<SGDOptions&>(o).momentum(momentum);
}

std::vector<double> OneCycleLR::lrs_and_momenta(std::int64_t step, bool set_momentum_now) {
  if (step > total_steps_)
    throw std::invalid_argument("OneCycleLR: tried to step " + std::to_string(step + 1) +
                                " times; the specified number of total steps is " + std::to_string(total_steps_));
  auto anneal = [&](double start, double end, double pct) {
    if (anneal_ == AnnealStrategy::linear) return (end - start) * pct + start;
    const double cos_out = std::cos(std::numbers::pi * pct) + 1.0;
    return end + (start - end) / 2.0 * cos_out;
  };
  const double s = static_cast<double>(step);
  std::vector<double> lrs, momenta;
  for (std::size_t g = 0; g < num_groups(); ++g) {
    const double lr_of[3] = {initial_lr_[g], max_lr_[g], min_lr_[g]};
    double start_step = 0.0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const Phase& p = phases_[i];
      if (s <= p.end_step || i + 1 == phases_.size()) {
        const double pct = (s - start_step) / (p.end_step - start_step);
        lrs.push_back(anneal(lr_of[p.start_lr], lr_of[p.end_lr], pct));
        if (cycle_momentum_) {
          const double m_of[2] = {max_momentum_[g], base_momentum_[g]};
          momenta.push_back(anneal(m_of[p.start_momentum], m_of[p.end_momentum], pct));
        }
        break;
      }
      start_step = p.end_step;
    }
  }
  // The momentum changes with the lr, so not when the lr is refused (apply() throws for it).
  const bool valid = std::all_of(lrs.begin(), lrs.end(), [](double lr) { return lr >= 0.0; });
  if (set_momentum_now && valid)
    for (std::size_t g = 0; g < momenta.size(); ++g) set_momentum(g, momenta[g]);
  return lrs;
}

std::vector<double> OneCycleLR::get_lr() { return lrs_and_momenta(last_epoch(), true); }

void OneCycleLR::after_load() { lrs_and_momenta(last_epoch(), true); }

// ---- WarmupInverseSqrtLR ------------------------------------------------------------------------

namespace {
LambdaLR::Lambda inverse_sqrt(std::int64_t warmup_steps, std::int64_t start_step) {
  if (warmup_steps < 1)
    throw std::invalid_argument("WarmupInverseSqrtLR: warmup_steps must be >= 1, got " + std::to_string(warmup_steps));
  if (start_step < 0)
    throw std::invalid_argument("WarmupInverseSqrtLR: start_step must be >= 0, got " + std::to_string(start_step));
  return [w = static_cast<double>(warmup_steps), start_step](std::int64_t epoch) {
    const double s = static_cast<double>(std::max<std::int64_t>(start_step + epoch + 1, 1));
    return std::min(s / w, std::sqrt(w / s));
  };
}
}  // namespace

WarmupInverseSqrtLR::WarmupInverseSqrtLR(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t start_step)
    : LambdaLR(optimizer, inverse_sqrt(warmup_steps, start_step)), warmup_(warmup_steps) {}

double WarmupInverseSqrtLR::lr_at(std::int64_t step, std::size_t group) const {
  const double s = static_cast<double>(std::max<std::int64_t>(step, 1)), w = static_cast<double>(warmup_);
  return base_lrs().at(group) * std::min(s / w, std::sqrt(w / s));
}

void LambdaLR::set_scale(double scale) {
  if (!(scale > 0.0)) throw std::invalid_argument("LambdaLR::set_scale: scale must be > 0, got " + number_text(scale));
  const std::vector<double> before = base_lrs();
  std::vector<double> scaled;
  for (double lr : unscaled_base_lrs_) scaled.push_back(lr * scale);  // (base_lr × scale) × lambda, in that order
  set_base_lrs(std::move(scaled));
  try {
    apply(get_lr());
  } catch (...) {
    set_base_lrs(before);
    throw;
  }
  scale_ = scale;
}

// ---- LinearAnnealLR -----------------------------------------------------------------------------

namespace {
LambdaLR::Lambda linear_anneal(std::int64_t from, std::int64_t to, std::int64_t start_step) {
  if (from < 0 || to <= from)
    throw std::invalid_argument("LinearAnnealLR: need 0 <= from < to, got from " + std::to_string(from) + ", to " +
                                std::to_string(to));
  if (start_step < 0)
    throw std::invalid_argument("LinearAnnealLR: start_step must be >= 0, got " + std::to_string(start_step));
  return [from, to, start_step](std::int64_t epoch) {
    const std::int64_t done = start_step + epoch;
    const double left = static_cast<double>(to - done) / static_cast<double>(to - from);
    return std::clamp(left, 0.0, 1.0);
  };
}
}  // namespace

LinearAnnealLR::LinearAnnealLR(Optimizer& optimizer, std::int64_t from, std::int64_t to, std::int64_t start_step)
    : LambdaLR(optimizer, linear_anneal(from, to, start_step)) {}

// ---- PlateauDecay -------------------------------------------------------------------------------

PlateauDecay::PlateauDecay(LambdaLR& schedule, double factor, std::int64_t patience, State state)
    : schedule_(schedule), factor_(factor), patience_(patience), state_(state) {
  if (!(factor > 0.0 && factor <= 1.0))
    throw std::invalid_argument("PlateauDecay: factor must be in (0, 1], got " + number_text(factor));
  if (patience < 1) throw std::invalid_argument("PlateauDecay: patience must be >= 1, got " + std::to_string(patience));
  if (!(state.scale > 0.0 && state.scale <= 1.0) || state.bad_validations < 0)
    throw std::invalid_argument("PlateauDecay: the state's scale must be in (0, 1] and its count >= 0");
  if (state_.scale != 1.0) schedule_.set_scale(state_.scale);
}

bool PlateauDecay::step(bool improved) {
  if (improved) {
    state_.bad_validations = 0;
    return false;
  }
  ++state_.bad_validations;
  if (factor_ == 1.0 || state_.bad_validations < patience_) return false;
  // Never below the smallest normal double: enough decays would round the product to 0 (which a
  // checkpoint's loader refuses), and lr × 2.2e-308 already moves no weight.
  state_.scale = std::max(state_.scale * factor_, std::numeric_limits<double>::min());
  schedule_.set_scale(state_.scale);
  state_.bad_validations = 0;
  return true;
}

NamedTensors PlateauDecay::state_dict() const {
  NamedTensors out;
  out.emplace_back("plateau_decay.scale", Tensor::scalar(state_.scale, DType::f64));
  out.emplace_back("plateau_decay.bad_validations", Tensor::scalar(static_cast<double>(state_.bad_validations), DType::i64));
  return out;
}

void PlateauDecay::load_state_dict(const NamedTensors& entries, const std::string& source) {
  SchedulerStateReader in(entries);
  const auto scale = in.f64("plateau_decay.scale");
  const auto bad = in.i64("plateau_decay.bad_validations");
  in.finish(source);
  if (!(*scale > 0.0 && *scale <= 1.0) || *bad < 0)
    throw std::runtime_error(source + ": plateau_decay.scale must be in (0, 1] and plateau_decay.bad_validations >= 0");
  schedule_.set_scale(*scale);
  state_ = State{*scale, *bad};
}

// ---- ReduceLROnPlateau --------------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, Mode mode, double factor, std::int64_t patience,
                                     double threshold, ThresholdMode threshold_mode, std::int64_t cooldown,
                                     PerGroup min_lr, double eps)
    : optimizer_(optimizer), mode_(mode), factor_(factor), patience_(patience), threshold_(threshold),
      threshold_mode_(threshold_mode), cooldown_(cooldown), eps_(eps),
      best_(mode == Mode::min ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity()) {
  if (!(factor < 1.0)) throw std::invalid_argument("ReduceLROnPlateau: factor should be < 1.0, got " + number_text(factor));
  for (const ParamGroup& g : optimizer.param_groups()) last_lrs_.push_back(g.lr());
  min_lrs_ = min_lr.expand(last_lrs_.size(), "ReduceLROnPlateau", "min_lr");
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  if (mode_ == Mode::min)
    return threshold_mode_ == ThresholdMode::rel ? a < best * (1.0 - threshold_) : a < best - threshold_;
  return threshold_mode_ == ThresholdMode::rel ? a > best * (threshold_ + 1.0) : a > best + threshold_;
}

void ReduceLROnPlateau::step(double metrics) {
  ++last_epoch_;
  if (is_better(metrics, best_)) {
    best_ = metrics;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (in_cooldown()) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown are not counted
  }
  auto groups = optimizer_.param_groups();
  if (num_bad_epochs_ > patience_) {
    for (std::size_t g = 0; g < last_lrs_.size(); ++g) {
      const double old_lr = groups[g].lr(), new_lr = std::max(old_lr * factor_, min_lrs_[g]);
      if (old_lr - new_lr > eps_) groups[g].set_lr(new_lr);
    }
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
  for (std::size_t g = 0; g < last_lrs_.size(); ++g) last_lrs_[g] = groups[g].lr();
}

NamedTensors ReduceLROnPlateau::state_dict() const {
  NamedTensors out;
  out.emplace_back("lr_scheduler.last_epoch", Tensor::scalar(static_cast<double>(last_epoch_), DType::i64));
  out.emplace_back("lr_scheduler.best", Tensor::scalar(best_, DType::f64));
  out.emplace_back("lr_scheduler.num_bad_epochs", Tensor::scalar(static_cast<double>(num_bad_epochs_), DType::i64));
  out.emplace_back("lr_scheduler.cooldown_counter", Tensor::scalar(static_cast<double>(cooldown_counter_), DType::i64));
  out.emplace_back("lr_scheduler.last_lrs", f64s(last_lrs_));
  return out;
}

void ReduceLROnPlateau::load_state_dict(const NamedTensors& entries, const std::string& source) {
  SchedulerStateReader in(entries);
  const auto epoch = in.i64("lr_scheduler.last_epoch");
  const auto best = in.f64("lr_scheduler.best");
  const auto bad = in.i64("lr_scheduler.num_bad_epochs");
  const auto cool = in.i64("lr_scheduler.cooldown_counter");
  const auto lrs = in.lrs("lr_scheduler.last_lrs", last_lrs_.size());
  in.finish(source);
  last_epoch_ = *epoch;
  best_ = *best;
  num_bad_epochs_ = *bad;
  cooldown_counter_ = *cool;
  last_lrs_ = *lrs;
  auto groups = optimizer_.param_groups();
  for (std::size_t g = 0; g < last_lrs_.size(); ++g) groups[g].set_lr(last_lrs_[g]);
}

}  // namespace tg::nn
