#pragma once
// An exponential moving average of a model's weights ("exponential smoothing": Marian's
// --exponential-smoothing, timm's ModelEmaV2, tf.train.ExponentialMovingAverage with num_updates),
// for any model's training loop (the translators' train() keeps one when TrainOptions::ema_decay > 0):
//
//   tg::nn::WeightEma ema(model.named_parameters(), 0.999);      // a copy of the current weights
//   ... optimizer.step(); ema.update();                           // after every step
//   ema.swap(); validate(model); ema.swap();                      // evaluate the smoothed weights
//
// Update n (0-based: n updates came before it) with decay D:
//   d = min(D, (1 + n) / (10 + n)),   ema = ema + (1 - d) (p - ema)
// The warm-up term lets early averages follow the weights instead of the initial ones.
#include <cstdint>
#include <vector>

#include "nn/module.h"

namespace tg::nn {

/// An exponential moving average of a set of parameters (see the file comment).
class WeightEma {
 public:
  /// Copies the current values of `params` (handles to the model's parameters, which update() and
  /// swap() then read and write in place). `decay` must be in (0, 1) (std::invalid_argument);
  /// `updates` is the n of the next update (a resumed average continues its count).
  WeightEma(NamedTensors params, double decay, std::int64_t updates = 0);

  /// The decay of update number n (0-based) for a given ema_decay: min(decay, (1 + n) / (10 + n)).
  static double decay_at(double decay, std::int64_t n);

  /// One update from the parameters' current values: one pass over their elements, no allocation,
  /// each element computed alone (the result does not depend on the thread count).
  void update();
  /// Exchanges the averages with the parameters' values, bit for bit (twice = unchanged): the
  /// model then holds the averages, and this object the training weights.
  void swap();
  /// Copies the parameters' current values into the averages (a restart of the average; the
  /// update count is kept).
  void reset_from_parameters();

  double decay() const { return decay_; }
  /// Updates done so far (with the count it started from).
  std::int64_t updates() const { return updates_; }
  /// The averages, named as the parameters, in their order (not the parameters themselves).
  const NamedTensors& averages() const { return averages_; }

 private:
  NamedTensors params_;
  NamedTensors averages_;
  double decay_;
  std::int64_t updates_;
};

/// Swaps a WeightEma's averages into its parameters for one scope and back at its end (also when
/// the scope is left by an exception). A null pointer does nothing.
class EmaSwapGuard {
 public:
  explicit EmaSwapGuard(WeightEma* ema) : ema_(ema) {
    if (ema_) ema_->swap();
  }
  ~EmaSwapGuard() {
    if (ema_) ema_->swap();
  }
  EmaSwapGuard(const EmaSwapGuard&) = delete;
  EmaSwapGuard& operator=(const EmaSwapGuard&) = delete;

 private:
  WeightEma* ema_;
};

}  // namespace tg::nn
