#include "autograd/ops_sampling.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/error_text.h"
#include "autograd/ops_elementwise.h"
#include "autograd/random.h"
#include "autograd/tape.h"

namespace tg {

namespace {

/// Runs f(default_generator()) holding its mutex: the overloads without a generator.
template <class F> Tensor with_default_generator(F&& f) {
  std::lock_guard<std::mutex> lock(default_generator_mutex());
  return f(default_generator());
}

/// Integer values as a tensor of `dtype` (i64, or floating: the sampling ops' output dtypes).
Tensor integers_as(std::vector<std::int64_t> values, const Shape& shape, DType dtype, const char* op) {
  if (dtype != DType::i64 && !is_floating(dtype))
    throw std::invalid_argument(std::string(op) + ": dtype must be i64, f32 or f64, got " +
                                std::string(dtype_name(dtype)));
  Tensor t = Tensor::from_vector(values, shape);
  return dtype == DType::i64 ? t : t.to(dtype);
}

/// Elements of a floating tensor as doubles, checked: a user error otherwise.
std::vector<double> floating_values(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": " + what + " is undefined");
  if (!is_floating(t.dtype()))
    throw std::invalid_argument(std::string(op) + " only supports floating-point dtypes for " + what + ", got " +
                                std::string(dtype_name(t.dtype())));
  return t.detach().to_vector<double>();
}

}  // namespace

// ---- multinomial ------------------------------------------------------------------------------

Tensor multinomial(const Tensor& input, std::int64_t num_samples, bool replacement, Generator& generator) {
  const std::vector<double> w = floating_values(input, "multinomial", "input");
  if (input.dim() < 1 || input.dim() > 2)
    throw std::invalid_argument("multinomial: prob_dist must be 1 or 2 dim, got shape " + input.shape().str());
  if (num_samples <= 0) throw std::invalid_argument("multinomial: cannot sample n_sample <= 0 samples");
  const std::int64_t n = input.size(-1), rows = input.dim() == 2 ? input.size(0) : 1;
  if (!replacement && num_samples > n)
    throw std::invalid_argument("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                                "(n_sample " + std::to_string(num_samples) + ", size " + std::to_string(n) + ")");
  // Every row is checked before anything is drawn: an error leaves the generator where it was.
  std::vector<double> row_max(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::string where = input.dim() == 2 ? " in row " + std::to_string(r) : "";
    double m = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = w[static_cast<std::size_t>(r * n + i)];
      if (!std::isfinite(v))
        throw std::invalid_argument("multinomial: invalid multinomial distribution (encountering probability entry = "
                                    "infinity or NaN" + where + ")");
      if (v < 0)
        throw std::invalid_argument("multinomial: invalid multinomial distribution (encountering probability entry < 0" +
                                    where + ")");
      m = std::max(m, v);
    }
    if (m == 0)
      throw std::invalid_argument("multinomial: invalid multinomial distribution (sum of probabilities <= 0" + where + ")");
    row_max[static_cast<std::size_t>(r)] = m;
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows * num_samples));
  std::vector<double> scratch(static_cast<std::size_t>(n));
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = w.data() + r * n;
    std::int64_t* o = out.data() + r * num_samples;
    // Weights over the row's maximum: sums stay <= n, so neither huge nor tiny weights overflow.
    const double inv = 1.0 / row_max[static_cast<std::size_t>(r)];
    if (replacement) {
      // Inverse CDF: the first category whose running sum exceeds u * total. A zero weight adds
      // nothing to the running sum, so it is never the first to exceed it.
      double total = 0.0;
      for (std::int64_t i = 0; i < n; ++i) scratch[static_cast<std::size_t>(i)] = total += row[i] * inv;
      std::int64_t last = n - 1;  // u * total may round up to total: then the last positive weight
      while (row[last] == 0) --last;
      for (std::int64_t s = 0; s < num_samples; ++s) {
        const double target = generator.uniform() * total;
        const auto it = std::upper_bound(scratch.begin(), scratch.end(), target);
        o[s] = std::min<std::int64_t>(it - scratch.begin(), last);
      }
    } else {
      // Largest keys w_i / E_i, E_i ~ Exp(1), one draw per category in index order: the order of a
      // sequential draw without replacement (torch's exponential trick). Zero weights rank last.
      for (std::int64_t i = 0; i < n; ++i) {
        const double e = generator.exponential();
        scratch[static_cast<std::size_t>(i)] = row[i] > 0 ? row[i] * inv / e : -1.0;  // e = 0: +inf, still first
      }
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::partial_sort(order.begin(), order.begin() + num_samples, order.end(), [&](std::int64_t a, std::int64_t b) {
        const double ka = scratch[static_cast<std::size_t>(a)], kb = scratch[static_cast<std::size_t>(b)];
        return ka != kb ? ka > kb : a < b;
      });
      std::copy(order.begin(), order.begin() + num_samples, o);
    }
  }
  const Shape shape = input.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples};
  return Tensor::from_vector(out, shape);
}

