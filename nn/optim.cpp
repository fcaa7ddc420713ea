#include "nn/optim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "autograd/compact_grad.h"
#include "autograd/dtype.h"
#include "autograd/error_text.h"
#include "autograd/memory.h"
#include "autograd/parallel.h"
#include "autograd/tape.h"
#include "nn/serialize.h"

namespace tg::nn {

namespace {


/// Calls f(std::true_type{}) or f(std::false_type{}): hoists a run-time flag out of a hot loop.
template <class F> void with_flag(bool flag, F&& f) {
  if (flag) f(std::true_type{});
  else f(std::false_type{});
}

// ---- update kernels: plain loops over restrict pointers, one pass, vectorised by the compiler.
// The scalars are cast to T first, as PyTorch does for Python-number arguments of tensor ops.

template <class T> struct AdamScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, weight_decay, decay, bias_correction2_sqrt, eps,
      neg_step_size;
};

template <class T, bool kCoupledDecay, bool kDecoupledDecay>
void adam_kernel(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, std::int64_t n,
                 const AdamScalars<T> s) {
  for (std::int64_t i = 0; i < n; ++i) {
    T pi = p[i];
    if constexpr (kDecoupledDecay) pi = pi * s.decay;              // param.mul_(1 - lr * wd)
    T gi = g[i];
    if constexpr (kCoupledDecay) gi = gi + s.weight_decay * pi;   // grad.add(param, alpha=wd)
    const T mi = m[i] * s.beta1 + s.one_minus_beta1 * gi;          // exp_avg.mul_(b1).add_(g, 1-b1)
    const T vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;     // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    p[i] = pi + s.neg_step_size * mi / denom;                      // param.addcdiv_(m, denom, -step_size)
  }
}

template <class T> struct SgdScalars {
  T weight_decay, momentum, one_minus_dampening, neg_lr;
};

/// kFirst: the momentum buffer is initialised to the (decayed) gradient, as PyTorch's clone(d_p).
template <class T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_kernel(T* __restrict p, const T* __restrict g, T* __restrict buf, std::int64_t n, const SgdScalars<T> s) {
  for (std::int64_t i = 0; i < n; ++i) {
    T d = g[i];
    if constexpr (kDecay) d = d + s.weight_decay * p[i];
    if constexpr (kMomentum) {
      const T b = kFirst ? d : buf[i] * s.momentum + s.one_minus_dampening * d;
      buf[i] = b;
      d = kNesterov ? d + s.momentum * b : b;
    }
    p[i] = p[i] + s.neg_lr * d;
  }
}

/// A parameter's gradient, dense or compact (autograd/compact_grad.h); both null when it has none.
struct Grad {
  Tensor dense;
  std::shared_ptr<CompactGrad> compact;
  explicit Grad(const Tensor& p) : compact(p.compact_grad()) {
    if (!compact) dense = p.grad();
  }
  bool defined() const { return dense.defined() || compact; }
};

/// Calls update(b, e, g) over consecutive element ranges [b, e) covering the parameter, g pointing at
/// the gradient of element b. A dense gradient is read in place (ranges split over the threads). A
/// compact one is read a block of whole rows at a time into scratch, never whole: each thread takes
/// every num_threads()-th block, so the blocks (and the update) do not depend on the thread count.
template <class T, class F> void for_each_grad_range(std::int64_t numel, const Grad& grad, F&& update) {
  if (!grad.compact) {
    const T* g = grad.dense.data<T>();
    // Memory-bound (up to 7 streams per element): worth two threads from a few hundred KB up.
    parallel_for_aligned(numel, kGrainCheap, 64, [&](std::int64_t b, std::int64_t e) { update(b, e, g + b); });
    return;
  }
  const CompactGrad& c = *grad.compact;
  const std::int64_t cols = std::max<std::int64_t>(c.cols(), 1);
  const std::int64_t rows_per_block = std::clamp<std::int64_t>((std::int64_t{1} << 20) / cols, 1, std::max<std::int64_t>(c.rows(), 1));
  const std::int64_t blocks = (c.rows() + rows_per_block - 1) / rows_per_block;
  const int tasks = static_cast<int>(std::min<std::int64_t>(num_threads(), blocks));
  auto body = [&](int task) {
    PooledVector<T> scratch(static_cast<std::size_t>(rows_per_block * cols));
    for (std::int64_t blk = task; blk < blocks; blk += tasks) {
      const std::int64_t r0 = blk * rows_per_block, r1 = std::min(c.rows(), r0 + rows_per_block);
      c.read_rows(r0, r1, scratch.data());
      update(r0 * c.cols(), r1 * c.cols(), scratch.data());
    }
  };
  run_tasks(tasks, body);
}

}  // namespace

