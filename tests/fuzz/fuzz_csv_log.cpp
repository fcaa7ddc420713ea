// Fuzz target: the CSV training log as `bahdanau plot` reads it (models::read_csv_series of the
// "step" and "loss" columns, from a path: the input goes to a scratch file), then the plot itself
// on a linear and a log axis. Error channels: std::runtime_error from the reader;
// std::invalid_argument from line_plot_svg when nothing is plottable.
#include <cstdint>
#include <stdexcept>

#include "fuzz_util.h"
#include "models/plots/plot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tg::fuzz::input_file(data, size, "log.csv");
  tg::models::Series series;
  try {
    series = tg::models::read_csv_series(path, "step", "loss");
  } catch (const std::runtime_error&) {
    return 0;
  }
  for (bool log_y : {false, true}) {
    tg::models::PlotOptions options;
    options.log_y = log_y;
    tg::models::count_unplottable({series}, log_y);
    try {
      tg::models::line_plot_svg({series}, options);
    } catch (const std::invalid_argument&) {
    }
  }
  return 0;
}
