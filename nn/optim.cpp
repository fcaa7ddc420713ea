#include "nn/optim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "autograd/compact_grad.h"
#include "autograd/dtype.h"
#include "autograd/memory.h"
#include "autograd/parallel.h"
#include "autograd/tape.h"
#include "nn/serialize.h"

namespace tg::nn {

namespace {

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}


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

// ---- Optimizer --------------------------------------------------------------------------------

void Optimizer::check_lr(const char* who, double lr) {
  if (!(lr >= 0.0)) throw std::invalid_argument(std::string(who) + ": invalid learning rate " + num(lr));
}

Optimizer::Optimizer(NamedTensors params, double lr, std::vector<std::string> buffers, const char* who)
    : params_(std::move(params)), buffer_names_(std::move(buffers)) {
  check_lr(who, lr);
  const std::string w = who;
  if (params_.empty()) throw std::invalid_argument(w + ": got an empty parameter list");
  std::set<std::string> names;
  std::set<const TensorImpl*> impls;
  for (const auto& [n, p] : params_) {
    if (!p.defined()) throw std::invalid_argument(w + ": parameter '" + n + "' is undefined");
    if (!is_floating(p.dtype()))
      throw std::invalid_argument(w + ": parameter '" + n + "' is " + std::string(dtype_name(p.dtype())) +
                                  ", not floating point");
    if (!p.is_leaf()) throw std::invalid_argument(w + ": parameter '" + n + "' is not a leaf tensor");
    if (!names.insert(n).second) throw std::invalid_argument(w + ": duplicate parameter name '" + n + "'");
    if (!impls.insert(p.impl()).second)
      throw std::invalid_argument(w + ": parameter '" + n + "' appears more than once");
  }
  state_.assign(params_.size(), ParamState{std::vector<Tensor>(buffer_names_.size()), 0});
}

void Optimizer::zero_grad() {
  for (auto& [_, p] : params_) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  check_lr(name().c_str(), lr);
  store_lr(lr);
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
      if (state_[i].buffers[b].defined()) out.emplace_back("optimizer." + buffer_names_[b] + "." + n, state_[i].buffers[b]);
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

SGD::SGD(NamedTensors params, const SGDOptions& options)
    : Optimizer(std::move(params), options.lr(),
                options.momentum() != 0.0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{},
                "SGD"),
      options_(options) {
  if (!(options.momentum() >= 0.0)) throw std::invalid_argument("SGD: invalid momentum value " + num(options.momentum()));
  if (!(options.weight_decay() >= 0.0))
    throw std::invalid_argument("SGD: invalid weight_decay value " + num(options.weight_decay()));
  if (!std::isfinite(options.dampening()))
    throw std::invalid_argument("SGD: invalid dampening value " + num(options.dampening()));
  if (options.nesterov() && (options.momentum() <= 0.0 || options.dampening() != 0.0))
    throw std::invalid_argument("SGD: Nesterov momentum requires a momentum and zero dampening");
}

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& options) : SGD(name_by_index(params), options) {}

void SGD::step() {
  NoGradGuard no_grad;
  ++step_count_;
  const bool use_momentum = options_.momentum() != 0.0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    const Grad g(p);
    if (!g.defined()) continue;
    const bool first = state_[i].step == 0;
    Tensor buf;
    if (use_momentum) {
      if (first) state_[i].buffers[0] = Tensor::empty(p.shape(), p.dtype());
      buf = buffer(i, 0);
    }
    ++state_[i].step;
    dispatch_floating("SGD", p.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const SgdScalars<T> s{static_cast<T>(options_.weight_decay()), static_cast<T>(options_.momentum()),
                            static_cast<T>(1.0 - options_.dampening()), static_cast<T>(-options_.lr())};
      T* pp = p.data<T>();
      T* pb = use_momentum ? buf.data<T>() : nullptr;
      with_flag(options_.weight_decay() != 0.0, [&](auto decay) {
        with_flag(use_momentum, [&](auto momentum) {
          with_flag(first, [&](auto first_step) {
            with_flag(options_.nesterov(), [&](auto nesterov) {
              for_each_grad_range<T>(p.numel(), g, [&](std::int64_t b, std::int64_t e, const T* pg) {
                sgd_kernel<T, decltype(decay)::value, decltype(momentum)::value, decltype(first_step)::value,
                           decltype(nesterov)::value>(pp + b, pg, pb ? pb + b : nullptr, e - b, s);
              });
            });
          });
        });
      });
    });
  }
}

// ---- Adam / AdamW -----------------------------------------------------------------------------

Adam::Adam(NamedTensors params, const AdamOptions& options)
    : Optimizer(std::move(params), options.lr(), {"exp_avg", "exp_avg_sq"},
                options.decoupled_weight_decay() ? "AdamW" : "Adam"),
      options_(options) {
  const std::string w = name();
  const auto [b1, b2] = options.betas();
  if (!(options.eps() >= 0.0)) throw std::invalid_argument(w + ": invalid epsilon value " + num(options.eps()));
  if (!(b1 >= 0.0 && b1 < 1.0)) throw std::invalid_argument(w + ": invalid beta parameter at index 0: " + num(b1));
  if (!(b2 >= 0.0 && b2 < 1.0)) throw std::invalid_argument(w + ": invalid beta parameter at index 1: " + num(b2));
  if (!(options.weight_decay() >= 0.0))
    throw std::invalid_argument(w + ": invalid weight_decay value " + num(options.weight_decay()));
}

Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& options) : Adam(name_by_index(params), options) {}

void Adam::step() {
  NoGradGuard no_grad;
  ++step_count_;
  // Not a structured binding: the lambdas below capture these, which clang < 16 refuses (fuzz build).
  const double beta1 = options_.betas().first, beta2 = options_.betas().second;
  const double wd = options_.weight_decay();
  const bool decoupled = options_.decoupled_weight_decay();
  for (std::size_t i = 0; i < params_.size(); ++i) {
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
    const double step_size = options_.lr() / bias_correction1;
    dispatch_floating(decoupled ? "AdamW" : "Adam", p.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const AdamScalars<T> s{static_cast<T>(beta1),
                             static_cast<T>(1.0 - beta1),
                             static_cast<T>(beta2),
                             static_cast<T>(1.0 - beta2),
                             static_cast<T>(wd),
                             static_cast<T>(1.0 - options_.lr() * wd),
                             static_cast<T>(std::sqrt(bias_correction2)),
                             static_cast<T>(options_.eps()),
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
  }
}

AdamW::AdamW(NamedTensors params, AdamOptions options)
    : Adam(std::move(params), options.decoupled_weight_decay(true)) {}

AdamW::AdamW(const std::vector<Tensor>& params, AdamOptions options)
    : Adam(name_by_index(params), options.decoupled_weight_decay(true)) {}

}  // namespace tg::nn