Tensor multinomial(const Tensor& input, std::int64_t num_samples, bool replacement) {
  return with_default_generator([&](Generator& g) { return multinomial(input, num_samples, replacement, g); });
}

// ---- randint, randperm ------------------------------------------------------------------------

Tensor randint(std::int64_t low, std::int64_t high, const Shape& size, Generator& generator, DType dtype) {
  if (low >= high)
    throw std::invalid_argument("randint: random_ expects 'from' to be less than 'to', but got from=" +
                                std::to_string(low) + " >= to=" + std::to_string(high));
  // high - low in unsigned arithmetic: exact even when it exceeds INT64_MAX.
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  std::vector<std::int64_t> v(static_cast<std::size_t>(size.numel()));
  for (auto& x : v) x = static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + generator.uniform_below(range));
  return integers_as(std::move(v), size, dtype, "randint");
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& size, DType dtype) {
  return with_default_generator([&](Generator& g) { return randint(low, high, size, g, dtype); });
}

Tensor randint(std::int64_t high, const Shape& size, Generator& generator, DType dtype) {
  return randint(0, high, size, generator, dtype);
}

Tensor randint(std::int64_t high, const Shape& size, DType dtype) {
  return with_default_generator([&](Generator& g) { return randint(0, high, size, g, dtype); });
}

Tensor randperm(std::int64_t n, Generator& generator, DType dtype) {
  if (n < 0) throw std::invalid_argument("randperm: n must be non-negative, got " + std::to_string(n));
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), std::int64_t{0});
  // Fisher-Yates front to back, as torch's CPU randperm (which draws with a modulo).
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<std::int64_t>(generator.uniform_below(static_cast<std::uint64_t>(n - i)));
    std::swap(v[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(i + z)]);
  }
  return integers_as(std::move(v), Shape{n}, dtype, "randperm");
}

Tensor randperm(std::int64_t n, DType dtype) {
  return with_default_generator([&](Generator& g) { return randperm(n, g, dtype); });
}

// ---- bernoulli --------------------------------------------------------------------------------

Tensor bernoulli(const Tensor& p, Generator& generator) {
  const std::vector<double> pv = floating_values(p, "bernoulli", "p");
  for (std::size_t i = 0; i < pv.size(); ++i)
    if (!(pv[i] >= 0.0 && pv[i] <= 1.0))
      throw std::invalid_argument("bernoulli: expects 0 <= p <= 1, got " + number_text(pv[i]) + " at flat index " +
                                  std::to_string(i));
  Tensor out = Tensor::empty(p.shape(), p.dtype());
  dispatch_floating("bernoulli", p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    // uniform() < 1 always and >= 0: p = 1 gives 1 and p = 0 gives 0 exactly.
    for (std::size_t i = 0; i < pv.size(); ++i) o[i] = generator.uniform() < pv[i] ? T(1) : T(0);
  });
  return out;
}

