#include "models/plots/attention_bars.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace tg::models {


std::string attention_bars_svg(const AttentionMap& map, const std::string& title, int columns) {
  check_attention_map(map);
  if (columns < 0) throw std::invalid_argument("attention bars: columns must be >= 0, got " + std::to_string(columns));
  const std::size_t n_src = std::max<std::size_t>(map.source.size(), 1);
  const std::size_t n_out = map.output.size();
  const double slot = 14, bar_w = 10, font = 11, char_w = 6.6;
  std::size_t src_w = 1;
  for (const auto& s : map.source) src_w = std::max(src_w, display_width(s));
  const double axis_w = 26;                                    // "1", "0" ticks at the left of a panel
  const double plot_w = slot * static_cast<double>(n_src);
  const double label_h = static_cast<double>(src_w) * char_w * 0.8 + 10;  // rotated source labels
  const double panel_w = std::max(140.0, axis_w + plot_w + 12);
  const double panel_h = 22 + kBarsPlotHeight + label_h + 10;  // step title, plot, labels, gap
  if (columns == 0) columns = static_cast<int>(std::clamp<double>(std::floor(900.0 / panel_w), 1.0, 4.0));
  const std::size_t cols = std::min<std::size_t>(static_cast<std::size_t>(columns), std::max<std::size_t>(n_out, 1));
  const std::size_t rows = (n_out + cols - 1) / cols;
  const double top = title.empty() ? 10 : 34;
  const double width = 10 + panel_w * static_cast<double>(cols) + 10;
  const double height = top + panel_h * static_cast<double>(std::max<std::size_t>(rows, 1)) + 6;

  std::ostringstream os;
  os << svg_begin(width, height, font);
  if (!title.empty())
    os << "<text x=\"" << svg_number(width / 2) << "\" y=\"22\" text-anchor=\"middle\" font-weight=\"bold\" font-size=\"13\">"
       << xml_escape(title) << "</text>\n";
  if (n_out == 0)
    os << "<text x=\"10\" y=\"" << svg_number(top + 14) << "\">(no decoding steps)</text>\n";
  for (std::size_t i = 0; i < n_out; ++i) {
    const double px = 10 + panel_w * static_cast<double>(i % cols);
    const double py = top + panel_h * static_cast<double>(i / cols);
    const double x0 = px + axis_w, base = py + 22 + kBarsPlotHeight;
    os << "<g class=\"step\" data-step=\"" << i << "\" data-baseline=\"" << svg_number(base) << "\" data-plot-height=\""
       << kBarsPlotHeight << "\">\n";
    os << "<text x=\"" << svg_number(px + 4) << "\" y=\"" << svg_number(py + 14) << "\" font-weight=\"bold\">" << (i + 1) << ": "
       << xml_escape(map.output[i]) << "</text>\n";
    // Axes: baseline, a faint line at 1 and 0.5, tick labels.
    os << "<line x1=\"" << svg_number(x0) << "\" y1=\"" << svg_number(base - kBarsPlotHeight) << "\" x2=\"" << svg_number(x0 + plot_w)
       << "\" y2=\"" << svg_number(base - kBarsPlotHeight) << "\" stroke=\"#ddd\"/>\n"
       << "<line x1=\"" << svg_number(x0) << "\" y1=\"" << svg_number(base - kBarsPlotHeight / 2) << "\" x2=\"" << svg_number(x0 + plot_w)
       << "\" y2=\"" << svg_number(base - kBarsPlotHeight / 2) << "\" stroke=\"#eee\" stroke-dasharray=\"3 3\"/>\n"
       << "<line x1=\"" << svg_number(x0) << "\" y1=\"" << svg_number(base - kBarsPlotHeight) << "\" x2=\"" << svg_number(x0) << "\" y2=\""
       << svg_number(base) << "\" stroke=\"#888\"/>\n"
       << "<text x=\"" << svg_number(x0 - 4) << "\" y=\"" << svg_number(base - kBarsPlotHeight + 4) << "\" text-anchor=\"end\" fill=\"#666\">1</text>\n"
       << "<text x=\"" << svg_number(x0 - 4) << "\" y=\"" << svg_number(base + 3) << "\" text-anchor=\"end\" fill=\"#666\">0</text>\n";
    for (std::size_t j = 0; j < map.source.size(); ++j) {
      const float w = map.weights[i][j];
      const double v = std::isnan(w) ? 0.0 : std::clamp(static_cast<double>(w), 0.0, 1.0);
      const double h = v * kBarsPlotHeight;
      const double bx = x0 + slot * static_cast<double>(j) + (slot - bar_w) / 2;
      char val[32];
      std::snprintf(val, sizeof val, "%.6g", static_cast<double>(w));
      // Heights with 4 decimals so the picture matches the weight to ~1e-6 of the plot height.
      char hbuf[32], ybuf[32];
      std::snprintf(hbuf, sizeof hbuf, "%.4f", h);
      std::snprintf(ybuf, sizeof ybuf, "%.4f", base - h);
      os << "<rect x=\"" << svg_number(bx) << "\" y=\"" << ybuf << "\" width=\"" << bar_w << "\" height=\"" << hbuf
         << "\" fill=\"" << colour_for(static_cast<float>(v)) << "\" data-step=\"" << i << "\" data-col=\"" << j
         << "\" data-weight=\"" << val << "\"><title>" << xml_escape(map.output[i]) << " ← " << xml_escape(map.source[j])
         << ": " << val << "</title></rect>\n";
    }
    os << "<line x1=\"" << svg_number(x0) << "\" y1=\"" << svg_number(base) << "\" x2=\"" << svg_number(x0 + plot_w) << "\" y2=\"" << svg_number(base)
       << "\" stroke=\"#444\"/>\n";
    for (std::size_t j = 0; j < map.source.size(); ++j) {
      const double lx = x0 + slot * static_cast<double>(j) + slot / 2 + 3, ly = base + 8;
      os << "<text x=\"" << svg_number(lx) << "\" y=\"" << svg_number(ly) << "\" transform=\"rotate(-60 " << svg_number(lx) << ' ' << svg_number(ly)
         << ")\" text-anchor=\"end\" font-size=\"10\">" << xml_escape(map.source[j]) << "</text>\n";
    }
    os << "</g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace tg::models
