#pragma once
// The best of a series of validations, and early stopping when no new best comes: one part of a
// training loop, for any model (the translators' train() uses it for --patience and the best
// checkpoint):
//
//   tg::nn::EarlyStopping stop(tg::nn::EarlyStopping::Mode::min, /*patience=*/5);
//   for (...) {
//     ... train, then at a validation after step s:
//     if (stop.step(s, dev_loss)) save(best_dir);   // a new best
//     if (stop.should_stop()) break;
//   }
//
// A validation is scored by a metric (lower or higher is better) and optionally a second figure,
// kept beside the best and, when given a mode, breaking ties of the metric (the trainer's "highest
// dev BLEU, ties by the lower dev loss"). The first validation is always a best. A NaN metric is
// never a new best after the first. The state is plain numbers (State), saved and loaded as named
// tensors like the schedulers' (state_dict), so a resumed run takes the same decisions.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "nn/module.h"

namespace tg::nn {

/// What an EarlyStopping's validations so far decided.
struct EarlyStoppingState {
  std::int64_t validations = 0;      ///< validations done
  std::int64_t last_step = 0;        ///< training step of the last one (0 = none)
  std::int64_t best_step = 0;        ///< training step of the best one (0 = none)
  std::int64_t bad_validations = 0;  ///< validations since the best one
  double best = std::numeric_limits<double>::quiet_NaN();         ///< the best one's metric
  double best_second = std::numeric_limits<double>::quiet_NaN();  ///< the best one's second figure
};

/// Best-so-far tracking and early stopping over validations (see the file comment).
class EarlyStopping {
 public:
  enum class Mode { min, max };
  using State = EarlyStoppingState;

  /// `patience`: stop after this many validations in a row without a new best (0 = never);
  /// `tie_break`: how the second figure breaks a tie of the metric (none: it does not). Throws
  /// std::invalid_argument for a negative patience.
  explicit EarlyStopping(Mode mode, std::int64_t patience = 0, std::optional<Mode> tie_break = std::nullopt,
                         State state = State());

  /// One validation after training step `step` (>= 1, std::invalid_argument otherwise) with its
  /// metric and second figure. Returns whether it is a new best (which resets the bad count).
  bool step(std::int64_t step, double metric, double second = std::numeric_limits<double>::quiet_NaN());
  /// Whether `metric` (and `second`) would be a new best now.
  bool is_better(double metric, double second = std::numeric_limits<double>::quiet_NaN()) const;
  /// patience > 0 and that many validations in a row brought no new best.
  bool should_stop() const { return patience_ > 0 && state_.bad_validations >= patience_; }
  bool has_best() const { return state_.best_step > 0; }

  const State& state() const { return state_; }
  std::int64_t patience() const { return patience_; }

  /// The state as named tensors: "early_stopping.validations", ".last_step", ".best_step",
  /// ".bad_validations" (i64 scalars), ".best", ".best_second" (f64 scalars).
  NamedTensors state_dict() const;
  /// Restores what state_dict() wrote: exactly those names, each a scalar, counts >= 0; otherwise
  /// std::runtime_error prefixed by `source` and nothing changes.
  void load_state_dict(const NamedTensors& entries, const std::string& source = "load_state_dict");

 private:
  Mode mode_;
  std::int64_t patience_;
  std::optional<Mode> tie_break_;
  State state_;
};

}  // namespace tg::nn