NamedTensors name_by_index(const std::vector<Tensor>& params) {
  NamedTensors out;
  for (std::size_t i = 0; i < params.size(); ++i) out.emplace_back(std::to_string(i), params[i]);
  return out;
}

// ---- ParamGroup -------------------------------------------------------------------------------

ParamGroup::ParamGroup(NamedTensors params) : params_(std::move(params)) {}

ParamGroup::ParamGroup(const std::vector<Tensor>& params) : params_(name_by_index(params)), unnamed_(true) {}

ParamGroup::ParamGroup(const ParamGroup& other)
    : params_(other.params_), unnamed_(other.unnamed_), overrides_(other.overrides_),
      options_(other.options_ ? other.options_->clone() : nullptr), first_(other.first_) {}

ParamGroup& ParamGroup::operator=(const ParamGroup& other) {
  if (this != &other) *this = ParamGroup(other);
  return *this;
}

ParamGroup::~ParamGroup() = default;

namespace {
void refuse_after_add(const ParamGroup& g, const char* option) {
  if (g.has_options())
    throw std::logic_error(std::string("ParamGroup::") + option +
                           ": the group is in an optimizer; change its options through options()");
}
}  // namespace

ParamGroup& ParamGroup::lr(double v) {
  if (has_options()) set_lr(v);
  else overrides_.lr = v;
  return *this;
}
ParamGroup& ParamGroup::weight_decay(double v) { refuse_after_add(*this, "weight_decay"); overrides_.weight_decay = v; return *this; }
ParamGroup& ParamGroup::momentum(double v) { refuse_after_add(*this, "momentum"); overrides_.momentum = v; return *this; }
ParamGroup& ParamGroup::dampening(double v) { refuse_after_add(*this, "dampening"); overrides_.dampening = v; return *this; }
ParamGroup& ParamGroup::nesterov(bool v) { refuse_after_add(*this, "nesterov"); overrides_.nesterov = v; return *this; }
ParamGroup& ParamGroup::betas(double b1, double b2) { refuse_after_add(*this, "betas"); overrides_.betas = std::pair{b1, b2}; return *this; }
ParamGroup& ParamGroup::eps(double v) { refuse_after_add(*this, "eps"); overrides_.eps = v; return *this; }

OptimizerOptions& ParamGroup::options() {
  if (!options_) throw std::logic_error("ParamGroup::options: the group is not in an optimizer yet");
  return *options_;
}

const OptimizerOptions& ParamGroup::options() const {
  if (!options_) throw std::logic_error("ParamGroup::options: the group is not in an optimizer yet");
  return *options_;
}

double ParamGroup::lr() const {
  if (options_) return options_->get_lr();
  return overrides_.lr.value_or(std::numeric_limits<double>::quiet_NaN());
}

void ParamGroup::set_lr(double v) {
  if (!(v >= 0.0)) throw std::invalid_argument("ParamGroup: invalid learning rate " + number_text(v));
  if (options_) options_->set_lr(v);
  else overrides_.lr = v;
}

// ---- Optimizer --------------------------------------------------------------------------------

void Optimizer::check_lr(const char* who, double lr) {
  if (!(lr >= 0.0)) throw std::invalid_argument(std::string(who) + ": invalid learning rate " + number_text(lr));
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, std::vector<std::string> buffers, const char* who)
    : buffer_names_(std::move(buffers)) {
  check_lr(who, lr);
  const std::string w = who;
  std::size_t total = 0;
  for (const ParamGroup& g : groups) total += g.params().size();
  if (total == 0) throw std::invalid_argument(w + ": got an empty parameter list");
  for (ParamGroup& g : groups) append_group(std::move(g), w);
}

