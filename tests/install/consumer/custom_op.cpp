// An op written outside the tapegrad tree against the installed package: y = x Wᵀ through the
// installed GEMM kernel, its backward delivering dx as a tensor and dW as a gradient term (added
// with beta = 1 into a gradient W already has). Exits with 1 unless float64 gradcheck passes and a
// second backward adds into W's gradient.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/gemm.h"
#include "autograd/tapegrad.h"

namespace my {

using tg::Tensor;

/// C (M, N) = op(A) op(B) + beta C, row-major, A and B contiguous.
void product(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const Tensor& A, const Tensor& B,
             Tensor& C, double beta) {
  tg::dispatch_floating("project", A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    tg::kernels::gemm<T>(ta, tb, M, N, K, T(1), A.data<T>(), ta ? M : K, B.data<T>(), tb ? K : N, T(beta),
                         C.template data<T>(), N);
  });
}

/// x (rows, in), w (out, in) -> x wᵀ (rows, out).
Tensor project(const Tensor& x, const Tensor& w) {
  const std::int64_t rows = x.size(0), in = x.size(1), out = w.size(0);
  Tensor y = Tensor::empty({rows, out}, x.dtype());
  product(false, true, rows, out, in, x, w, y, 0.0);
  return tg::record("project", y, {x, w}, [x = x.detach(), w = w.detach(), rows, in, out](tg::BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (ctx.needs_grad(0)) {  // dx = G W
      Tensor dx = Tensor::empty({rows, in}, g.dtype());
      product(false, false, rows, in, out, g, w, dx, 0.0);
      ctx.accumulate(0, std::move(dx));
    }
    struct WeightGrad {  // dW = Gᵀ x
      const Tensor &g, &x;
      std::int64_t rows, in, out;
      void add_into(Tensor& dw) const { product(true, false, out, in, rows, g, x, dw, 1.0); }
      Tensor make() const {
        Tensor dw = Tensor::empty({out, in}, g.dtype());
        product(true, false, out, in, rows, g, x, dw, 0.0);
        return dw;
      }
    };
    if (ctx.needs_grad(1)) ctx.accumulate(1, WeightGrad{g, x, rows, in, out});
  });
}

}  // namespace my

int main() {
  using tg::Tensor;
  tg::Generator gen(0);
  Tensor x = tg::Tensor::normal({5, 3}, 0, 1, gen, tg::DType::f64).requires_grad_();
  Tensor w = tg::Tensor::normal({4, 3}, 0, 1, gen, tg::DType::f64).requires_grad_();
  const auto report = tg::gradcheck([](const std::vector<Tensor>& in) { return my::project(in[0], in[1]); }, {x, w});
  if (!report) std::cerr << report << "\n";

  // Twice through backward: the second dW is added into the first (make, then add_into).
  w.zero_grad();
  tg::sum(my::project(x, w)).backward();
  const std::vector<double> once = w.grad().to_vector<double>();
  tg::sum(my::project(x, w)).backward();
  const std::vector<double> twice = w.grad().to_vector<double>();
  bool doubled = once.size() == twice.size();
  for (std::size_t i = 0; doubled && i < once.size(); ++i)  // the GEMM may add C in another order
    doubled = std::abs(twice[i] - 2 * once[i]) <= 1e-12 * std::abs(once[i]) && once[i] != 0;

  const bool ok = static_cast<bool>(report) && doubled;
  std::printf("custom op %s: gradcheck %s over %lld entries, second backward %s\n", ok ? "ok" : "WRONG",
              report ? "passed" : "FAILED", static_cast<long long>(report.checked), doubled ? "added" : "WRONG");
  return ok ? 0 : 1;
}
