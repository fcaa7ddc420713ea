#include "models/plots/heatmap.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace tg::models {

std::size_t display_width(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string svg_begin(double width, double height, double font_size) {
  const std::string w = svg_number(width), h = svg_number(height);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w +
         "\" height=\"" + h + "\" viewBox=\"0 0 " + w + ' ' + h +
         "\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"" + svg_number(font_size) +
         "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

std::string svg_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

void check_attention_map(const AttentionMap& map) {
  if (map.weights.size() != map.output.size())
    throw std::invalid_argument("attention map: " + std::to_string(map.weights.size()) + " weight rows for " +
                                std::to_string(map.output.size()) + " output tokens");
  for (const auto& row : map.weights)
    if (row.size() != map.source.size())
      throw std::invalid_argument("attention map: a weight row has " + std::to_string(row.size()) + " entries for " +
                                  std::to_string(map.source.size()) + " source tokens");
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string colour_for(float v) {
  // Five anchors of matplotlib's viridis, linearly interpolated.
  static constexpr std::array<std::array<double, 3>, 5> kAnchors = {{
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
  const double t = std::clamp(std::isnan(v) ? 0.0 : static_cast<double>(v), 0.0, 1.0) * (kAnchors.size() - 1);
  const std::size_t i = std::min<std::size_t>(static_cast<std::size_t>(t), kAnchors.size() - 2);
  const double f = t - static_cast<double>(i);
  char buf[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<int>(std::lround(kAnchors[i][c] * (1 - f) + kAnchors[i + 1][c] * f));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

std::string attention_heatmap_svg(const AttentionMap& map, const std::string& title) {
  check_attention_map(map);
  const double cell = 28, font = 13, char_w = 7.8;
  std::size_t src_w = 1, out_w = 1;
  for (const auto& s : map.source) src_w = std::max(src_w, display_width(s));
  for (const auto& s : map.output) out_w = std::max(out_w, display_width(s));
  const double left = 16 + out_w * char_w;                 // output labels
  const double top = (title.empty() ? 12 : 36) + src_w * char_w * 0.72 + 12;  // rotated source labels
  const double grid_w = cell * std::max<std::size_t>(map.source.size(), 1);
  const double grid_h = cell * std::max<std::size_t>(map.output.size(), 1);
  const double bar_x = left + grid_w + 24, bar_w = 14;
  const double width = bar_x + bar_w + 48, height = top + grid_h + 40;

  std::ostringstream os;
  os << svg_begin(width, height, font);
  if (!title.empty())
    os << "<text x=\"" << svg_number(width / 2) << "\" y=\"22\" text-anchor=\"middle\" font-weight=\"bold\">" << xml_escape(title)
       << "</text>\n";
  // Source labels, rotated so long words fit above narrow columns.
  for (std::size_t j = 0; j < map.source.size(); ++j) {
    const double x = left + cell * j + cell / 2 + 4, y = top - 6;
    os << "<text x=\"" << svg_number(x) << "\" y=\"" << svg_number(y) << "\" transform=\"rotate(-60 " << svg_number(x) << ' ' << svg_number(y)
       << ")\">" << xml_escape(map.source[j]) << "</text>\n";
  }
  for (std::size_t i = 0; i < map.output.size(); ++i)
    os << "<text x=\"" << svg_number(left - 6) << "\" y=\"" << svg_number(top + cell * i + cell / 2 + font / 3)
       << "\" text-anchor=\"end\">" << xml_escape(map.output[i]) << "</text>\n";
  os << "<g class=\"cells\">\n";
  for (std::size_t i = 0; i < map.output.size(); ++i)
    for (std::size_t j = 0; j < map.source.size(); ++j) {
      const float w = map.weights[i][j];
      char val[32];
      std::snprintf(val, sizeof val, "%.6g", static_cast<double>(w));
      os << "<rect x=\"" << svg_number(left + cell * j) << "\" y=\"" << svg_number(top + cell * i) << "\" width=\"" << cell
         << "\" height=\"" << cell << "\" fill=\"" << colour_for(w) << "\" data-row=\"" << i << "\" data-col=\"" << j
         << "\" data-weight=\"" << val << "\"><title>" << xml_escape(map.output[i]) << " ← "
         << xml_escape(map.source[j]) << ": " << val << "</title></rect>\n";
    }
  os << "</g>\n";
  // Colour bar from 1 (top) to 0 (bottom).
  const int steps = 20;
  for (int s = 0; s < steps; ++s)
    os << "<rect x=\"" << svg_number(bar_x) << "\" y=\"" << svg_number(top + grid_h * s / steps) << "\" width=\"" << bar_w
       << "\" height=\"" << svg_number(grid_h / steps + 0.5) << "\" fill=\"" << colour_for(1.0f - (s + 0.5f) / steps) << "\"/>\n";
  os << "<rect x=\"" << svg_number(bar_x) << "\" y=\"" << svg_number(top) << "\" width=\"" << bar_w << "\" height=\"" << svg_number(grid_h)
     << "\" fill=\"none\" stroke=\"#444\"/>\n"
     << "<text x=\"" << svg_number(bar_x + bar_w + 4) << "\" y=\"" << svg_number(top + font / 2) << "\">1</text>\n"
     << "<text x=\"" << svg_number(bar_x + bar_w + 4) << "\" y=\"" << svg_number(top + grid_h) << "\">0</text>\n"
     << "</svg>\n";
  return os.str();
}

std::string attention_terminal(const AttentionMap& map) {
  check_attention_map(map);
  static const char* kShades[] = {" ", "░", "▒", "▓", "█"};
  std::size_t out_w = 1;
  for (const auto& s : map.output) out_w = std::max(out_w, display_width(s));
  std::ostringstream os;
  for (std::size_t i = 0; i < map.output.size(); ++i) {
    os << map.output[i] << std::string(out_w - display_width(map.output[i]), ' ') << " │";
    for (float w : map.weights[i]) {
      const int level = std::clamp(static_cast<int>(std::lround(std::clamp(w, 0.0f, 1.0f) * 4)), 0, 4);
      os << kShades[level] << kShades[level];
    }
    os << "│\n";
  }
  os << std::string(out_w, ' ') << " └" << std::string(0, ' ');
  for (std::size_t j = 0; j < map.source.size(); ++j) os << "──";
  os << "┘\n";
  for (std::size_t j = 0; j < map.source.size(); ++j)
    os << std::string(out_w + 2, ' ') << std::string(2 * j, ' ') << "↑ " << map.source[j] << '\n';
  return os.str();
}

}  // namespace tg::models