void Optimizer::append_group(ParamGroup group, const std::string& w) {
  if (group.unnamed_) group.params_ = [&] {  // global indices, as torch's state_dict keys
    NamedTensors named;
    for (std::size_t k = 0; k < group.params_.size(); ++k)
      named.emplace_back(std::to_string(params_.size() + k), group.params_[k].second);
    return named;
  }();
  std::set<std::string> names;
  std::set<const TensorImpl*> impls;
  for (const auto& [n, p] : params_) {
    names.insert(n);
    impls.insert(p.impl());
  }
  for (const auto& [n, p] : group.params_) {
    if (!p.defined()) throw std::invalid_argument(w + ": parameter '" + n + "' is undefined");
    if (!is_floating(p.dtype()))
      throw std::invalid_argument(w + ": parameter '" + n + "' is " + std::string(dtype_name(p.dtype())) +
                                  ", not floating point");
    if (!p.is_leaf()) throw std::invalid_argument(w + ": parameter '" + n + "' is not a leaf tensor");
    if (!names.insert(n).second) throw std::invalid_argument(w + ": duplicate parameter name '" + n + "'");
    if (!impls.insert(p.impl()).second)
      throw std::invalid_argument(w + ": parameter '" + n + "' appears more than once");
  }
  group.first_ = params_.size();
  for (const auto& entry : group.params_) {
    params_.push_back(entry);
    state_.push_back(ParamState{std::vector<Tensor>(buffer_names_.size()), 0});
    group_of_.push_back(groups_.size());
  }
  groups_.push_back(std::move(group));
}

void Optimizer::resolve_groups() {
  for (std::size_t g = 0; g < groups_.size(); ++g)
    if (!groups_[g].options_) groups_[g].options_ = resolve(groups_[g], g);
}

void Optimizer::add_param_group(ParamGroup group) {
  if (group.params().empty()) throw std::invalid_argument(name() + ": add_param_group: the group has no parameters");
  group.options_ = resolve(group, groups_.size());  // validated before anything is added
  append_group(std::move(group), name());
}

bool Optimizer::keeps_buffer(std::size_t, std::size_t) const { return true; }

void Optimizer::zero_grad() {
  for (auto& [_, p] : params_) p.zero_grad();
}

double Optimizer::lr() const { return groups_.front().lr(); }

void Optimizer::set_lr(double lr) {
  check_lr(name().c_str(), lr);
  for (ParamGroup& g : groups_) g.options_->set_lr(lr);
}

