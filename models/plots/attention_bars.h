#pragma once
// Per-step attention bars: one small bar chart per decoding step ("small multiples"), source
// tokens along x and bar height = the attention weight of that source token when the step's
// output token was produced. Easier to read than a heatmap when you want exact magnitudes, e.g.
// how peaked (or how spread) each step's distribution is.
//
//   auto svg = tg::models::attention_bars_svg({tr.source, tr.step_labels(), tr.attention}, "title");
//
// Every bar is a <rect> carrying data-step, data-col and data-weight attributes; its height is
// clamp(weight, 0, 1) * kBarsPlotHeight pixels and it stands on its panel's baseline (so the
// picture can be checked against the weights, as the tests do).
#include <string>

#include "models/plots/heatmap.h"

namespace tg::models {

/// Height in pixels of a bar of weight 1 (every panel's y range is [0, 1]).
inline constexpr double kBarsPlotHeight = 64.0;

/// A standalone SVG document: a panel per output step (row i of map.weights), laid out in
/// `columns` panels per row (0 = automatic: up to 4, fewer for wide sentences), each titled with
/// its step number and output token and labelled with the source tokens. Labels are UTF-8 and
/// XML-escaped. Throws std::invalid_argument if the map is inconsistent (check_attention_map) or
/// columns < 0.
std::string attention_bars_svg(const AttentionMap& map, const std::string& title = "", int columns = 0);

}  // namespace tg::models
