#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "autograd/ops_elementwise.h"
#include "models/plots/plot.h"
#include "../../autograd/error_of.h"
#include "../../nn/deadline.h"

using namespace tg::models;

namespace {
/// This process's scratch directory (ctest runs the tests of this file as concurrent processes),
/// removed when the process ends.
const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("tg_plot_test_" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  std::ofstream(scratch_dir() / name) << text;
  return scratch_dir() / name;
}
}  // namespace

TEST(Plot, CsvSeriesAndSvg) {
  const auto csv = temp_file("log.csv", "step,epoch,loss\n1,1,2.5\n2,1,1.0\n3,1,0.25\n");
  Series s = read_csv_series(csv.string(), "step", "loss");
  EXPECT_EQ(s.x, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(s.y, (std::vector<double>{2.5, 1.0, 0.25}));
  // The same log with CRLF line ends reads the same.
  const Series crlf = read_csv_series(temp_file("crlf.csv", "step,epoch,loss\r\n1,1,2.5\r\n2,1,1.0\r\n3,1,0.25\r\n").string(),
                                      "step", "loss");
  EXPECT_EQ(crlf.x, s.x);
  EXPECT_EQ(crlf.y, s.y);
  s.label = "train <a&b>";
  for (bool log_y : {false, true}) {
    PlotOptions o;
    o.log_y = log_y;
    o.title = "loss";
    const std::string svg = line_plot_svg({s, s}, o);
    const std::regex poly(R"re(<polyline class="series" data-label="train &lt;a&amp;b&gt;")re");
    EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), poly), std::sregex_iterator()), 2);
    const auto path = temp_file(log_y ? "log.svg" : "lin.svg", svg);
    if (std::system("command -v /usr/bin/python3 >/dev/null 2>&1") == 0) {
      const std::string cmd = "/usr/bin/python3 -c \"import sys,xml.etree.ElementTree as E; E.parse(sys.argv[1])\" " + path.string();
      EXPECT_EQ(std::system(cmd.c_str()), 0) << "not well-formed XML";
    }
  }
}

TEST(Plot, TrailingMeanSkipsNonFiniteValues) {
  const double nan = std::nan("");
  const std::vector<double> y{4, 2, 6, nan, 8};
  const std::vector<double> m = trailing_mean(y, 2);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], 4.0);
  EXPECT_EQ(m[1], 3.0);
  EXPECT_EQ(m[2], 4.0);
  EXPECT_TRUE(std::isnan(m[3]));
  EXPECT_EQ(m[4], 7.0);  // (6 + 8) / 2: the NaN is not in the window
  EXPECT_EQ(trailing_mean({4, 2, 6}, 1), (std::vector<double>{4, 2, 6}));
  EXPECT_EQ(trailing_mean({4, 2, 6}, 10), (std::vector<double>{4, 3, 4}));
  EXPECT_THROW(trailing_mean(y, 0), std::invalid_argument);
}

TEST(Plot, ErrorsNameFileAndLine) {
  const auto bad = temp_file("bad.csv", "step,loss\n1,2\n2\n");
  try {
    read_csv_series(bad.string(), "step", "loss");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_csv_series(bad.string(), "step", "nope"), std::runtime_error);
  EXPECT_THROW(line_plot_svg({}), std::invalid_argument);
}

// train --dev logs dev_loss,dev_bleu on the validated steps' rows only: empty cells (the last one
// included) are fields, and a row whose plotted cell is empty is skipped.
TEST(Plot, CsvColumnsFilledOnSomeRowsOnly) {
  const auto csv = temp_file("dev.csv", "step,loss,dev_loss,dev_bleu\n1,2.5,,\n2,2.0,1.75,3.5\n3,1.5,,\n");
  const Series loss = read_csv_series(csv.string(), "step", "loss");
  EXPECT_EQ(loss.x, (std::vector<double>{1, 2, 3}));
  const Series bleu = read_csv_series(csv.string(), "step", "dev_bleu");
  EXPECT_EQ(bleu.x, (std::vector<double>{2}));
  EXPECT_EQ(bleu.y, (std::vector<double>{3.5}));
  const auto short_row = temp_file("short.csv", "step,loss,dev_bleu\n1,2.5\n");
  EXPECT_THROW(read_csv_series(short_row.string(), "step", "loss"), std::runtime_error);  // 2 fields, not 3
}

