// A regression MLP trained with the same parts as the translators' trainer (docs/training.md):
// Adam with a LinearAnnealLR schedule and a PlateauDecay on top of it, a weight EMA (nn::WeightEma)
// whose averaged weights are validated and kept, EarlyStopping on the validation loss, and a
// checkpoint that resumes exactly. It fits y = sin(2x) + 0.3x + noise on x in [-2, 2]. Copy it to
// train your own model with these parts.
//
//   build/bin/train_regression [steps] [checkpoint_dir] [stop_after]
//
// `steps` is the training's length (the lr anneals to 0 there); it validates every 25 steps. With
// checkpoint_dir, the checkpoint is written there every 100 steps and at the end of the run, and
// the run resumes from it if it holds one; `stop_after` ends the run after that many steps in
// total, as an interruption would: `train_regression 400 a` gives the same files as
// `train_regression 400 b 190` followed by `train_regression 400 b`. The directory holds
// weights.npz (the averaged weights: the model to use), training_weights.npz (the raw ones),
// optimizer.npz and parts.npz (the step, the EMA's update count and the state_dict of the early
// stopping and the plateau decay); best.npz holds the averaged weights of the best validation.
// `train_regression 2000` reaches a plateau, where the lr decays.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"
#include "nn/nn.h"

using namespace tg;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kBatch = 32, kValidateEvery = 25, kCheckpointEvery = 100;

// n points: x uniform in [-2, 2], y = sin(2x) + 0.3 x + N(0, 0.05^2), as (n, 1) columns.
void make_data(std::int64_t n, Generator& gen, Tensor& x, Tensor& y) {
  std::vector<float> xs, ys;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = -2.0 + 4.0 * gen.uniform();
    xs.push_back(static_cast<float>(v));
    ys.push_back(static_cast<float>(std::sin(2 * v) + 0.3 * v + 0.05 * gen.normal()));
  }
  x = Tensor::from_vector(xs, {n, 1});
  y = Tensor::from_vector(ys, {n, 1});
}

