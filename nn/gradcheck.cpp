#include "nn/gradcheck.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <ostream>
#include <sstream>

#include "autograd/random.h"
#include "autograd/tape.h"

namespace tg::nn {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// sum(r * y) in double, outside autograd.
double project(const Tensor& y, const Tensor& r) {
  if (y.dtype() != DType::f64 || !(y.shape() == r.shape()))
    throw std::invalid_argument("nn::gradcheck: forward returned " + y.shape().str() + " " + std::string(dtype_name(y.dtype())) +
                                ", expected " + r.shape().str() + " float64 as in the first call");
  const double* py = y.data<double>();
  const double* pr = r.data<double>();
  double s = 0;
  for (std::int64_t k = 0; k < y.numel(); ++k) s += py[k] * pr[k];
  return s;
}

/// The entries of a tensor of `numel` elements to check: all, or `max` distinct ones in order.
std::vector<std::int64_t> pick_entries(std::int64_t numel, std::int64_t max, std::uint64_t seed) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(numel));
  std::iota(all.begin(), all.end(), 0);
  if (max <= 0 || numel <= max) return all;
  Generator gen(seed);
  for (std::int64_t k = 0; k < max; ++k)  // partial Fisher-Yates
    std::swap(all[k], all[k + static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(numel - k)))]);
  all.resize(static_cast<std::size_t>(max));
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace

ModuleGradcheckReport gradcheck(Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                const std::vector<Tensor>& inputs, const ModuleGradcheckOptions& opt) {
  const auto t_start = Clock::now();
  const GradcheckOptions& tol = opt.tolerances;

  // The tensors to check: trainable parameters, then floating inputs (private copies).
  struct Target {
    std::string name;
    Tensor tensor;
  };
  std::vector<Target> targets;
  for (auto& [name, p] : module.named_parameters()) {
    if (!p.requires_grad()) continue;
    if (p.dtype() != DType::f64)
      throw std::invalid_argument("nn::gradcheck: parameter '" + name + "' is " + std::string(dtype_name(p.dtype())) +
                                  "; convert the module with to(DType::f64) first");
    targets.push_back({name, p});
  }
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !is_floating(x.dtype())) {
      xs.push_back(x);
      continue;
    }
    if (x.dtype() != DType::f64)
      throw std::invalid_argument("nn::gradcheck: input " + std::to_string(i) + " is " + std::string(dtype_name(x.dtype())) +
                                  "; check in float64");
    Tensor c = x.detach().clone();
    if (opt.check_inputs) {
      c.requires_grad_();
      targets.push_back({"input " + std::to_string(i), c});
    }
    xs.push_back(c);
  }

  // The projection r, from the output's shape.
  Tensor y0;
  {
    NoGradGuard no_grad;
    y0 = fn(xs);
  }
  if (!y0.defined() || y0.dtype() != DType::f64)
    throw std::invalid_argument("nn::gradcheck: forward must return a float64 tensor");
  Generator gen(opt.seed);
  const Tensor r = y0.numel() == 1 ? Tensor::ones(y0.shape(), DType::f64) : Tensor::uniform(y0.shape(), -1, 1, gen, DType::f64);

  // Analytic gradients of sum(r * y); the callers' gradients are put back afterwards.
  std::vector<Tensor> saved_grads;
  for (auto& t : targets) {
    saved_grads.push_back(t.tensor.grad());
    t.tensor.zero_grad();
  }
  std::vector<Tensor> analytic(targets.size());
  try {
    Tensor y = fn(xs);
    if (y.requires_grad()) y.backward(r);
    tape::reset();
    for (std::size_t k = 0; k < targets.size(); ++k) {
      analytic[k] = targets[k].tensor.grad();
      if (!analytic[k].defined()) analytic[k] = Tensor::zeros(targets[k].tensor.shape(), DType::f64);  // not used
      else analytic[k] = analytic[k].clone();
    }
  } catch (...) {
    tape::reset();
    for (std::size_t k = 0; k < targets.size(); ++k) targets[k].tensor.set_grad(saved_grads[k]);
    throw;
  }
  for (std::size_t k = 0; k < targets.size(); ++k) targets[k].tensor.set_grad(saved_grads[k]);

  // Central differences, entry by entry.
  ModuleGradcheckReport report;
  NoGradGuard no_grad;
  for (std::size_t k = 0; k < targets.size(); ++k) {
    const auto t0 = Clock::now();
    Tensor& p = targets[k].tensor;
    TensorGradcheck row;
    row.name = targets[k].name;
    row.shape = p.shape();
    row.numel = p.numel();
    double* px = p.data<double>();
    const double* pa = analytic[k].data<double>();
    double worst_excess = 0;
    for (const std::int64_t e : pick_entries(p.numel(), opt.max_entries, opt.seed + 1 + k)) {
      const double saved = px[e];
      px[e] = saved + tol.eps;
      double sp = 0, sm = 0;
      try {
        sp = project(fn(xs), r);
        px[e] = saved - tol.eps;
        sm = project(fn(xs), r);
      } catch (...) {
        px[e] = saved;
        throw;
      }
      px[e] = saved;
      const double numeric = (sp - sm) / (2 * tol.eps);
      const double a = pa[e];
      const double err = std::abs(a - numeric);
      const double excess = err - (tol.atol + tol.rtol * std::abs(numeric));
      ++row.checked;
      row.max_abs_error = std::max(row.max_abs_error, err);
      row.max_rel_error = std::max(row.max_rel_error, err / std::max({std::abs(a), std::abs(numeric), tol.atol}));
      const bool fails = !(excess <= 0);  // also NaN
      if (row.worst_element < 0 || (std::isnan(excess) && !std::isnan(worst_excess)) || excess > worst_excess) {
        worst_excess = excess;
        row.worst_element = e;
        row.analytic = a;
        row.numeric = numeric;
      }
      if (fails) row.ok = false;
    }
    row.seconds = since(t0);
    report.ok = report.ok && row.ok;
    report.tensors.push_back(std::move(row));
  }
  report.seconds = since(t_start);
  return report;
}

std::string ModuleGradcheckReport::str() const {
  std::size_t width = 9;  // "parameter"
  for (const auto& t : tensors) width = std::max(width, t.name.size());
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-14s %15s  %11s  %11s  %8s  %s\n", static_cast<int>(width), "parameter", "shape",
                "checked/numel", "max abs err", "max rel err", "time", "result");
  os << line;
  std::int64_t checked = 0, failed = 0;
  for (const auto& t : tensors) {
    const std::string counts = std::to_string(t.checked) + "/" + std::to_string(t.numel);
    std::snprintf(line, sizeof line, "%-*s  %-14s %15s  %11.3g  %11.3g  %7.3fs  %s", static_cast<int>(width), t.name.c_str(),
                  t.shape.str().c_str(), counts.c_str(), t.max_abs_error, t.max_rel_error, t.seconds, t.ok ? "ok" : "FAIL");
    os << line;
    if (!t.ok) {
      std::snprintf(line, sizeof line, " (element %lld: analytic %.10g, numeric %.10g)", static_cast<long long>(t.worst_element),
                    t.analytic, t.numeric);
      os << line;
      ++failed;
    }
    os << '\n';
    checked += t.checked;
  }
  std::snprintf(line, sizeof line, "%zu tensors, %lld entries checked, %s (%.2fs)\n", tensors.size(),
                static_cast<long long>(checked),
                ok ? "all passed" : (std::to_string(failed) + " failed").c_str(), seconds);
  os << line;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const ModuleGradcheckReport& report) { return os << report.str(); }

}  // namespace tg::nn
