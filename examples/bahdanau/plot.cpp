// bahdanau plot: curves of train --log-csv files on one SVG.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "models/plots/plot.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct PlotArgs {
  std::vector<std::string> csv, labels;
  std::string out, column = "loss", x = "step", title;
  bool log = false, x_minutes = false;
  int smooth = 1;
};

int run_plot(const PlotArgs& a) {
  require_distinct(named("--csv", a.csv), {{"--out", a.out}});
  if (!a.labels.empty() && a.labels.size() != a.csv.size())
    throw UsageError("--label given " + std::to_string(a.labels.size()) + " times for " + std::to_string(a.csv.size()) +
                     " --csv files");
  std::vector<Series> series;
  for (std::size_t i = 0; i < a.csv.size(); ++i) {
    io::require_regular_file(a.csv[i], "--csv");
    Series s = read_csv_series(a.csv[i], a.x, a.column);
    if (a.x_minutes)
      for (double& x : s.x) x /= 60.0;
    if (!a.labels.empty()) s.label = a.labels[i];
    if (const std::size_t bad = count_unplottable({s}, a.log))
      std::cerr << "bahdanau plot: " << a.csv[i] << ": skipped " << bad << " of " << s.y.size()
                << (a.log ? " points (non-finite, or not positive on the log axis)\n" : " points (non-finite)\n");
    if (a.smooth > 1) s.y = trailing_mean(s.y, a.smooth);  // per-batch losses are noisy
    series.push_back(std::move(s));
  }
  PlotOptions o;
  o.title = a.title;
  o.y_label = a.column;
  o.x_label = a.x_minutes ? a.x + " / 60 (minutes)" : a.x;
  o.log_y = a.log;
  io::write_file_atomic(a.out, line_plot_svg(series, o));
  return 0;
}

}  // namespace

Subcommand add_plot(CLI::App& app) {
  auto args = std::make_shared<PlotArgs>();
  PlotArgs& pa = *args;
  CLI::App* plot_cmd = app.add_subcommand("plot", "Curves from one or more --log-csv files on one SVG");
  plot_cmd->add_option("--csv", pa.csv, "A per-step log written by train --log-csv (repeatable)")->required();
  plot_cmd->add_option("--label", pa.labels, "Legend label of each --csv, in order (default: the file name)");
  plot_cmd->add_option("--out", pa.out, "Output SVG file")->required();
  plot_cmd->add_option("--column", pa.column, "Column to plot (rows where it is empty are skipped)")->capture_default_str();
  plot_cmd->add_option("--x", pa.x, "Column of the x axis, e.g. elapsed_s for wall time")->capture_default_str();
  plot_cmd->add_flag("--x-minutes", pa.x_minutes, "The --x column holds seconds: plot it in minutes");
  plot_cmd->add_option("--smooth", pa.smooth, "Moving average over N steps")->check(kPositive)->capture_default_str();
  plot_cmd->add_option("--title", pa.title, "Plot title");
  plot_cmd->add_flag("--log", pa.log, "Logarithmic y axis");
  return {plot_cmd, [args] { return run_plot(*args); }};
}

}  // namespace tg::cli