Tensor& Optimizer::buffer(std::size_t i, std::size_t b) {
  Tensor& t = state_[i].buffers[b];
  const DType want = params_[i].second.dtype();
  if (t.defined() && t.dtype() != want) t = t.detach().to(want);  // the module was converted with to()
  return t;
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (state_[i].step == 0) continue;
    const std::string& n = params_[i].first;
    for (std::size_t b = 0; b < buffer_names_.size(); ++b)
      if (state_[i].buffers[b].defined() && keeps_buffer(i, b)) out.emplace_back("optimizer." + buffer_names_[b] + "." + n, state_[i].buffers[b]);
    out.emplace_back("optimizer.step." + n, Tensor::scalar(static_cast<double>(state_[i].step), DType::i64));
  }
  out.emplace_back("optimizer.step", Tensor::scalar(static_cast<double>(step_count_), DType::i64));
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& entries, const std::string& source) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < params_.size(); ++i) index[params_[i].first] = i;
  std::vector<ParamState> staged(params_.size(), ParamState{std::vector<Tensor>(buffer_names_.size()), 0});
  LoadReport report;  // sections in the order the message lists them
  auto& missing = report.section("missing");
  auto& unexpected = report.section("unexpected");
  auto& mismatched = report.section("shape mismatch");
  auto& incomplete = report.section("inconsistent");
  auto& duplicated = report.section("duplicated");
  std::set<std::string> seen, bad_shape;
  bool has_global = false;
  std::int64_t global = 0;
  const std::string prefix = "optimizer.";

  for (const auto& [key, t] : entries) {
    if (!seen.insert(key).second) {
      duplicated.push_back(key);
      continue;
    }
    if (key == "optimizer.step") {
      if (t.numel() != 1) {
        mismatched.push_back(key + ": file " + t.shape().str() + " vs a scalar");
        continue;
      }
      global = static_cast<std::int64_t>(t.to_vector<std::int64_t>()[0]);
      has_global = true;
      continue;
    }
    bool matched = false;
    if (key.compare(0, prefix.size(), prefix) == 0) {
      const std::string rest = key.substr(prefix.size());
      // Kinds never contain '.', parameter names may: match "<kind>." then look the rest up.
      for (std::size_t b = 0; b <= buffer_names_.size() && !matched; ++b) {
        const std::string kind = b < buffer_names_.size() ? buffer_names_[b] : "step";
        if (rest.compare(0, kind.size() + 1, kind + ".") != 0) continue;
        auto it = index.find(rest.substr(kind.size() + 1));
        if (it == index.end()) continue;
        if (b < buffer_names_.size() && !keeps_buffer(it->second, b)) continue;  // e.g. SGD without momentum
        matched = true;
        const std::size_t i = it->second;
        const Tensor& p = params_[i].second;
        if (b == buffer_names_.size()) {
          if (t.numel() != 1) mismatched.push_back(key + ": file " + t.shape().str() + " vs a scalar");
          else staged[i].step = t.to_vector<std::int64_t>()[0];
        } else if (!(t.shape() == p.shape())) {
          mismatched.push_back(key + ": file " + t.shape().str() + " vs model " + p.shape().str());
          bad_shape.insert(key);
        } else {
          Tensor copy = Tensor::empty(p.shape(), p.dtype());  // own buffer: never alias the source
          copy.copy_(t.detach().to(p.dtype()));
          staged[i].buffers[b] = copy;
        }
      }
    }
    if (!matched) unexpected.push_back(key);
  }
  if (!has_global) missing.push_back("optimizer.step");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    // A parameter that was updated has every buffer its optimizer keeps; one never updated has none.
    for (std::size_t b = 0; b < buffer_names_.size(); ++b) {
      if (!keeps_buffer(i, b)) continue;
      const std::string key = "optimizer." + buffer_names_[b] + "." + params_[i].first;
      if (staged[i].step > 0 && !staged[i].buffers[b].defined() && !bad_shape.count(key))
        missing.push_back(key);
      else if (staged[i].step == 0 && staged[i].buffers[b].defined())
        incomplete.push_back(key + " without a step count");
    }
  }
  report.throw_if_any(source + " (" + name() + " state)");
  state_ = std::move(staged);
  step_count_ = global;
}

void Optimizer::save(const std::string& path) const { save_npz(path, state_dict()); }

void Optimizer::load(const std::string& path) { load_state_dict(load_npz(path), "load " + path); }

// ---- SGD --------------------------------------------------------------------------------------

namespace {

void validate_sgd(const SGDOptions& o, const std::string& where) {
  if (!(o.lr() >= 0.0)) throw std::invalid_argument("SGD: invalid learning rate " + number_text(o.lr()) + where);
  if (!(o.momentum() >= 0.0)) throw std::invalid_argument("SGD: invalid momentum value " + number_text(o.momentum()) + where);
  if (!(o.weight_decay() >= 0.0))
    throw std::invalid_argument("SGD: invalid weight_decay value " + number_text(o.weight_decay()) + where);
  if (!std::isfinite(o.dampening())) throw std::invalid_argument("SGD: invalid dampening value " + number_text(o.dampening()) + where);
  if (o.nesterov() && (o.momentum() <= 0.0 || o.dampening() != 0.0))
    throw std::invalid_argument("SGD: Nesterov momentum requires a momentum and zero dampening" + where);
}

/// " (param group i)" for a group's own option errors.
std::string group_suffix(std::size_t index) { return " (param group " + std::to_string(index) + ")"; }

void refuse_option(bool set, const std::string& who, const char* option, std::size_t index) {
  if (set) throw std::invalid_argument(who + ": param group " + std::to_string(index) + " sets " + option + ", which " + who + " does not have");
}

}  // namespace

