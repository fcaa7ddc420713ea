// Trains a tg::nn::Linear for 3 Adam steps on a fixed regression problem and prints the loss of
// each step. Exits with 1 unless every loss is finite and the last one is below the first.
#include <cmath>
#include <cstdio>

#include "autograd/tapegrad.h"
#include "nn/nn.h"

int main() {
  tg::Generator gen(0);
  tg::nn::Linear model(4, 2, gen);
  tg::nn::Adam opt(model->named_parameters(), tg::nn::AdamOptions(0.1));

  const tg::Tensor x = tg::Tensor::normal({16, 4}, 0, 1, gen);
  const tg::Tensor target = tg::Tensor::normal({16, 2}, 0, 1, gen);
  double first = 0, last = 0;
  for (int step = 1; step <= 3; ++step) {
    tg::Tensor loss = tg::mean(tg::square(model(x) - target));
    loss.backward();
    opt.step();
    opt.zero_grad();
    last = loss.item();
    if (step == 1) first = last;
    std::printf("step %d loss %.6f\n", step, last);
  }
  return std::isfinite(first) && std::isfinite(last) && last < first ? 0 : 1;
}
