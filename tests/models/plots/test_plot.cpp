#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "autograd/ops_elementwise.h"
#include "models/plots/plot.h"

using namespace tg::models;

namespace {
std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "tg_plot_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}
}  // namespace

TEST(Plot, CsvSeriesAndSvg) {
  const auto csv = temp_file("log.csv", "step,epoch,loss\n1,1,2.5\n2,1,1.0\n3,1,0.25\n");
  Series s = read_csv_series(csv.string(), "step", "loss");
  EXPECT_EQ(s.x, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(s.y, (std::vector<double>{2.5, 1.0, 0.25}));
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