Tensor bernoulli(const Tensor& p) {
  return with_default_generator([&](Generator& g) { return bernoulli(p, g); });
}

Tensor bernoulli(const Tensor& input, double p, Generator& generator) {
  if (!input.defined()) throw std::invalid_argument("bernoulli: input is undefined");
  if (!(p >= 0.0 && p <= 1.0)) throw std::invalid_argument("bernoulli_ expects p to be in [0, 1], but got p=" + number_text(p));
  std::vector<double> v(static_cast<std::size_t>(input.numel()));
  for (auto& x : v) x = generator.uniform() < p ? 1.0 : 0.0;
  return Tensor::from_values(v, input.shape(), input.dtype());
}

Tensor bernoulli(const Tensor& input, double p) {
  return with_default_generator([&](Generator& g) { return bernoulli(input, p, g); });
}

// ---- normal -----------------------------------------------------------------------------------

Tensor normal(double mean, double std, const Shape& size, Generator& generator, DType dtype) {
  if (!(std >= 0.0)) throw std::invalid_argument("normal expects std >= 0.0, but found std " + number_text(std));
  if (!is_floating(dtype))
    throw std::invalid_argument("normal: dtype must be floating, got " + std::string(dtype_name(dtype)));
  return Tensor::normal(size, mean, std, generator, dtype);
}

Tensor normal(double mean, double std, const Shape& size, DType dtype) {
  return with_default_generator([&](Generator& g) { return normal(mean, std, size, g, dtype); });
}

// With tensor arguments the output has mean's dtype, as torch's (at::empty(shape, mean.options())
// then output.mul_(std).add_(mean)): mean must be floating, std of any dtype is converted to it.
// With a double on one side the output has the tensor's dtype (torch's empty_like), which must be
// floating; each error names the argument that decides the output's dtype.

namespace {

/// Throws unless t (mean or std, whose dtype the output takes) is a defined floating tensor.
void check_output_dtype(const Tensor& t, const char* what) {
  if (!t.defined()) throw std::invalid_argument(std::string("normal: ") + what + " is undefined");
  if (!is_floating(t.dtype()))
    throw std::invalid_argument(std::string("normal: expects a floating-point ") + what + " (the output's dtype), got " +
                                std::string(dtype_name(t.dtype())) + " " + t.shape().str());
}

}  // namespace

Tensor normal(const Tensor& mean, const Tensor& std, Generator& generator) {
  check_output_dtype(mean, "mean");
  if (!std.defined()) throw std::invalid_argument("normal: std is undefined");
  const Tensor sd = std.detach().to(mean.dtype());
  for (double s : std.detach().to(DType::f64).to_vector<double>())
    if (!(s >= 0.0)) throw std::invalid_argument("normal expects all elements of std >= 0.0, found " + number_text(s));
  const Shape shape = broadcast_shapes("normal", mean.shape(), std.shape());
  // Standard normals over the output in row-major order, then mean + std * z (no tape: sampling).
  NoGradGuard no_grad;
  const Tensor z = Tensor::normal(shape, 0.0, 1.0, generator, mean.dtype());
  return add(mean.detach(), mul(sd, z));
}

Tensor normal(const Tensor& mean, const Tensor& std) {
  return with_default_generator([&](Generator& g) { return normal(mean, std, g); });
}

Tensor normal(const Tensor& mean, double std, Generator& generator) {
  check_output_dtype(mean, "mean");
  return normal(mean, Tensor::full(mean.shape(), std, mean.dtype()), generator);
}

Tensor normal(const Tensor& mean, double std) {
  return with_default_generator([&](Generator& g) { return normal(mean, std, g); });
}

Tensor normal(double mean, const Tensor& std, Generator& generator) {
  check_output_dtype(std, "std");
  return normal(Tensor::full(std.shape(), mean, std.dtype()), std, generator);
}

Tensor normal(double mean, const Tensor& std) {
  return with_default_generator([&](Generator& g) { return normal(mean, std, g); });
}

}  // namespace tg
