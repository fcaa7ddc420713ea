#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "../attention_sample.h"
#include "../test_dirs.h"
#include "autograd/ops_elementwise.h"
#include "models/plots/heatmap.h"

using namespace tg::models;

namespace {
using tg::models::testing::have;
AttentionMap sample() { return tg::models::testing::sample_attention(); }
}  // namespace

TEST(Heatmap, SvgCellsCarryTheWeights) {
  const AttentionMap map = sample();
  const std::string svg = attention_heatmap_svg(map, "fra → eng");
  std::regex cell(R"re(data-row="(\d+)" data-col="(\d+)" data-weight="([^"]+)")re");
  int cells = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cell); it != std::sregex_iterator(); ++it) {
    const int i = std::stoi((*it)[1]), j = std::stoi((*it)[2]);
    EXPECT_NEAR(std::stod((*it)[3]), map.weights[i][j], 1e-6);
    ++cells;
  }
  EXPECT_EQ(cells, 24);
  EXPECT_NE(svg.find(">chez</text>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;eos&gt;"), std::string::npos);  // labels are escaped
}

TEST(Heatmap, SvgIsWellFormedXmlAndRenders) {
  const auto dir = tg::models::testing::per_test_dir("tg_heatmap", true);
  const auto path = dir / "map.svg";
  std::ofstream(path) << attention_heatmap_svg(sample(), "À l'œil & <co>");
  if (have("/usr/bin/python3")) {
    const std::string cmd = "/usr/bin/python3 -c \"import sys,xml.etree.ElementTree as E; E.parse(sys.argv[1])\" " + path.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "not well-formed XML: " << path;
  }
  if (have("rsvg-convert")) {
    const auto png = dir / "map.png";
    const std::string cmd = "rsvg-convert -o " + png.string() + " " + path.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_GT(std::filesystem::file_size(png), 1000u);
  }
  std::filesystem::remove_all(dir);
  if (!have("/usr/bin/python3") && !have("rsvg-convert")) GTEST_SKIP() << "neither python3 nor rsvg-convert to validate with";
}

TEST(Heatmap, TerminalShadesAndErrors) {
  const std::string text = attention_terminal(sample());
  EXPECT_NE(text.find("<eos> │"), std::string::npos) << text;
  EXPECT_NE(text.find("██"), std::string::npos) << text;  // weight 1.0
  EXPECT_NE(text.find("↑ chez"), std::string::npos) << text;
  AttentionMap bad = sample();
  bad.weights.pop_back();
  EXPECT_THROW(attention_heatmap_svg(bad), std::invalid_argument);
  EXPECT_EQ(colour_for(0.0f), "#440154");
  EXPECT_EQ(colour_for(1.0f), "#fde725");
}
