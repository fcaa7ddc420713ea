// grouped_bar_chart_svg: the plot of the ablation, primes and scores experiments.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "models/experiments/experiments.h"
#include "models/experiments/support.h"
#include "models/plots/heatmap.h"

namespace tg::models {

using experiment_support::num;

std::string grouped_bar_chart_svg(const std::vector<std::string>& series, const std::vector<BarGroup>& groups,
                                  const PlotOptions& options) {
  if (series.empty() || groups.empty()) throw std::invalid_argument("grouped bar chart: nothing to plot");
  for (const auto& g : groups)
    if (g.values.size() != series.size())
      throw std::invalid_argument("grouped bar chart: group '" + g.label + "' has " + std::to_string(g.values.size()) +
                                  " values for " + std::to_string(series.size()) + " series");
  static const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  double ymax = 1.0;
  for (const auto& g : groups)
    for (double v : g.values)
      if (std::isfinite(v)) ymax = std::max(ymax, v);
  auto f = [](double v) { return num(v, 2); };
  std::size_t legend_chars = 4;
  for (const auto& s : series) legend_chars = std::max(legend_chars, s.size());
  std::size_t group_chars = 0;
  for (const auto& g : groups) group_chars = std::max(group_chars, display_width(g.label));
  const double bar_w = 16;
  // Wide enough for the bars and for the group's label under them (~7 px per character).
  const double group_w = std::max(bar_w * static_cast<double>(series.size()) + 22, 7.0 * static_cast<double>(group_chars) + 12);
  const double gap = group_w - bar_w * static_cast<double>(series.size());
  const double left = 56, top = options.title.empty() ? 16 : 40, plot_h = 220;
  const double plot_w = std::max(200.0, group_w * static_cast<double>(groups.size()));
  const double legend_x = left + plot_w + 20;
  const double width = legend_x + 24 + 7.0 * static_cast<double>(legend_chars) + 10;
  const double height = top + plot_h + 64;
  const double base = top + plot_h;
  std::ostringstream os;
  os << svg_begin(width, height, 12);
  if (!options.title.empty())
    os << "<text x=\"" << f(width / 2) << "\" y=\"24\" text-anchor=\"middle\" font-weight=\"bold\">"
       << xml_escape(options.title) << "</text>\n";
  for (int k = 0; k <= 5; ++k) {
    const double v = ymax * k / 5.0, y = base - plot_h * k / 5.0;
    os << "<line x1=\"" << f(left) << "\" y1=\"" << f(y) << "\" x2=\"" << f(left + plot_w) << "\" y2=\"" << f(y)
       << "\" stroke=\"" << (k == 0 ? "#444" : "#e5e5e5") << "\"/>\n"
       << "<text x=\"" << f(left - 6) << "\" y=\"" << f(y + 4) << "\" text-anchor=\"end\">" << num(v, 1) << "</text>\n";
  }
  os << "<text x=\"14\" y=\"" << f(top + plot_h / 2) << "\" transform=\"rotate(-90 14 " << f(top + plot_h / 2)
     << ")\" text-anchor=\"middle\">" << xml_escape(options.y_label) << "</text>\n";
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const double gx = left + gap / 2 + group_w * static_cast<double>(gi);
    for (std::size_t si = 0; si < series.size(); ++si) {
      const double v = groups[gi].values[si];
      const double h = std::isfinite(v) ? std::max(0.0, v) / ymax * plot_h : 0.0;
      os << "<rect x=\"" << f(gx + bar_w * static_cast<double>(si)) << "\" y=\"" << num(base - h, 4) << "\" width=\""
         << bar_w - 2 << "\" height=\"" << num(h, 4) << "\" fill=\"" << kPalette[si % 10] << "\" data-group=\"" << gi
         << "\" data-series=\"" << si << "\" data-value=\"" << num(v, 6) << "\"><title>" << xml_escape(groups[gi].label)
         << ", " << xml_escape(series[si]) << ": " << num(v, 3) << "</title></rect>\n";
    }
    os << "<text x=\"" << f(gx + bar_w * static_cast<double>(series.size()) / 2) << "\" y=\"" << f(base + 18)
       << "\" text-anchor=\"middle\">" << xml_escape(groups[gi].label) << "</text>\n";
  }
  if (!options.x_label.empty())
    os << "<text x=\"" << f(left + plot_w / 2) << "\" y=\"" << f(base + 44) << "\" text-anchor=\"middle\">"
       << xml_escape(options.x_label) << "</text>\n";
  for (std::size_t si = 0; si < series.size(); ++si) {
    const double y = top + 8 + 20.0 * static_cast<double>(si);
    os << "<rect x=\"" << f(legend_x) << "\" y=\"" << f(y - 10) << "\" width=\"14\" height=\"14\" fill=\""
       << kPalette[si % 10] << "\"/>\n<text x=\"" << f(legend_x + 20) << "\" y=\"" << f(y + 2) << "\">"
       << xml_escape(series[si]) << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace tg::models
