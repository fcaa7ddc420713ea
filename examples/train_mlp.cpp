// A small classifier trained with nothing but the autograd API: a two-layer MLP learns the
// classic three-arm spiral (generated here, no download). Copy it to start your own model.
//
//   build/bin/train_mlp [steps] [seed]
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"

using namespace tg;

namespace {

// n points per class on `classes` interleaved spiral arms, with a little noise.
void make_spiral(int n, int classes, Generator& gen, Tensor& x, Tensor& y) {
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (int c = 0; c < classes; ++c)
    for (int i = 0; i < n; ++i) {
      const double r = static_cast<double>(i) / n;
      const double t = c * 4.0 + 4.0 * r + 0.2 * gen.normal();
      xs.push_back(static_cast<float>(r * std::sin(t)));
      xs.push_back(static_cast<float>(r * std::cos(t)));
      ys.push_back(c);
    }
  x = Tensor::from_vector(xs, {static_cast<std::int64_t>(ys.size()), 2});
  y = Tensor::from_vector(ys, {static_cast<std::int64_t>(ys.size())});
}

}  // namespace

/// Whether all of `text` is a whole number (no sign for an unsigned T), stored in `value`.
template <class T> bool parse_whole(const char* text, T& value) {
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, value);
  return error == std::errc() && stop == end && stop != text;
}

int main(int argc, char** argv) {
  int steps = 2000;
  unsigned seed = 0;
  if (argc > 3 || (argc > 1 && (!parse_whole(argv[1], steps) || steps <= 0 || steps > 10'000'000)) ||
      (argc > 2 && !parse_whole(argv[2], seed))) {
    std::fprintf(stderr, "usage: train_mlp [steps in 1..10000000] [seed >= 0]\n");
    return 2;
  }
  Generator gen(seed);
  Tensor x, y;
  make_spiral(100, 3, gen, x, y);

  const int hidden = 64;
  // PyTorch's nn.Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  auto init = [&](Shape s, double fan_in) {
    const double b = 1.0 / std::sqrt(fan_in);
    return Tensor::uniform(s, -b, b, gen).requires_grad_();
  };
  std::vector<Tensor> params = {init({hidden, 2}, 2), init({hidden}, 2), init({3, hidden}, hidden), init({3}, hidden)};

  const double lr = 0.5;
  for (int step = 1; step <= steps; ++step) {
    Tensor h = tanh(linear(x, params[0], params[1]));
    Tensor logits = linear(h, params[2], params[3]);
    Tensor loss = cross_entropy(logits, y);
    loss.backward();  // also frees this step's graph
    {
      NoGradGuard no_grad;  // plain SGD, in place
      for (Tensor& p : params) {
        p.sub_(p.grad() * lr);
        p.zero_grad();
      }
    }
    if (step == 1 || step % (steps / 10 > 0 ? steps / 10 : 1) == 0) {
      NoGradGuard no_grad;
      const double correct = (logits.argmax(1) == y).sum().item();
      std::printf("step %5d  loss %.4f  train accuracy %.1f%%\n", step, loss.item(), 100.0 * correct / y.size(0));
    }
  }
  // Status 0 only if what was printed reached stdout (not a full disk or a closed pipe).
  try {
    nn::io::flush_stdout_or_throw();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
