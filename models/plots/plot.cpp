#include "models/plots/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/error_text.h"
#include "models/plots/heatmap.h"  // svg_begin, svg_number, xml_escape
#include "nn/file_io.h"

namespace tg::models {

namespace {

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

constexpr int kMaxTicks = 12;

// About `n` round tick values covering [lo, hi] (finite, lo < hi), never more than kMaxTicks. Ticks are
// counted by index, not by adding the step: at large magnitudes a step below the spacing of doubles
// would never advance. When round values cannot mark the range (it is narrower than a few ulps, or
// wider than the largest double), n + 1 evenly spaced values, duplicates dropped.
std::vector<double> linear_ticks(double lo, double hi, int n) {
  std::vector<double> ticks;
  const double span = hi - lo;
  if (std::isfinite(span) && span > 0) {
    const double raw = span / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
    const double first = std::ceil(lo / step), last = std::floor((hi + 1e-9 * span) / step);
    if (std::isfinite(first) && std::isfinite(last) && last - first < kMaxTicks)
      for (int i = 0; i <= static_cast<int>(last - first); ++i) {
        const double t = (first + i) * step;
        if (ticks.empty() || t > ticks.back()) ticks.push_back(t);
      }
    if (ticks.size() >= 2) return ticks;
    ticks.clear();
  }
  for (int i = 0; i <= n; ++i) {
    const double f = static_cast<double>(i) / n, t = lo * (1 - f) + hi * f;  // no overflow for any finite lo, hi
    if (ticks.empty() || t > ticks.back()) ticks.push_back(t);
  }
  return ticks;
}

bool plottable(double x, double y, bool log_y) { return std::isfinite(x) && std::isfinite(y) && !(log_y && y <= 0); }

const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

}  // namespace

std::string line_plot_svg(const std::vector<Series>& series, const PlotOptions& o) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  auto ty = [&](double y) { return o.log_y ? std::log10(y) : y; };
  for (const Series& s : series) {
    if (s.x.size() != s.y.size()) throw std::invalid_argument("line_plot_svg: series '" + elide(s.label) + "' has x and y of different lengths");
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!plottable(s.x[i], s.y[i], o.log_y)) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, ty(s.y[i])), y1 = std::max(y1, ty(s.y[i]));
    }
  }
  if (!std::isfinite(x0)) throw std::invalid_argument("line_plot_svg: nothing to plot");
  // A single value gets a unit range (or one of its own magnitude, where adding 1 changes nothing),
  // extended towards zero so that it stays finite.
  auto widen = [](double& lo, double& hi) {
    if (hi != lo) return;
    const double d = std::max(1.0, std::abs(lo) * 1e-6);
    if (lo > 0) lo -= d;
    else hi += d;
  };
  widen(x0, x1);
  widen(y0, y1);
  // The legend sits right of the plot: widen the picture (not shrink the plot) for long labels,
  // at ~7.2 px per character of 12 px text.
  std::size_t label_chars = 0;
  for (const Series& s : series) label_chars = std::max(label_chars, display_width(s.label));
  const double left = 64, top = o.title.empty() ? 16 : 36, bottom = 48;
  const double right = std::max(150.0, 44 + 7.2 * static_cast<double>(label_chars));
  const double width = o.width + (right - 150);
  const double pw = o.width - left - 150, ph = o.height - top - bottom;
  // Positions as fractions of the range, computed on halves so that a range wider than the largest
  // double (-1e308 to 1e308) does not overflow.
  auto fraction = [](double v, double lo, double hi) { return (v / 2 - lo / 2) / (hi / 2 - lo / 2); };
  auto px = [&](double x) { return left + fraction(x, x0, x1) * pw; };
  auto py = [&](double y) { return top + ph - fraction(ty(y), y0, y1) * ph; };

  std::ostringstream os;
  os << svg_begin(width, o.height, 12);
  if (!o.title.empty())
    os << "<text x=\"" << svg_number(left + pw / 2) << "\" y=\"22\" text-anchor=\"middle\" font-weight=\"bold\">"
       << xml_escape(o.title) << "</text>\n";
  // Grid and ticks.
  for (double t : linear_ticks(x0, x1, 6))
    os << "<line x1=\"" << svg_number(px(t)) << "\" y1=\"" << svg_number(top) << "\" x2=\"" << svg_number(px(t)) << "\" y2=\"" << svg_number(top + ph)
       << "\" stroke=\"#e5e5e5\"/><text x=\"" << svg_number(px(t)) << "\" y=\"" << svg_number(top + ph + 16)
       << "\" text-anchor=\"middle\">" << tick_label(t) << "</text>\n";
  std::vector<double> yt;
  if (o.log_y && std::ceil(y1) - std::floor(y0) <= 4)  // 1-2-5 ticks for up to four decades
    for (double e = std::floor(y0); e <= std::ceil(y1); ++e)
      for (double m : {1.0, 2.0, 5.0})
        if (const double v = std::log10(m) + e; v >= y0 - 1e-9 && v <= y1 + 1e-9) yt.push_back(v);
  if (yt.size() < 2) yt = linear_ticks(y0, y1, 5);
  for (double t : yt) {
    const double y = top + ph - fraction(t, y0, y1) * ph;
    os << "<line x1=\"" << svg_number(left) << "\" y1=\"" << svg_number(y) << "\" x2=\"" << svg_number(left + pw) << "\" y2=\"" << svg_number(y)
       << "\" stroke=\"#e5e5e5\"/><text x=\"" << svg_number(left - 6) << "\" y=\"" << svg_number(y + 4) << "\" text-anchor=\"end\">"
       << tick_label(o.log_y ? std::pow(10.0, t) : t) << "</text>\n";
  }
  os << "<rect x=\"" << svg_number(left) << "\" y=\"" << svg_number(top) << "\" width=\"" << svg_number(pw) << "\" height=\"" << svg_number(ph)
     << "\" fill=\"none\" stroke=\"#444\"/>\n"
     << "<text x=\"" << svg_number(left + pw / 2) << "\" y=\"" << o.height - 10 << "\" text-anchor=\"middle\">"
     << xml_escape(o.x_label) << "</text>\n"
     << "<text transform=\"rotate(-90)\" x=\"" << svg_number(-(top + ph / 2)) << "\" y=\"16\" text-anchor=\"middle\">"
     << xml_escape(o.y_label + (o.log_y ? " (log)" : "")) << "</text>\n";
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const char* colour = kColours[k % 8];
    os << "<polyline class=\"series\" data-label=\"" << xml_escape(s.label) << "\" fill=\"none\" stroke=\"" << colour
       << "\" stroke-width=\"1.5\" points=\"";
    for (std::size_t i = 0; i < s.x.size(); ++i)
      if (plottable(s.x[i], s.y[i], o.log_y)) os << svg_number(px(s.x[i])) << ',' << svg_number(py(s.y[i])) << ' ';
    os << "\"/>\n<line x1=\"" << svg_number(left + pw + 12) << "\" y1=\"" << svg_number(top + 10 + 18 * k) << "\" x2=\""
       << svg_number(left + pw + 32) << "\" y2=\"" << svg_number(top + 10 + 18 * k) << "\" stroke=\"" << colour
       << "\" stroke-width=\"2\"/><text x=\"" << svg_number(left + pw + 36) << "\" y=\"" << svg_number(top + 14 + 18 * k) << "\">"
       << xml_escape(s.label) << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::size_t count_unplottable(const std::vector<Series>& series, bool log_y) {
  std::size_t n = 0;
  for (const Series& s : series)
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) n += !plottable(s.x[i], s.y[i], log_y);
  return n;
}

