#include "nn/early_stopping.h"

#include <map>
#include <stdexcept>
#include <utility>

namespace tg::nn {

namespace {

constexpr const char* kI64Keys[] = {"early_stopping.validations", "early_stopping.last_step",
                                    "early_stopping.best_step", "early_stopping.bad_validations"};
constexpr const char* kF64Keys[] = {"early_stopping.best", "early_stopping.best_second"};

}  // namespace

EarlyStopping::EarlyStopping(Mode mode, std::int64_t patience, std::optional<Mode> tie_break, State state)
    : mode_(mode), patience_(patience), tie_break_(tie_break), state_(state) {
  if (patience < 0) throw std::invalid_argument("EarlyStopping: patience must be >= 0, got " + std::to_string(patience));
}

bool EarlyStopping::is_better(double metric, double second) const {
  if (!has_best()) return true;
  // Written as the trainer always compared, so that its decisions stay the same bit for bit.
  const bool better = mode_ == Mode::min ? metric < state_.best : metric > state_.best;
  if (better || !tie_break_) return better;
  return metric == state_.best && (*tie_break_ == Mode::min ? second < state_.best_second : second > state_.best_second);
}

bool EarlyStopping::step(std::int64_t step, double metric, double second) {
  if (step < 1) throw std::invalid_argument("EarlyStopping::step: step must be >= 1, got " + std::to_string(step));
  const bool best = is_better(metric, second);
  ++state_.validations;
  state_.last_step = step;
  if (best) {
    state_.best_step = step;
    state_.best = metric;
    state_.best_second = second;
    state_.bad_validations = 0;
  } else {
    ++state_.bad_validations;
  }
  return best;
}

NamedTensors EarlyStopping::state_dict() const {
  NamedTensors out;
  const std::int64_t counts[] = {state_.validations, state_.last_step, state_.best_step, state_.bad_validations};
  for (int i = 0; i < 4; ++i) out.emplace_back(kI64Keys[i], Tensor::scalar(static_cast<double>(counts[i]), DType::i64));
  out.emplace_back(kF64Keys[0], Tensor::scalar(state_.best, DType::f64));
  out.emplace_back(kF64Keys[1], Tensor::scalar(state_.best_second, DType::f64));
  return out;
}

void EarlyStopping::load_state_dict(const NamedTensors& entries, const std::string& source) {
  std::map<std::string, Tensor> byname;
  for (const auto& [key, t] : entries)
    if (!byname.emplace(key, t).second) throw std::runtime_error(source + ": duplicated entry " + key);
  auto take = [&](const char* key) {
    const auto it = byname.find(key);
    if (it == byname.end()) throw std::runtime_error(source + ": missing entry " + key);
    if (it->second.numel() != 1) throw std::runtime_error(source + ": " + key + " is not a scalar");
    const Tensor t = it->second;
    byname.erase(it);
    return t;
  };
  std::int64_t counts[4];
  for (int i = 0; i < 4; ++i) {
    counts[i] = take(kI64Keys[i]).to_vector<std::int64_t>()[0];
    if (counts[i] < 0) throw std::runtime_error(source + ": " + kI64Keys[i] + " is negative");
  }
  const double best = take(kF64Keys[0]).to_vector<double>()[0], second = take(kF64Keys[1]).to_vector<double>()[0];
  if (!byname.empty()) throw std::runtime_error(source + ": unexpected entry " + byname.begin()->first);
  state_ = State{counts[0], counts[1], counts[2], counts[3], best, second};
}

}  // namespace tg::nn
