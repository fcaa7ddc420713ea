// A custom differentiable op written with tg::autograd::Function (as torch.autograd.Function):
// a static forward, a static backward, and a context that carries what backward needs. Copy it to
// add your own op without touching the library.
//
//   build/bin/custom_function
//
// Prints the float64 gradcheck of the op and a few steps of fitting its parameter; exits 1 if
// the gradcheck fails.
#include <cstdio>
#include <iostream>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"

using namespace tg;
using tg::autograd::AutogradContext;
using tg::autograd::tensor_list;

// swish(x, beta) = x * sigmoid(beta * x), with beta a tensor so that it can be learned.
struct Swish : autograd::Function<Swish> {
  static Tensor forward(AutogradContext& ctx, const Tensor& x, const Tensor& beta) {
    Tensor s = sigmoid(x * beta);  // forward runs without recording: plain values
    ctx.save_for_backward({x, beta, s});
    return x * s;
  }
  // One gradient per forward argument, in order (undefined for an argument that needs none).
  static tensor_list backward(AutogradContext& ctx, tensor_list grad_outputs) {
    const tensor_list& saved = ctx.get_saved_variables();
    const Tensor &x = saved[0], &beta = saved[1], &s = saved[2];
    const Tensor ds = s * rsub(1.0, s);  // sigmoid'
    const Tensor& g = grad_outputs[0];
    Tensor gx, gbeta;
    if (ctx.needs_input_grad(0)) gx = g * (s + x * beta * ds);
    // beta has shape [1] and was broadcast: reduce its gradient back to that shape.
    if (ctx.needs_input_grad(1)) gbeta = (g * x * x * ds).sum().reshape(beta.shape());
    return {gx, gbeta};
  }
};

int main() {
  Generator gen(0);
  // 1. Check the hand-written backward against finite differences, in float64.
  const Tensor x64 = Tensor::uniform({4, 5}, -2, 2, gen, DType::f64).requires_grad_();
  const Tensor b64 = Tensor::full({1}, 0.7, DType::f64).requires_grad_();
  const GradcheckReport report =
      gradcheck([](const std::vector<Tensor>& in) { return Swish::apply(in[0], in[1]); }, {x64, b64});
  std::cout << report << std::endl;
  if (!report) return 1;

  // 2. Use it like any op: fit beta so that Swish(x, beta) matches a target made with beta = 1.5.
  const Tensor x = Tensor::uniform({64}, -3, 3, gen);
  const Tensor target = x * sigmoid(x * 1.5);
  Tensor beta = Tensor::full({1}, 0.5).requires_grad_();
  for (int step = 0; step <= 200; ++step) {
    Tensor loss = (Swish::apply(x, beta) - target).square().mean();
    loss.backward();
    {
      NoGradGuard no_grad;
      beta.sub_(beta.grad() * 0.5);
    }
    beta.zero_grad();
    if (step % 50 == 0) std::printf("step %3d  loss %.6f  beta %.4f\n", step, loss.item(), beta.item());
  }
  // Status 0 only if what was printed reached stdout (not a full disk or a closed pipe).
  try {
    nn::io::flush_stdout_or_throw();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_function: %s\n", e.what());
    return 1;
  }
  return 0;
}