SGD::SGD(NamedTensors params, const SGDOptions& options) : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& options) : SGD(std::vector<ParamGroup>{ParamGroup(params)}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults)
    : Optimizer(std::move(groups), defaults.lr(), {"momentum_buffer"}, "SGD"), defaults_(defaults) {
  validate_sgd(defaults_, "");
  resolve_groups();
}

std::unique_ptr<OptimizerOptions> SGD::resolve(const ParamGroup& group, std::size_t index) const {
  const ParamGroup::Overrides& o = group.overrides();
  refuse_option(o.betas.has_value(), "SGD", "betas", index);
  refuse_option(o.eps.has_value(), "SGD", "eps", index);
  auto out = std::make_unique<SGDOptions>(defaults_);
  if (o.lr) out->lr(*o.lr);
  if (o.momentum) out->momentum(*o.momentum);
  if (o.dampening) out->dampening(*o.dampening);
  if (o.weight_decay) out->weight_decay(*o.weight_decay);
  if (o.nesterov) out->nesterov(*o.nesterov);
  validate_sgd(*out, group_suffix(index));
  return out;
}

bool SGD::keeps_buffer(std::size_t i, std::size_t) const {
  return static_cast<const SGDOptions&>(options_of(i)).momentum() != 0.0;
}

void SGD::step() {
  NoGradGuard no_grad;
  ++step_count_;
  for_each_group([&](const OptimizerOptions& group, std::size_t first, std::size_t last) {
    const auto& options = static_cast<const SGDOptions&>(group);
    const bool use_momentum = options.momentum() != 0.0;
    for (std::size_t i = first; i < last; ++i) {
      Tensor& p = params_[i].second;
      const Grad g(p);
      if (!g.defined()) continue;
      // No buffer yet (first update, or momentum turned on later): it starts as the step, as torch's.
      bool fresh = false;
      Tensor buf;
      if (use_momentum) {
        fresh = !state_[i].buffers[0].defined();
        if (fresh) state_[i].buffers[0] = Tensor::empty(p.shape(), p.dtype());
        buf = buffer(i, 0);
      }
      ++state_[i].step;
      dispatch_floating("SGD", p.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const SgdScalars<T> s{static_cast<T>(options.weight_decay()), static_cast<T>(options.momentum()),
                              static_cast<T>(1.0 - options.dampening()), static_cast<T>(-options.lr())};
        T* pp = p.data<T>();
        T* pb = use_momentum ? buf.data<T>() : nullptr;
        with_flag(options.weight_decay() != 0.0, [&](auto decay) {
          with_flag(use_momentum, [&](auto momentum) {
            with_flag(fresh, [&](auto first_flag) {
              with_flag(options.nesterov(), [&](auto nesterov) {
                for_each_grad_range<T>(p.numel(), g, [&](std::int64_t b, std::int64_t e, const T* pg) {
                  sgd_kernel<T, decltype(decay)::value, decltype(momentum)::value, decltype(first_flag)::value,
                             decltype(nesterov)::value>(pp + b, pg, pb ? pb + b : nullptr, e - b, s);
                });
              });
            });
          });
        });
      });
      // Written through data<T>(): bumped as torch's in-place update does, so a backward through a
      // graph that saved p before this step throws, and autocast's bf16 copy of p is renewed.
      autograd::increment_version(p);
    }
  });
}

// ---- Adam / AdamW -----------------------------------------------------------------------------

namespace {

void validate_adam(const AdamOptions& o, const std::string& w, const std::string& where) {
  const auto [b1, b2] = o.betas();
  if (!(o.lr() >= 0.0)) throw std::invalid_argument(w + ": invalid learning rate " + number_text(o.lr()) + where);
  if (!(o.eps() >= 0.0)) throw std::invalid_argument(w + ": invalid epsilon value " + number_text(o.eps()) + where);
  if (!(b1 >= 0.0 && b1 < 1.0)) throw std::invalid_argument(w + ": invalid beta parameter at index 0: " + number_text(b1) + where);
  if (!(b2 >= 0.0 && b2 < 1.0)) throw std::invalid_argument(w + ": invalid beta parameter at index 1: " + number_text(b2) + where);
  if (!(o.weight_decay() >= 0.0))
    throw std::invalid_argument(w + ": invalid weight_decay value " + number_text(o.weight_decay()) + where);
}

}  // namespace

