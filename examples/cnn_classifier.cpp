// A small convolutional image classifier, written as the PyTorch tutorial's CNN would be: a Module
// with Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d blocks, AdaptiveAvgPool2d and a Linear head,
// trained with AdamW (no weight decay on norms and biases) on minibatches from a DataLoader. The
// images are drawn in code (16x16 grey: a horizontal bar, a vertical bar, a hollow square or a
// cross, at a random place and size, in noise), so nothing is downloaded. After training it
// reports the accuracy on held-out images, saves the state_dict as .npz, loads it into a fresh
// model and checks that the reloaded model scores the same. Copy it to start your own CNN.
//
//   build/bin/cnn_classifier [--epochs N] [--seed S] [--threads T] [--out model.npz]
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"
#include "nn/nn.h"

using namespace tg;
using namespace tg::indexing;  // Slice

namespace {

constexpr std::int64_t kSize = 16, kClasses = 4;
const char* const kClassNames[kClasses] = {"horizontal bar", "vertical bar", "square", "cross"};

// `n` images (n, 1, 16, 16) and labels (n): class i % 4, drawn at a random place and size
// (6 to 10 pixels), ink 1 on 0, plus Gaussian noise of standard deviation 0.25.
std::pair<Tensor, Tensor> make_shapes(std::int64_t n, Generator& gen) {
  std::vector<Tensor> images;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto len = static_cast<std::int64_t>(6 + gen.uniform_below(5));
    const auto r0 = static_cast<std::int64_t>(gen.uniform_below(kSize - len + 1));
    const auto c0 = static_cast<std::int64_t>(gen.uniform_below(kSize - len + 1));
    const std::int64_t mid = len / 2, cls = i % kClasses;
    const Slice rows(r0, r0 + len), cols(c0, c0 + len);
    Tensor img = Tensor::zeros({kSize, kSize});
    if (cls == 0) img.index_put_({r0 + mid, cols}, 1.0);  // horizontal bar
    if (cls == 1) img.index_put_({rows, c0 + mid}, 1.0);  // vertical bar
    if (cls == 2) {                                       // hollow square
      img.index_put_({rows, cols}, 1.0);
      img.index_put_({Slice(r0 + 1, r0 + len - 1), Slice(c0 + 1, c0 + len - 1)}, 0.0);
    }
    if (cls == 3) {  // cross
      img.index_put_({r0 + mid, cols}, 1.0);
      img.index_put_({rows, c0 + mid}, 1.0);
    }
    images.push_back(img + normal(0.0, 0.25, {kSize, kSize}, gen));
    labels.push_back(cls);
  }
  return {stack(images).unsqueeze(1), Tensor::from_vector(labels, {n})};
}

// The model. Registered children give torch's state_dict keys: "conv1.weight", "bn1.running_mean", ...
class SmallCnnImpl : public nn::Module {
 public:
  SmallCnnImpl(std::int64_t num_classes, Generator& gen) {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1), gen));
    bn1 = register_module("bn1", nn::BatchNorm2d(16));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1), gen));
    bn2 = register_module("bn2", nn::BatchNorm2d(32));
    pool = register_module("pool", nn::MaxPool2d(2));
    gap = register_module("gap", nn::AdaptiveAvgPool2d(1));
    fc = register_module("fc", nn::Linear(32, num_classes, gen));
  }

  /// x (N, 1, 16, 16) -> logits (N, num_classes).
  Tensor forward(Tensor x) {
    x = pool(relu(bn1(conv1(x))));  // (N, 16, 8, 8)
    x = pool(relu(bn2(conv2(x))));  // (N, 32, 4, 4)
    return fc(flatten(gap(x), 1));  // (N, 32) -> (N, num_classes)
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::MaxPool2d pool{nullptr};
  nn::AdaptiveAvgPool2d gap{nullptr};
  nn::Linear fc{nullptr};
};
TG_MODULE(SmallCnn);

