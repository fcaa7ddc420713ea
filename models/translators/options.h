#pragma once
// The typed options of a translation model's architecture. Each is parsed from its name once, at
// the boundary (command line, config.json, experiment settings); model code compares enums only.
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/error_text.h"

namespace tg::models {

/// rnnsearch/rnnencdec output layer: the paper's maxout deep output, or one linear layer.
enum class Readout : std::uint8_t { maxout, linear };
/// rnnsearch attention score: Bahdanau's additive (MLP) score, Luong's dot product, or the dot
/// product scaled by 1/sqrt(d).
enum class AttentionScore : std::uint8_t { additive, dot, scaled_dot };
/// rnnsearch decoder-path ablations: none | zero_init (s_0 = 0) | state_only_output (the output
/// sees only s_i) | no_prev_token (no y_{i-1} anywhere in the decoder) | recurrence_only
/// (s_i = f(s_{i-1})).
enum class Ablation : std::uint8_t { none, zero_init, state_only_output, no_prev_token, recurrence_only };

/// Each option's values with their names, in declaration order.
template <class E> struct OptionNames;
template <> struct OptionNames<Readout> {
  static constexpr std::array<std::pair<Readout, std::string_view>, 2> values{
      {{Readout::maxout, "maxout"}, {Readout::linear, "linear"}}};
};
template <> struct OptionNames<AttentionScore> {
  static constexpr std::array<std::pair<AttentionScore, std::string_view>, 3> values{
      {{AttentionScore::additive, "additive"}, {AttentionScore::dot, "dot"}, {AttentionScore::scaled_dot, "scaled_dot"}}};
};
template <> struct OptionNames<Ablation> {
  static constexpr std::array<std::pair<Ablation, std::string_view>, 5> values{
      {{Ablation::none, "none"},
       {Ablation::zero_init, "zero_init"},
       {Ablation::state_only_output, "state_only_output"},
       {Ablation::no_prev_token, "no_prev_token"},
       {Ablation::recurrence_only, "recurrence_only"}}};
};

/// The name of an option value ("maxout", "scaled_dot", ...).
template <class E> std::string_view to_string(E value) {
  for (const auto& [v, name] : OptionNames<E>::values)
    if (v == value) return name;
  return "?";
}

/// Every value of an option, in declaration order.
template <class E> std::vector<E> option_values() {
  std::vector<E> out;
  for (const auto& [v, name] : OptionNames<E>::values) out.push_back(v);
  return out;
}

/// Every name of an option, in declaration order (for --help and checks).
template <class E> std::vector<std::string> option_names() {
  std::vector<std::string> out;
  for (const auto& [v, name] : OptionNames<E>::values) out.emplace_back(name);
  return out;
}

/// Parses `text`; an unknown name throws std::invalid_argument
/// `WHERE: unknown value "text" (allowed: a, b, c)`, where `where` names the field and its source.
template <class E> E parse_option(std::string_view text, std::string_view where) {
  for (const auto& [v, name] : OptionNames<E>::values)
    if (name == text) return v;
  std::string allowed;
  for (const auto& [v, name] : OptionNames<E>::values) allowed += (allowed.empty() ? "" : ", ") + std::string(name);
  throw std::invalid_argument(std::string(where) + ": unknown value \"" + elide(text) + "\" (allowed: " +
                              allowed + ")");
}

}  // namespace tg::models