std::vector<double> trailing_mean(const std::vector<double>& y, int window) {
  if (window < 1) throw std::invalid_argument("trailing_mean: window must be >= 1, got " + std::to_string(window));
  std::vector<double> out(y.size()), finite;
  double acc = 0;
  std::size_t oldest = 0;
  for (std::size_t k = 0; k < y.size(); ++k) {
    if (!std::isfinite(y[k])) {
      out[k] = y[k];
      continue;
    }
    finite.push_back(y[k]);
    acc += y[k];
    if (finite.size() - oldest > static_cast<std::size_t>(window)) acc -= finite[oldest++];
    out[k] = acc / static_cast<double>(finite.size() - oldest);
  }
  return out;
}

Series read_csv_series(const std::string& path, const std::string& x_column, const std::string& y_column) {
  // Only a regular file within nn::io::limits::kTextData, lines within kLineBytes; a read error
  // is an error naming the line, never the end of the log.
  const auto in = nn::io::open_input(path, nn::io::limits::kTextData);
  nn::io::LineReader reader(*in, path);
  auto split = [](const std::string& line) {
    std::vector<std::string> cols;
    // Every field, empty ones included ("1,2,," has four).
    std::size_t begin = 0;
    for (std::size_t comma; (comma = line.find(',', begin)) != std::string::npos; begin = comma + 1)
      cols.push_back(line.substr(begin, comma - begin));
    cols.push_back(line.substr(begin));
    return cols;
  };
  std::string line;
  auto next_line = [&] {  // CRLF files (written on Windows) read as LF ones
    if (!reader.next(line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  if (!next_line()) throw std::runtime_error(path + ":1: empty file, expected a CSV header");
  const auto header = split(line);
  auto find = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw std::runtime_error(path + ":1: no column '" + elide(name) + "' in the header");
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t xc = find(x_column), yc = find(y_column);
  Series s;
  s.label = path;
  for (std::size_t n = 2; next_line(); ++n) {
    if (line.empty()) continue;
    const auto cols = split(line);
    if (cols.size() != header.size())
      throw std::runtime_error(path + ":" + std::to_string(n) + ": " + std::to_string(cols.size()) + " fields, header has " +
                               std::to_string(header.size()));
    if (cols[yc].empty()) continue;  // a column filled on some rows only (train --dev: dev_loss, dev_bleu)
    try {
      s.x.push_back(std::stod(cols[xc]));
      s.y.push_back(std::stod(cols[yc]));
    } catch (const std::logic_error&) {
      throw std::runtime_error(path + ":" + std::to_string(n) + ": not a number in column '" + elide(x_column) + "' or '" +
                               elide(y_column) + "'");
    }
  }
  return s;
}

}  // namespace tg::models
