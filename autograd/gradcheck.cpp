#include "autograd/gradcheck.h"

#include <cmath>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "autograd/tape.h"

namespace tg {

std::ostream& operator<<(std::ostream& os, const GradcheckReport& r) {
  if (r.ok) return os << "gradcheck passed (" << r.checked << " entries, max abs error " << r.max_abs_error << ")";
  return os << r.message;
}

namespace {

Tensor run_detached(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs);
}

}  // namespace

GradcheckReport gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad() && inputs[i].dtype() != DType::f64)
      throw std::invalid_argument("gradcheck: input " + std::to_string(i) + " requires grad but is " +
                                  std::string(dtype_name(inputs[i].dtype())) + "; check in float64");

  // Work on private copies so the caller's tensors and their .grad stay untouched.
  std::vector<Tensor> xs;
  for (const Tensor& x : inputs) {
    Tensor c = x.detach().clone();
    if (x.requires_grad()) c.requires_grad_(true);
    if (x.allows_compact_grad()) c.allow_compact_grad();  // check the caller's gradient path
    xs.push_back(c);
  }
  const Tensor y0 = run_detached(fn, xs);
  if (y0.dtype() != DType::f64) throw std::invalid_argument("gradcheck: fn must return float64");
  const std::int64_t n_out = y0.numel();

  // Analytic Jacobian, one row per output element (one backward with a one-hot seed each).
  std::vector<std::vector<std::vector<double>>> analytic(xs.size());  // [input][out][elem]
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (xs[i].requires_grad()) analytic[i].assign(n_out, std::vector<double>(xs[i].numel(), 0.0));
  for (std::int64_t o = 0; o < n_out; ++o) {
    for (auto& x : xs) x.zero_grad();
    Tensor y = fn(xs);
    Tensor seed = Tensor::zeros(y.shape(), DType::f64);
    seed.data<double>()[o] = 1.0;
    if (y.requires_grad()) y.backward(seed);  // frees what it walked; the caller's other graphs stay
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (!xs[i].requires_grad()) continue;
      const Tensor g = xs[i].grad();
      if (!g.defined()) continue;  // no path from this input to this output: zero row
      const double* pg = g.data<double>();
      std::copy(pg, pg + g.numel(), analytic[i][o].begin());
    }
  }
  for (auto& x : xs) x.zero_grad();

  GradcheckReport report;
  double worst_excess = 0;  // largest |a - n| - (atol + rtol |n|)
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].requires_grad()) continue;
    double* px = xs[i].data<double>();
    for (std::int64_t e = 0; e < xs[i].numel(); ++e) {
      const double saved = px[e];
      px[e] = saved + opt.eps;
      const Tensor yp = run_detached(fn, xs).detach().clone();  // fn may return an input itself
      px[e] = saved - opt.eps;
      const Tensor ym = run_detached(fn, xs).detach().clone();
      px[e] = saved;
      const double* a = yp.data<double>();
      const double* b = ym.data<double>();
      for (std::int64_t o = 0; o < n_out; ++o) {
        const double numeric = (a[o] - b[o]) / (2 * opt.eps);
        const double an = analytic[i][o][e];
        const double err = std::abs(an - numeric);
        const double excess = err - (opt.atol + opt.rtol * std::abs(numeric));
        ++report.checked;
        report.max_abs_error = std::max(report.max_abs_error, err);
        if (!(excess <= 0) && (report.ok || !(excess <= worst_excess))) {  // also catches NaN
          report.ok = false;
          worst_excess = excess;
          report.input = static_cast<int>(i);
          report.element = e;
          report.output = o;
          report.analytic = an;
          report.numeric = numeric;
        }
      }
    }
  }
  if (!report.ok) {
    std::ostringstream os;
    os.precision(10);
    os << "gradcheck failed: input " << report.input << " (shape " << xs[report.input].shape().str()
       << "), element " << report.element << ", output element " << report.output << ": analytic "
       << report.analytic << " vs numeric " << report.numeric << " (atol " << opt.atol << ", rtol " << opt.rtol
       << "; " << report.checked << " entries checked)";
    report.message = os.str();
  }
  return report;
}

GradcheckReport gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const Tensor& grad_output,
                              const GradcheckOptions& opt) {
  std::vector<int> wrt;  // positions of the inputs the vector-Jacobian product differentiates
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad()) wrt.push_back(static_cast<int>(i));
  if (wrt.empty()) throw std::invalid_argument("gradgradcheck: no input requires grad");
  Tensor v = grad_output;
  if (!v.defined()) {
    Tensor y;
    {
      NoGradGuard no_grad;
      y = fn(inputs);
    }
    Generator gen(20261125);
    v = Tensor::uniform(y.shape(), -1.0, 1.0, gen, DType::f64);
  }
  if (v.dtype() != DType::f64) throw std::invalid_argument("gradgradcheck: grad_output must be float64");
  // (inputs..., v) -> the input gradients, flattened and joined into one tensor.
  auto vjp = [&fn, &wrt](const std::vector<Tensor>& in) {
    const bool differentiate = GradMode::enabled();  // false in gradcheck's finite-difference pass
    EnableGradGuard enable;  // the product needs a graph in both passes
    const std::vector<Tensor> xs(in.begin(), in.end() - 1);
    std::vector<Tensor> targets;
    for (int i : wrt) targets.push_back(xs[i]);
    const Tensor y = fn(xs);
    std::vector<Tensor> parts;
    if (!y.requires_grad()) {  // fn does not depend on its inputs: the product is zero
      for (const Tensor& t : targets) parts.push_back(reshape(Tensor::zeros(t.shape(), t.dtype()), Shape{t.numel()}));
      return concat(parts, 0);
    }
    const std::vector<Tensor> grads =
        grad({y}, targets, {in.back()}, {.create_graph = differentiate, .allow_unused = true});
    for (std::size_t k = 0; k < grads.size(); ++k) {
      const Tensor g = grads[k].defined() ? grads[k] : Tensor::zeros(targets[k].shape(), targets[k].dtype());
      parts.push_back(reshape(g, Shape{g.numel()}));
    }
    return concat(parts, 0);
  };
  std::vector<Tensor> all = inputs;
  all.push_back(v.detach().requires_grad_());
  GradcheckReport report = gradcheck(vjp, all, opt);
  if (!report.ok) report.message = "gradgradcheck: " + report.message;
  return report;
}

}  // namespace tg