Adam::Adam(NamedTensors params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup(params)}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Optimizer(std::move(groups), defaults.lr(), {"exp_avg", "exp_avg_sq"},
                defaults.decoupled_weight_decay() ? "AdamW" : "Adam"),
      defaults_(defaults) {
  validate_adam(defaults_, name(), "");
  resolve_groups();
}

std::unique_ptr<OptimizerOptions> Adam::resolve(const ParamGroup& group, std::size_t index) const {
  const ParamGroup::Overrides& o = group.overrides();
  const std::string w = name();
  refuse_option(o.momentum.has_value(), w, "momentum", index);
  refuse_option(o.dampening.has_value(), w, "dampening", index);
  refuse_option(o.nesterov.has_value(), w, "nesterov", index);
  auto out = std::make_unique<AdamOptions>(defaults_);
  if (o.lr) out->lr(*o.lr);
  if (o.betas) out->betas(o.betas->first, o.betas->second);
  if (o.eps) out->eps(*o.eps);
  if (o.weight_decay) out->weight_decay(*o.weight_decay);
  validate_adam(*out, w, group_suffix(index));
  return out;
}

void Adam::step() {
  NoGradGuard no_grad;
  ++step_count_;
  for_each_group([&](const OptimizerOptions& group, std::size_t first, std::size_t last) {
    const auto& options = static_cast<const AdamOptions&>(group);
    // Not a structured binding: the lambdas below capture these, which clang < 16 refuses (fuzz build).
    const double beta1 = options.betas().first, beta2 = options.betas().second;
    const double wd = options.weight_decay(), lr = options.lr();
    const bool decoupled = options.decoupled_weight_decay();
    for (std::size_t i = first; i < last; ++i) {
      Tensor& p = params_[i].second;
      const Grad g(p);
      if (!g.defined()) continue;
      ParamState& st = state_[i];
      if (st.step == 0) {
        st.buffers[0] = Tensor::zeros(p.shape(), p.dtype());
        st.buffers[1] = Tensor::zeros(p.shape(), p.dtype());
      }
      Tensor m = buffer(i, 0), v = buffer(i, 1);
      const auto t = static_cast<double>(++st.step);
      const double bias_correction1 = 1.0 - std::pow(beta1, t);
      const double bias_correction2 = 1.0 - std::pow(beta2, t);
      const double step_size = lr / bias_correction1;
      dispatch_floating(decoupled ? "AdamW" : "Adam", p.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const AdamScalars<T> s{static_cast<T>(beta1),
                               static_cast<T>(1.0 - beta1),
                               static_cast<T>(beta2),
                               static_cast<T>(1.0 - beta2),
                               static_cast<T>(wd),
                               static_cast<T>(1.0 - lr * wd),
                               static_cast<T>(std::sqrt(bias_correction2)),
                               static_cast<T>(options.eps()),
                               static_cast<T>(-step_size)};
        T* pp = p.data<T>();
        T* pm = m.data<T>();
        T* pv = v.data<T>();
        for_each_grad_range<T>(p.numel(), g, [&](std::int64_t b, std::int64_t e, const T* pg) {
          if (wd == 0.0) adam_kernel<T, false, false>(pp + b, pg, pm + b, pv + b, e - b, s);
          else if (decoupled) adam_kernel<T, false, true>(pp + b, pg, pm + b, pv + b, e - b, s);
          else adam_kernel<T, true, false>(pp + b, pg, pm + b, pv + b, e - b, s);
        });
      });
      autograd::increment_version(p);  // as in SGD::step
    }
  });
}

AdamW::AdamW(NamedTensors params, AdamOptions options)
    : Adam(std::move(params), options.decoupled_weight_decay(true)) {}

AdamW::AdamW(const std::vector<Tensor>& params, AdamOptions options)
    : Adam(params, options.decoupled_weight_decay(true)) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Adam(std::move(groups), defaults.decoupled_weight_decay(true)) {}

}  // namespace tg::nn
