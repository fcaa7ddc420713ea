// Uses the installed interop header through tapegrad::xtensor: a tensor from an xtensor expression,
// a differentiable op on it, and its gradient read back through a view. Exits with 1 on a wrong value.
#include <cstdio>

#include <xtensor/xarray.hpp>

#include "autograd/tapegrad.h"
#include "autograd/xtensor.h"

int main() {
  xt::xarray<double> a = {{1.0, 2.0}, {3.0, 4.0}};
  tg::Tensor x = tg::from_xtensor(a * a);
  x.requires_grad_();
  tg::sum(tg::square(x)).backward();  // d/dx sum(x^2) = 2x
  const tg::Tensor g = x.grad();
  auto view = tg::as_xtensor<double>(g);
  const bool ok = view(1, 1) == 32.0 && view(0, 1) == 8.0;
  std::printf("xtensor interop %s: grad(1,1) = %.1f\n", ok ? "ok" : "WRONG", view(1, 1));
  return ok ? 0 : 1;
}
