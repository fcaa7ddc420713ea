#pragma once
// Line plots as standalone SVG, for loss curves (`bahdanau plot`).
#include <string>
#include <vector>

namespace tg::models {

struct Series {
  std::string label;
  std::vector<double> x, y;  // same length
};

struct PlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label = "loss";
  bool log_y = false;  ///< logarithmic y axis (non-positive values are skipped)
  int width = 640, height = 400;
};

/// One SVG with every series as a polyline, axes with ticks, and a legend. Throws
/// std::invalid_argument if a series' x and y differ in length or there is nothing to plot.
std::string line_plot_svg(const std::vector<Series>& series, const PlotOptions& options = {});

/// Reads columns `x_column` and `y_column` of a CSV with a header line (as written by
/// `bahdanau train --log-csv`); errors name the file and line.
Series read_csv_series(const std::string& path, const std::string& x_column, const std::string& y_column);

}  // namespace tg::models