class RegressorImpl : public nn::Module {
 public:
  explicit RegressorImpl(Generator& gen) {
    fc1 = register_module("fc1", nn::Linear(1, 64, gen));
    fc2 = register_module("fc2", nn::Linear(64, 1, gen));
  }
  Tensor forward(const Tensor& x) { return fc2(tanh(fc1(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
TG_MODULE(Regressor);

double mse(const Tensor& prediction, const Tensor& target) {
  const Tensor d = prediction - target;
  return (d * d).mean().item();
}

// The validation loss of the weights the model holds, without recording anything.
double validation_mse(const Regressor& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  nn::EvalModeGuard eval(model);
  return mse(model(x), y);
}

// Everything a run needs to continue exactly.
struct Parts {
  nn::Adam& optimizer;
  nn::WeightEma& ema;
  nn::EarlyStopping& stop;
  nn::PlateauDecay& decay;
};

void save(const fs::path& dir, std::int64_t step, Regressor& model, const Parts& p) {
  {
    nn::EmaSwapGuard swap(&p.ema);  // weights.npz: the averaged weights
    model->save((dir / "weights.npz").string());
  }
  model->save((dir / "training_weights.npz").string());
  p.optimizer.save((dir / "optimizer.npz").string());
  nn::NamedTensors parts = {{"step", Tensor::scalar(static_cast<double>(step), DType::i64)},
                            {"ema_updates", Tensor::scalar(static_cast<double>(p.ema.updates()), DType::i64)}};
  for (const auto& e : p.stop.state_dict()) parts.push_back(e);
  for (const auto& e : p.decay.state_dict()) parts.push_back(e);
  nn::save_npz((dir / "parts.npz").string(), parts);
}

// The entries of parts.npz that start with `prefix`.
nn::NamedTensors with_prefix(const nn::NamedTensors& entries, const std::string& prefix) {
  nn::NamedTensors out;
  for (const auto& e : entries)
    if (e.first.rfind(prefix, 0) == 0) out.push_back(e);
  return out;
}

std::int64_t scalar_i64(const nn::NamedTensors& entries, const std::string& name) {
  for (const auto& [key, t] : entries)
    if (key == name) return t.to_vector<std::int64_t>()[0];
  throw std::runtime_error("parts.npz: no " + name);
}

/// Trains a `steps`-step training up to step `stop_after`; returns the process status.
int run(std::int64_t steps, const fs::path& dir, std::int64_t stop_after) {
  Generator gen(7);
  Tensor x, y, vx, vy;
  make_data(512, gen, x, y);
  make_data(128, gen, vx, vy);
  Regressor model(gen);
  nn::Adam optimizer(model->named_parameters(), nn::AdamOptions(0.01));

  // Resume: the step, the optimizer; the EMA is rebuilt from the averaged weights, after which the
  // model takes the raw ones back.
  std::int64_t step = 0, ema_updates = 0;
  nn::NamedTensors parts;
  const bool resuming = !dir.empty() && fs::exists(dir / "parts.npz");
  if (resuming) {
    parts = nn::load_npz((dir / "parts.npz").string());
    step = scalar_i64(parts, "step");
    ema_updates = scalar_i64(parts, "ema_updates");
    optimizer.load((dir / "optimizer.npz").string());
    model->load((dir / "weights.npz").string());
  }
  nn::WeightEma ema(model->named_parameters(), 0.99, ema_updates);
  if (resuming) model->load((dir / "training_weights.npz").string());
  // The lr: constant for the first half, then annealed linearly to 0 at `steps`; halved after 2
  // validations without a new best. Early stopping after 6.
  nn::LinearAnnealLR schedule(optimizer, steps / 2, steps, step);
  nn::PlateauDecay decay(schedule, 0.5, 2);
  nn::EarlyStopping stop(nn::EarlyStopping::Mode::min, 6);
  if (resuming) {
    decay.load_state_dict(with_prefix(parts, "plateau_decay."), "parts.npz");
    stop.load_state_dict(with_prefix(parts, "early_stopping."), "parts.npz");
  }
  const Parts p{optimizer, ema, stop, decay};
  if (!dir.empty()) fs::create_directories(dir);

  model->train();
  bool saved = true;  // the checkpoint holds the current step
  while (step < std::min(steps, stop_after) && !stop.should_stop()) {
    const std::int64_t first = (step * kBatch) % x.size(0);  // the batches depend on the step alone
    const Tensor d = model(narrow(x, 0, first, kBatch)) - narrow(y, 0, first, kBatch);
    const Tensor loss = (d * d).mean();
    loss.backward();
    const double lr = optimizer.lr();
    optimizer.step();
    ema.update();
    schedule.step();
    optimizer.zero_grad();
    ++step;
    saved = false;
    if (step % kValidateEvery != 0 && step != steps) continue;
    double val = 0.0;
    bool best = false;
    {
      nn::EmaSwapGuard swap(&ema);  // validate the averaged weights
      val = validation_mse(model, vx, vy);
      best = stop.step(step, val);
      if (best && !dir.empty()) model->save((dir / "best.npz").string());
    }
    const bool decayed = decay.step(best);
    std::printf("step %4lld  batch mse %.5f  lr %.6f  validation mse (ema) %.5f%s%s\n", static_cast<long long>(step),
                loss.item(), lr, val, best ? "  best" : "", decayed ? "  lr decayed" : "");
    if (step % kCheckpointEvery != 0) continue;
    if (!dir.empty()) save(dir, step, model, p);
    saved = true;
  }
  if (!saved && !dir.empty()) save(dir, step, model, p);
  std::printf("best validation mse %.5f at step %lld%s\n", stop.state().best,
              static_cast<long long>(stop.state().best_step), stop.should_stop() ? " (stopped early)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto whole = [](const char* text, std::int64_t& value) {
    const char* end = text + std::strlen(text);
    const auto [stop, error] = std::from_chars(text, end, value);
    return error == std::errc() && stop == end && value >= 2 && value <= 10'000'000;
  };
  std::int64_t steps = 400, stop_after = 10'000'000;
  if (argc > 4 || (argc > 1 && !whole(argv[1], steps)) || (argc > 3 && !whole(argv[3], stop_after))) {
    std::fprintf(stderr, "usage: train_regression [steps in 2..10000000] [checkpoint_dir] [stop_after in 2..10000000]\n");
    return 2;
  }
  try {
    const int status = run(steps, argc > 2 ? fs::path(argv[2]) : fs::path(), stop_after);
    nn::io::flush_stdout_or_throw();  // status 0 only if the output reached stdout
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_regression: %s\n", e.what());
    return 1;
  }
}