// Dev BLEU against wall time (`bahdanau plot --x elapsed_s --column dev_bleu`): any column can be the x
// axis, and the rows without a validation are skipped.
TEST(Plot, AnyColumnAsXWithDevRowsOnly) {
  const auto csv = temp_file("wall.csv", "step,loss,elapsed_s,dev_loss,dev_bleu\n1,2.5,0.5,,\n2,2.0,1.25,1.75,3.5\n"
                                         "3,1.5,2,,\n4,1.0,90.5,1.5,7.25\n");
  const Series bleu = read_csv_series(csv.string(), "elapsed_s", "dev_bleu");
  EXPECT_EQ(bleu.x, (std::vector<double>{1.25, 90.5}));
  EXPECT_EQ(bleu.y, (std::vector<double>{3.5, 7.25}));
  PlotOptions o;
  o.x_label = "elapsed_s / 60 (minutes)";
  const std::string svg = line_plot_svg({bleu}, o);
  EXPECT_NE(svg.find(">elapsed_s / 60 (minutes)<"), std::string::npos);
}

namespace {
std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

// Regression: tick generation added the step to the previous tick, so at large magnitudes (a step
// below the spacing of doubles) it never advanced and grew memory without bound.
TEST(Plot, AnyFiniteValuesPlotWithBoundedTicks) {
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> cases = {
      {{1e17, 1e17 + 16, 1e17 + 32}, {1.0, 2.0, 3.0}},                   // steps close together, huge
      {{1, 2, 3}, {1e300, std::nextafter(1e300, 2e300), 1e300}},         // losses one ulp apart
      {{-1e308, 0, 1e308}, {-1e308, 1e308, 0}},                          // a range beyond DBL_MAX
      {{5, 5, 5}, {1e20, 1e20, 1e20}},                                   // a single value, huge
      {{0, 1e-300, 2e-300}, {1e-310, 2e-310, 3e-310}},                   // tiny and subnormal
  };
  for (const auto& [x, y] : cases)
    for (bool log_y : {false, true}) {
      Series s{.label = "s", .x = x, .y = y};
      PlotOptions o;
      o.log_y = log_y;
      std::string svg;
      try {
        svg = line_plot_svg({s}, o);
      } catch (const std::invalid_argument&) {  // log axis with no positive value: nothing to plot
        EXPECT_TRUE(log_y);
        continue;
      }
      EXPECT_LE(count_of(svg, "stroke=\"#e5e5e5\""), 24u) << x[0] << " " << y[0];  // grid lines = ticks
      EXPECT_GE(count_of(svg, "stroke=\"#e5e5e5\""), 4u) << x[0] << " " << y[0];
      EXPECT_EQ(svg.find("nan"), std::string::npos) << x[0] << " " << y[0];
      EXPECT_EQ(svg.find("inf"), std::string::npos) << x[0] << " " << y[0];
    }
}

TEST(Plot, NonFiniteValuesAreSkippedAndCounted) {
  const double nan = std::nan(""), inf = INFINITY;
  Series s{.label = "s", .x = {1, 2, 3, nan, 5, 6}, .y = {1.0, nan, inf, 4.0, -inf, 0.5}};
  EXPECT_EQ(count_unplottable({s}, false), 4u);
  EXPECT_EQ(count_unplottable({s, s}, false), 8u);
  Series with_zero{.label = "z", .x = {1, 2, 3}, .y = {1.0, 0.0, -2.0}};
  EXPECT_EQ(count_unplottable({with_zero}, false), 0u);
  EXPECT_EQ(count_unplottable({with_zero}, true), 2u);
  const std::string svg = line_plot_svg({s});
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  // The polyline has the two plottable points only.
  const std::size_t at = svg.find("points=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string points = svg.substr(at + 8, svg.find('"', at + 8) - at - 8);
  EXPECT_EQ(count_of(points, ","), 2u) << points;
}

// The CSV reader takes a read error for an error, not the end of the log (before: "empty file,
// expected a CSV header"), and refuses a FIFO at once (before: blocked forever).
TEST(Plot, CsvReadErrorsAndFifosAreRefused) {
  using tg::testing::error_of;
  EXPECT_EQ(error_of([] { read_csv_series("/proc/self/mem", "step", "loss"); }),
            "/proc/self/mem:1: read error (Input/output error)");
  const std::string fifo = (scratch_dir() / "log_fifo.csv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(tg::testing::error_within(10, "read_csv_series of a FIFO", [&] { read_csv_series(fifo, "step", "loss"); },
                                      [&] { tg::testing::unblock_fifo_reader(fifo); }),
            fifo + ": is a FIFO, not a regular file");
  EXPECT_EQ(error_of([] { read_csv_series(scratch_dir().string(), "step", "loss"); }),
            scratch_dir().string() + ": is a directory, not a regular file");
}