// Fraction of images classified right, in eval mode (BatchNorm's running statistics), untaped.
double accuracy(const SmallCnn& model, const Tensor& images, const Tensor& labels) {
  NoGradGuard no_grad;
  model->eval();
  return (model(images).argmax(1) == labels).to(DType::f32).mean().item();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Small CNN classifier of drawn shapes (tapegrad example)", "cnn_classifier"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated flag: the last wins
  int epochs = 5, threads = 0;
  std::uint64_t seed = 0;
  std::string out = (std::filesystem::temp_directory_path() / "cnn_classifier.npz").string();
  app.add_option("--epochs", epochs, "passes over the 2048 training images")->check(CLI::Range(1, 1000));
  app.add_option("--seed", seed, "seed of the images, the initialisation and the shuffling")
      ->check(CLI::Validator([](std::string& text) {  // an unsigned option would read -1 as 2^64 - 1
        return text.starts_with('-') ? "expected a number >= 0, got '" + text + "'" : std::string();
      }, ""));
  app.add_option("--threads", threads, "kernel threads (0 = all)")->check(CLI::Range(0, 4096));
  app.add_option("--out", out, "where the state_dict is saved (.npz; default: the temporary directory)")
      ->check(CLI::Validator([](std::string& text) { return text.empty() ? "expected a path, got ''" : ""; }, ""));
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      app.exit(e);  // the help on stdout
      nn::io::flush_stdout_or_throw();
      return 0;
    } catch (const CLI::ParseError& e) {
      std::fprintf(stderr, "cnn_classifier: %s\nusage: cnn_classifier [OPTIONS]; --help lists them\n", e.what());
      return 2;
    }
    set_num_threads(threads);
    nn::io::require_writable_location(out);  // found now, not after the training

    // ---- data: 2048 training and 512 held-out images, drawn from the seed -----------------------
    Generator gen(seed);
    const auto [x_train, y_train] = make_shapes(2048, gen);
    const auto [x_test, y_test] = make_shapes(512, gen);
    nn::data::DataLoader loader(nn::data::TensorDataset(x_train, y_train),
                                nn::data::DataLoaderOptions().batch_size(32).shuffle(true).seed(seed));

    // ---- model, optimizer (weight decay on the conv and linear weights only) and schedule -------------------
    SmallCnn model(kClasses, gen);
    nn::NamedTensors decay, no_decay;
    for (const auto& [name, p] : model->named_parameters())  // BN's running stats are buffers, not here
      (p.dim() >= 2 ? decay : no_decay).emplace_back(name, p);
    nn::AdamW optimizer({nn::ParamGroup(decay), nn::ParamGroup(no_decay).weight_decay(0.0)},
                        nn::AdamWOptions(3e-3).weight_decay(0.05));
    // The learning rate decays linearly to 0 over the run, one step per batch.
    nn::LinearLR scheduler(optimizer, 1.0, 0.0, epochs * static_cast<std::int64_t>(loader.size()));
    std::printf("%s\n", model->str().c_str());

    // ---- training ---------------------------------------------------------------------------------
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      model->train();
      double loss_sum = 0;
      std::int64_t seen = 0;
      for (auto& [images, labels] : loader) {
        optimizer.zero_grad();
        Tensor loss = cross_entropy(model(images), labels);
        loss.backward();
        optimizer.step();
        scheduler.step();
        loss_sum += loss.item() * static_cast<double>(images.size(0));
        seen += images.size(0);
      }
      std::printf("epoch %d  loss %.4f  test accuracy %.4f\n", epoch, loss_sum / static_cast<double>(seen),
                  accuracy(model, x_test, y_test));
      std::fflush(stdout);
    }

    // ---- checkpoint: save the state_dict, load it into a fresh model ------------------------------
    const double acc = accuracy(model, x_test, y_test);
    nn::save_npz(out, model->state_dict());
    Generator other(seed + 1);  // other initial weights, so the load visibly matters
    SmallCnn restored(kClasses, other);
    restored->load_state_dict(nn::load_npz(out), out);
    const double restored_acc = accuracy(restored, x_test, y_test);
    std::printf("test accuracy %.4f on %lld held-out images (%s, %s, %s, %s)\n", acc,
                static_cast<long long>(x_test.size(0)), kClassNames[0], kClassNames[1], kClassNames[2], kClassNames[3]);
    std::printf("saved %s; reloaded model: test accuracy %.4f (%s)\n", out.c_str(), restored_acc,
                restored_acc == acc ? "same" : "DIFFERENT");
    nn::io::flush_stdout_or_throw();  // status 0 only if the report reached stdout
    return restored_acc == acc ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnn_classifier: %s\n", e.what());
    return 1;
  }
}
