// An MLP classifier written as an nn::Module: two Linear layers with ReLU and Dropout between them,
// trained with Adam on minibatches of a generated dataset (three concentric noisy rings), evaluated
// on a held-out split, then saved to a .npz checkpoint and reloaded into a fresh model. Copy it to
// start your own feed-forward model.
//
//   build/bin/mlp_classifier [steps] [seed] [checkpoint.npz]
//
// The checkpoint is a NumPy archive: numpy.load("mlp_classifier.npz")["fc1.weight"] reads it, and
// the same keys are the state_dict of the equivalent PyTorch module.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"
#include "nn/nn.h"

using namespace tg;
using namespace tg::indexing;  // Slice, None

namespace {

// `n` points per class; class c lies on a ring of radius 0.3 + 0.35 c, with Gaussian noise.
void make_rings(int n, int classes, Generator& gen, Tensor& x, Tensor& y) {
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (int i = 0; i < n * classes; ++i) {
    const int c = i % classes;  // interleaved, so any prefix holds every class
    const double angle = 2 * std::numbers::pi * gen.uniform();
    const double radius = 0.3 + 0.35 * c + 0.06 * gen.normal();
    xs.push_back(static_cast<float>(radius * std::cos(angle)));
    xs.push_back(static_cast<float>(radius * std::sin(angle)));
    ys.push_back(c);
  }
  x = Tensor::from_vector(xs, {static_cast<std::int64_t>(ys.size()), 2});
  y = Tensor::from_vector(ys, {static_cast<std::int64_t>(ys.size())});
}

// The model. Children are registered by name, which gives the checkpoint keys "fc1.weight",
// "fc1.bias", "fc2.weight", "fc2.bias" (Dropout has no parameters).
class MlpClassifierImpl : public nn::Module {
 public:
  MlpClassifierImpl(std::int64_t in, std::int64_t hidden, std::int64_t classes, double dropout_p, Generator& gen) {
    fc1 = register_module("fc1", nn::Linear(in, hidden, gen));
    // The dropout masks get their own generator, seeded from `gen`: reproducible runs.
    dropout = register_module("dropout", nn::Dropout(dropout_p, std::make_shared<Generator>(gen.next_u64())));
    fc2 = register_module("fc2", nn::Linear(hidden, classes, gen));
  }

  /// x (N, in) -> logits (N, classes). Dropout is active in train() mode only.
  Tensor forward(const Tensor& x) { return fc2(dropout(relu(fc1(x)))); }

  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::Dropout dropout{nullptr};
};
TG_MODULE(MlpClassifier);  // MlpClassifier: the holder, used as the Python object

// Fraction of rows whose arg-max logit is the label.
double accuracy(const Tensor& logits, const Tensor& labels) {
  return (logits.argmax(1) == labels).sum().item() / static_cast<double>(labels.size(0));
}

// Logits of the whole set in eval mode (no dropout), without recording anything on the tape.
Tensor predict(const MlpClassifier& model, const Tensor& x) {
  NoGradGuard no_grad;
  nn::EvalModeGuard eval(model);
  return model(x);
}

}  // namespace

/// Whether all of `text` is a whole number (no sign for an unsigned T), stored in `value`.
template <class T> bool parse_whole(const char* text, T& value) {
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, value);
  return error == std::errc() && stop == end && stop != text;
}

int main(int argc, char** argv) {
  int steps = 1000;
  std::uint64_t seed = 0;
  const std::string checkpoint =
      argc > 3 ? argv[3] : (std::filesystem::temp_directory_path() / "mlp_classifier.npz").string();
  if (argc > 4 || (argc > 1 && (!parse_whole(argv[1], steps) || steps <= 0 || steps > 10'000'000)) ||
      (argc > 2 && !parse_whole(argv[2], seed))) {
    std::fprintf(stderr, "usage: mlp_classifier [steps in 1..10000000] [seed >= 0] [checkpoint.npz]\n");
    return 2;
  }

  try {
    // The checkpoint's directory must take a file: found now, not after the training.
    nn::io::require_writable_location(checkpoint);
    // ---- data: 600 points, shuffled, 80 % train / 20 % test -----------------------------------------
    Generator gen(seed);
    Tensor x, y;
    make_rings(200, 3, gen, x, y);
    std::vector<std::int64_t> order(static_cast<std::size_t>(x.size(0)));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
    for (std::size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[gen.below(i + 1)]);  // Fisher-Yates
    const auto n_train = static_cast<std::int64_t>(order.size() * 4 / 5);
    const Tensor perm = Tensor::from_vector(order, {static_cast<std::int64_t>(order.size())});
    const Tensor train_idx = perm.index({Slice(None, n_train)}), test_idx = perm.index({Slice(n_train, None)});
    const Tensor x_train = x.index({train_idx}), y_train = y.index({train_idx});
    const Tensor x_test = x.index({test_idx}), y_test = y.index({test_idx});

    // ---- model and optimizer ------------------------------------------------------------------------
    MlpClassifier model(2, 64, 3, /*dropout_p=*/0.1, gen);
    nn::Adam opt(model->named_parameters(), nn::AdamOptions(1e-2));
    std::printf("%s\n", model->str().c_str());

    // ---- training on random minibatches ----------------------------------------------------------------
    const std::int64_t batch = 64;
    for (int step = 1; step <= steps; ++step) {
      std::vector<std::int64_t> rows(batch);
      for (auto& r : rows) r = static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(n_train)));
      const Tensor idx = Tensor::from_vector(rows, {batch});

      Tensor loss = cross_entropy(model(x_train.index({idx})), y_train.index({idx}));
      loss.backward();  // accumulates into the parameters' grad() and frees this step's graph
      opt.step();
      opt.zero_grad();

      if (step == 1 || step % std::max(1, steps / 5) == 0)
        std::printf("step %5d  loss %.4f  train accuracy %5.1f%%  test accuracy %5.1f%%\n", step, loss.item(),
                    100 * accuracy(predict(model, x_train), y_train), 100 * accuracy(predict(model, x_test), y_test));
    }

    // ---- checkpoint: save, then load into a freshly initialised model ---------------------------------
    const Tensor logits = predict(model, x_test);
    model->save(checkpoint);
    std::printf("saved %lld parameters to %s:", static_cast<long long>(model->num_parameters()), checkpoint.c_str());
    for (const auto& [name, p] : model->named_parameters()) std::printf(" %s%s", name.c_str(), p.shape().str().c_str());
    std::printf("\n");

    Generator other(seed + 1);  // different initial weights, so the load visibly matters
    MlpClassifier restored(2, 64, 3, 0.1, other);
    restored->load(checkpoint);  // checks every name and shape before copying anything
    const Tensor restored_logits = predict(restored, x_test);
    const double diff = std::sqrt((restored_logits - logits).square().max().item());
    std::printf("reloaded: test accuracy %.1f%%  (max |logit difference| %g)\n", 100 * accuracy(restored_logits, y_test), diff);
    nn::io::flush_stdout_or_throw();  // status 0 only if the report reached stdout
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_classifier: %s\n", e.what());
    return 1;
  }
  return 0;
}
