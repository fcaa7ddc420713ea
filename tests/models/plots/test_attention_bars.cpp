#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "../attention_sample.h"
#include "../test_dirs.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "models/plots/attention_bars.h"

using namespace tg::models;

namespace {
using tg::models::testing::have;
AttentionMap sample() { return tg::models::testing::sample_attention(); }
}  // namespace

TEST(AttentionBars, BarHeightsMatchTheWeights) {
  const AttentionMap map = sample();
  const std::string svg = attention_bars_svg(map, "fra → eng");
  // Baseline of each step's panel.
  std::map<int, double> baseline;
  std::regex group(R"re(<g class="step" data-step="(\d+)" data-baseline="([^"]+)" data-plot-height="([^"]+)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), group); it != std::sregex_iterator(); ++it) {
    baseline[std::stoi((*it)[1])] = std::stod((*it)[2]);
    EXPECT_DOUBLE_EQ(std::stod((*it)[3]), kBarsPlotHeight);
  }
  ASSERT_EQ(baseline.size(), 4u);
  std::regex bar(R"re(y="([^"]+)" width="[^"]+" height="([^"]+)" fill="[^"]+" data-step="(\d+)" data-col="(\d+)" data-weight="([^"]+)")re");
  std::set<std::pair<int, int>> seen;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), bar); it != std::sregex_iterator(); ++it) {
    const int i = std::stoi((*it)[3]), j = std::stoi((*it)[4]);
    const double y = std::stod((*it)[1]), h = std::stod((*it)[2]);
    EXPECT_NEAR(std::stod((*it)[5]), map.weights[i][j], 1e-6);
    EXPECT_NEAR(h, map.weights[i][j] * kBarsPlotHeight, 1e-3) << "step " << i << " col " << j;
    EXPECT_NEAR(y + h, baseline.at(i), 0.01) << "bars stand on their panel's baseline";
    seen.insert({i, j});
  }
  EXPECT_EQ(seen.size(), 24u);
  // Step titles and escaped labels.
  EXPECT_NE(svg.find(">1: i&apos;m</text>"), std::string::npos);
  EXPECT_NE(svg.find(">4: &lt;eos&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">chez</text>"), std::string::npos);
}

TEST(AttentionBars, WeightsOutsideTheRangeAreClampedButRecorded) {
  AttentionMap map{.source = {"a", "b"}, .output = {"x"}, .weights = {{1.5f, -0.25f}}};
  const std::string svg = attention_bars_svg(map);
  EXPECT_NE(svg.find("height=\"64.0000\" fill=\"#fde725\" data-step=\"0\" data-col=\"0\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-weight=\"1.5\""), std::string::npos);
  EXPECT_NE(svg.find("height=\"0.0000\""), std::string::npos);
  EXPECT_NE(svg.find("data-weight=\"-0.25\""), std::string::npos);
}

TEST(AttentionBars, ColumnsAndErrors) {
  AttentionMap bad = sample();
  bad.weights[1].pop_back();
  EXPECT_THROW(attention_bars_svg(bad), std::invalid_argument);
  EXPECT_THROW(attention_bars_svg(sample(), "", -1), std::invalid_argument);
  // One column: the SVG is as tall as four panels and as wide as one.
  const std::string one = attention_bars_svg(sample(), "", 1);
  const std::string four = attention_bars_svg(sample(), "", 4);
  std::regex size(R"re(<svg [^>]*width="([^"]+)" height="([^"]+)")re");
  std::smatch m1, m4;
  ASSERT_TRUE(std::regex_search(one, m1, size));
  ASSERT_TRUE(std::regex_search(four, m4, size));
  EXPECT_GT(std::stod(m1[2]), 3 * std::stod(m4[2]) * 0.9);
  EXPECT_LT(std::stod(m1[1]), std::stod(m4[1]) / 2);
  // No decoding steps: still a valid document.
  const std::string empty = attention_bars_svg({{"a"}, {}, {}});
  EXPECT_NE(empty.find("no decoding steps"), std::string::npos);
}

TEST(AttentionBars, SvgIsWellFormedXmlAndRenders) {
  const auto dir = tg::models::testing::per_test_dir("tg_attention_bars", true);
  const auto path = dir / "bars.svg";
  std::ofstream(path) << attention_bars_svg(sample(), "À l'œil & <co>");
  bool checked = false;
  if (have("/usr/bin/python3")) {
    const std::string cmd =
        "/usr/bin/python3 -c \"import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); "
        "n=sum(1 for e in r.iter('{http://www.w3.org/2000/svg}rect') if 'data-weight' in e.attrib); "
        "sys.exit(0 if n == 24 else 3)\" " + path.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "not well-formed XML or wrong bar count: " << path;
    checked = true;
  }
  if (have("rsvg-convert")) {
    const auto png = dir / "bars.png";
    const std::string cmd = "rsvg-convert -o " + png.string() + " " + path.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_GT(std::filesystem::file_size(png), 1000u);
    checked = true;
  }
  std::filesystem::remove_all(dir);
  if (!checked) GTEST_SKIP() << "neither python3 nor rsvg-convert to validate with";
}
