#pragma once
// Line plots as standalone SVG, for loss curves (`bahdanau plot`).
#include <cstddef>
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

/// One SVG with every series as a polyline, linear axes with at most 12 ticks (a log axis gets 1-2-5
/// ticks per decade), and a legend. Points with a non-finite x or y (or y <= 0 on a log axis) are
/// skipped (count_unplottable counts them); any finite values plot, however large or close together. Throws std::invalid_argument if a series' x
/// and y differ in length or there is nothing to plot.
std::string line_plot_svg(const std::vector<Series>& series, const PlotOptions& options = {});

/// Number of points line_plot_svg skips: a non-finite x or y, or y <= 0 when log_y.
std::size_t count_unplottable(const std::vector<Series>& series, bool log_y);

/// Trailing moving average of y over its last `window` finite values (`bahdanau plot --smooth`):
/// each finite y[k] becomes the mean of itself and the finite values before it, at most `window`
/// in all; a non-finite value stays as it is and enters no mean. Throws std::invalid_argument if
/// window < 1.
std::vector<double> trailing_mean(const std::vector<double>& y, int window);

/// Reads columns `x_column` and `y_column` of a CSV with a header line (as written by
/// `bahdanau train --log-csv`); errors name the file and line. Only a regular file of at most
/// nn::io::limits::kTextData (4 GiB) is read, each line at most kLineBytes (1 MiB); a read error
/// is an error, not the end of the file.
Series read_csv_series(const std::string& path, const std::string& x_column, const std::string& y_column);

}  // namespace tg::models
